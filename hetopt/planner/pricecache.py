"""What the built-in parallelizer's queries share, so that work done once serves every query it fits.

A plan asks the built-in parallelizer (``planner/builtin.py``) about a thousand queries, one per
(slice, island, micro-batch size). Much of a query's work depends on far less than the query:

* a stage's price depends on the island's hardware and links, never on its name, so two
  islands of one signature (:func:`island_key`) share their prices;
* the layouts a slice can take, the redundant ones dropped, their compute floors and the order
  they are priced in (:class:`Prepared`) depend on the slice's layers by content, whether it
  holds the head (and the whole model), the island's signature and the micro-batch size: a
  slice of the embedding shares them with the slices of the same layers behind it, and every
  slice of equal layers with every other;
* the stages' memo keys of a layout depend on the same, and on whether the slice holds the
  embedding;
* the links NCCL achieves on an island (``IslandSpec.intra_achieved``, ``inter_achieved``) are
  pure functions of its fields: :class:`PricingIsland` computes them once where ``price_stage``
  reads them a dozen times a stage.

Nothing here changes a number: every shared value is the one the query would compute itself
(``tests/planner/test_price_sharing.py`` compares the shared and the plain paths).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from hetopt.costmodel.stage import Layout
from hetopt.planner.parallelizer import IslandSpec



def island_key(island: IslandSpec) -> tuple:
    """Every field of ``island`` but its name: what a stage's price may read of it.

    Two islands with equal keys price every stage alike; any other field (the GPU, nodes, GPUs
    per node, either bandwidth, peer-to-peer access, the network's transport, and any field
    added later) tells them apart.

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> a100 = load_gpus()["A100-SXM4-80GB"]
    >>> a, b = IslandSpec("a", a100, 2, 8, 25e9), IslandSpec("b", a100, 2, 8, 25e9)
    >>> island_key(a) == island_key(b), island_key(a) == island_key(IslandSpec("c", a100, 2, 8, 12.5e9))
    (True, False)
    """
    return tuple((f.name, getattr(island, f.name)) for f in fields(island) if f.name != "name")


class PricingIsland:
    """An island as ``price_stage`` reads it, with the links NCCL achieves computed once.

    ``intra_achieved`` and ``inter_achieved`` are plain attributes here (the island's properties
    recompute them from the catalog at every read); every other attribute is the island's own.

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> isl = IslandSpec("v", load_gpus()["V100-SXM2-16GB"], 2, 4, 6e9)
    >>> view = PricingIsland(isl)
    >>> (view.intra_achieved, view.inter_achieved, view.gpus) == (isl.intra_achieved, isl.inter_achieved, isl.gpus)
    True
    """

    __slots__ = ("_island", "gpu", "nodes", "gpus_per_node", "intra_achieved", "inter_achieved")

    def __init__(self, island: IslandSpec) -> None:
        self._island = island
        self.gpu = island.gpu
        self.nodes = island.nodes
        self.gpus_per_node = island.gpus_per_node
        self.intra_achieved = island.intra_achieved
        self.inter_achieved = island.inter_achieved

    def __getattr__(self, name: str) -> Any:
        # only for names not set above (the island's other fields and properties)
        return getattr(self._island, name)


@dataclass
class Prepared:
    """A query's layouts (redundant ones dropped), their compute floors and the order they are
    priced in, shared by every query of the same content (``BuiltinParallelizer._prepared``).

    ``keys[embedding][index[n]]`` (``keys[embedding][n]`` without an index): the memo keys of
    layout n's stages, for slices with or without the embedding (built as the layouts are
    priced); the queries of every micro-batch size of a slice share them (their layouts are
    places ``index`` of one list)."""

    layouts: list[Layout]
    floors: list[tuple[float, float]] | None
    visit: Any  # Sequence[int]: a list, or a range without floors
    keys: dict[bool, dict[int, tuple]] = field(default_factory=lambda: {False: {}, True: {}})
    index: list[int] | None = None
    #: the parts of the stage keys that do not read the layout's shape (``_stage_keys``)
    frames: dict[bool, dict[tuple, tuple]] = field(default_factory=lambda: {False: {}, True: {}})
    #: a list shared by every micro-batch size: its floor tables, with and without the embedding
    tables: dict[bool, FloorTable] = field(default_factory=dict)


class FloorTable:
    """The floors of a list of layouts (``BuiltinParallelizer._floors``) for any micro-batch size, in arrays.

    A layout's floors are the sum and the maximum of its stages' floors; a stage's floor depends
    on its layers, roles and the layout but for its ZeRO stage and offloading (a *cell*). The
    table numbers the layouts' shapes and cells once; for a micro-batch size m it computes each
    cell whose DP degree divides m once (``value``), and adds a shape's cells column by column,
    stage 0 first: the same floating-point sums as Python's ``sum`` over the stages (a missing
    stage adds 0.0, which changes no sum of positive times).

    Parameters
    ----------
    layouts
        The layouts, in the order they are enumerated.
    parts
        A layout's stages as (layers, embedding, head) tuples, its cells without the shape.

    Examples
    --------
    >>> lays = [Layout(1, 2, d, (1, 1), "none", 0) for d in (1, 2)]
    >>> table = FloorTable(lays, lambda lay: (("x", False, False), ("x", False, True)))
    >>> index, floors, visit = table.order(2, lambda lay, q, cell: 1.0 + q + 1.0 / lay.dp)
    >>> index, floors, visit
    ([0, 1], [(5.0, 3.0), (4.0, 2.5)], [1, 0])
    """

    def __init__(self, layouts: list[Layout], parts: Callable[[Layout], tuple]) -> None:
        shapes: dict[tuple, int] = {}
        cells: dict[tuple, int] = {}
        self.cells: list[tuple[Layout, int, tuple]] = []  # a layout and stage of each cell, and its memo key
        rows: list[list[int]] = []
        shape_of = []
        for lay in layouts:
            shape = (lay.split, lay.tp, lay.dp, lay.cp, lay.recompute, lay.ep, lay.fsep)
            j = shapes.get(shape)
            if j is None:
                j = shapes[shape] = len(rows)
                row = []
                for q, part in enumerate(parts(lay)):
                    key = part + (shape[1:],)
                    c = cells.get(key)
                    if c is None:
                        c = cells[key] = len(self.cells)
                        self.cells.append((lay, q, key))
                    row.append(c)
                rows.append(row)
            shape_of.append(j)
        width = max((len(r) for r in rows), default=1)
        blank = len(self.cells)  # a missing stage: 0.0
        self.grid = np.array([r + [blank] * (width - len(r)) for r in rows] or [[blank]], dtype=np.intp)
        self.shape_of = np.array(shape_of, dtype=np.intp)
        self.layout_dp = np.array([lay.dp for lay in layouts], dtype=np.int64)
        self.cell_dp = np.array([lay.dp for lay, _, _ in self.cells], dtype=np.int64)

    def order(self, m: int, value: Callable[[Layout, int, tuple], float]) -> tuple[list[int], list[tuple[float, float]], list[int]]:
        """For micro-batch size m: the places of the layouts whose d divides m, their floors
        (Σ, max) and the order to price them in (by Σ, stable), as ``_visit_order`` gives them."""
        index = np.flatnonzero(m % self.layout_dp == 0)
        values = np.zeros(len(self.cells) + 1)
        for c in np.flatnonzero(m % self.cell_dp == 0).tolist():
            values[c] = value(*self.cells[c])
        stages = values[self.grid]
        total = stages[:, 0].copy()
        for q in range(1, stages.shape[1]):
            total += stages[:, q]  # stage by stage, as ``sum`` adds them
        worst = stages.max(axis=1)
        shapes = self.shape_of[index]
        low_total, low_worst = total[shapes], worst[shapes]
        visit = np.argsort(low_total, kind="stable")
        return index.tolist(), list(zip(low_total.tolist(), low_worst.tolist())), visit.tolist()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the block, and left as it was found (off stays off).

    A planning run allocates millions of short-lived objects and makes no reference cycles,
    while the parallelizer's memo of stage prices only grows: the collector, run every few
    hundred allocations, would traverse the memo again and again (a fifth of a planning run on
    Mixtral-8x7B / C2; a tenth of Sailor's a4v4 when paused query by query only, where each
    query's survivors were traversed as the next began). Reference counting still frees
    everything that is not in a cycle; a cycle made in the block waits for the collector's next
    pass after it.

    Examples
    --------
    >>> with collector_paused():
    ...     gc.isenabled()
    False
    """
    collecting = gc.isenabled()
    if collecting:
        gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


__all__ = ["FloorTable", "PricingIsland", "Prepared", "collector_paused", "island_key"]
