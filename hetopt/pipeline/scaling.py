"""How ``dp`` time grows with islands and layers: ``hetopt scaling``.

Instances come from the generator (``generate.py``) with M = 256, m = 8 and role ``any``:
island i is one node of GPU type i mod 8 (``synthetic_islands``) with 1 + i // 8 nodes, so
every island differs from every other (the DP's worst case: 2^n usage states, no two
islands merged into one kind). Each cell is one ``dp`` run with a time limit; a cell that
stops shows why (DECLINED: the table exceeds ``MAX_DP_CELLS``; TIME_LIMIT).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

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


def scaling_table(islands: Sequence[int] = ISLANDS, layers: Sequence[int] = LAYERS, *, time_limit: float = 60.0,
                  on_line: Callable[[str], None] = print) -> None:
    """A Markdown table of dp wall time (s) by islands (rows) and layers (columns), line by line
    to ``on_line`` (``hetopt scaling``); a row stops at its first cell that does not finish."""
    on_line("| islands | " + " | ".join(f"L = {L}" for L in layers) + " |")
    on_line("|---|" + "---|" * len(layers))
    for n in islands:
        cells, stop = [], False
        for L in layers:
            if stop:
                cells.append("–")
                continue
            r = solve_dp(scaling_instance(n, L), time_limit=time_limit)
            if r.status.value in ("OPTIMAL", "INFEASIBLE"):
                cells.append(f"{r.wall_s:.2f}" + ("" if r.status.value == "OPTIMAL" else " (inf.)"))
            else:
                cells.append(r.status.value)
                stop = True  # longer models only take longer
        on_line(f"| {n} | " + " | ".join(cells) + " |")
