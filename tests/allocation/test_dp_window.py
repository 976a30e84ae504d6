"""The fast dp over its window: exact against the other methods, and independent of B."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

import hetopt
from hetopt.allocation.dp import MAX_WINDOW, solve_dp
from hetopt.allocation.problem import GIB
from hetopt.result import Status

from .conftest import random_instance

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_B = ROOT / "instances" / "allocation" / "cephalo-b-gpt3-6.7b-b1024-measured.toml"


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("orientation", ["forward", "deficit"])
def test_both_windows_match_bruteforce(seed, orientation):
    instance = random_instance(seed)
    oracle = hetopt.solve(instance, "bruteforce")
    for bracket in (True, False):
        r = solve_dp(instance, bracket=bracket, orientation=orientation)
        assert r.status is oracle.status, (r.reason, oracle.reason)
        if oracle.status is Status.OPTIMAL:
            assert r.objective == oracle.objective


def _scaled(seed: int) -> hetopt.allocation.AllocationInstance:
    # more GPUs per group and batches in the thousands: far from where bruteforce reaches
    rng = np.random.default_rng(seed)
    inst = random_instance(seed, max_gpus=6, max_batch=10)
    groups = tuple(dataclasses.replace(g, count=g.count * int(rng.integers(1, 5))) for g in inst.groups)
    n = sum(g.count for g in groups)
    return dataclasses.replace(
        inst, groups=groups, global_batch=int(rng.integers(n, 1500)), state_bytes=inst.state_bytes * float(rng.uniform(0, 2))
    )


@pytest.mark.parametrize("seed", range(2000, 2012))
def test_dp_matches_the_milp_and_dp_faithful_at_larger_batches(seed):
    from hetopt.allocation.dp_faithful import faithful_work

    instance = _scaled(seed)
    a = solve_dp(instance)
    b = hetopt.solve(instance, "milp", time_limit=30)
    if b.status is Status.FEASIBLE:  # the MILP ran out of time: its bound still holds
        assert b.bound <= a.objective * (1 + 1e-9) <= b.objective * (1 + 2e-9)
        return
    assert a.status is b.status, (a.reason, b.reason)
    if a.status is Status.OPTIMAL:
        assert math.isclose(a.objective, b.objective, rel_tol=1e-9)
        if faithful_work(instance) <= 2e8:
            assert hetopt.solve(instance, "dp-faithful").objective == a.objective


def test_the_planner_maximum_batch_on_cluster_b():
    # B = 2^20 on Cluster B: the window near T* is a few dozen samples, so dp proves the
    # optimum; the table-based methods decline up front, naming their limit
    instance = dataclasses.replace(hetopt.load(CLUSTER_B), global_batch=1 << 20)
    r = hetopt.solve(instance, "dp")
    assert r.status is Status.OPTIMAL
    assert sum(p.batch for p in r.solution.gpus) == 1 << 20
    assert r.stats["window"] <= 1024
    # a lower bound that holds: the slowest GPU type's share of B at its best per-sample rate
    assert r.objective > 0
    for method, words in [
        ("milp", "exceed milp's limit of"),
        ("cpsat", "exceed cpsat's limit of"),
        ("dp-faithful", "above its limit of 1 GiB"),
        ("bruteforce", "bruteforce's limit"),
    ]:
        d = hetopt.solve(instance, method)
        assert d.status is Status.DECLINED and words in d.reason, (method, d.reason)


def test_huge_batch_agrees_with_the_milp_where_the_milp_still_runs():
    # B = 4096 on Cluster B (analytic): both exact, both solve
    instance = dataclasses.replace(hetopt.load(ROOT / "instances" / "allocation" / "cephalo-b-llama-2-7b-b1024-analytic.toml"), global_batch=4096)
    a, b = hetopt.solve(instance, "dp"), hetopt.solve(instance, "milp")
    assert a.status is b.status is Status.OPTIMAL
    assert math.isclose(a.objective, b.objective, rel_tol=1e-9)


def test_a_window_beyond_the_limit_is_declined_with_the_limit():
    # forcing the deficit window where it is longer than MAX_WINDOW
    instance = dataclasses.replace(hetopt.load(CLUSTER_B), global_batch=4096, state_bytes=hetopt.load(CLUSTER_B).state_bytes + 300 * GIB)
    r = solve_dp(instance, orientation="deficit", bracket=False)
    if r.status is Status.DECLINED:
        assert f"exceeds dp's limit of {MAX_WINDOW}" in r.reason
    else:  # the search found a plan below the too-wide windows: it must be the optimum
        assert r.objective == solve_dp(instance).objective


def test_crosscheck_leaves_out_the_models_at_huge_batches():
    from hetopt.allocation import crosscheck_methods

    small = hetopt.load(CLUSTER_B)
    assert crosscheck_methods(small)[:3] == ["dp", "milp", "cpsat"]
    huge = dataclasses.replace(small, global_batch=65536)
    assert crosscheck_methods(huge) == ["dp"]


def test_dp_declines_too_many_microbatch_sizes_with_its_limit():
    from hetopt.allocation.dp import MAX_RANGE_ENTRIES
    from hetopt.allocation.problem import AllocationInstance, GpuGroup, Latency

    # one byte of activation per sample: every group may run micro-batches up to B − N + 1
    f = Latency((), 1e-3, 1e-3)
    groups = tuple(GpuGroup(f"G{g}", 1, 16 * GIB, GIB, f, f) for g in range(10))
    instance = AllocationInstance("tiny-activations", 1 << 20, groups, 1.0, GIB)
    assert sum(instance.max_microbatch_per_group) > MAX_RANGE_ENTRIES
    r = hetopt.solve(instance, "dp")
    assert r.status is Status.DECLINED and f"exceed dp's limit of {MAX_RANGE_ENTRIES}" in r.reason
