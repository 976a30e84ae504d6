"""How the built-in parallelizer prices a layout's stages: the pricing context of a query (the
island as ``price_stage`` reads it, the running record on its GPU, the layer tables), the memo of
stage prices keyed by everything a price reads, and the floors that let a layout go unpriced.

A part of :class:`~hetopt.planner.parallelizer.builtin.BuiltinParallelizer` (its base class):
the search (enumerate, prune, keep the Pareto front) is in ``builtin.py``, the prices here.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import accumulate

from hetopt import costmodel as cm
from hetopt.costmodel.interleave import interleaved_stages
from hetopt.costmodel.stage import LayerTable, Layout, layer_table, path_floor_s, price_stage, stage_nodes, stage_offset
from hetopt.planner.parallelizer.pricecache import FloorTable, Prepared, PricingIsland, island_key
from hetopt.planner.parallelizer.protocol import IslandSpec, PartialPlan, Slice, StageCost, in_flight_fit, limit_from_fits


class StagePricing:
    """The stage-pricing methods of the built-in parallelizer (a mixin: it reads the parallelizer's
    fields, ``running_on``, ``_cache`` and ``_memo``)."""

    def _prices(self, sl: Slice, island: IslandSpec, m: int, M: int, phi: float) -> dict[tuple, tuple[StageCost, int | None, float]]:
        # one table per pricing context (the parallelizer's own settings are fixed); islands
        # that differ only in their names share one (``pricecache.island_key``)
        return self._cache("prices").setdefault((sl.model, sl.seq, island_key(island) if self.share_prices else island, m, M,
                                                  phi), {})

    def _table(self, sl: Slice, island: IslandSpec) -> LayerTable:
        """The slice's layer table (``layer_table``), memoized: it reads the slice's layers and the
        island's attention kernels and element size, and recurs for every micro-batch size."""
        running = self.running_on(island)
        flash, element = running.flash, cm.element_bytes(running.precision)
        kinds = self._cache("kinds")
        tables = self._cache("tables")
        key = (sl.model, sl.seq, sl.first_layer, sl.layers, flash, element)
        tab = tables.get(key)
        if tab is None:
            tab = tables[key] = layer_table(sl, kinds, flash=flash, element_bytes=element)
        return tab

    def _pricing(self, island: IslandSpec) -> tuple[PricingIsland, dict]:
        """The island as ``price_stage`` reads it and the keyword arguments every stage of a query
        on it is priced with (both fixed by the parallelizer and the island)."""
        views = self._memo.setdefault("pricing", {})
        out = views.get(island)
        if out is None:
            out = views[island] = (PricingIsland(island), dict(running=self.running_on(island),
                                                               reserved_bytes=self.reserved_bytes)
                                   | ({} if self.measured is None else {"measured": self.measured}))
        return out

    def _nodes(self, island: IslandSpec, lay: Layout) -> tuple[tuple[int, int], ...]:
        """``stage_nodes`` of the layout's stages, memoized: it depends on the island's shape only
        (a small table: shapes × stage sizes × depths)."""
        placed = self._memo.setdefault("nodes", {})
        where = (island.nodes, island.gpus_per_node, lay.tp * lay.dp * lay.cp, lay.pp)
        nodes = placed.get(where)
        if nodes is None:
            nodes = placed[where] = stage_nodes(island, lay.tp, lay.dp * lay.cp, lay.pp)
        return nodes

    def _stage_keys(self, sl: Slice, island: IslandSpec, tab: LayerTable, lay: Layout,
                    frames: dict[tuple, tuple] | None = None) -> tuple[tuple, ...]:
        """The memo keys of the layout's stages: everything ``price_stage`` reads of a stage besides
        the pricing context (``_prices``): the stage's layers (by content, not position: a run of
        equal layers is (kind, count, None), which no tuple of kinds can equal), its role, the
        layout, and which hand-overs cross a node boundary. ``frames`` memoizes each key but
        the layout's shape by everything that part reads (the split, the stage's GPUs,
        interleaving and EP; the slice and island are the memo's)."""
        shape = (lay.tp, lay.dp, lay.recompute, lay.zero_stage, lay.vpp, lay.ep, lay.fsep, lay.cp, lay.offload)
        gpus = lay.tp * lay.dp * lay.cp
        where = (lay.split, gpus, lay.vpp > 1, lay.ep == 1)
        frame = None if frames is None else frames.get(where)
        if frame is None:
            nodes = self._nodes(island, lay)
            starts = tuple(accumulate(lay.split, initial=0))
            embedding, head, last = sl.embedding, sl.head, lay.pp - 1
            wrap_one = nodes[0][0] == nodes[0][1] == nodes[-1][0] == nodes[-1][1]  # interleaving's last → first hand-over
            kinds, run_end = tab.kinds, tab.run_end
            parts = []
            for q in range(lay.pp):
                a, b = starts[q], starts[q + 1]
                one = nodes[q][0] == nodes[q][1]
                parts.append((
                    ((kinds[a], b - a, None) if run_end[a] >= b else kinds[a:b], embedding and q == 0, head and q == last),
                    (one,
                     None if q == last else one and nodes[q] == nodes[q + 1],
                     None if q == 0 else one and nodes[q - 1] == nodes[q],
                     lay.vpp > 1 and q in (0, last) and wrap_one,
                     # where a multi-node stage starts within a node decides which links its EP groups cross
                     None if lay.ep == 1 or one else stage_offset(island, gpus, lay.pp, q) % island.gpus_per_node),
                ))
            frame = tuple(parts)
            if frames is not None:
                frames[where] = frame
        return tuple(before + (shape,) + after for before, after in frame)

    def _price_layout(
        self, sl: Slice, island: IslandSpec, tab: LayerTable, lay: Layout, m: int, M: int,
        prices: dict[tuple, tuple[StageCost | None, int | None, float | None]], capacity: float, *, complete: bool = False,
        keys: tuple[tuple, ...] | None = None, pricing: tuple[PricingIsland, dict] | None = None,
    ) -> tuple[tuple[StageCost, ...] | None, list[float] | None, int | None]:
        """The layout's stages (memoized prices, under ``keys``: ``_stage_keys``, built when not
        given), their times and its stages-behind limit.

        Unless ``complete``, (None, None, -1) as soon as a stage's static bytes alone do not fit
        (:attr:`static_first`): the layout fits in no pipeline position, whatever its other stages.
        """
        static_first = self.static_first and not complete
        if keys is None:
            keys = self._stage_keys(sl, island, tab, lay)
        view, kwargs = pricing or self._pricing(island)
        stages, times, fits = [], [], []
        for q, key in enumerate(keys):
            priced = prices.get(key)
            if priced is None or (priced[0] is None and not static_first):
                cost = price_stage(sl, view, tab, lay, q, self._nodes(island, lay), microbatch_size=m, microbatches=M,
                                   capacity=capacity if static_first else None, **kwargs)
                # None: the stage's static bytes exceed the capacity (its time not computed)
                priced = prices[key] = (None, -1, None) if cost is None else (cost, in_flight_fit(cost, capacity, M), cost.time_s)
            if priced[0] is None:
                return None, None, -1
            stages.append(priced[0])
            fits.append(priced[1])
            times.append(priced[2])
        if lay.vpp > 1:
            stages = list(interleaved_stages(stages, lay.vpp, M))
            fits = [in_flight_fit(st, capacity, M) for st in stages]
            times = [st.time_s for st in stages]
        return tuple(stages), times, limit_from_fits(fits)

    def _floors(self, sl: Slice, island: IslandSpec, tab: LayerTable, lay: Layout, m: int,
                computed: dict[tuple, float], parts: dict[tuple[int, ...], tuple] | None = None) -> tuple[float, float]:
        """Lower bounds of the layout's Σ t and max t: its stages' kernels and TP/CP collectives,
        each pass held to the host's floor (``path_floor_s``), memoized in ``computed`` by
        everything they read: the stage's layers by content, whether it holds the embedding and
        the head, and the layout but for its ZeRO stage and offloading (the island and m: the
        table ``computed`` is). ``parts`` memoizes the first three per split (they read nothing else)."""
        shape = (lay.tp, lay.dp, lay.cp, lay.recompute, lay.ep, lay.fsep)
        times = []
        for q, part in enumerate(self._stage_parts(sl, tab, lay, parts)):
            key = part + (shape,)
            t = computed.get(key)
            if t is None:
                t = computed[key] = path_floor_s(sl, self._pricing(island)[0], tab, lay, q, microbatch_size=m,
                                                 running=self.running_on(island), measured=self.measured)
            times.append(t)
        return sum(times), max(times)

    @staticmethod
    def _stage_parts(sl: Slice, tab: LayerTable, lay: Layout, parts: dict[tuple[int, ...], tuple] | None) -> tuple:
        """The layout's stages as (layers by content, holds the embedding, holds the head), memoized
        per split in ``parts``."""
        stage_parts = None if parts is None else parts.get(lay.split)
        if stage_parts is None:
            starts = tuple(accumulate(lay.split, initial=0))
            kinds, run_end, last = tab.kinds, tab.run_end, lay.pp - 1
            stage_parts = tuple(
                ((kinds[a], b - a, None) if run_end[a] >= b else kinds[a:b], sl.embedding and q == 0, sl.head and q == last)
                for q, (a, b) in enumerate(zip(starts, starts[1:])))
            if parts is not None:
                parts[lay.split] = stage_parts
        return stage_parts

    def _partial_plan(
        self, sl: Slice, island: IslandSpec, lay: Layout, m: int, M: int, capacity: float,
        stages: tuple[StageCost, ...], limit: int | None,
    ) -> PartialPlan:
        return PartialPlan(
            island=island.name, signature=sl.signature, first_layer=sl.first_layer, layers=sl.layers, role=sl.role,
            tp=lay.tp, pp=lay.pp, dp=lay.dp, microbatch_size=m, microbatches=M, recompute=lay.recompute,
            zero_stage=lay.zero_stage, sequence_parallel=self.running.sequence_parallel and lay.tp > 1, stages=stages,
            capacity_bytes=capacity, behind=limit, vpp=lay.vpp, ep=lay.ep, fsep=lay.fsep, cp=lay.cp, offload=lay.offload,
        )

    def _plan(self, sl: Slice, island: IslandSpec, tab: LayerTable, lay: Layout, m: int, M: int, phi: float) -> PartialPlan:
        capacity = phi * island.memory_bytes
        stages, _, limit = self._price_layout(sl, island, tab, lay, m, M, self._prices(sl, island, m, M, phi), capacity,
                                              complete=True)
        return self._partial_plan(sl, island, lay, m, M, capacity, stages, limit)

    def _floor_table(self, sl: Slice, island: IslandSpec, tab: LayerTable, every: Prepared) -> FloorTable:
        """The floor table of a list of layouts shared by every micro-batch size (``FloorTable``), for
        slices with or without the embedding (whose first stage's floor holds its TP all-reduces)."""
        table = every.tables.get(sl.embedding)
        if table is None:
            parts: dict[tuple[int, ...], tuple] = {}
            table = every.tables[sl.embedding] = FloorTable(every.layouts, lambda lay: self._stage_parts(sl, tab, lay, parts))
        return table

    def _floor_of(self, sl: Slice, island: IslandSpec, tab: LayerTable, m: int) -> Callable[[Layout, int, tuple], float]:
        """A stage's floor (``path_floor_s``) at micro-batch size m, memoized by its cell (``_floors``)."""
        computed = self._cache("prices").setdefault(("floor", sl.model, sl.seq, island_key(island), m), {})
        view = self._pricing(island)[0]
        running = self.running_on(island)

        def floor(lay: Layout, q: int, cell: tuple) -> float:
            t = computed.get(cell)
            if t is None:
                t = computed[cell] = path_floor_s(sl, view, tab, lay, q, microbatch_size=m, running=running,
                                                  measured=self.measured)
            return t
        return floor
