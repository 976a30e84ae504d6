"""Differential test of the islands family (issue 29): 1,000 seeded random clusters, every
exact method against an optimum and a checker written here from formulations/islands.md
(validity: equal GPU counts, the compute/memory/intra ratios within 1 + ε with the 1e-9 slack,
proximity; fewest islands), not from the family's code (no evaluate, no compatible, no greedy).
"""

from __future__ import annotations

import pytest

from hetopt import solve
from hetopt.islands.randomized import random_cluster
from hetopt.result import Status

SEEDS = range(1000)
CHUNKS = 10
METHODS = ("dp", "milp", "cpsat")
RATIO_SLACK = 1e-9


def valid(inst, island: list[int]) -> bool:
    nodes = [inst.nodes[n] for n in island]
    if len({n.gpus for n in nodes}) != 1:
        return False
    tol = inst.tolerance
    for values, eps in (([n.flops for n in nodes], tol.compute), ([n.memory_bytes for n in nodes], tol.memory),
                        ([n.intra_bytes_s for n in nodes], tol.intra)):
        if max(values) / min(values) > (1 + eps) * (1 + RATIO_SLACK):
            return False
    e = inst.bandwidth
    outside = [x for x in range(inst.num_nodes) if x not in island]
    for n in island:  # proximity: every member's slowest link inside ≥ its fastest link outside
        inside = [e[n][m] for m in island if m != n]
        if inside and outside and min(inside) < max(e[n][x] for x in outside):
            return False
    return True


def partitions(items: list[int]):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in partitions(rest):
        for k in range(len(part)):
            yield part[:k] + [[first] + part[k]] + part[k + 1:]
        yield [[first]] + part


def fewest(inst) -> int:
    ok: dict[tuple[int, ...], bool] = {}
    best = inst.num_nodes
    for part in partitions(list(range(inst.num_nodes))):
        if len(part) >= best:
            continue
        if all(ok.setdefault(tuple(sorted(i)), valid(inst, sorted(i))) for i in part):
            best = len(part)
    return best


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_exact_methods_find_the_fewest_valid_islands(chunk):
    for seed in SEEDS[chunk::CHUNKS]:
        inst = random_cluster(40_000 + seed, 3 + seed % 5)  # 3 to 7 nodes: at most 877 partitions
        truth = fewest(inst)
        index = {name: k for k, name in enumerate(n.name for n in inst.nodes)}
        for method in METHODS:
            r = solve(inst, method, time_limit=30)
            assert r.status is Status.OPTIMAL, (seed, method, r.status, r.reason)
            islands = [sorted(index[name] for name in isl.nodes) for isl in r.solution.islands]
            assert sorted(n for isl in islands for n in isl) == list(range(inst.num_nodes)), (seed, method)
            assert all(valid(inst, isl) for isl in islands), (seed, method, islands)
            assert len(islands) == r.objective == truth, (seed, method, len(islands), r.objective, truth)
