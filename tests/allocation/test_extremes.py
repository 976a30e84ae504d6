"""Seeded fuzz over the accepted ranges: every exact method answers, finitely, and they agree."""

from __future__ import annotations

import math

import numpy as np
import pytest

import hetopt
from hetopt.allocation import limits
from hetopt.allocation.problem import GIB, AllocationInstance, GpuGroup, Latency
from hetopt.errors import InputError
from hetopt.result import Status


def _log_uniform(rng, lo, hi):
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def extreme_instance(seed: int) -> AllocationInstance | None:
    """Values drawn log-uniformly across the accepted ranges (None if the draw is rejected)."""
    rng = np.random.default_rng(seed)
    groups = []
    activation = _log_uniform(rng, limits.MIN_ACTIVATION_BYTES, 64 * GIB)
    for g in range(int(rng.integers(1, 3))):
        per_sample = _log_uniform(rng, limits.MIN_LATENCY_S, limits.MAX_LATENCY_PER_SAMPLE_S / 2)
        table = tuple(per_sample * m * float(rng.uniform(0.6, 1.0)) for m in range(1, int(rng.integers(2, 5)) + 1))
        fwd = Latency(table)
        bwd = Latency(tuple(2 * x for x in table))
        u = int(rng.integers(1, 6))
        base = _log_uniform(rng, 1.0, limits.MAX_MEMORY_GIB * GIB / 4)
        memory = min(limits.MAX_MEMORY_GIB * GIB, (base + (u + 0.5) * activation) / 0.8)
        groups.append(GpuGroup(f"G{g}", int(rng.integers(1, 3)), memory, base, fwd, bwd))
    n = sum(g.count for g in groups)
    try:
        return AllocationInstance(
            name=f"extreme-{seed}",
            global_batch=int(rng.integers(n, 9)),
            groups=tuple(groups),
            activation_bytes_per_sample=activation,
            state_bytes=float(rng.uniform(0, 0.5)) * sum(g.count * (0.8 * g.memory_bytes - g.memory_base_bytes) for g in groups),
            accumulation_overhead_s=_log_uniform(rng, 1e-9, limits.MAX_TIME_S) if rng.random() < 0.5 else 0.0,
            allgather_s=_log_uniform(rng, 1e-9, limits.MAX_TIME_S) if rng.random() < 0.5 else 0.0,
            reducescatter_s=_log_uniform(rng, 1e-9, limits.MAX_TIME_S) if rng.random() < 0.5 else 0.0,
            uneven_shard_overhead=float(rng.uniform(0, limits.MAX_UNEVEN_SHARD_OVERHEAD)),
        )
    except InputError:
        return None


@pytest.mark.parametrize("seed", range(40))
def test_exact_methods_agree_across_the_accepted_ranges(seed):
    instance = extreme_instance(seed)
    if instance is None:
        pytest.skip("the draw fell outside the ranges (rejected with an InputError)")
    oracle = hetopt.solve(instance, "bruteforce")
    for method in ("dp", "dp-faithful", "milp", "cpsat"):
        r = hetopt.solve(instance, method)
        assert r.status is oracle.status, (method, r.reason)
        if r.status is Status.OPTIMAL:
            assert math.isfinite(r.objective) and r.objective > 0
            rtol, atol = hetopt.family(instance).tolerance(instance)
            assert math.isclose(r.objective, oracle.objective, rel_tol=rtol, abs_tol=atol), method


def test_the_fuzz_mostly_builds_instances():
    assert sum(extreme_instance(s) is not None for s in range(40)) >= 30
