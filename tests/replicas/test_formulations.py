"""The two formulations of the replicas models (issue 43): copies counted per candidate
(``counts``, the default) and one slot per copy (``slots``) prove the same optimum, on seeded
instances where candidates repeat (several copies fit the islands) and against brute force."""

from __future__ import annotations

import math

import pytest

from hetopt import solve
from hetopt.errors import InputError
from hetopt.replicas import tolerance
from hetopt.replicas.levels import TooManyLevels, capacity_floor, time_levels
from hetopt.replicas.model import model_data
from hetopt.replicas.problem import Candidate, IslandShape, ReplicasInstance
from hetopt.replicas.synthetic import random_instance
from hetopt.result import Status

SEEDS = range(24)


def repeating(seed: int) -> ReplicasInstance:
    """Shapes of up to 4 islands and candidates on 1-2 of them: copies repeat on most seeds."""
    return random_instance(5_000 + seed, shapes=2, max_count=4, candidates=4, microbatches=9)


def test_the_seeds_repeat_candidates():
    repeats = 0
    for seed in SEEDS:
        inst = repeating(seed)
        r = solve(inst, "dp")
        if r.status is Status.OPTIMAL:
            chosen = [x.candidate for x in r.solution.replicas]
            repeats += len(chosen) > len(set(chosen))
    assert repeats >= 5, repeats


@pytest.mark.parametrize("model", ["milp", "cpsat"])
@pytest.mark.parametrize("seed", SEEDS)
def test_counts_and_slots_prove_the_same_optimum(model, seed):
    inst = repeating(seed)
    rtol, atol = tolerance(inst)
    truth = solve(inst, "bruteforce")
    counts = solve(inst, model)  # the default formulation
    slots = solve(inst, model, formulation="slots")
    if truth.status is Status.INFEASIBLE:
        assert counts.status is slots.status is Status.INFEASIBLE
        return
    assert counts.status is Status.OPTIMAL and slots.status is Status.OPTIMAL, (counts.reason, slots.reason)
    assert counts.stats["formulation"] == "counts" and slots.stats["formulation"] == "slots"
    assert math.isclose(counts.objective, truth.objective, rel_tol=rtol, abs_tol=atol)
    assert math.isclose(slots.objective, truth.objective, rel_tol=rtol, abs_tol=atol)


def test_an_unknown_formulation_is_refused_by_name():
    inst = repeating(0)
    for model in ("milp", "cpsat"):
        with pytest.raises(InputError) as err:
            solve(inst, model, formulation="rows")
        assert str(err.value).startswith("formulation: unknown formulation 'rows'")


def test_the_capacity_floor_bounds_every_plan():
    """No plan finishes N micro-batches below the floor: check it against every plan's split."""
    for seed in SEEDS:
        inst = repeating(seed)
        truth = solve(inst, "bruteforce")
        if truth.status is not Status.OPTIMAL:
            continue
        data = model_data(inst, truth.objective)
        levels = time_levels(inst, data)
        slowest = max(truth.solution.times)
        assert levels.floor_s <= slowest
        assert slowest in levels.values  # the optimum's slowest time is a level
        kept = sorted(data.most)
        assert capacity_floor(inst, kept, levels.copies, slowest) >= inst.microbatches


def test_the_levels_are_counted_before_their_tables():
    # 400 candidates whose times interleave: without a known plan (U) to cut them, the levels
    # between the capacity floor and the slowest T_c(N) pass MAX_LEVEL_CELLS
    cands = tuple(Candidate(f"c{i}", (1,), 1.0 + i * 1e-3, 1e-3 * (1 + i % 7), 0.0, 1e9) for i in range(400))
    inst = ReplicasInstance("big", 4096, (IslandShape("A", 2),), cands, hop_latency_s=0.0)
    with pytest.raises(TooManyLevels, match="table cells exceed the count model's limit"):
        time_levels(inst, model_data(inst, None))
