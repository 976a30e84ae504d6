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
