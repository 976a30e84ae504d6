"""Cephalo's allocation problem: data, plan, and ``evaluate``, the single source of truth.

Symbols follow ``formulations/allocation.md``: GPU i of group g has capacity C, memory base
β, latencies f(m), g(m); the instance has global batch B, activation bytes per sample a,
training state S, usable fraction φ, accumulation overhead δ, AllGather / ReduceScatter
times AG, RS and the uneven-shard overhead o.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from hetopt.allocation.groups import GpuGroup, Latency  # noqa: F401  (Latency re-exported: instances are built from it)
from hetopt.allocation.limits import validate_instance
from hetopt.result import Evaluation
from hetopt.units import GIB, MEMORY_RTOL  # noqa: F401  (GIB re-exported: instances are built in GiB)

#: Slack, in samples, when a memory ratio is floored to a whole micro-batch: a ratio of
#: 7.9999999999 that is 8 in exact arithmetic must give 8.
FLOOR_SLACK = 1e-9


#: Absolute slack of ``sum(state_share) == 1``.
SHARE_ATOL = 1e-9


def memory_limit(usable):
    """The most bytes a GPU may hold when φ·C = ``usable`` bytes are usable: φ·C·(1 + MEMORY_RTOL).

    The one memory rule of the family's answers: ``evaluate`` checks a plan against it and
    the state split (``state.lp_partition``) fills GPUs up to it, so a split exists whenever
    ``evaluate`` would accept one (a GPU filled to the byte by its micro-batch still takes a
    state of a few bytes; issue 44). Works on numbers and numpy arrays alike.

    >>> round(memory_limit(1e9) - 1e9, 6)  # a byte of slack per GB
    1.0
    """
    return usable * (1.0 + MEMORY_RTOL)


def floor_ratio(numerator: float, denominator: float) -> int:
    """``floor(numerator / denominator)`` with ``FLOOR_SLACK`` of rounding slack.

    Examples
    --------
    >>> floor_ratio(8.0, 1.0)
    8
    >>> floor_ratio(0.7, 0.1)  # 6.999999999999999 in floating point
    7
    >>> floor_ratio(-1.0, 2.0)
    -1
    """
    return math.floor(numerator / denominator + FLOOR_SLACK)


@dataclass(frozen=True)
class AllocationInstance:
    """One Cephalo allocation instance (SI units: bytes, seconds).

    Build it with ``hetopt.load`` from a TOML file, or directly: the constructor checks
    every field against the accepted ranges (``hetopt.allocation.limits``) and raises
    ``InputError("key.path: problem")`` naming the file's key, e.g. ``gpu[0].memory_gib``.
    """

    name: str
    global_batch: int
    groups: tuple[GpuGroup, ...]
    activation_bytes_per_sample: float
    state_bytes: float
    memory_fraction: float = 0.8
    accumulation_overhead_s: float = 0.0
    allgather_s: float = 0.0
    reducescatter_s: float = 0.0
    uneven_shard_overhead: float = 0.25
    max_microbatch: int | None = None
    layers: int | None = None

    problem = "allocation"

    def __post_init__(self) -> None:
        if isinstance(self.groups, list):  # a list from code becomes the tuple a frozen value needs
            object.__setattr__(self, "groups", tuple(self.groups))

        validate_instance(self)

    @cached_property
    def num_gpus(self) -> int:
        """N, the number of GPUs."""
        return sum(g.count for g in self.groups)

    @cached_property
    def group_of_gpu(self) -> tuple[int, ...]:
        """The group index of each GPU, in file order (groups expanded)."""
        return tuple(gi for gi, g in enumerate(self.groups) for _ in range(g.count))

    def derived_max_microbatch(self, g: int) -> int:
        """The largest m with β + a·m ≤ φ·C (memory alone, before caps and overrides)."""
        grp = self.groups[g]
        room = self.memory_fraction * grp.memory_bytes - grp.memory_base_bytes
        return floor_ratio(room, self.activation_bytes_per_sample)

    @cached_property
    def max_microbatch_per_group(self) -> tuple[int, ...]:
        """u_g: the max micro-batch of each group under (II), the global cap and overrides.

        Never more than the largest batch one GPU can get, B - (N - 1).
        """
        biggest_batch = self.global_batch - (self.num_gpus - 1)
        out = []
        for g, grp in enumerate(self.groups):
            u = self.derived_max_microbatch(g)
            if grp.max_microbatch is not None:
                u = min(u, grp.max_microbatch)
            if self.max_microbatch is not None:
                u = min(u, self.max_microbatch)
            out.append(min(u, biggest_batch))
        return tuple(out)

    @cached_property
    def even_shard_max_microbatch_per_group(self) -> tuple[int, ...]:
        """e_g: the largest m with β + a·m + S/N ≤ φ·C, or the group's override."""
        out = []
        for grp in self.groups:
            if grp.even_shard_max_microbatch is not None:
                out.append(grp.even_shard_max_microbatch)
                continue
            room = self.memory_fraction * grp.memory_bytes - grp.memory_base_bytes - self.state_bytes / self.num_gpus
            out.append(floor_ratio(room, self.activation_bytes_per_sample))
        return tuple(out)

    @cached_property
    def microbatch_budget(self) -> int:
        """K*: the largest Σ m_i allowed by (III): Σ(β_i + a·m_i) + S ≤ φ·Σ C_i.

        Capped at Σ_i u_i, which (II) imposes anyway, so the value stays an integer every
        solver can hold (CP-SAT's int64) however small the activation per sample.
        """
        capacity = sum(g.count * self.memory_fraction * g.memory_bytes for g in self.groups)
        base = sum(g.count * g.memory_base_bytes for g in self.groups)
        budget = floor_ratio(capacity - base - self.state_bytes, self.activation_bytes_per_sample)
        cap = sum(g.count * max(u, 0) for g, u in zip(self.groups, self.max_microbatch_per_group))
        return min(budget, cap)

    def times(self, g: int, microbatches: np.ndarray, microbatch_size: np.ndarray) -> np.ndarray:
        """T_i(ℓ, m) for a GPU of group ``g``, vectorized over arrays ℓ and m.

        T = max(AG_i, F) + max(AG_i + RS_i, F + G) with F = ℓ·f(m),
        G = ℓ·g(m) + (ℓ - 1)·δ, and AG_i, RS_i multiplied by (1 + o) when m > e_g.
        """
        grp = self.groups[g]
        ell = np.asarray(microbatches, dtype=float)
        m = np.asarray(microbatch_size)
        fwd = ell * grp.forward(m)
        bwd = ell * grp.backward(m) + (ell - 1.0) * self.accumulation_overhead_s
        penalty = np.where(m > self.even_shard_max_microbatch_per_group[g], 1.0 + self.uneven_shard_overhead, 1.0)
        ag = self.allgather_s * penalty
        rs = self.reducescatter_s * penalty
        return np.maximum(ag, fwd) + np.maximum(ag + rs, fwd + bwd)

    def cached_time(self) -> Callable[[int, int, int], float]:
        """:meth:`time` with a memo: GPUs of one group repeat their (ℓ, m), so a plan of many
        GPUs has few distinct times (a 100,000-GPU instance, a handful). One memo per call.

        Examples
        --------
        >>> from hetopt.allocation.problem import GIB, GpuGroup, Latency
        >>> f = Latency((0.010, 0.018, 0.026))
        >>> inst = AllocationInstance("x", 8, (GpuGroup("A", 2, 16 * GIB, GIB, f, f),), GIB, 4 * GIB)
        >>> time = inst.cached_time()
        >>> time(0, 1, 4) == inst.time(0, 1, 4)
        True
        """
        memo: dict[tuple[int, int, int], float] = {}

        def time(g: int, microbatches: int, microbatch_size: int) -> float:
            key = (g, microbatches, microbatch_size)
            if key not in memo:
                memo[key] = self.time(g, microbatches, microbatch_size)
            return memo[key]

        return time

    def time(self, g: int, microbatches: int, microbatch_size: int) -> float:
        """T_i(ℓ, m) for one GPU of group ``g`` (scalar version of :meth:`times`, same arithmetic)."""
        grp = self.groups[g]
        ell = float(microbatches)
        fwd = ell * grp.forward.at(microbatch_size)
        bwd = ell * grp.backward.at(microbatch_size) + (ell - 1.0) * self.accumulation_overhead_s
        penalty = 1.0 + self.uneven_shard_overhead if microbatch_size > self.even_shard_max_microbatch_per_group[g] else 1.0
        ag = self.allgather_s * penalty
        rs = self.reducescatter_s * penalty
        return max(ag, fwd) + max(ag + rs, fwd + bwd)


