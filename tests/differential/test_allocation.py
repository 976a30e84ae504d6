"""Differential test of the allocation family (issue 29): 1,000 seeded random instances, every
exact method against an optimum and a checker written here from formulations/allocation.md
(the symbols, derived limits, constraints (I)-(III), the state rule and T_i), not from the
family's code (no evaluate, no option lists, no instance-derived limits).
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from hetopt.allocation import tolerance
from hetopt.units import GIB

from . import assert_methods_agree, seeded_generator

random_instance = seeded_generator("allocation")

SEEDS = range(1000)
CHUNKS = 10
METHODS = ("dp", "milp", "cpsat")
SLACK = 1e-9  # the formulation's floors take 1e-9 samples of slack


def floor(x: float) -> int:
    return math.floor(x + SLACK)


def latency(curve, m: int) -> float:
    """A table for m = 1..P, then the given line, or the line through the last two points."""
    table = curve.table
    if m <= len(table):
        return table[m - 1]
    if curve.slope is not None and curve.intercept is not None:
        return curve.slope * m + curve.intercept
    (m1, y1), (m2, y2) = (len(table) - 1, table[-2]), (len(table), table[-1])
    return y1 + (y2 - y1) * (m - m1) / (m2 - m1)


def limits(inst):
    """(per GPU: group, u, e) and K*, from the formulation's derived limits."""
    gpus = [g for g, grp in enumerate(inst.groups) for _ in range(grp.count)]
    n, a, phi, s = len(gpus), inst.activation_bytes_per_sample, inst.memory_fraction, inst.state_bytes
    u, e = [], []
    for grp in inst.groups:
        room = phi * grp.memory_bytes - grp.memory_base_bytes
        caps = [floor(room / a), inst.global_batch - (n - 1)]
        caps += [c for c in (grp.max_microbatch, inst.max_microbatch) if c is not None]
        u.append(min(caps))
        e.append(grp.even_shard_max_microbatch if grp.even_shard_max_microbatch is not None
                 else floor((room - s / n) / a))
    k_star = floor((phi * sum(inst.groups[g].memory_bytes for g in gpus)
                    - sum(inst.groups[g].memory_base_bytes for g in gpus) - s) / a)
    return gpus, u, e, k_star


def gpu_time(inst, g: int, e: list[int], ell: int, m: int) -> float:
    grp = inst.groups[g]
    f = ell * latency(grp.forward, m)
    gg = ell * latency(grp.backward, m) + (ell - 1) * inst.accumulation_overhead_s
    factor = 1.0 + inst.uneven_shard_overhead if m > e[g] else 1.0
    ag, rs = inst.allgather_s * factor, inst.reducescatter_s * factor
    return max(ag, f) + max(ag + rs, f + gg)


def check(inst, plan) -> float:
    """The formulation's objective of a solution (inf when a constraint breaks)."""
    gpus, u, e, k_star = limits(inst)
    if len(plan.gpus) != len(gpus):
        return math.inf
    if sum(p.microbatch_size * p.microbatches for p in plan.gpus) != inst.global_batch:  # (I)
        return math.inf
    if any(not 1 <= p.microbatch_size <= u[g] or p.microbatches < 1 for p, g in zip(plan.gpus, gpus)):  # (II)
        return math.inf
    if sum(p.microbatch_size for p in plan.gpus) > k_star:  # (III)
        return math.inf
    shares = [p.state_share for p in plan.gpus]
    if not all(math.isfinite(r) and r >= -1e-9 for r in shares) or abs(sum(shares) - 1) > 1e-6:
        return math.inf
    for p, g in zip(plan.gpus, gpus):  # the state rule
        grp = inst.groups[g]
        used = grp.memory_base_bytes + inst.activation_bytes_per_sample * p.microbatch_size + p.state_share * inst.state_bytes
        if used > inst.memory_fraction * grp.memory_bytes * (1 + 1e-9):
            return math.inf
    return max(gpu_time(inst, g, e, p.microbatches, p.microbatch_size) for p, g in zip(plan.gpus, gpus))


def brute_optimum(inst) -> float:
    """Least max_i T_i over every (m_i, ℓ_i) per GPU meeting (I)-(III); inf if none."""
    gpus, u, e, k_star = limits(inst)
    big_b = inst.global_batch
    options = [[(m, ell) for m in range(1, max(u[g], 0) + 1) for ell in range(1, big_b // m + 1)] for g in gpus]
    best = math.inf
    for combo in itertools.product(*options):
        if sum(m * ell for m, ell in combo) != big_b or sum(m for m, _ in combo) > k_star:
            continue
        best = min(best, max(gpu_time(inst, g, e, ell, m) for (m, ell), g in zip(combo, gpus)))
    return best


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_exact_methods_match_an_independent_optimum(chunk):
    for seed in SEEDS[chunk::CHUNKS]:
        inst = random_instance(20_000 + seed, max_gpus=3, max_batch=7)
        truth = brute_optimum(inst)
        assert_methods_agree(inst, truth, lambda sol: check(inst, sol), METHODS, tolerance(inst), seed)


def filled_to_the_byte(seed: int):
    """``random_instance`` with every GPU's usable memory φ·C exactly its base plus u samples
    (C = (β + u·a)/φ in floating point, so φ·C lands on β + u·a or an ulp off it) and a state
    that leaves no room: 0, a few bytes (the audit's 8.8e-17 GiB), or exactly what n samples
    leave. The class of input where the state split refused valid answers (issue 44, item 6)."""
    rng = np.random.default_rng([seed, 6])
    inst = random_instance(20_000 + seed, max_gpus=3, max_batch=7)
    a, phi = inst.activation_bytes_per_sample, inst.memory_fraction
    groups = []
    for grp in inst.groups:
        base = round(float(rng.uniform(0.5, 2.0)), 15) * GIB  # decimal GiB, as files give them
        groups.append(dataclasses.replace(grp, memory_base_bytes=base,
                                          memory_bytes=(base + int(rng.integers(1, 4)) * a) / phi))
    inst = dataclasses.replace(inst, groups=tuple(groups), max_microbatch=None)
    leftover = sum(g.count * (phi * g.memory_bytes - g.memory_base_bytes - a) for g in groups)
    state = [0.0, float(rng.uniform(1e-17, 1e-15)) * GIB, max(0.0, leftover)][seed % 3]
    return dataclasses.replace(inst, state_bytes=state, name=f"full-{seed}")


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_memory_filled_to_the_byte_is_an_answer(chunk):
    """Every exact method answers as the formulation does where memory is exactly full: the
    split must accept what ``evaluate`` accepts (no "no state split fits", exit 2)."""
    for seed in range(300)[chunk::CHUNKS]:
        inst = filled_to_the_byte(seed)
        truth = brute_optimum(inst)
        assert_methods_agree(inst, truth, lambda sol: check(inst, sol), METHODS + ("bruteforce",), tolerance(inst),
                             seed)
