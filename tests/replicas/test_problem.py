"""The instance checks itself; ``evaluate`` by hand on a small case."""

from __future__ import annotations

import math

import pytest

from hetopt.costmodel import HOP_LATENCY_S, RING_BASE_LATENCY_S, ring_allreduce_s
from hetopt.errors import InputError
from hetopt.replicas.problem import (
    DEFAULT_HOP_LATENCY_S,
    Candidate,
    IslandShape,
    Replica,
    ReplicasSolution,
    build_solution,
    evaluate,
)

from .conftest import candidate, two_shapes


def test_default_hop_latency_is_the_cost_models_network_figure():
    assert DEFAULT_HOP_LATENCY_S == HOP_LATENCY_S["network"]


@pytest.mark.parametrize(("change", "key"), [
    ({"microbatches": 0}, "microbatches"),
    ({"microbatches": 2**21}, "microbatches"),
    ({"microbatches": 4.0}, "microbatches"),
    ({"hop_latency_s": -1.0}, "hop_latency_s"),
    ({"hop_latency_s": math.nan}, "hop_latency_s"),
    ({"shapes": ()}, "shape"),
    ({"shapes": (IslandShape("A", -1), IslandShape("B", 1))}, "shape[0].count"),
    ({"shapes": (IslandShape("A", 1), IslandShape("A", 1))}, "shape[1].name"),
    ({"shapes": (IslandShape("A", 1), IslandShape("B", 1, gpus=0))}, "shape[1].gpus"),
    ({"candidates": ()}, "candidate"),
    ({"candidates": (candidate(uses=(1,)),)}, "candidate[0].uses"),
    ({"candidates": (candidate(uses=(0, 0)),)}, "candidate[0].uses"),
    ({"candidates": (candidate(uses=(-1, 1)),)}, "candidate[0].uses.A"),
    ({"candidates": (candidate(uses=(1, 0), fill=0.0),)}, "candidate[0].fill_s"),
    ({"candidates": (candidate(uses=(1, 0), fill=math.inf),)}, "candidate[0].fill_s"),
    ({"candidates": (candidate(uses=(1, 0), per=-0.1),)}, "candidate[0].per_microbatch_s"),
    ({"candidates": (candidate(uses=(1, 0), fill=1.0, per=2.0),)}, "candidate[0].per_microbatch_s"),
    ({"candidates": (candidate(uses=(1, 0), grad=-1.0),)}, "candidate[0].gradient_gib"),
    ({"candidates": (candidate(uses=(1, 0), gbps=0.0),)}, "candidate[0].bandwidth_gbps"),
    ({"candidates": (candidate(uses=(1, 0)), candidate(uses=(0, 1)))}, "candidate[1].name"),
])
def test_constructor_names_the_key(change, key):
    with pytest.raises(InputError) as err:
        two_shapes(**change)
    assert str(err.value).startswith(f"{key}: ")


def test_evaluate_by_hand():
    inst = two_shapes()
    # two replicas of "a" with 3 micro-batches each: T = 1 + 0.5·2 = 2; ring of 2: 2·(1/2)·1e9/1e10 = 0.1,
    # plus NCCL's launch latency (8.4 µs; the instance has no per-step latency)
    ev = evaluate(inst, build_solution(inst, [(0, 3), (0, 3)]))
    assert ev.feasible and ev.objective == pytest.approx(2.1 + RING_BASE_LATENCY_S, rel=1e-12)
    assert ev.details["sync_s"] == pytest.approx(0.1 + RING_BASE_LATENCY_S, rel=1e-12)
    # "a" (4) and "ab" (2): max(1 + 1.5, 2 + 1) + ring at the slower member: 2·(1/2)·2e9/1e10 = 0.2
    ev = evaluate(inst, build_solution(inst, [(0, 4), (1, 2)]))
    assert ev.feasible and ev.objective == pytest.approx(3.2 + RING_BASE_LATENCY_S, rel=1e-12)
    # one replica syncs nothing
    ev = evaluate(inst, build_solution(inst, [(0, 6)]))
    assert ev.objective == pytest.approx(3.5, rel=1e-12) and ev.details["sync_s"] == 0.0


def test_sync_uses_the_cost_models_ring_with_latency():
    inst = two_shapes(hop_latency_s=1e-5)
    ev = evaluate(inst, build_solution(inst, [(0, 3), (0, 3)]))
    assert ev.details["sync_s"] == ring_allreduce_s(1e9, 2, 1e10, 1e-5)
    assert ev.details["sync_s"] > 0.1


@pytest.mark.parametrize(("replicas", "words"), [
    ((), "no replica"),
    ((Replica(0, 3), Replica(0, 2)), "5 micro-batches"),
    ((Replica(0, 2), Replica(0, 2), Replica(0, 2)), "shape A"),
    ((Replica(1, 3), Replica(1, 3)), "shape B"),
    ((Replica(0, 0), Replica(0, 6)), "at least one micro-batch"),
    ((Replica(7, 6),), "unknown candidate"),
])
def test_evaluate_rejects(replicas, words):
    ev = evaluate(two_shapes(), ReplicasSolution(replicas))
    assert not ev.feasible and math.isinf(ev.objective)
    assert any(words in v for v in ev.violations)


def test_candidate_time_formula():
    c = Candidate("x", (1,), 2.0, 0.25, 0.0, 1.0)
    assert [c.time(n) for n in (1, 2, 5)] == [2.0, 2.25, 3.0]
