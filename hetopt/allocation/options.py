"""The per-GPU choices (ℓ, m) every allocation solver works from, and the presolve.

An *option* of group g is a pair (ℓ, m) with 1 ≤ m ≤ u_g and ℓ·m ≤ B − (N − 1) (every other
GPU needs at least one sample), together with its batch b = ℓ·m and its time T_g(ℓ, m).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetopt.allocation.problem import GIB, AllocationInstance


@dataclass(frozen=True)
class Options:
    """All options of one group, as parallel arrays (sorted by batch, then micro-batch size)."""

    microbatches: np.ndarray  # ℓ
    microbatch_size: np.ndarray  # m
    batch: np.ndarray  # b = ℓ·m
    time: np.ndarray  # T_g(ℓ, m)

    def __len__(self) -> int:
        return int(self.batch.size)

    def take(self, keep: np.ndarray) -> Options:
        """The options selected by a boolean mask or index array."""
        return Options(self.microbatches[keep], self.microbatch_size[keep], self.batch[keep], self.time[keep])


def first_of_each_batch(batch: np.ndarray) -> np.ndarray:
    """Mask of the first entry of each run of equal values in a batch-sorted array.

    Examples
    --------
    >>> first_of_each_batch(np.array([1, 1, 2, 3, 3])).tolist()
    [True, False, True, True, False]
    """
    first = np.ones(batch.size, dtype=bool)
    first[1:] = batch[1:] != batch[:-1]
    return first


#: Most options (ℓ, m) the table-based methods (milp, cpsat, bruteforce, the greedy) will
#: enumerate, summed over groups: four int64/float64 arrays of this length plus their sort
#: take about 200 MB. Above it they decline; ``dp`` works from ranges and has no such limit.
MAX_ENUMERATED_OPTIONS = 2_000_000


def option_count(instance: AllocationInstance) -> int:
    """Σ_g Σ_{m ≤ u_g} ⌊(B − N + 1)/m⌋: the options of all groups, before any pruning.

    Computed without enumerating them (O(Σ_g u_g)), so methods can decline up front.

    Examples
    --------
    >>> from hetopt.allocation.problem import GpuGroup, Latency
    >>> f = Latency((0.01, 0.018, 0.026))
    >>> option_count(AllocationInstance("x", 4, (GpuGroup("A", 1, 48 * GIB, 2 * GIB, f, f),), GIB, 10 * GIB))
    8
    """
    bmax = instance.global_batch - (instance.num_gpus - 1)
    if bmax < 1:
        return 0
    total = 0
    for u in instance.max_microbatch_per_group:
        if u >= 1:
            total += int((bmax // np.arange(1, u + 1)).sum())
    return total


def too_many_options(instance: AllocationInstance, method: str, limit: int = MAX_ENUMERATED_OPTIONS) -> str | None:
    """The reason ``method`` declines because the option list is too long, or None."""
    count = option_count(instance)
    if count <= limit:
        return None
    return (
        f"{count} options (ℓ, m) to enumerate (global batch {instance.global_batch}) exceed {method}'s limit of "
        f"{limit}; use dp, which works from ranges"
    )


def enumerate_options(instance: AllocationInstance, g: int) -> Options:
    """Every option (ℓ, m) of group ``g``, with its time.

    Examples
    --------
    >>> from hetopt.allocation.problem import GpuGroup, Latency
    >>> f = Latency((0.01, 0.018, 0.026))
    >>> inst = AllocationInstance("x", 4, (GpuGroup("A", 1, 48 * GIB, 2 * GIB, f, f),), GIB, 10 * GIB)
    >>> o = enumerate_options(inst, 0)
    >>> list(zip(o.microbatches.tolist(), o.microbatch_size.tolist()))
    [(1, 1), (2, 1), (1, 2), (3, 1), (1, 3), (4, 1), (2, 2), (1, 4)]
    """
    bmax = instance.global_batch - (instance.num_gpus - 1)
    u = instance.max_microbatch_per_group[g]
    if u < 1 or bmax < 1:
        empty = np.zeros(0, dtype=np.int64)
        return Options(empty, empty, empty, np.zeros(0))
    ms = np.arange(1, u + 1)
    counts = bmax // ms
    m = np.repeat(ms, counts)
    # ℓ runs 1..counts[m] inside each block of equal m
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    ell = np.arange(m.size) - starts + 1
    b = ell * m
    order = np.lexsort((m, b))
    ell, m, b = ell[order], m[order], b[order]
    return Options(ell.astype(np.int64), m.astype(np.int64), b.astype(np.int64), instance.times(g, ell, m))


def pareto_options(options: Options) -> Options:
    """Drop the options another option of the same batch dominates (no larger m, no larger T).

    Replacing a dominated option by its dominator keeps Σ b, does not raise Σ m and does
    not raise any T_i, so at least one optimal plan survives: the pruning is exact.
    Among equal (m, T) pairs nothing is lost either, since b and m fix ℓ.
    """
    if len(options) == 0:
        return options
    b = options.batch
    # exact ranks of the times (equal times share a rank), shifted down segment by segment so
    # that one running minimum over the whole array restarts at every new batch
    _, rank = np.unique(options.time, return_inverse=True)
    segment = np.cumsum(np.r_[0, np.diff(b) != 0])
    shifted = rank.astype(np.int64) - segment * (int(rank.max()) + 1)
    running = np.minimum.accumulate(shifted)
    keep = np.ones(len(options), dtype=bool)
    same = segment[1:] == segment[:-1]
    # keep an option strictly faster than every smaller m of its batch (and each batch's first)
    keep[1:] = ~same | (shifted[1:] < running[:-1])
    return options.take(keep)


def why_infeasible(instance: AllocationInstance) -> str | None:
    """The reason no plan exists, in one sentence, or None when some plan exists.

    A plan exists exactly when B ≥ N (every GPU needs a sample), every GPU holds a
    micro-batch of one (u_g ≥ 1), and (III) holds with every m_i = 1; then m_i = 1 for
    all i with any ℓ_i summing to B is a plan, and the state split exists by (III).
    """
    n, big_b = instance.num_gpus, instance.global_batch
    if n == 0:
        return "the cluster has no GPUs"
    if big_b < n:
        return f"global batch {big_b} is smaller than the {n} GPUs; every GPU needs at least one sample"
    phi = instance.memory_fraction
    for g, grp in enumerate(instance.groups):
        if instance.max_microbatch_per_group[g] < 1:
            need = grp.memory_base_bytes + instance.activation_bytes_per_sample
            return (
                f"(II) a {grp.type} cannot hold one sample: memory base plus one sample's activations "
                f"need {need / GIB:.2f} GiB, above {100 * phi:.0f}% of its {grp.memory_bytes / GIB:.2f} GiB"
            )
    if instance.microbatch_budget < n:
        need = instance.state_bytes + sum(
            g.count * (g.memory_base_bytes + instance.activation_bytes_per_sample) for g in instance.groups
        )
        capacity = sum(g.count * g.memory_bytes for g in instance.groups)
        return (
            f"(III) training state {instance.state_bytes / GIB:.1f} GiB plus the smallest activations need "
            f"{need / GIB:.1f} GiB, above {100 * phi:.0f}% of the cluster's {capacity / GIB:.1f} GiB"
        )
    return None


def time_lower_bound(instance: AllocationInstance, options: list[Options]) -> float:
    """A proven lower bound on the optimum: every GPU runs some option, so
    max over groups of that group's fastest option. (The MILP and CP-SAT models use this
    one, so that their proofs share nothing with the DP's bracketing below.)"""
    return max(float(o.time.min()) for o in options)


