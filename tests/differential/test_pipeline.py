"""Differential test of the pipeline family (issue 29): 1,000 seeded random instances, every
exact method against an optimum and a checker written here from formulations/pipeline.md
(tiling, islands once, roles, the 1F1B memory rule, T = A + (M − 1)·β), not from the family's
code (no evaluate, no behind limits, no option filtering).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hetopt.pipeline import tolerance
from hetopt.pipeline.problem import PipelineInstance, PipelineIsland, PipelineOption
from hetopt.pipeline.signatures import signatures

from . import assert_methods_agree, seeded_generator

SEEDS = range(1000)
CHUNKS = 10
METHODS = ("dp", "milp", "cpsat")
#: The models' per-island formulation, beside their default (the level model over island
#: signatures): both must prove the brute-force optimum on every seed.
PER_ISLAND = (("milp", {"formulation": "positions"}), ("cpsat", {"formulation": "positions"}))
#: Seeds of the suite with repeated signatures (islands copied with their options and links).
TWIN_SEEDS = range(300)


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


def _agree(inst, truth: float, methods, seed) -> list[float | None]:
    """``methods`` prove the brute-force optimum ``truth``, their plans priced by this file's checker."""
    return assert_methods_agree(inst, truth, lambda sol: cost(inst, [b.option for b in sol.blocks]), methods,
                                tolerance(inst), seed)


def _match_the_brute_force(chunk: int, methods) -> None:
    for seed in SEEDS[chunk::CHUNKS]:
        inst = random_instance(30_000 + seed)
        _agree(inst, brute_optimum(inst), methods, seed)


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_exact_methods_match_an_independent_optimum(chunk):
    _match_the_brute_force(chunk, METHODS)


def with_twins(seed: int) -> PipelineInstance:
    """A random instance whose islands repeat: 1-2 islands are copied with their options and
    links (c(x, i') = c(x, i) for every other island x), so signatures hold 2-3 islands."""
    base = random_instance(40_000 + seed, max_islands=3, max_layers=5)
    rng = np.random.default_rng(seed)
    n = len(base.islands)
    copies = [int(i) for i in rng.choice(n, size=int(rng.integers(1, 3)), replace=True)]
    islands, options = list(base.islands), list(base.options)
    link = [list(row) for row in base.link_s]
    twin_link = float(rng.choice([0.0, 0.01, 0.03]))
    for i in copies:
        j = len(islands)
        islands.append(PipelineIsland(f"{base.islands[i].name}-twin{j}", base.islands[i].gpus, base.islands[i].memory_bytes))
        options += [PipelineOption(j, o.layers, o.stages, o.role) for o in base.options if o.island == i]
        for row in link:
            row.append(0.0)
        link.append([0.0] * (j + 1))
        for x in range(j):
            # the copy sees every island as its original does; the original and its copies see
            # each other at one time (the copies of an island form one signature)
            same = x == i or islands[x].name.startswith(f"{base.islands[i].name}-twin")
            link[x][j] = link[j][x] = twin_link if same else link[x][i]
    return PipelineInstance(name=f"twins-{seed}", layers=base.layers, microbatches=base.microbatches,
                            islands=tuple(islands), options=tuple(options), link_s=tuple(tuple(r) for r in link),
                            memory_fraction=base.memory_fraction)


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_per_island_formulations_match_an_independent_optimum(chunk):
    _match_the_brute_force(chunk, PER_ISLAND)


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_signature_and_per_island_models_agree_where_islands_repeat(chunk):
    """Issue 43: the aggregated formulation (signature counts) and the per-island one prove the
    same optimum, the brute force's, on instances whose signatures hold several islands."""
    repeated = 0
    for seed in TWIN_SEEDS[chunk::CHUNKS]:
        inst = with_twins(seed)
        repeated += signatures(inst).repeated
        found = _agree(inst, brute_optimum(inst), (*METHODS, *PER_ISLAND), seed)
        assert len({None if v is None else round(v, 6) for v in found}) == 1, (seed, found)
    assert repeated >= len(TWIN_SEEDS[chunk::CHUNKS]) // 2, repeated
