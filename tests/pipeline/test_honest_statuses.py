"""Every answer stopped early carries a bound and a reason (issue 29): pipeline cpsat on
scale-8x96 at a 2 s limit was FEASIBLE with no bound, no gap and an empty reason."""

from __future__ import annotations

import pytest

from hetopt import load, solve
from hetopt.catalog import instances_dir
from hetopt.pipeline.problem import simple_bound
from hetopt.result import Status


@pytest.fixture(scope="module")
def scale():
    return load(instances_dir() / "pipeline" / "scale-8x96.toml")


@pytest.mark.parametrize("method", ["cpsat", "milp"])
@pytest.mark.parametrize("limit", [0.05, 0.5])
def test_a_model_stopped_early_reports_a_bound_and_why(scale, method, limit):
    r = solve(scale, method, time_limit=limit)
    assert r.status in (Status.FEASIBLE, Status.TIME_LIMIT, Status.OPTIMAL), r.reason
    if r.status is Status.OPTIMAL:
        return
    assert r.bound is not None and r.bound >= simple_bound(scale) * (1 - 1e-12)
    assert r.reason
    if r.status is Status.FEASIBLE:
        assert r.gap is not None and r.bound <= r.objective


def test_the_simple_bound_is_below_the_optimum(scale):
    best = solve(scale, "dp")
    assert best.status is Status.OPTIMAL
    assert simple_bound(scale) <= best.objective
