"""The data both models (MILP and CP-SAT) are built from: replica slots and (class, R) pairs.

Candidate c gets K_c slots (its most copies); slot (c, j) holds y_{c,j} ∈ {0, 1} (used)
and n_{c,j} ∈ 0..N (its micro-batches). One pair (k, R) is chosen, w_{k,R} = 1: at most R
replicas, all of sync class ≤ k, which costs σ(k, R). See ``formulations/replicas.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from hetopt.replicas.dp import usable_candidates
from hetopt.replicas.problem import ReplicasInstance, ring_s

#: Most slots (Σ_c K_c) a model takes: each is two variables and four rows; beyond 20,000
#: the models take longer to build than the DP to solve, so they decline.
MAX_SLOTS = 20_000
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

    @property
    def num_classes(self) -> int:
        """K, the number of sync classes."""
        return 1 + max(self.class_of.values())


def model_data(instance: ReplicasInstance) -> ModelData:
    """Slots, classes and σ for the models (``instance`` must have a usable candidate)."""
    usable = usable_candidates(instance)
    cands = instance.candidates
    r_max = min(instance.max_replicas, sum(instance.copies(c) for c in usable))
    ratios = sorted({cands[c].sync_ratio for c in usable})
    class_of = {c: ratios.index(cands[c].sync_ratio) for c in usable}
    slots = tuple((c, j) for c in usable for j in range(min(instance.copies(c), r_max)))
    sync: dict[tuple[int, int], float] = {}
    top = len(ratios) - 1
    for k in range(len(ratios)):
        for r in range(2, r_max + 1):
            sync[k, r] = max(ring_s(cands[c].gradient_bytes, r, cands[c].bandwidth, instance.hop_latency_s)
                             for c in usable if class_of[c] <= k)
    # one replica syncs nothing, whatever its class: a single pair stands for R = 1
    sync[top, 1] = 0.0
    pairs = tuple(sorted(sync))
    return ModelData(slots, class_of, pairs, sync, r_max)


def too_large(data: ModelData, model: str) -> str | None:
    """Why a model declines the instance, or None."""
    if len(data.slots) > MAX_SLOTS:
        return f"{len(data.slots)} replica slots exceed {model}'s limit of {MAX_SLOTS}; use dp"
    if len(data.pairs) > MAX_PAIRS:
        return f"{len(data.pairs)} (sync class, replicas) pairs exceed {model}'s limit of {MAX_PAIRS}; use dp"
    return None
