"""Time limits never produce a false OPTIMAL; the generated instances match their generator."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import hetopt
from hetopt.result import Status

ROOT = Path(__file__).resolve().parents[2]
BIG = ROOT / "instances" / "allocation" / "cephalo-b-gpt3-6.7b-b1024-analytic.toml"


@pytest.fixture(scope="module")
def big():
    instance = hetopt.load(BIG)
    return instance, hetopt.solve(instance, "dp").objective


@pytest.mark.parametrize("method", ["dp", "dp-faithful", "milp", "cpsat", "bruteforce"])
def test_a_tiny_time_limit_is_honest(big, method):
    instance, optimum = big
    r = hetopt.solve(instance, method, time_limit=0.001)
    assert r.status in (Status.OPTIMAL, Status.FEASIBLE, Status.TIME_LIMIT, Status.DECLINED)
    if r.status is Status.OPTIMAL:
        assert math.isclose(r.objective, optimum, rel_tol=1e-9, abs_tol=1e-9)
    if r.status is Status.FEASIBLE:
        assert r.objective >= optimum - 1e-9
        assert r.bound is None or r.bound <= optimum + 1e-9
        assert r.gap is None or r.gap >= 0
    if r.status is Status.TIME_LIMIT:
        assert r.solution is None and r.objective is None


def test_dp_under_a_zero_time_limit_is_honest():
    # the search stops before its first decision: no plan, and a bound that holds
    instance = hetopt.load(ROOT / "instances" / "allocation" / "cephalo-a-gpt3-2.7b-b256-analytic.toml")
    optimum = hetopt.solve(instance, "dp").objective
    r = hetopt.solve(instance, "dp", time_limit=0.0)
    assert r.status is Status.TIME_LIMIT and r.solution is None
    assert 0 < r.bound <= optimum


def test_generated_instances_match_the_generator():
    from hetopt.generate.allocation import paper_instances

    for name, data in paper_instances().items():
        on_disk = hetopt.load(ROOT / "instances" / "allocation" / name)
        assert on_disk == hetopt.loads(_toml(data), source=name), name


def _toml(data):
    from hetopt.generate.toml import dumps

    return dumps(data)


def test_catalog_efficiencies_are_the_calibration():
    from hetopt.generate.calibrate import calibrate
    from hetopt.hardware import load_gpus

    gpus = load_gpus()
    for key, c in calibrate().items():
        for gpu in gpus.values():
            if gpu.profile == key:
                assert gpu.efficiency == c["efficiency"], gpu.name
                assert gpu.half_efficiency_tokens == c["half_efficiency_tokens"], gpu.name


def test_catalog_gemm_efficiencies_are_the_calibration():
    """The planner's e_g in the catalog is what ``hetopt calibrate`` prints:
    a GPU's own profile, else its measured matmul peak times what the A100 sustains of its own."""
    from hetopt.generate.calibrate import UNPROFILED, calibrate, unprofiled_gemm_efficiency
    from hetopt.hardware import load_gpus

    cal, gpus = calibrate(), load_gpus()
    derived = unprofiled_gemm_efficiency(cal)
    assert set(UNPROFILED) <= set(gpus)
    checked = 0
    for gpu in gpus.values():
        if gpu.name in derived:
            assert gpu.gemm_efficiency == derived[gpu.name], gpu.name
            checked += 1
        elif gpu.profile in cal:
            assert gpu.gemm_efficiency == cal[gpu.profile]["gemm_efficiency"], gpu.name
            checked += 1
    assert checked >= 20
    # the same chip at a higher power limit is not priced slower than its profiled PCIe parts' median
    assert derived["A100-SXM4-80GB"] >= min(cal[k]["gemm_efficiency"] for k in ("a100x40", "a100x80"))
