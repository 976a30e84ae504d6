"""The accepted ranges of an allocation instance, and the one check that enforces them.

:class:`~hetopt.allocation.problem.AllocationInstance` calls :func:`validate_instance` from
its constructor, so an instance built in code and one read from a file get the same
one-line :class:`~hetopt.errors.InputError`; the reader builds it inside
``hetopt.readers.fields.located(source)``, which adds the file name. Messages name the
file's keys (``gpu[1].memory_gib``) and its units (GiB, seconds), whatever built the
instance.

Why these ranges (``formulations/allocation.md``, "Accepted ranges"):

* every time a solver sees is an option time T = max(AG', F) + max(AG' + RS', F + G) with
  F = ℓ f(m) ≤ b · (f(m)/m), G likewise, AG' = (1 + o) AG. With per-sample latency at most
  ``MAX_LATENCY_PER_SAMPLE_S``, b ≤ ``MAX_GLOBAL_BATCH``, δ, AG, RS ≤ ``MAX_TIME_S`` and
  o ≤ ``MAX_UNEVEN_SHARD_OVERHEAD``, every T is below ``MAX_ITERATION_S`` ≈ 4.4e9 s, i.e.
  below 2^62 CP-SAT quanta of 1 ns: CP-SAT's integer times fit int64 with room for a sum;
* the shortest latency ``MIN_LATENCY_S`` and the longest per-sample latency span 1e9: HiGHS
  decides with tolerances of about 1e-7 relative, and times 1e9 apart are the most a MILP
  row can carry next to each other exactly enough to rank plans;
* byte counts stay below 2^50 per GPU (``MAX_MEMORY_GIB``), exact in float64, and an
  activation of at least one byte per sample keeps every micro-batch limit finite.
"""

from __future__ import annotations

import logging
import math
from numbers import Integral, Real
from typing import Any

# the largest global batch B is the planner's (hetopt.checks): the ``dp`` solves it in
# seconds; the methods whose tables grow with B decline above their own limits
from hetopt.checks import MAX_GLOBAL_BATCH
from hetopt.errors import InputError
from hetopt.units import GIB

from hetopt.allocation.groups import GpuGroup, Latency

LOG = logging.getLogger("hetopt.allocation")


#: Most GPUs in one instance (a 100,000-GPU cluster is outside what this family plans).
MAX_GPUS = 100_000
#: Longest latency table (points m = 1..P); measured profiles have a few dozen.
MAX_TABLE = 4_096
#: Most FSDP units (``layers``), the greedy state split's piece count.
MAX_LAYERS = 100_000

#: Shortest accepted latency of a micro-batch, seconds (1 µs, below one kernel launch):
#: every latency f(m), g(m) for a micro-batch memory allows must be at least this.
MIN_LATENCY_S = 1e-6
#: Longest accepted latency per sample, f(m)/m, seconds: 1e9 × ``MIN_LATENCY_S``, the span
#: HiGHS's ~1e-7 relative tolerances rank exactly (and 1,000 s per sample through a layer
#: stack is far beyond any GPU).
MAX_LATENCY_PER_SAMPLE_S = 1e3
#: Longest accepted accumulation overhead δ, AllGather AG and ReduceScatter RS, seconds.
MAX_TIME_S = 1e3
#: Largest uneven-shard overhead o (an uneven shard 11× slower than an even one).
MAX_UNEVEN_SHARD_OVERHEAD = 10.0
#: The largest option time these ranges allow, seconds:
#: T ≤ 2F + G + 2AG' + RS' with F ≤ B·f/m, G ≤ B·(g/m + δ), AG', RS' ≤ (1 + o)·MAX_TIME_S.
MAX_ITERATION_S = (
    MAX_GLOBAL_BATCH * (3 * MAX_LATENCY_PER_SAMPLE_S + MAX_TIME_S) + 3 * (1 + MAX_UNEVEN_SHARD_OVERHEAD) * MAX_TIME_S
)

#: Largest memory per GPU, GiB (2^20 GiB = 2^50 bytes: byte counts stay exact in float64).
MAX_MEMORY_GIB = float(1 << 20)
#: Smallest activation per sample, bytes: less than one byte per sample is not a model.
MIN_ACTIVATION_BYTES = 1.0
#: Largest training state, GiB: all the memory of the largest cluster.
MAX_STATE_GIB = MAX_MEMORY_GIB * MAX_GPUS


