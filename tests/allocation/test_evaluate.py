"""evaluate rejects a plan that breaks each constraint, and accepts the optimum."""

from __future__ import annotations

import dataclasses

import pytest

import hetopt
from hetopt.allocation.problem import (
    GIB,
    AllocationInstance,
    AllocationSolution,
    GpuGroup,
    GpuPlan,
    Latency,
    evaluate,
)

F = Latency((0.01, 0.018, 0.026))


@pytest.fixture
def instance():
    # 2 GPUs, 16 GiB each, φ = 0.8: room 12.8 - 1 = 11.8 GiB, u = 11 at a = 1 GiB; K* = (25.6 - 2 - 8)/1 = 15
    return AllocationInstance("t", 8, (GpuGroup("A", 2, 16 * GIB, GIB, F, F),), GIB, 8 * GIB)


def plan(*gpus, shares=None):
    shares = shares or [1.0 / len(gpus)] * len(gpus)
    return AllocationSolution(tuple(GpuPlan("A", 0, m, ell, r) for (m, ell), r in zip(gpus, shares)))


def test_a_valid_plan_is_accepted(instance):
    ev = evaluate(instance, plan((4, 1), (4, 1)))
    assert ev.feasible, ev.violations
    assert ev.objective == pytest.approx(2 * 0.034 + 0.034)  # f(4) on the line 0.008 m + 0.002: T = f + (f + g)


def test_rejects_wrong_global_batch_I(instance):
    ev = evaluate(instance, plan((4, 1), (3, 1)))
    assert not ev.feasible and any(v.startswith("(I)") for v in ev.violations)


def test_rejects_microbatch_above_the_gpu_limit_II(instance):
    assert evaluate(instance, plan((7, 1), (1, 1))).feasible  # 7 <= u = 11: allowed
    big = dataclasses.replace(instance, global_batch=13)
    ev = evaluate(big, plan((12, 1), (1, 1)))
    assert not ev.feasible and any(v.startswith("(II)") for v in ev.violations)


def test_rejects_cluster_memory_III(instance):
    tight = dataclasses.replace(instance, state_bytes=15 * GIB)  # K* = 25.6 - 2 - 15 = 8.6 -> 8
    ev = evaluate(tight, plan((5, 1), (4, 1), shares=[0.5, 0.5]))
    assert not ev.feasible and any(v.startswith("(III)") for v in ev.violations)


def test_rejects_shares_not_summing_to_one(instance):
    ev = evaluate(instance, plan((4, 1), (4, 1), shares=[0.5, 0.4]))
    assert not ev.feasible and any("sum to" in v for v in ev.violations)


def test_rejects_a_state_share_that_overflows_a_gpu(instance):
    # GPU 0 holds 1 + 4 + 8 GiB = 13 GiB > 12.8 usable
    ev = evaluate(instance, plan((4, 1), (4, 1), shares=[1.0, 0.0]))
    assert not ev.feasible and any(v.startswith("state: GPU 0") for v in ev.violations)


def test_rejects_negative_share_and_non_positive_sizes(instance):
    assert not evaluate(instance, plan((4, 1), (4, 1), shares=[1.5, -0.5])).feasible
    assert not evaluate(instance, plan((0, 4), (4, 1))).feasible
    assert not evaluate(instance, plan((4, 0), (4, 2))).feasible


def test_rejects_a_plan_for_another_cluster(instance):
    assert not evaluate(instance, plan((8, 1))).feasible


def test_solver_answers_are_rechecked(monkeypatch, instance):
    # a solver that returns a wrong plan raises SolverBug instead of answering
    from hetopt.allocation import dp

    monkeypatch.setattr(dp, "_choices", lambda *a, **k: [(4, 1), (3, 1)])
    with pytest.raises(hetopt.SolverBug):
        hetopt.solve(instance, "dp")


def test_uneven_shard_costs_more():
    inst = AllocationInstance("u", 2, (GpuGroup("A", 2, 16 * GIB, GIB, F, F),), GIB, 8 * GIB, allgather_s=1.0, reducescatter_s=1.0)
    # e = floor((12.8 - 1 - 4) / 1) = 7: m = 8 is uneven
    assert inst.even_shard_max_microbatch_per_group == (7,)
    assert inst.time(0, 1, 8) == pytest.approx(1.25 + 2.5)
    assert inst.time(0, 1, 7) == pytest.approx(1.0 + 2.0)
