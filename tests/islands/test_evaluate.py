"""evaluate: the single source of truth; one rejection test per condition."""

from __future__ import annotations

import pytest

from hetopt.islands.problem import build_solution, evaluate

from .conftest import make_instance, make_node

UNIFORM = [[0, 100, 100], [100, 0, 100], [100, 100, 0]]


def _check(instance, groups):
    return evaluate(instance, build_solution(instance, groups))


def test_accepts_a_valid_partition_and_counts_islands():
    inst = make_instance([make_node("a"), make_node("b"), make_node("c")], UNIFORM)
    ev = _check(inst, [[0, 1], [2]])
    assert ev.feasible and ev.objective == 2


def test_singletons_are_always_valid():
    nodes = [make_node("a", gpus=4), make_node("b", gpus=8, tflops=65.0), make_node("c", memory_gib=16.0)]
    inst = make_instance(nodes, [[0, 400, 25], [400, 0, 50], [25, 50, 0]])
    assert _check(inst, [[0], [1], [2]]).feasible


@pytest.mark.parametrize(("a", "b", "word"), [
    ({"gpus": 4}, {"gpus": 8}, "GPU counts"),
    ({"memory_gib": 40.0}, {"memory_gib": 80.0}, "memory"),
])
def test_rejects_mixed_figures_condition_1(a, b, word):
    inst = make_instance([make_node("a", **a), make_node("b", **b), make_node("c")], UNIFORM)
    ev = _check(inst, [[0, 1], [2]])
    assert not ev.feasible and any(v.startswith("(1)") and word in v for v in ev.violations)


def test_rejects_compute_spread_condition_1():
    inst = make_instance([make_node("a", tflops=100.0), make_node("b", tflops=111.0), make_node("c")], UNIFORM)
    ev = _check(inst, [[0, 1], [2]])
    assert not ev.feasible and any(v.startswith("(1)") and "compute" in v for v in ev.violations)
    # 10% exactly is inside the tolerance (floating point slack)
    inst = make_instance([make_node("a", tflops=312.0), make_node("b", tflops=343.2), make_node("c")], UNIFORM)
    assert _check(inst, [[0, 1], [2]]).feasible


def test_rejects_intra_node_spread_condition_2():
    inst = make_instance([make_node("a", intra_gbs=16.0), make_node("b", intra_gbs=300.0), make_node("c")], UNIFORM)
    ev = _check(inst, [[0, 1], [2]])
    assert not ev.feasible and [v[:3] for v in ev.violations] == ["(2)"]


def test_rejects_proximity_condition_3():
    # a-c are linked at 400 but c is left out of a's island with b (100)
    inst = make_instance([make_node("a"), make_node("b"), make_node("c")], [[0, 100, 400], [100, 0, 100], [400, 100, 0]])
    ev = _check(inst, [[0, 1], [2]])
    assert not ev.feasible and [v[:3] for v in ev.violations] == ["(3)"]
    assert "outsider c" in ev.violations[0]
    assert _check(inst, [[0, 2], [1]]).feasible


def test_proximity_allows_ties():
    inst = make_instance([make_node("a"), make_node("b"), make_node("c")], UNIFORM)
    assert _check(inst, [[0, 1], [2]]).feasible


def test_rejects_missing_duplicate_and_unknown_nodes():
    from hetopt.islands.problem import Island, IslandsSolution

    inst = make_instance([make_node("a"), make_node("b"), make_node("c")], UNIFORM)
    island = build_solution(inst, [[0]]).islands[0]
    dup = IslandsSolution((island, island))
    ev = evaluate(inst, dup)
    assert not ev.feasible and any("is in island 0 and island 1" in v for v in ev.violations)
    assert any("in no island" in v for v in ev.violations)
    ghost = IslandsSolution((Island(("zz",), 4, "X", 1, 1, 1, None, None),))
    assert any("unknown node" in v for v in evaluate(inst, ghost).violations)


def test_reported_figures_are_recomputed():
    inst = make_instance([make_node("a", tflops=100.0), make_node("b", tflops=105.0), make_node("c")], [[0, 200, 50], [200, 0, 50], [50, 50, 0]])
    isl = build_solution(inst, [[0, 1], [2]]).islands[0]
    assert isl.gpus == 8 and abs(isl.compute_spread - 1.05) < 1e-12
    d = isl.to_dict()
    assert d["slowest_internal_gbps"] == 200.0 and d["fastest_leaving_gbps"] == 50.0 and d["nodes"] == ["a", "b"]