@dataclass(frozen=True)
class GpuPlan:
    """The plan of one GPU.

    ``state_share`` is the exact (LP) share of the training state; ``state_share_greedy``
    what Cephalo's greedy gives. ``time_s`` and ``memory_bytes`` are recomputed values.
    """

    type: str
    group: int
    microbatch_size: int
    microbatches: int
    state_share: float
    state_share_greedy: float | None = None
    time_s: float = math.nan
    memory_bytes: float = math.nan
    uneven_shard: bool = False
    capacity_bytes: float = math.nan  # C of the GPU, for "memory used vs capacity" (pictures, reports)

    @property
    def batch(self) -> int:
        """b_i = ℓ_i · m_i."""
        return self.microbatch_size * self.microbatches


@dataclass(frozen=True)
class StatePartition:
    """How the training state was split: the exact LP and Cephalo's greedy, side by side.

    Utilization is memory used / capacity C of the GPU; the LP minimizes its maximum.
    """

    lp_max_utilization: float
    greedy_max_utilization: float | None
    greedy_units: int
    greedy_gap: float | None  # (greedy - lp) / lp, None when the greedy found no split

    def to_dict(self) -> dict:
        return {
            "lp_max_utilization": self.lp_max_utilization,
            "greedy_max_utilization": self.greedy_max_utilization,
            "greedy_units": self.greedy_units,
            "greedy_gap": self.greedy_gap,
        }