def capacity_lower_bound(instance: AllocationInstance, options: list[Options], levels: np.ndarray | None = None) -> float:
    """A proven lower bound on the optimum T*: the least option time τ at which every group
    has an option with T ≤ τ and the largest batches such options allow add up to B.

    Valid because a plan with max_i T_i ≤ τ gives each GPU an option with T ≤ τ (so at least
    one per group) and a batch no larger than its group's largest under τ, and Σ b_i = B.
    It ignores (III) and divisibility, which is what the exact methods add. ``levels``: the
    sorted distinct option times, when the caller has them already.
    """
    if levels is None:
        levels = np.unique(np.concatenate([o.time for o in options]))
    total = np.zeros(levels.size, dtype=np.int64)
    every_group = np.ones(levels.size, dtype=bool)
    for g, o in enumerate(options):
        order = np.argsort(o.time)
        widest = np.maximum.accumulate(o.batch[order])  # largest batch among the k fastest options
        k = np.searchsorted(o.time[order], levels, side="right")  # options with T <= level
        every_group &= k > 0
        total += instance.groups[g].count * np.where(k > 0, widest[np.maximum(k, 1) - 1], 0)
    ok = np.flatnonzero(every_group & (total >= instance.global_batch))
    return float(levels[ok[0]]) if ok.size else float(levels[-1])