def _fail(key: str, message: str) -> InputError:
    return InputError(f"{key}: {message}")


def _integer(key: str, value: Any, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise _fail(key, f"must be a whole number (got {value!r})")
    if hi is not None and not lo <= value <= hi:
        raise _fail(key, f"must be between {lo} and {hi} (got {value})")
    if value < lo:
        raise _fail(key, f"must be >= {lo} (got {value})")
    return int(value)


def _real(key: str, value: Any, lo: float, hi: float, *, lo_open: bool = False, unit: str = "", scale: float = 1.0) -> float:
    """A finite number in [lo, hi] (or (lo, hi] with ``lo_open``); messages in the file's unit."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise _fail(key, f"must be a number (got {value!r})")
    shown = float(value) / scale
    bracket = "(" if lo_open else "["
    rng = f"{bracket}{lo / scale:.12g}, {hi / scale:.12g}]{unit}"
    if math.isnan(value):
        raise _fail(key, f"must be a number in {rng} (got nan)")
    if value < lo or (lo_open and value == lo) or value > hi:
        raise _fail(key, f"must be in {rng} (got {shown:g})")
    return float(value)


def _check_latency(key: str, curve: Latency, u: int) -> None:
    """A latency table and its line: finite, in range, and positive wherever memory lets m go."""
    if not isinstance(curve.table, tuple):
        raise _fail(f"{key}_s", f"must be a tuple of seconds (got {type(curve.table).__name__})")
    if len(curve.table) > MAX_TABLE:
        raise _fail(f"{key}_s", f"has {len(curve.table)} points, more than the limit of {MAX_TABLE}")
    for m, value in enumerate(curve.table, start=1):
        _real(f"{key}_s[{m - 1}]", value, MIN_LATENCY_S, MAX_LATENCY_PER_SAMPLE_S * m, unit=" s")
    if (curve.slope is None) != (curve.intercept is None):
        missing = f"{key}_intercept_s" if curve.intercept is None else f"{key}_slope_s"
        raise _fail(missing, f"missing: give both {key}_slope_s and {key}_intercept_s, or neither")
    explicit = curve.slope is not None
    if not explicit and len(curve.table) < 2:
        raise _fail(
            f"{key}_s",
            f"has {len(curve.table)} point(s) and no line: give at least two points, or {key}_slope_s and {key}_intercept_s",
        )
    if explicit:
        _real(f"{key}_slope_s", curve.slope, -MAX_LATENCY_PER_SAMPLE_S, MAX_LATENCY_PER_SAMPLE_S, unit=" s")
        _real(f"{key}_intercept_s", curve.intercept, -MAX_LATENCY_PER_SAMPLE_S * MAX_GLOBAL_BATCH,
              MAX_LATENCY_PER_SAMPLE_S * MAX_GLOBAL_BATCH, unit=" s")
    p = len(curve.table)
    if u <= p:
        return  # the line is never used: every micro-batch memory allows is in the table
    slope, intercept = curve.line()
    where = f"{key}_slope_s" if explicit else f"{key}_s"
    first, last = p + 1, u
    # a line is monotone: its extremes over m = p+1..u are at the ends (and so is f(m)/m)
    for m in (first, last):
        value = slope * m + intercept
        if not value >= MIN_LATENCY_S:
            raise _fail(
                where,
                f"the line beyond the table (slope {slope:g} s, intercept {intercept:g} s) gives {value:g} s at "
                f"micro-batch {m}, which memory allows (max micro-batch {u}); latencies must be >= {MIN_LATENCY_S:g} s",
            )
        if value > MAX_LATENCY_PER_SAMPLE_S * m:
            raise _fail(
                where,
                f"the line beyond the table gives {value:g} s at micro-batch {m}, above {MAX_LATENCY_PER_SAMPLE_S:g} s per sample",
            )
    if slope < 0:
        points = "" if explicit else f" (its last two points fall, {curve.table[-2]:g} -> {curve.table[-1]:g} s)"
        LOG.warning(
            "%s: the latency line beyond the table falls%s: extending it with slope %g s up to the max "
            "micro-batch %d (%g s there)", where, points, slope, u, slope * u + intercept,
        )


def validate_instance(instance: Any) -> None:
    """Check every field of an allocation instance (an
    :class:`~hetopt.allocation.problem.AllocationInstance`, which calls this from its
    constructor) against the accepted ranges.

    Raises
    ------
    InputError
        ``"key.path: problem (fix)"`` with the file's key and unit, on the first field out
        of range. A latency line that falls beyond its table is accepted with a logged
        warning (logger ``hetopt.allocation``) unless it reaches ``MIN_LATENCY_S`` for a
        micro-batch memory allows.
    """
    if not isinstance(instance.name, str):
        raise _fail("name", f"must be a string (got {instance.name!r})")
    _integer("global_batch", instance.global_batch, 1, MAX_GLOBAL_BATCH)
    _real("memory_fraction", instance.memory_fraction, 0.0, 1.0, lo_open=True)
    _real("activation_gib_per_sample", instance.activation_bytes_per_sample, MIN_ACTIVATION_BYTES,
          MAX_MEMORY_GIB * GIB, unit=" GiB", scale=GIB)
    _real("state_gib", instance.state_bytes, 0.0, MAX_STATE_GIB * GIB, unit=" GiB", scale=GIB)
    _real("accumulation_overhead_s", instance.accumulation_overhead_s, 0.0, MAX_TIME_S, unit=" s")
    _real("allgather_s", instance.allgather_s, 0.0, MAX_TIME_S, unit=" s")
    _real("reducescatter_s", instance.reducescatter_s, 0.0, MAX_TIME_S, unit=" s")
    _real("uneven_shard_overhead", instance.uneven_shard_overhead, 0.0, MAX_UNEVEN_SHARD_OVERHEAD)
    if instance.max_microbatch is not None:
        _integer("max_microbatch", instance.max_microbatch, 1)
    if instance.layers is not None:
        _integer("layers", instance.layers, 1, MAX_LAYERS)
    if not isinstance(instance.groups, tuple) or not instance.groups:
        raise _fail("gpu", "missing: give at least one [[gpu]] table (a tuple of GpuGroup in code)")
    total = 0
    for g, grp in enumerate(instance.groups):
        key = f"gpu[{g}]"
        if not isinstance(grp, GpuGroup):
            raise _fail(key, f"must be a GpuGroup (got {type(grp).__name__})")
        for which in ("forward", "backward"):
            if not isinstance(getattr(grp, which), Latency):
                raise _fail(f"{key}.{which}_s", f"must be a Latency (got {type(getattr(grp, which)).__name__})")
        if not isinstance(grp.type, str) or not grp.type:
            raise _fail(f"{key}.type", f"must be a non-empty string (got {grp.type!r})")
        total += _integer(f"{key}.count", grp.count, 1, MAX_GPUS)
        _real(f"{key}.memory_gib", grp.memory_bytes, 0.0, MAX_MEMORY_GIB * GIB, lo_open=True, unit=" GiB", scale=GIB)
        _real(f"{key}.memory_base_gib", grp.memory_base_bytes, 0.0, MAX_MEMORY_GIB * GIB, unit=" GiB", scale=GIB)
        if grp.even_shard_max_microbatch is not None:
            _integer(f"{key}.even_shard_max_microbatch", grp.even_shard_max_microbatch, 0)
        if grp.max_microbatch is not None:
            _integer(f"{key}.max_microbatch", grp.max_microbatch, 1)
            derived = instance.derived_max_microbatch(g)
            if grp.max_microbatch > derived:
                raise _fail(
                    f"{key}.max_microbatch",
                    f"{grp.max_microbatch} exceeds the {derived} that memory_base_gib + m x activation_gib_per_sample "
                    f"<= memory_fraction x memory_gib allows; lower it or the memory figures",
                )
    if total > MAX_GPUS:
        raise _fail("gpu", f"{total} GPUs in all, more than the limit of {MAX_GPUS}")
    for g, grp in enumerate(instance.groups):
        u = instance.max_microbatch_per_group[g]
        for which in ("forward", "backward"):
            _check_latency(f"gpu[{g}].{which}", getattr(grp, which), max(u, 0))
