"""dp = milp = cpsat = bruteforce on seeded random tiny instances; greedy never beats them."""

from __future__ import annotations

import math

import pytest

from hetopt import crosscheck, solve
from hetopt.replicas import tolerance
from hetopt.replicas.problem import evaluate
from hetopt.replicas.synthetic import random_instance
from hetopt.result import Status, objectives_agree

#: (shapes, max islands per shape, candidates, N) of the seeded cases: two to three shapes,
#: up to four islands each, up to six candidates, up to 12 micro-batches (bruteforce stays
#: below its limit).
SIZES = [(2, 3, 4, 6), (3, 3, 5, 8), (2, 4, 6, 10), (3, 2, 6, 12)]
SEEDS = range(40)


def _instance(seed: int):
    shapes, count, cands, n = SIZES[seed % len(SIZES)]
    return random_instance(seed, shapes=shapes, max_count=count, candidates=cands, microbatches=n)


@pytest.mark.parametrize("seed", SEEDS)
def test_exact_methods_agree_with_bruteforce(seed):
    inst = _instance(seed)
    results = {m: solve(inst, m) for m in ("bruteforce", "dp", "milp", "cpsat", "greedy")}
    truth = results["bruteforce"]
    assert truth.status in (Status.OPTIMAL, Status.INFEASIBLE)
    rtol, atol = tolerance(inst)
    for method in ("dp", "milp", "cpsat"):
        r = results[method]
        assert r.status is truth.status, (method, r.reason)
        if truth.status is Status.OPTIMAL:
            assert objectives_agree(r.objective, truth.objective, rtol=rtol, atol=atol), (method, r.objective, truth.objective)
            assert evaluate(inst, r.solution).feasible
    greedy = results["greedy"]
    if truth.status is Status.OPTIMAL:
        assert greedy.status is Status.FEASIBLE
        assert greedy.objective >= truth.objective - atol
    else:
        assert greedy.status is Status.INFEASIBLE


def test_the_seeds_cover_several_replicas_and_infeasible_cases():
    """The cases would prove little if every optimum were one replica."""
    statuses, replicas = [], []
    for seed in SEEDS:
        r = solve(_instance(seed), "dp")
        statuses.append(r.status)
        if r.status is Status.OPTIMAL:
            replicas.append(len(r.solution.replicas))
    assert Status.INFEASIBLE in statuses
    assert max(replicas) >= 3 and min(replicas) == 1


def test_greedy_is_beaten_somewhere():
    """The greedy is a heuristic: on some seeded instance the exact optimum is strictly better."""
    gaps = []
    for seed in range(200):
        inst = random_instance(seed, shapes=3, max_count=4, candidates=6, microbatches=12)
        exact, greedy = solve(inst, "dp"), solve(inst, "greedy")
        if exact.status is Status.OPTIMAL:
            gaps.append(greedy.objective - exact.objective)
    assert min(gaps) >= -1e-12 and max(gaps) > 0


@pytest.mark.parametrize("seed", range(6))
def test_crosscheck_agrees_with_ring_latency(seed):
    inst = random_instance(1000 + seed, shapes=3, max_count=4, candidates=8, microbatches=16,
                           hop_latency_s=9.6e-6)
    check = crosscheck(inst, ["dp", "milp", "cpsat", "greedy"])
    assert check.agree is True, check.disagreement
    assert math.isfinite(check.results[0].objective)


def test_cpsat_keeps_a_plan_whose_time_rounds_below_its_scaled_value():
    """Issue 29: T(7) = 3.3 + 6·0.33 sums to 5.279999999999999 in floating point; a domain cap
    ⌊T(N)/q⌋ taken from that float fell one unit below f̂ + 6·p̂ and cut off every plan, so
    CP-SAT answered infeasible (a SolverBug) where dp, milp and brute force give 5.28 s."""
    from hetopt.replicas.problem import Candidate, IslandShape, ReplicasInstance

    inst = ReplicasInstance("x", 7, (IslandShape("A", 2),), (Candidate("a", (2,), 3.3, 0.33, 1e9, 1e10),))
    truth = solve(inst, "bruteforce")
    assert truth.status is Status.OPTIMAL and math.isclose(truth.objective, 5.28)
    r = solve(inst, "cpsat")
    assert r.status is Status.OPTIMAL, r.reason
    assert math.isclose(r.objective, truth.objective, rel_tol=1e-9)