@dataclass(frozen=True)
class AllocationSolution:
    """A plan: one :class:`GpuPlan` per GPU in file order, and the state partition."""

    gpus: tuple[GpuPlan, ...]
    iteration_time_s: float = math.nan
    throughput_samples_s: float = math.nan
    state: StatePartition | None = None

    def to_dict(self) -> dict:
        """Plain data for JSON (``solution`` in ``hetopt solve --json``)."""
        return {
            "iteration_time_s": self.iteration_time_s,
            "throughput_samples_s": self.throughput_samples_s,
            "state": None if self.state is None else self.state.to_dict(),
            "gpus": [
                {
                    "type": p.type,
                    "microbatch_size": p.microbatch_size,
                    "microbatches": p.microbatches,
                    "batch": p.batch,
                    "state_share": p.state_share,
                    "state_share_greedy": p.state_share_greedy,
                    "time_s": p.time_s,
                    "memory_gib": p.memory_bytes / GIB,
                    "capacity_gib": p.capacity_bytes / GIB,
                    "uneven_shard": p.uneven_shard,
                }
                for p in self.gpus
            ],
        }

    def rows(self) -> list[dict]:
        """The human-readable table: one row per set of identical GPUs.

        GPUs are identical when they share the group (so the type), the micro-batch size and
        count, and the state shares (exact and greedy); ``gpus`` lists their indices in file
        order, ``count`` how many. ``to_dict()`` keeps one entry per GPU.
        """
        rows: dict[tuple, dict] = {}
        members: dict[tuple, list[int]] = {}
        for i, p in enumerate(self.gpus):
            key = (p.group, p.microbatch_size, p.microbatches, p.state_share, p.state_share_greedy)
            members.setdefault(key, []).append(i)
            rows.setdefault(
                key,
                {
                    "gpus": "",
                    "count": 0,
                    "type": p.type,
                    "batch": p.batch,
                    "mb_size": p.microbatch_size,
                    "mb_count": p.microbatches,
                    "state %": 100.0 * p.state_share,
                    "greedy state %": None if p.state_share_greedy is None else 100.0 * p.state_share_greedy,
                    "time_s": p.time_s,
                    "memory_gib": p.memory_bytes / GIB,
                },
            )
        for key, row in rows.items():
            row["gpus"] = _index_ranges(members[key])
            row["count"] = len(members[key])
        return list(rows.values())

    def summary(self) -> list[str]:
        """A few lines under the table."""
        lines = [
            (
                f"iteration time {self.iteration_time_s:.6g} s, throughput {self.throughput_samples_s:.6g} samples/s; "
                f"{len(self.gpus)} GPUs, global batch {sum(p.batch for p in self.gpus)} (identical GPUs share a row)"
            )
        ]
        if self.state is not None:
            s = self.state
            greedy = "no fit" if s.greedy_max_utilization is None else f"{s.greedy_max_utilization:.4f}"
            gap = "" if s.greedy_gap is None else f" (gap {100 * s.greedy_gap:.2f}%)"
            lines.append(
                f"state split: LP max memory utilization {s.lp_max_utilization:.4f}; "
                f"greedy in {s.greedy_units} units {greedy}{gap}"
            )
        return lines


