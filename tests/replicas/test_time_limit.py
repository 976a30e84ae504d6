"""A time limit never yields a false OPTIMAL; every method returns within the limit plus the slack."""

from __future__ import annotations

import pytest

from hetopt import load, solve
from hetopt.family import TIME_LIMIT_SLACK_S
from hetopt.replicas import METHODS
from hetopt.replicas.problem import evaluate
from hetopt.replicas.synthetic import random_instance
from hetopt.result import Status

from .conftest import INSTANCES

DATACENTER = INSTANCES / "datacenter-512-gpt3-175b-b1536.toml"


@pytest.fixture(scope="module")
def datacenter():
    inst = load(DATACENTER)
    return inst, solve(inst, "dp").objective


def _assert_honest(inst, r, optimum, rtol=1e-9) -> None:
    if r.status is Status.OPTIMAL:
        assert r.objective == pytest.approx(optimum, rel=rtol)
    elif r.status is Status.FEASIBLE:
        assert r.objective >= optimum * (1 - rtol)
        assert r.bound is None or r.bound <= optimum * (1 + rtol)
        assert evaluate(inst, r.solution).feasible
    else:
        assert r.status in (Status.TIME_LIMIT, Status.DECLINED) and r.solution is None


@pytest.mark.parametrize("method", ["milp", "cpsat"])
@pytest.mark.parametrize("limit", [0.0, 0.5])
def test_models_stopped_are_honest_and_on_time(datacenter, method, limit):
    inst, optimum = datacenter
    r = solve(inst, method, time_limit=limit)
    assert r.wall_s <= limit + TIME_LIMIT_SLACK_S
    assert r.status is not Status.OPTIMAL or limit > 0  # no proof in no time
    _assert_honest(inst, r, optimum)


def test_models_on_the_datacenter_do_not_claim_what_they_do_not_prove(datacenter):
    inst, optimum = datacenter
    for method in ("milp", "cpsat"):
        r = solve(inst, method, time_limit=2.0)
        _assert_honest(inst, r, optimum)


def test_dp_at_time_limit_zero_returns_the_greedy_plan_unproven(datacenter):
    inst, optimum = datacenter
    r = solve(inst, "dp", time_limit=0.0)
    assert r.status is Status.FEASIBLE and r.bound is not None and r.gap > 0
    _assert_honest(inst, r, optimum)


def test_bruteforce_cut_short_is_not_optimal():
    from hetopt.replicas.bruteforce import CLOCK_EVERY, plan_count

    inst = random_instance(22, shapes=3, max_count=4, candidates=6, microbatches=16)
    assert plan_count(inst) > CLOCK_EVERY  # it looks at the clock before the end
    r = solve(inst, "bruteforce", time_limit=0.0)
    assert r.status in (Status.FEASIBLE, Status.TIME_LIMIT)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_returns_within_the_limit(method):
    inst = random_instance(4, shapes=4, max_count=8, candidates=60, microbatches=400)
    limit = 0.3
    r = solve(inst, method, time_limit=limit)
    assert r.wall_s <= limit + TIME_LIMIT_SLACK_S
    optimum = solve(inst, "dp").objective
    _assert_honest(inst, r, optimum)


def test_dp_stops_inside_a_long_knapsack():
    """One knapsack of this instance takes seconds: the DP must look at the clock inside it."""
    from hetopt.replicas.problem import Candidate, IslandShape, ReplicasInstance

    shapes = tuple(IslandShape(f"S{s}", 12) for s in range(4))
    cands = [Candidate(f"one{s}", tuple(int(t == s) for t in range(4)), 1.0 + s / 10, 0.01 * (s + 1), 1e8, 1e10)
             for s in range(4)]
    cands += [Candidate(f"two{s}", tuple(int(t in (s, s + 1)) for t in range(4)), 0.8, 0.006, 2e8, 1e10)
              for s in range(3)]
    inst = ReplicasInstance("chain", 600, shapes, tuple(cands))
    limit = 0.2
    r = solve(inst, "dp", time_limit=limit)
    assert r.wall_s <= limit + TIME_LIMIT_SLACK_S
    assert r.status in (Status.FEASIBLE, Status.TIME_LIMIT, Status.OPTIMAL)
    if r.status is Status.FEASIBLE:
        assert evaluate(inst, r.solution).feasible and r.bound <= r.objective
