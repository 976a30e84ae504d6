"""Time limits and size limits: on time, honest, and declines that name the limit."""

from __future__ import annotations

import pytest

from hetopt import solve
from hetopt.family import TIME_LIMIT_SLACK_S
from hetopt.mixed.limits import MAX_MILP_SPLITS, MAX_PRICINGS, MAX_STATES
from hetopt.mixed.problem import evaluate
from hetopt.mixed.synthetic import two_type_instance
from hetopt.result import Status


@pytest.fixture(scope="module")
def medium():
    inst = two_type_instance(layers=12, a100=8, v100=16, microbatch_size=8, microbatches=16)
    return inst


@pytest.mark.parametrize("method", ["dp", "milp", "bruteforce"])
@pytest.mark.parametrize("limit", [0.0, 0.3])
def test_stopped_methods_are_on_time_and_honest(medium, method, limit):
    r = solve(medium, method, time_limit=limit)
    assert r.wall_s <= limit + TIME_LIMIT_SLACK_S
    assert r.status in (Status.TIME_LIMIT, Status.FEASIBLE, Status.DECLINED), r.status
    if r.status is Status.FEASIBLE:
        assert evaluate(medium, r.solution).feasible and r.objective == evaluate(medium, r.solution).objective


def test_dp_without_limit_is_optimal_on_the_medium_instance(medium):
    r = solve(medium, "dp")
    assert r.status is Status.OPTIMAL and r.stats["pricings"] > 0


def test_dp_declines_big_instances_naming_the_limit():
    big = two_type_instance(layers=64, a100=64, v100=128, microbatch_size=32)
    r = solve(big, "dp", time_limit=1.0)
    assert r.status is Status.DECLINED and r.wall_s <= 1.0 + TIME_LIMIT_SLACK_S
    assert str(MAX_PRICINGS) in r.reason or str(MAX_STATES) in r.reason


def test_milp_declines_naming_its_limit_and_the_dp():
    inst = two_type_instance(layers=8, a100=8, v100=8, microbatch_size=8, microbatches=8)
    r = solve(inst, "milp")
    assert r.status is Status.DECLINED and str(MAX_MILP_SPLITS) in r.reason and "dp" in r.reason


def test_bruteforce_declines_past_its_limit(medium):
    r = solve(medium, "bruteforce")
    assert r.status is Status.DECLINED and "bruteforce's limit" in r.reason


def test_a_huge_instance_is_declined_at_once_by_every_method():
    """4096 GPUs of each type and b = 256: no method lists its member sets or layouts first."""
    from hetopt.mixed import crosscheck_methods

    huge = two_type_instance(layers=64, a100=4096, v100=4096, microbatch_size=256)
    assert crosscheck_methods(huge) == ["dp"]
    for method in ("dp", "milp", "bruteforce"):
        r = solve(huge, method, time_limit=1.0)  # a decline, not a stop: it comes before any work
        assert r.status is Status.DECLINED and r.wall_s <= 1.0 + TIME_LIMIT_SLACK_S, (method, r.wall_s)
        assert "declines it too" in r.reason or method == "dp", r.reason


@pytest.mark.parametrize("seed", range(60))
def test_member_choices_are_counted_as_they_are_listed(seed):
    """bruteforce declines by a count it makes without listing: it must equal the listing's length."""
    from hetopt.mixed.stages import _member_choices, member_choice_count
    from hetopt.mixed.synthetic import random_instance

    inst = random_instance(seed, types=1 + seed % 3, max_count=2 + seed % 5, microbatch_size=1 + seed % 7)
    assert [member_choice_count(inst, g) for g in range(inst.num_types)] == \
        [len(_member_choices(inst, g)) for g in range(inst.num_types)]
    big = two_type_instance(layers=4, a100=16 + seed, v100=8 + 2 * seed, microbatch_size=1 + seed)
    assert [member_choice_count(big, g) for g in range(2)] == [len(_member_choices(big, g)) for g in range(2)]