def _index_ranges(indices: list[int]) -> str:
    """Sorted GPU indices as compact ranges.

    Examples
    --------
    >>> _index_ranges([0, 1, 2, 5, 7, 8])
    '0-2,5,7-8'
    """
    parts: list[str] = []
    start = prev = indices[0]
    for i in indices[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ",".join(parts)


def _check_gpu(instance: AllocationInstance, i: int, p: GpuPlan, g: int,
               time: Callable[[int, int, int], float]) -> tuple[list[str], float, int]:
    """GPU ``i``'s violations, its time T_i and its samples of activations (for (III))."""
    v: list[str] = []
    grp = instance.groups[g]
    if p.group != g:
        v.append(f"GPU {i}: plan says group {p.group}, the instance has group {g} ({grp.type})")
    if int(p.microbatch_size) != p.microbatch_size or int(p.microbatches) != p.microbatches:
        v.append(f"GPU {i}: micro-batch size and count must be integers")
    if p.microbatch_size < 1 or p.microbatches < 1:
        v.append(f"GPU {i}: micro-batch size {p.microbatch_size} and count {p.microbatches} must be >= 1")
        return v, math.inf, 0
    u = instance.max_microbatch_per_group
    if p.microbatch_size > u[g]:
        v.append(f"(II) GPU {i} ({grp.type}): micro-batch {p.microbatch_size} exceeds its max micro-batch {u[g]}")
    if not math.isfinite(p.state_share):  # NaN passes every comparison below
        v.append(f"state: GPU {i} has a share that is not a number ({p.state_share})")
    elif p.state_share < -SHARE_ATOL:
        v.append(f"state: GPU {i} has a negative share {p.state_share}")
    used = grp.memory_base_bytes + instance.activation_bytes_per_sample * p.microbatch_size + p.state_share * instance.state_bytes
    limit = instance.memory_fraction * grp.memory_bytes
    if used > memory_limit(limit):
        v.append(f"state: GPU {i} ({grp.type}) needs {used / GIB:.4f} GiB, above {limit / GIB:.4f} GiB usable")
    return v, time(g, p.microbatches, p.microbatch_size), p.microbatch_size


def evaluate(instance: AllocationInstance, solution: AllocationSolution) -> Evaluation:
    """Check a plan against every constraint and recompute its iteration time.

    Parameters
    ----------
    instance
        The instance.
    solution
        The plan; only its decisions (micro-batch size, micro-batches, state share per
        GPU) are read, every derived number is recomputed.

    Returns
    -------
    Evaluation
        ``objective`` = max_i T_i; ``details["times"]`` the per-GPU T_i and
        ``details["throughput"]`` = B / objective.

    Examples
    --------
    >>> f = Latency((0.01, 0.02))
    >>> inst = AllocationInstance("x", 2, (GpuGroup("A", 2, 10 * GIB, GIB, f, f),), GIB, 2 * GIB)
    >>> plan = AllocationSolution(tuple(GpuPlan("A", 0, 1, 1, 0.5) for _ in range(2)))
    >>> ev = evaluate(inst, plan)
    >>> ev.feasible, round(ev.objective, 3)
    (True, 0.03)
    """
    v: list[str] = []
    n = instance.num_gpus
    if len(solution.gpus) != n:
        return Evaluation(False, math.inf, (f"the plan lists {len(solution.gpus)} GPUs, the instance has {n}",))
    times = []
    time = instance.cached_time()
    activations = 0
    # a plan object shared by many GPUs of one group (build_solution shares identical ones) is
    # checked once: its violations name the first such GPU
    checked: dict[tuple[int, int], tuple[list[str], float, int]] = {}
    for i, (p, g) in enumerate(zip(solution.gpus, instance.group_of_gpu)):
        key = (id(p), g)
        found = checked.get(key)
        if found is None:
            found = checked[key] = _check_gpu(instance, i, p, g, time)
            v.extend(found[0])
        times.append(found[1])
        activations += found[2]
    total = sum(p.batch for p in solution.gpus)
    if total != instance.global_batch:
        v.append(f"(I) the local batches sum to {total}, not the global batch {instance.global_batch}")
    if activations > instance.microbatch_budget:
        v.append(
            f"(III) the micro-batches sum to {activations} samples of activations; "
            f"cluster memory allows {instance.microbatch_budget}"
        )
    share = sum(p.state_share for p in solution.gpus)
    if abs(share - 1.0) > SHARE_ATOL:
        v.append(f"state: the shares sum to {share!r}, not 1")
    objective = max(times) if times else math.inf
    details = {"times": times, "throughput": instance.global_batch / objective if objective > 0 else math.inf}
    if v:
        return Evaluation(False, math.inf, tuple(v), details)
    return Evaluation(True, objective, (), details)
