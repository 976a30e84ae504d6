"""Every exact allocation method finds the same optimum as bruteforce, on seeded random instances."""

from __future__ import annotations

import math

import pytest

import hetopt
from hetopt.result import Status

from .conftest import random_instance

EXACT = ["dp", "dp-faithful", "milp", "cpsat"]
SEEDS = range(60)


@pytest.mark.parametrize("seed", SEEDS)
def test_all_exact_methods_match_bruteforce(seed, matches_bruteforce):
    matches_bruteforce(random_instance(seed), EXACT, tol=lambda method: 1e-9 if method == "cpsat" else 0.0, rel_tol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_dp_threshold_search_without_bounds(seed):
    # the bounds often meet on small instances; searching every option time exercises the
    # min-plus feasibility decisions themselves
    from hetopt.allocation.dp import solve_dp

    instance = random_instance(seed)
    a, b = solve_dp(instance, bracket=False), hetopt.solve(instance, "bruteforce")
    assert a.status is b.status
    if b.status is Status.OPTIMAL:
        assert a.objective == b.objective
        assert a.stats["thresholds"] > 0


@pytest.mark.parametrize("seed", range(8))
def test_cbc_backend_matches(seed):
    instance = random_instance(seed)
    if not hetopt.backends.milp_available("cbc"):
        pytest.skip("CBC is not available here")
    a = hetopt.solve(instance, "dp")
    b = hetopt.solve(instance, "milp", backend="cbc")
    assert a.status is b.status
    if a.status is Status.OPTIMAL:
        assert math.isclose(a.objective, b.objective, rel_tol=1e-12)
        assert b.method == "milp-cbc"


def test_random_instances_cover_both_outcomes():
    # the generator must produce infeasible and feasible cases, or the agreement test is weaker than it looks
    statuses = {hetopt.solve(random_instance(s), "dp").status for s in SEEDS}
    assert statuses == {Status.OPTIMAL, Status.INFEASIBLE}


def test_random_instances_exercise_the_constraints():
    # some optimum uses an uneven shard, and in some instance (III) is what stops a faster plan
    uneven = binding = 0
    for s in SEEDS:
        inst = random_instance(s)
        r = hetopt.solve(inst, "dp")
        if r.status is not Status.OPTIMAL:
            continue
        uneven += any(p.uneven_shard for p in r.solution.gpus)
        loose = hetopt.solve(_without_state(inst), "dp")
        binding += loose.objective < r.objective
    assert uneven > 0 and binding > 0


def _without_state(instance):
    import dataclasses

    return dataclasses.replace(instance, state_bytes=0.0, allgather_s=instance.allgather_s)


def test_crosscheck_agrees_on_random_instances():
    for s in range(5):
        check = hetopt.crosscheck(random_instance(s))
        assert check.agree, check.disagreement


@pytest.mark.parametrize("seed", range(1000, 1015))
def test_exact_methods_agree_beyond_bruteforce(seed):
    # medium instances (up to 10 GPUs, batch up to 60): bruteforce is out of reach, the
    # four exact methods must still agree with each other
    from hetopt.allocation.dp import solve_dp

    instance = random_instance(seed, max_gpus=10, max_batch=60)
    results = [hetopt.solve(instance, m) for m in EXACT] + [solve_dp(instance, bracket=False)]
    statuses = {r.status for r in results}
    assert len(statuses) == 1, [(r.method, r.status) for r in results]
    if statuses == {Status.OPTIMAL}:
        best = results[0].objective
        for r in results:
            assert math.isclose(r.objective, best, rel_tol=1e-12, abs_tol=1e-9 if r.method == "cpsat" else 0.0), r.method


def test_the_bounds_bracket_the_optimum():
    # both bounds the solvers rely on must hold on every instance, or an exact method is wrong
    from hetopt.allocation.options import (
        capacity_lower_bound,
        enumerate_options,
        pareto_options,
        time_lower_bound,
    )

    tight = 0
    for s in SEEDS:
        instance = random_instance(s)
        r = hetopt.solve(instance, "bruteforce")
        if r.status is not Status.OPTIMAL:
            continue
        options = [pareto_options(enumerate_options(instance, g)) for g in range(len(instance.groups))]
        assert time_lower_bound(instance, options) <= capacity_lower_bound(instance, options) <= r.objective
        tight += capacity_lower_bound(instance, options) == r.objective
    assert tight > 0  # the bound is not vacuous
