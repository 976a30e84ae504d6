"""How ``dp`` time grows with islands and layers: ``python -m hetopt.pipeline.scaling``.

Instances come from the generator (``generate.py``) with M = 256, m = 8 and role ``any``:
island i is one node of GPU type i mod 8 (``synthetic_islands``) with 1 + i // 8 nodes, so
every island differs from every other (the DP's worst case: 2^n usage states, no two
islands merged into one kind). Each cell is one ``dp`` run with a time limit; a cell that
stops shows why (DECLINED: the table exceeds ``MAX_DP_CELLS``; TIME_LIMIT).
"""

from __future__ import annotations

import argparse
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


def main(argv: list[str] | None = None) -> int:
    """Print a Markdown table of dp wall time (s) by islands (rows) and layers (columns)."""
    parser = argparse.ArgumentParser(prog="python -m hetopt.pipeline.scaling", description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per dp run (default 60)")
    parser.add_argument("--islands", default=",".join(map(str, ISLANDS)))
    parser.add_argument("--layers", default=",".join(map(str, LAYERS)))
    args = parser.parse_args(argv)
    islands = [int(x) for x in args.islands.split(",")]
    layers = [int(x) for x in args.layers.split(",")]
    print("| islands | " + " | ".join(f"L = {L}" for L in layers) + " |")
    print("|---|" + "---|" * len(layers))
    for n in islands:
        cells, stop = [], False
        for L in layers:
            if stop:
                cells.append("–")
                continue
            r = solve_dp(scaling_instance(n, L), time_limit=args.time_limit)
            if r.status.value in ("OPTIMAL", "INFEASIBLE"):
                cells.append(f"{r.wall_s:.2f}" + ("" if r.status.value == "OPTIMAL" else " (inf.)"))
            else:
                cells.append(r.status.value)
                stop = True  # longer models only take longer
        print(f"| {n} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
