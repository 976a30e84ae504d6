"""The planner's one status step, ``conclude_plan``, on every combination that matters."""

from __future__ import annotations


import pytest

from hetopt.planner.search.enumerate import EnumerationStats
from hetopt.planner.search.outcome import Attempt, ChosenIslands, conclude_plan
from hetopt.result import Result, Status

IDEAL = 10.0


def pipeline(status: Status, objective: float | None = None, bound: float | None = None, reason: str = "") -> Result:
    if status is Status.OPTIMAL:
        bound = objective
    return Result(problem="pipeline", method="dp", status=status, objective=objective, bound=bound, reason=reason)


def attempt(m: int, result: Result | None, complete: bool = True) -> Attempt:
    stats = EnumerationStats(queried=10, answered=10 if complete else 4)
    return Attempt(m, result, stats.complete, [], stats)


ISLANDS_OK = Result(problem="islands", method="exact", status=Status.OPTIMAL, objective=2.0, bound=2.0)
ALL = ChosenIslands([], [], [], [], "")
SOME = ChosenIslands([], [], [], ["t4"], "composed over 1 of 2 islands")


def conclude(attempts, islands=ISLANDS_OK, chosen=ALL, planned=None):
    out = conclude_plan(islands, chosen, attempts, len(attempts) if planned is None else planned,
                        cluster="c", model="m", ideal_s=IDEAL)
    return out, out.best


def test_every_size_proven_is_optimal_with_the_best():
    out, best = conclude([attempt(1, pipeline(Status.OPTIMAL, 14.0)), attempt(2, pipeline(Status.OPTIMAL, 12.0)),
                          attempt(4, pipeline(Status.INFEASIBLE, reason="no fit"))])
    assert out.status is Status.OPTIMAL and best.microbatch_size == 2 and out.bound_s == 12.0 and out.gap == 0


def test_a_composition_stopped_with_a_plan_is_feasible_with_the_least_bound():
    out, best = conclude([attempt(1, pipeline(Status.OPTIMAL, 14.0)), attempt(2, pipeline(Status.FEASIBLE, 13.0, 11.0))])
    assert out.status is Status.FEASIBLE and best.microbatch_size == 2
    assert out.bound_s == 11.0 and out.gap == pytest.approx(2 / 13)


def test_an_unknown_bound_falls_back_to_the_ideal():
    for attempts, planned in (([attempt(1, pipeline(Status.OPTIMAL, 14.0), complete=False)], 1),  # enumeration cut
                              ([attempt(1, pipeline(Status.OPTIMAL, 14.0))], 2),  # a size not planned
                              ([attempt(1, pipeline(Status.OPTIMAL, 14.0)), attempt(2, None)], 2)):  # not composed
        out, _ = conclude(attempts, planned=planned)
        assert out.status is Status.FEASIBLE and out.bound_s == IDEAL and "time limit" in out.reason


def test_left_out_islands_or_unproven_islands_are_never_optimal():
    out, _ = conclude([attempt(1, pipeline(Status.OPTIMAL, 14.0))], chosen=SOME)
    assert out.status is Status.FEASIBLE and out.bound_s == IDEAL
    feasible_islands = Result(problem="islands", method="exact", status=Status.FEASIBLE, objective=3.0, bound=2.0)
    out, _ = conclude([attempt(1, pipeline(Status.OPTIMAL, 14.0))], islands=feasible_islands)
    assert out.status is Status.FEASIBLE and out.bound_s == IDEAL


def test_no_plan_is_infeasible_only_when_every_size_is_proven():
    out, best = conclude([attempt(1, pipeline(Status.INFEASIBLE, reason="too big")),
                          attempt(2, pipeline(Status.INFEASIBLE, reason="too big"))])
    assert best is None and out.status is Status.INFEASIBLE and "too big" in out.reason
    for attempts, planned in (([attempt(1, pipeline(Status.INFEASIBLE)), attempt(2, pipeline(Status.TIME_LIMIT))], 2),
                              ([attempt(1, pipeline(Status.INFEASIBLE), complete=False)], 1),
                              ([attempt(1, pipeline(Status.INFEASIBLE))], 2),
                              ([attempt(1, None)], 1)):
        out, _ = conclude(attempts, planned=planned)
        assert out.status is Status.TIME_LIMIT, attempts


