"""Every exact pipeline method finds bruteforce's optimum on seeded random tiny instances."""

from __future__ import annotations

import math

import pytest

import hetopt
from hetopt.backends import milp_available
from hetopt.pipeline.cpsat import error_bound
from hetopt.result import Status

from .conftest import random_instance

EXACT = ["dp", "milp", "cpsat"]
SEEDS = range(80)


@pytest.mark.parametrize("seed", SEEDS)
def test_exact_methods_match_bruteforce(seed, matches_bruteforce):
    instance = random_instance(seed)
    matches_bruteforce(instance, EXACT, tol=lambda method: error_bound(instance) if method == "cpsat" else 0.0)


@pytest.mark.parametrize("seed", range(6))
def test_cbc_backend_matches(seed):
    if not milp_available("cbc"):
        pytest.skip("CBC is not available here")
    instance = random_instance(seed)
    a, b = hetopt.solve(instance, "dp"), hetopt.solve(instance, "milp", backend="cbc")
    assert a.status is b.status and b.method == "milp-cbc"
    if a.status is Status.OPTIMAL:
        assert math.isclose(a.objective, b.objective, rel_tol=1e-9)


def test_random_instances_exercise_the_rules():
    """The generator must make memory-at-position, roles and links matter, or agreement proves little."""
    statuses, position_bound, several_blocks, roles = set(), 0, 0, set()
    for s in SEEDS:
        inst = random_instance(s)
        r = hetopt.solve(inst, "dp")
        statuses.add(r.status)
        if r.status is not Status.OPTIMAL:
            continue
        limits = [inst.behind_limits[b.option] for b in r.solution.blocks]
        position_bound += any(lim is not None for lim in limits)
        several_blocks += len(r.solution.blocks) > 1
        roles |= {inst.options[b.option].role for b in r.solution.blocks}
    assert statuses == {Status.OPTIMAL, Status.INFEASIBLE}
    assert position_bound >= 5 and several_blocks >= 10
    assert {"first", "last", "any"} <= roles


def test_greedy_never_beats_the_optimum():
    for s in range(30):
        inst = random_instance(s)
        g, d = hetopt.solve(inst, "greedy"), hetopt.solve(inst, "dp")
        if g.status.has_solution:
            assert d.status is Status.OPTIMAL and g.objective >= d.objective * (1 - 1e-12)
