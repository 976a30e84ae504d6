"""The DPs: dendrogram construction, the ultrametric test, declining, wide levels."""

from __future__ import annotations

import numpy as np

from hetopt import load, solve
from hetopt.islands import dendrogram
from hetopt.islands.dp import min_clique_cover, solve_dp, solve_dp_dendrogram
from hetopt.islands.network import matrix_from_switch_tree
from hetopt.result import Status

from .conftest import INSTANCES, make_instance, make_node

RING = [[0, 400, 200, 400], [400, 0, 400, 200], [200, 400, 0, 400], [400, 200, 400, 0]]


def test_dendrogram_declines_on_a_non_ultrametric_matrix():
    inst = make_instance([make_node(c) for c in "abcd"], RING)
    r = solve_dp_dendrogram(inst)
    assert r.status is Status.DECLINED
    assert "not ultrametric" in r.reason and "e(a, c) = 200" in r.reason
    # dp falls back to the subset DP on a cluster this small, and is exact
    assert solve_dp(inst).status is Status.OPTIMAL
    assert solve_dp(inst).objective == solve(inst, "bruteforce").objective


def test_dp_declines_on_the_large_non_tree_instance():
    inst = load(INSTANCES / "ring-24-nontree.toml")
    r = solve(inst, "dp")
    assert r.status is Status.DECLINED and "not ultrametric" in r.reason and "subset DP" in r.reason
    exact = solve(inst, "exact")  # falls back to CP-SAT
    assert exact.status is Status.OPTIMAL and exact.stats["via"] == "cpsat" and exact.stats["dp_declined"]


def test_a_switch_tree_is_ultrametric():
    rng = np.random.default_rng(0)
    for _ in range(20):
        k = int(rng.integers(2, 8))
        switches = {"s0": (None, None)}
        for s in range(1, k):
            switches[f"s{s}"] = (f"s{int(rng.integers(s))}", float(rng.choice([10, 40, 100])))
        attach = [(f"s{int(rng.integers(k))}", float(rng.choice([25, 100, 400]))) for _ in range(9)]
        e = matrix_from_switch_tree([f"n{i}" for i in range(9)], attach, switches)
        assert dendrogram.ultrametric_violation(e) is None


def test_dendrogram_levels_equal_the_matrix_when_ultrametric():
    e = np.array([[0, 4, 2, 1], [4, 0, 2, 1], [2, 2, 0, 1], [1, 1, 1, 0]], dtype=float)
    d = dendrogram.build(e)
    assert np.array_equal(dendrogram.merge_levels(d, 4), e)
    assert len(d.clusters[d.root].children) == 2


def test_wide_flat_level_uses_profiles_not_subsets():
    inst = load(INSTANCES / "flat-64-one-switch.toml")
    r = solve(inst, "dp")
    assert r.status is Status.OPTIMAL and r.stats["widest_level"] == 64
    assert r.stats["cover_states"] < 1000
    assert solve(inst, "cpsat").objective == r.objective


def test_min_clique_cover_on_a_path_and_a_triangle():
    assert len(min_clique_cover([0b010, 0b101, 0b010], {})) == 2
    assert min_clique_cover([0b110, 0b101, 0b011], {}) == [0b111]




def _bypass_validation_with_negative_tolerance(inst):
    """An instance whose tolerance went around the constructor's check (e.g. mutated in place)."""
    from hetopt.islands.problem import Tolerance

    bad = object.__new__(Tolerance)
    for key in ("compute", "memory", "intra"):
        object.__setattr__(bad, key, -0.5)
    object.__setattr__(inst, "tolerance", bad)
    return inst


def test_subset_dp_without_valid_singletons_stops_with_a_reason():
    """Issue 9: dp-subsets looped forever when no single node is a valid island."""
    import signal

    inst = _bypass_validation_with_negative_tolerance(make_instance([make_node(c) for c in "abcd"], RING))

    def hang(*_):
        raise TimeoutError("dp-subsets did not return")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(20)
    try:
        results = [solve(inst, method) for method in ("dp-subsets", "dp")]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    for r in results:
        assert r.status is Status.ERROR and r.solution is None
        assert "'a' is not a valid island by itself" in r.reason
