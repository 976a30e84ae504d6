"""evaluate on hand-computed cases: times, sync, hand-over, and every violation."""

from __future__ import annotations

import pytest

from hetopt.mixed.problem import GIB, Member, build_solution, evaluate, exposed_sync_s, link_bytes, sync_s
from hetopt.mixed.synthetic import hand_instance

from .conftest import one_layer, one_layer_type


def test_two_replicas_one_stage():
    inst = hand_instance()
    ev = evaluate(inst, build_solution(inst, [(0, 2, [(0, 1, 2, 2)])]))
    # two replicas holding 2 samples: 1 each; compute 1 + 1 (y = 1); sync 2·(2−1)/2 · 2 GiB / 1 GiB/s = 2 s, over M = 4: 0.5; T = 2.5 + 3·2.5
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
    ([(0, 1, [(0, 1, 2, 2)]), (1, 2, [(0, 1, 2, 2)])], "the plan uses 4 GPUs, 2 exist"),
    ([(0, 2, [(0, 1, 1, 1)])], "hold 1 samples"),
    ([(0, 1, [(0, 1, 1, 2)])], "cover layers 0..0"),
    ([(1, 2, [(0, 1, 1, 2)])], "do not continue from layer 0"),
    ([(0, 2, [(0, 2, 1, 2)])], "tp 2 is not allowed"),
    ([(0, 2, [(0, 1, 1, 3)])], "samples from replicas to 2"),
    ([(0, 2, [(0, 1, 2, 1)])], "every replica holds one at least"),
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


def test_uneven_samples_run_at_the_larger_share():
    """3 samples on 2 replicas of one type: one holds 2, one holds 1; the stage runs at the share of 2."""
    a = one_layer_type("A", 2, (1.0, 1.5, 2.5), degree=1)
    inst = one_layer([a], b=3)
    ev = evaluate(inst, build_solution(inst, [(0, 1, [(0, 1, 2, 3)])]))
    # compute max(τ(1) = 1.0, τ(2) = 1.5) = 1.5; no gradients, M = 1: T = 1.5
    assert ev.feasible and ev.details["compute_s"] == [1.5] and ev.objective == pytest.approx(1.5)
    assert Member(0, 1, 2, 3).shares == (1, 2) and Member(0, 1, 3, 3).shares == (1,)


def test_the_larger_share_must_fit():
    """memory 2.5 GiB: static 1 + 1 GiB per sample fits y = 1, not y = 2; 3 samples on 2 replicas need y = 2."""
    a = one_layer_type("A", 2, (1.0, 1.5, 2.5), memory_gib=2.5)
    inst = one_layer([a], b=3)
    ev = evaluate(inst, build_solution(inst, [(0, 1, [(0, 1, 2, 3)])]))
    assert not ev.feasible and "y2 does not fit" in ev.violations[0]


def test_units_are_taken_whole():
    """A type of 4 GPUs in units of 2: 1 replica of tp 1 takes half a unit (a violation), 2 replicas one unit."""
    a = one_layer_type("A", 4, (1.0, 2.0))
    a = a.__class__(a.name, a.count, a.memory_bytes, a.bandwidth, a.tp, 2)
    inst = one_layer([a], b=2)
    ev = evaluate(inst, build_solution(inst, [(0, 1, [(0, 1, 1, 2)])]))
    assert not ev.feasible and "not whole units of 2" in ev.violations[0]
    assert evaluate(inst, build_solution(inst, [(0, 1, [(0, 1, 2, 2)])])).feasible


def test_a_unit_link_carries_the_whole_gradient_when_it_holds_whole_replicas():
    # unit 4 GPUs: tp 1 → 4 rings of the full gradient... each crossing once: 8 B; tp 4 → 4 shards of 2 B: 8 B;
    # tp 8 spans 2 units: each holds 4 of the 8 shards of 1 B: 4 B; unit 1 (a GPU's link), tp 2: one shard, 4 B
    assert (link_bytes(8.0, 1, 4), link_bytes(8.0, 4, 4), link_bytes(8.0, 8, 4), link_bytes(8.0, 2, 1)) == (8.0, 8.0, 4.0, 4.0)


def test_overlap_hides_the_ring_behind_the_backward_up_to_its_last_bucket():
    inst = hand_instance(overlap=0.5, buckets=(2, 2))
    # σ = 2 s, c = 1 s: 2 − 0.5 = 1.5 exposed; c = 3.9 s: 2 − 1.95 = 0.05 < σ/K = 2/4 = 0.5 → 0.5
    assert exposed_sync_s(inst, 0, 2, 2.0, 1.0) == pytest.approx(1.5)
    assert exposed_sync_s(inst, 0, 2, 2.0, 3.9) == pytest.approx(0.5)
    assert exposed_sync_s(inst, 0, 1, 2.0, 3.9) == pytest.approx(1.0)  # one layer: 2 buckets
    ev = evaluate(inst, build_solution(inst, [(0, 2, [(0, 1, 2, 2)])]))
    # c = 2 (y = 1, two layers), σ = 2: exposed max(2 − 1, 2/4) = 1, over M = 4: t = 2.25; T = 4 · 2.25
    assert ev.objective == pytest.approx(9.0)


@pytest.mark.parametrize(("fields", "words"), [
    ({"overlap": 1.0}, "overlap"), ({"overlap": -0.1}, "overlap"), ({"buckets": (1,)}, "buckets"),
    ({"buckets": (1, 0)}, "buckets[1]"),
])
def test_bad_overlap_and_buckets(fields, words):
    from hetopt.errors import InputError

    with pytest.raises(InputError, match=words.replace("[", r"\[").replace("]", r"\]")):
        hand_instance(**fields)


def test_tables_must_not_decrease_with_the_share():
    from hetopt.errors import InputError

    with pytest.raises(InputError, match=r"time_s\[1\]\[0\].*below the row of one sample fewer"):
        one_layer([one_layer_type("A", 1, (2.0, 1.0))], b=2)


def test_units_must_divide_the_count():
    from hetopt.errors import InputError

    a = one_layer_type("A", 3, (1.0,))
    with pytest.raises(InputError, match=r"gpu\[0\]\.count: 3 GPUs are not whole units of 2"):
        one_layer([a.__class__(a.name, 3, a.memory_bytes, a.bandwidth, a.tp, 2)], b=1)


def test_fewer_rows_than_b_mean_larger_shares_do_not_fit():
    a = one_layer_type("A", 2, (1.0,))  # one row: y = 1 only
    inst = one_layer([a], b=2)
    assert evaluate(inst, build_solution(inst, [(0, 1, [(0, 1, 2, 2)])])).feasible
    ev = evaluate(inst, build_solution(inst, [(0, 1, [(0, 1, 1, 2)])]))
    assert not ev.feasible and "y2 does not fit" in ev.violations[0]
