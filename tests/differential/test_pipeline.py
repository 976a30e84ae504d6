"""Differential test of the pipeline family (issue 29): 1,000 seeded random instances, every
exact method against an optimum and a checker written here from formulations/pipeline.md
(tiling, islands once, roles, the 1F1B memory rule, T = A + (M − 1)·β), not from the family's
code (no evaluate, no behind limits, no option filtering).
"""

from __future__ import annotations

import math

import pytest

from hetopt.pipeline import tolerance

from . import assert_methods_agree, seeded_generator

SEEDS = range(1000)
CHUNKS = 10
METHODS = ("dp", "milp", "cpsat")


random_instance = seeded_generator("pipeline")


def cost(inst, sequence: list[int]) -> float:
    """T of the blocks ``sequence`` (option indices, front to back); inf when a rule breaks."""
    opts = inst.options
    if not sequence or sum(opts[o].layers for o in sequence) != inst.layers:  # 1. tiling
        return math.inf
    islands = [opts[o].island for o in sequence]
    if len(set(islands)) != len(islands):  # 2. island once
        return math.inf
    k = len(sequence)
    for m, o in enumerate(sequence):  # 3. roles
        allowed = {"whole", "any"} if k == 1 else {"first", "any"} if m == 0 else {"last", "any"} if m == k - 1 \
            else {"middle", "any"}
        if opts[o].role not in allowed:
            return math.inf
    stages = [(opts[o].island, st) for o in sequence for st in opts[o].stages]
    total = len(stages)
    for s, (i, st) in enumerate(stages):  # 4. 1F1B memory
        held = min(total - s, inst.microbatches)
        capacity = inst.memory_fraction * inst.islands[i].memory_bytes
        if st.static_bytes + st.activation_bytes * held > capacity * (1 + 1e-9):
            return math.inf
    times = [st.forward_s + st.backward_s for _, st in stages]
    links = [inst.link_s[a][b] for a, b in zip(islands, islands[1:])]
    return sum(times) + sum(links) + (inst.microbatches - 1) * max(times + links)


def brute_optimum(inst) -> float:
    """Least T over every sequence of options on distinct islands whose slices sum to L."""
    opts = inst.options
    best = math.inf

    def extend(sequence: list[int], layers: int, used: set[int]) -> None:
        nonlocal best
        if layers == inst.layers:
            best = min(best, cost(inst, sequence))
            return
        for o, opt in enumerate(opts):
            if opt.island not in used and layers + opt.layers <= inst.layers:
                extend(sequence + [o], layers + opt.layers, used | {opt.island})

    extend([], 0, set())
    return best


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_exact_methods_match_an_independent_optimum(chunk):
    for seed in SEEDS[chunk::CHUNKS]:
        inst = random_instance(30_000 + seed)
        truth = brute_optimum(inst)
        assert_methods_agree(inst, truth, lambda sol: cost(inst, [b.option for b in sol.blocks]), METHODS, tolerance(inst),
                             seed)
