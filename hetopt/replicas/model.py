"""The data both models (MILP and CP-SAT) are built from: replica slots and (class, R) pairs.

Candidate c gets K_c slots (its most copies); slot (c, j) holds y_{c,j} ∈ {0, 1} (used)
and n_{c,j} ∈ 0..N (its micro-batches). One pair (k, R) is chosen, w_{k,R} = 1: at most R
replicas, all of sync class ≤ k, which costs σ(k, R). See ``formulations/replicas.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hetopt.replicas.problem import ReplicasInstance, ring_s, usable_candidates
from hetopt.replicas.split import cap

#: Most slots (Σ_c K_c) a model takes: each is two variables and four rows; beyond 20,000
#: the models take longer to build than the DP to solve, so they decline.
MAX_SLOTS = 20_000
#: The finest time quantum, seconds (1 ps): times of a millisecond or more keep 9 digits.
FINEST_QUANTUM_S = 1e-12
#: Largest scaled time: sums of a few such terms stay far inside int64 (2^63).
MAX_SCALED = 2**50
#: Relative margin on the known plan's time U when pruning with it: the pruned figures are
#: recomputed sums, and the known plan must never be cut off by a rounding.
UPPER_RTOL = 1e-9
#: Most (class, R) pairs a model takes (binaries w_{k,R}).
MAX_PAIRS = 50_000


@dataclass(frozen=True)
class ModelData:
    """Slots, classes and the σ(k, R) table of an instance."""

    slots: tuple[tuple[int, int], ...]  # (candidate, copy j) in candidate order, j = 0..K_c − 1
    class_of: dict[int, int]  # candidate -> sync class k (0 = lowest ratio)
    pairs: tuple[tuple[int, int], ...]  # (k, R) choosable
    sync: dict[tuple[int, int], float]  # σ(k, R), seconds
    r_max: int
    most: dict[int, int]  # candidate -> the most micro-batches a slot of it can run (cap_c(U))
    z_top: float  # no plan worth finding runs a replica longer (U with its margin, or max T_c(N))

    @property
    def num_classes(self) -> int:
        """K, the number of sync classes."""
        return 1 + max(self.class_of.values())


def model_data(instance: ReplicasInstance, upper: float | None = None) -> ModelData:
    """Slots, classes and σ for the models (``instance`` must have a usable candidate).

    ``upper``: the iteration time of a known plan (the greedy's), U. A plan no worse than it
    runs no replica past U, so candidates with f_c > U get no slot, a slot of c runs at most
    cap_c(U) micro-batches, and pairs with σ(k, R) + min f > U are left out (with a relative
    margin of ``UPPER_RTOL`` so that the known plan itself always stays in the model).
    """
    usable = usable_candidates(instance)
    cands = instance.candidates
    n_total = instance.microbatches
    limit = math.inf if upper is None else upper * (1 + UPPER_RTOL)
    kept = [c for c in usable if cands[c].fill_s <= limit] or usable
    most = {c: n_total if upper is None else max(1, cap(cands[c].fill_s, cands[c].per_microbatch_s, n_total, limit))
            for c in kept}
    r_max = min(instance.max_replicas, sum(instance.copies(c) for c in kept))
    ratios = sorted({cands[c].sync_ratio for c in kept})
    rank = {ratio: k for k, ratio in enumerate(ratios)}
    class_of = {c: rank[cands[c].sync_ratio] for c in kept}
    slots = tuple((c, j) for c in kept for j in range(min(instance.copies(c), r_max)))
    fastest = min(cands[c].fill_s for c in kept)
    sync: dict[tuple[int, int], float] = {}
    top = len(ratios) - 1
    for k in range(len(ratios)):
        for r in range(2, r_max + 1):
            value = max(ring_s(cands[c].gradient_bytes, r, cands[c].bandwidth, instance.hop_latency_s)
                        for c in kept if class_of[c] <= k)
            if fastest + value <= limit:
                sync[k, r] = value
    # one replica syncs nothing, whatever its class: a single pair stands for R = 1
    sync[top, 1] = 0.0
    pairs = tuple(sorted(sync))
    z_top = limit if upper is not None else max(cands[c].time(n_total) for c in kept)
    return ModelData(slots, class_of, pairs, sync, r_max, most, z_top)


def too_large(data: ModelData, model: str) -> str | None:
    """Why a model declines the instance, or None."""
    if len(data.slots) > MAX_SLOTS:
        return f"{len(data.slots)} replica slots exceed {model}'s limit of {MAX_SLOTS}; use dp"
    if len(data.pairs) > MAX_PAIRS:
        return f"{len(data.pairs)} (sync class, replicas) pairs exceed {model}'s limit of {MAX_PAIRS}; use dp"
    return None


def quantum(instance: ReplicasInstance) -> float:
    """q: the finest power of ten ≥ 1 ps that keeps max_c T_c(N) + max σ below ``MAX_SCALED`` units.

    Examples
    --------
    >>> from hetopt.replicas.problem import Candidate, IslandShape
    >>> inst = ReplicasInstance("x", 4, (IslandShape("A", 2),), (Candidate("a", (1,), 1.0, 0.5, 1e9, 1e10),))
    >>> quantum(inst)
    1e-12
    """
    replicas = max(2, instance.max_replicas)
    largest = max(c.time(instance.microbatches) for c in instance.candidates) + max(
        ring_s(c.gradient_bytes, replicas, c.bandwidth, instance.hop_latency_s) for c in instance.candidates)
    q = FINEST_QUANTUM_S
    while largest / q > MAX_SCALED:
        q *= 10
    return q
