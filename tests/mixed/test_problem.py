"""evaluate on hand-computed cases: times, sync, hand-over, and every violation."""

from __future__ import annotations

import pytest

from hetopt.mixed.problem import GIB, build_solution, evaluate, sync_s
from hetopt.mixed.synthetic import hand_instance

from .conftest import one_layer, one_layer_type


def test_two_replicas_one_stage():
    inst = hand_instance()
    ev = evaluate(inst, build_solution(inst, [(0, 2, [(0, 1, 2, 1)])]))
    # compute 1 + 1 (y = 1); sync 2·(2−1)/2 · 2 GiB / 1 GiB/s = 2 s, over M = 4: 0.5; T = 2.5 + 3·2.5
    assert ev.feasible and ev.objective == pytest.approx(10.0)
    assert ev.details["sync_s"] == [pytest.approx(2.0)] and ev.details["in_flight"] == [1]


def test_two_stages_pay_the_hand_over_in_sum_and_bottleneck():
    inst = hand_instance(link_s=2.0)
    ev = evaluate(inst, build_solution(inst, [(0, 1, [(0, 1, 1, 2)]), (1, 2, [(0, 1, 1, 2)])]))
    # t = 1.5 each, no sync; Σ = 3 + λ 2; bottleneck max(1.5, λ = 2) → T = 5 + 3·2
    assert ev.feasible and ev.objective == pytest.approx(11.0)
    assert ev.details["in_flight"] == [2, 1]


def test_mixed_stage_ring_runs_at_the_cross_bandwidth():
    a = one_layer_type("A", 1, (1.0, 2.0), gbs=4.0)
    b = one_layer_type("B", 1, (1.5, 3.0), gbs=4.0, degree=1)
    inst = one_layer([a, b], b=2, m=2, grad_gib=1.0, cross_gbs=0.5)
    plan = build_solution(inst, [(0, 1, [(0, 1, 1, 1), (1, 1, 1, 1)])])
    ev = evaluate(inst, plan)
    # R = 2: 2·1/2 · 1 GiB / min(4, 0.5) GiB/s = 2 s; t = max(1.0, 1.5) + 2 / M = 2.5; T = 2.5 + 1·2.5
    assert ev.details["sync_s"] == [pytest.approx(2.0)]
    assert ev.objective == pytest.approx(5.0)
    # one type alone rings at its own bandwidth: 2 replicas of A (count 2)
    assert sync_s(inst, 0, 1, [(0, 1, 2)]) == pytest.approx(1.0 / 4.0)


def test_tp_shard_divides_the_sync():
    a = one_layer_type("A", 4, (1.0, 2.0), degree=2)
    inst = one_layer([a], b=2, grad_gib=1.0)
    assert sync_s(inst, 0, 1, [(0, 2, 2)]) == pytest.approx(0.5)  # 1 GiB / 2 per GPU at 1 GiB/s, ·2·1/2


@pytest.mark.parametrize(("stages", "words"), [
    ([(0, 2, [(0, 1, 3, 1)])], "the plan uses 3 GPUs, 2 exist"),
    ([(0, 2, [(0, 1, 1, 1)])], "hold 1 samples"),
    ([(0, 1, [(0, 1, 1, 2)])], "cover layers 0..0"),
    ([(1, 2, [(0, 1, 1, 2)])], "do not continue from layer 0"),
    ([(0, 2, [(0, 2, 1, 2)])], "tp 2 is not allowed"),
    ([(0, 2, [(0, 1, 1, 3)])], "a share 1..2"),
    ([(0, 2, [(5, 1, 1, 2)])], "unknown"),
    ([(0, 2, [])], "no replica"),
    ([], "no stage"),
])
def test_violations(stages, words):
    inst = hand_instance()
    ev = evaluate(inst, build_solution(inst, stages))
    assert not ev.feasible and any(words in v for v in ev.violations), ev.violations


def test_memory_counts_the_flight():
    inst = hand_instance(gpus=(hand_instance().gpus[0].__class__("A", 2, 5.5 * GIB, GIB, hand_instance().gpus[0].tp),))
    # one layer, y = 2: static 1 + flight · 2 GiB; stage 0 has 2 in flight (5 GiB fits), ...
    ok = build_solution(inst, [(0, 1, [(0, 1, 1, 2)]), (1, 2, [(0, 1, 1, 2)])])
    assert evaluate(inst, ok).feasible
    # ... all layers in one stage at y = 2: 2 + 1 · 4 = 6 GiB > 5.5
    whole = build_solution(inst, [(0, 2, [(0, 1, 1, 2)])])
    ev = evaluate(inst, whole)
    assert not ev.feasible and "does not fit its memory with 1 micro-batches" in ev.violations[0]