def test_no_plan_over_a_choice_of_islands_is_declined_not_infeasible():
    out, _ = conclude([attempt(1, pipeline(Status.INFEASIBLE))], chosen=SOME)
    assert out.status is Status.DECLINED and "not proven for the whole cluster" in out.reason


def test_a_declined_composition_is_declined():
    out, _ = conclude([attempt(1, pipeline(Status.INFEASIBLE)), attempt(2, pipeline(Status.DECLINED, reason="too many"))])
    assert out.status is Status.DECLINED and "too many" in out.reason


@pytest.mark.parametrize("status", [Status.TIME_LIMIT, Status.INFEASIBLE, Status.DECLINED])
def test_no_islands_passes_the_islands_status_on(status):
    islands = Result(problem="islands", method="exact", status=status, reason="why")
    out, best = conclude([], islands=islands, chosen=None, planned=3)
    assert best is None and out.status is status and out.bound_s is None


def test_a_narrowed_search_proven_everywhere_says_it_is_optimal_within_its_narrowing():
    # issue 43: every island composed, every size proven, only the large-cluster narrowing left
    narrowing = ["narrowed for a cluster of more than 16 islands: atoms of 4 layers, micro-batch sizes 1, 2"]
    out = conclude_plan(ISLANDS_OK, ALL, [attempt(1, pipeline(Status.OPTIMAL, 14.0)), attempt(2, pipeline(Status.OPTIMAL, 12.0))],
                        2, narrowing, cluster="c", model="m", ideal_s=IDEAL)
    assert out.status is Status.FEASIBLE and out.bound_s == IDEAL  # the narrowing is no proof for the whole cluster
    assert "optimal over every island within that narrowing (each of the 2 micro-batch sizes composed and proven)" in out.reason
    # not when a composition stopped unproven, nor when islands were left out
    out = conclude_plan(ISLANDS_OK, ALL, [attempt(1, pipeline(Status.FEASIBLE, 13.0, 11.0))], 1, narrowing, cluster="c",
                        model="m", ideal_s=IDEAL)
    assert "within that narrowing" not in out.reason
    out = conclude_plan(ISLANDS_OK, SOME, [attempt(1, pipeline(Status.OPTIMAL, 14.0))], 1, narrowing, cluster="c",
                        model="m", ideal_s=IDEAL)
    assert "within that narrowing" not in out.reason


def test_sizes_proven_only_within_the_gap_limit_make_one_entry_and_keep_the_gap_within_it():
    # gap limit 0.1 on a 12 s plan: a size ruled out at 11 s (0.9 × an earlier 12.2 s plan), one
    # composed to 11.5 s within the limit, one proven above the plan; a narrowed search that
    # holds such a size is not "optimal within the narrowing"
    ruled = Attempt(4, None, True, [], EnumerationStats(queried=10, answered=10), pruned_bound=11.0)
    above = Attempt(8, None, True, [], EnumerationStats(queried=10, answered=10), pruned_bound=12.5)
    attempts = [attempt(1, pipeline(Status.FEASIBLE, 12.0, 10.9, reason="within the gap limit 0.1")),
                attempt(2, pipeline(Status.FEASIBLE, 13.0, 11.5)), ruled, above]
    out = conclude_plan(ISLANDS_OK, ALL, attempts, 4, cluster="c", model="m", ideal_s=IDEAL, gap_limit=0.1)
    assert out.status is Status.FEASIBLE and out.best.microbatch_size == 1
    assert out.bound_s == 10.9 and out.gap <= 0.1
    assert "micro-batch sizes 1, 2, 4: proven only within the gap limit 0.1 (none faster than 10.8 s)" in out.reason
    assert "micro-batch 8" not in out.reason
    # without the gap limit the same sizes are each named for what they are
    out = conclude_plan(ISLANDS_OK, ALL, attempts, 4, cluster="c", model="m", ideal_s=IDEAL)
    assert "micro-batch 4: none faster than 11 s" in out.reason and "gap limit 0.1 (" not in out.reason
    narrowing = ["narrowed for a cluster of more than 16 islands: atoms of 4 layers"]
    out = conclude_plan(ISLANDS_OK, ALL, [attempt(1, pipeline(Status.OPTIMAL, 12.0)), ruled], 2, narrowing, cluster="c",
                        model="m", ideal_s=IDEAL, gap_limit=0.1)
    assert "within that narrowing" not in out.reason
