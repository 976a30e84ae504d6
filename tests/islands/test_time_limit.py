"""A time limit never yields a false OPTIMAL; a cut-short answer is still valid."""

from __future__ import annotations

import pytest

from hetopt import load, solve
from hetopt.islands.problem import evaluate
from hetopt.islands.randomized import random_cluster
from hetopt.result import Status

from .conftest import INSTANCES


@pytest.mark.parametrize("method", ["cpsat", "milp", "exact"])
@pytest.mark.parametrize("limit", [0.0, 0.05])
def test_model_time_limit(method, limit):
    inst = load(INSTANCES / "synthetic-64-nodes-2-pods.toml")
    optimum = solve(inst, "dp").objective
    r = solve(inst, method, time_limit=limit)
    if r.status is Status.OPTIMAL:
        assert r.objective == optimum
    elif r.status is Status.FEASIBLE:
        assert r.objective >= optimum and (r.bound is None or r.bound <= optimum)
        assert evaluate(inst, r.solution).feasible
    else:
        assert r.status is Status.TIME_LIMIT and r.solution is None


def test_bruteforce_cut_short_is_feasible_not_optimal():
    inst = random_cluster(3, 10, network="matrix", profiles=1)
    r = solve(inst, "bruteforce", time_limit=0.0)
    assert r.status is Status.FEASIBLE and evaluate(inst, r.solution).feasible


def test_dps_at_time_limit_zero():
    inst = load(INSTANCES / "synthetic-64-nodes-2-pods.toml")
    for method in ("dp", "dp-dendrogram"):
        assert solve(inst, method, time_limit=0.0).status is Status.TIME_LIMIT
    small = random_cluster(5, 12, network="matrix")
    assert solve(small, "dp-subsets", time_limit=0.0).status is Status.TIME_LIMIT


def test_subset_dp_honours_the_time_limit_inside_a_layer():
    """Issue 9: the subset DP checked the clock only between layers (3.5 s at a 2 s limit)."""
    from hetopt.family import TIME_LIMIT_SLACK_S

    from .conftest import make_instance, make_node

    n = 18  # one profile, equal links: every subset is valid, ~2e8 updates (tens of seconds)
    inst = make_instance([make_node(f"n{i}") for i in range(n)], [[100.0] * n for _ in range(n)])
    limit = 2.0
    r = solve(inst, "dp-subsets", time_limit=limit)
    assert r.wall_s <= limit + TIME_LIMIT_SLACK_S
    assert r.status is Status.TIME_LIMIT or (r.status is Status.OPTIMAL and r.objective == 1)
