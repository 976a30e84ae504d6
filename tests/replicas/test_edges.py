"""The replicas family at the edges of its limits (issue 29): no overflow, declines decided
from the input's counts before any table, the clock read inside long loops, honest statuses."""

from __future__ import annotations

import random
import time

import pytest

from hetopt import solve
from hetopt.errors import InputError
from hetopt.family import TIME_LIMIT_SLACK_S
from hetopt.replicas.limits import table_sizes
from hetopt.replicas.problem import Candidate, IslandShape, ReplicasInstance
from hetopt.result import Status


def seven_shapes_of_1023():
    """1024^7 island-count states: the DP's mixed-radix index overflowed int64."""
    shapes = tuple(IslandShape(f"S{i}", 1023) for i in range(7))
    return ReplicasInstance("ovf", 64, shapes, (Candidate("a", (1,) * 7, 1.0, 0.0025, 1e9, 1e11),))


def one_shape_of_4096(n=900):
    """3.69 M knapsack cells, under the 4 M limit; each candidate has ~900 copies to add."""
    cands = (Candidate("a", (1,), 1.0, 0.01, 1e9, 1e11), Candidate("b", (1,), 1.5, 0.005, 1e9, 1e11))
    return ReplicasInstance("clock", n, (IslandShape("A", 4096),), cands)


def many_candidates(count=1000, shapes=4, per_shape=4096, n=2**20, seed=1):
    rng = random.Random(seed)
    cands = []
    for c in range(count):
        uses = tuple(rng.choice([1, 2]) if i == 0 else rng.choice([0, 1, 2]) for i in range(shapes))
        per = rng.uniform(0.01, 0.1)
        cands.append(Candidate(f"c{c}", uses, per * rng.uniform(2, 8), per, rng.uniform(1e8, 1e10), 1e10))
    return ReplicasInstance("many", n, tuple(IslandShape(f"S{i}", per_shape) for i in range(shapes)), tuple(cands))


def test_dp_declines_past_int64_states_and_the_models_answer():
    inst = seven_shapes_of_1023()
    assert table_sizes(inst, [0])["states"] == 1024**7
    dp = solve(inst, "dp")
    assert dp.status is Status.DECLINED and "knapsack cells" in dp.reason and "use milp or cpsat" in dp.reason
    milp, cpsat = solve(inst, "milp"), solve(inst, "cpsat")
    assert milp.status is cpsat.status is Status.OPTIMAL
    assert milp.objective == pytest.approx(cpsat.objective, rel=1e-6)


@pytest.mark.parametrize("method", ["dp", "milp", "cpsat"])
def test_a_limit_is_kept_inside_a_long_knapsack(method):
    # dp read the clock only between candidates: 7.45 s at a 1 s limit
    started = time.perf_counter()
    r = solve(one_shape_of_4096(), method, time_limit=1.0)
    assert time.perf_counter() - started <= 1.0 + TIME_LIMIT_SLACK_S + 1.0
    assert r.status in (Status.OPTIMAL, Status.FEASIBLE), r.reason
    assert r.status is Status.OPTIMAL or r.reason  # a FEASIBLE answer says why


@pytest.mark.parametrize("method", ["dp", "milp", "cpsat"])
def test_huge_inputs_are_declined_from_their_counts_at_once(method):
    inst = many_candidates()
    started = time.perf_counter()
    r = solve(inst, method, time_limit=2.0)
    assert time.perf_counter() - started < 3.0 + TIME_LIMIT_SLACK_S
    assert r.status is Status.DECLINED
    # the advice is true: every exact method declines, so none is recommended but greedy
    assert "use greedy" in r.reason, r.reason


def test_milp_stopped_early_keeps_the_greedy_plan_as_feasible():
    r = solve(one_shape_of_4096(), "milp", time_limit=0.5)
    assert r.status is Status.FEASIBLE and r.solution is not None and r.bound is not None
    assert "greedy" in r.reason


def test_the_instance_name_must_be_a_string():
    with pytest.raises(InputError, match="name: must be a non-empty string") as err:
        ReplicasInstance(5, 4, (IslandShape("A", 2),), (Candidate("a", (1,), 1.0, 0.5, 1e9, 1e10),))
    assert err.value.field == "name"
