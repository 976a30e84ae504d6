"""How ``dp`` time grows with islands and layers: ``hetopt scaling``.

Instances come from the generator (``generate.py``) with M = 256, m = 8 and role ``any``:
island i is one node of GPU type i mod 8 (``synthetic_islands``) with 1 + i // 8 nodes, so
every island differs from every other (the DP's worst case: 2^n usage states, no two
islands merged into one kind). Each cell is one ``dp`` run with a time limit; a cell that
stops shows why (DECLINED: the table exceeds ``MAX_DP_CELLS``; TIME_LIMIT).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from hetopt.interrupt import stop_requested
from hetopt.pipeline.dp import solve_dp
from hetopt.pipeline.synthetic import MICROBATCH_SIZE, Model, Workload, build_instance, synthetic_islands
from hetopt.pipeline.problem import PipelineInstance

#: Island counts and layer counts of the README table.
ISLANDS = (1, 2, 4, 6, 8, 10, 12, 16)
LAYERS = (8, 16, 32, 64, 96, 128)


def scaling_instance(islands: int, layers: int, microbatches: int = 256) -> PipelineInstance:
    """``islands`` pairwise different islands and a GPT of ``layers`` layers (h = 4096)."""
    base = synthetic_islands()
    specs = [replace(base[i % len(base)], name=f"{base[i % len(base)].name}-{i}", nodes=1 + i // len(base)) for i in range(islands)]
    work = Workload(Model(f"{layers}-layer GPT (h = 4096)", layers, 4096, 32), MICROBATCH_SIZE, microbatches)
    return build_instance(f"scaling-{islands}x{layers}", work, specs, roles=False)


def scaling_rows(islands: Sequence[int] = ISLANDS, layers: Sequence[int] = LAYERS, *, time_limit: float = 60.0,
                 on_cell: Callable[[int, int], None] | None = None) -> Iterator[dict[str, str | int]]:
    """dp wall time (s) by islands (one row each) and layers (one column each), a row at a time
    (``hetopt scaling``); ``on_cell(islands, layers)`` before each run (for a progress line).

    A row stops at its first cell that does not finish (longer models only take longer); a
    proven infeasible cell reads "(inf.)". A stop requested meanwhile (Ctrl-C) ends the rows
    before the one it cut short.
    """
    for n in islands:
        row: dict[str, str | int] = {"islands": n}
        stopped = False
        for L in layers:
            if stopped:
                row[f"L = {L}"] = "–"
                continue
            if on_cell is not None:
                on_cell(n, L)
            r = solve_dp(scaling_instance(n, L), time_limit=time_limit)
            if stop_requested():
                return
            if r.status.value in ("OPTIMAL", "INFEASIBLE"):
                row[f"L = {L}"] = f"{r.wall_s:.2f}" + ("" if r.status.value == "OPTIMAL" else " (inf.)")
            else:
                row[f"L = {L}"] = r.status.value
                stopped = True
        yield row
