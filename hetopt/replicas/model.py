"""The data both models (MILP and CP-SAT) are built from: replica slots and (class, R) pairs.

Candidate c gets K_c slots (its most copies); slot (c, j) holds y_{c,j} ∈ {0, 1} (used)
and n_{c,j} ∈ 0..N (its micro-batches). One pair (k, R) is chosen, w_{k,R} = 1: at most R
replicas, all of sync class ≤ k, which costs σ(k, R). See ``formulations/replicas.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hetopt.budget import Deadline
from hetopt.family import conclude, no_solution
from hetopt.replicas.limits import MAX_PAIRS, MAX_SLOTS, slot_count
from hetopt.replicas.problem import ReplicasInstance, build_solution, evaluate, ring_s, usable_candidates
from hetopt.result import Result, Status
from hetopt.replicas.split import cap

#: The finest time quantum, seconds (1 ps): times of a millisecond or more keep 9 digits.
FINEST_QUANTUM_S = 1e-12
#: Largest scaled time: sums of a few such terms stay far inside int64 (2^63).
MAX_SCALED = 2**50
#: Relative margin on the known plan's time U when pruning with it: the pruned figures are
#: recomputed sums, and the known plan must never be cut off by a rounding.
UPPER_RTOL = 1e-9
#: Under a time limit, the share of it the greedy warm start may take (it improves its plan
#: until stopped; the model needs the rest).
GREEDY_SHARE = 0.2


#: The formulations of the MILP and CP-SAT models (``formulation=``): ``counts`` (copies
#: counted per candidate; the default, may change) and ``slots`` (one slot per copy).
FORMULATIONS = ("counts", "slots")


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


class TooLarge(Exception):
    """The instance's model would exceed a limit (``MAX_SLOTS``, ``MAX_PAIRS``); the message says which."""


def model_data(instance: ReplicasInstance, upper: float | None = None, model: str = "the model",
               deadline: Deadline | None = None) -> ModelData:
    """Slots, classes and σ for the models (``instance`` must have a usable candidate).

    ``upper``: the iteration time of a known plan (the greedy's), U. A plan no worse than it
    runs no replica past U, so candidates with f_c > U get no slot, a slot of c runs at most
    cap_c(U) micro-batches, and pairs with σ(k, R) + min f > U are left out (with a relative
    margin of ``UPPER_RTOL`` so that the known plan itself always stays in the model).

    The slots and pairs are counted before any is built (O(candidates · shapes) and
    O(classes · log R)), so an instance past ``MAX_SLOTS`` or ``MAX_PAIRS`` costs no memory.

    Raises
    ------
    TooLarge
        Past ``MAX_SLOTS`` slots or ``MAX_PAIRS`` pairs (naming ``model``).
    TimeoutError
        When ``deadline`` passes while the table is built.
    """
    usable = usable_candidates(instance)
    cands = instance.candidates
    n_total = instance.microbatches
    limit = math.inf if upper is None else upper * (1 + UPPER_RTOL)
    kept = [c for c in usable if cands[c].fill_s <= limit] or usable
    r_max = min(instance.max_replicas, sum(instance.copies(c) for c in kept))
    slots_count = slot_count(instance, kept)
    if slots_count > MAX_SLOTS:
        raise TooLarge(f"{slots_count} replica slots exceed {model}'s limit of {MAX_SLOTS}; use dp")
    ratios = sorted({cands[c].sync_ratio for c in kept})
    rank = {ratio: k for k, ratio in enumerate(ratios)}
    class_of = {c: rank[cands[c].sync_ratio] for c in kept}
    # σ(k, R) = max over classes ≤ k of the ring: the members of a class share g/w and the ring
    # grows with g/w, so it is the ring of class k's own members (one representative each)
    rep = {}
    for c in kept:
        rep.setdefault(class_of[c], c)
    fastest = min(cands[c].fill_s for c in kept)

    def sigma(k: int, r: int) -> float:
        c = rep[k]
        return ring_s(cands[c].gradient_bytes, r, cands[c].bandwidth, instance.hop_latency_s)

    # the ring grows with R too: the pairs of class k are R = 2..top_k, found by bisection
    tops = []
    for k in range(len(ratios)):
        lo, hi = 1, r_max
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fastest + sigma(k, mid) <= limit:
                lo = mid
            else:
                hi = mid - 1
        tops.append(lo)
    pairs_count = 1 + sum(max(0, t - 1) for t in tops)
    if pairs_count > MAX_PAIRS:
        raise TooLarge(f"{pairs_count} (sync class, replicas) pairs exceed {model}'s limit of {MAX_PAIRS}; use dp")
    most = {c: n_total if upper is None else max(1, cap(cands[c].fill_s, cands[c].per_microbatch_s, n_total, limit))
            for c in kept}
    slots = tuple((c, j) for c in kept for j in range(min(instance.copies(c), r_max)))
    sync: dict[tuple[int, int], float] = {}
    for k, top_k in enumerate(tops):
        if deadline is not None and deadline.expired():
            raise TimeoutError("time limit reached while building the model's sync table")
        for r in range(2, top_k + 1):
            sync[k, r] = sigma(k, r)
    # one replica syncs nothing, whatever its class: a single pair stands for R = 1
    sync[len(ratios) - 1, 1] = 0.0
    pairs = tuple(sorted(sync))
    z_top = limit if upper is not None else max(cands[c].time(n_total) for c in kept)
    return ModelData(slots, class_of, pairs, sync, r_max, most, z_top)


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


def known_plan_or_time_limit(instance: ReplicasInstance, plan: list[tuple[int, int]] | None, method: str,
                             deadline: Deadline, lower: float, why: str) -> Result:
    """A model stopped by the time limit: FEASIBLE with the known (greedy) plan and the bound
    ``lower`` when there is one, TIME_LIMIT otherwise; ``why`` is the reason either way."""
    if plan is None:
        return no_solution(problem="replicas", method=method, status=Status.TIME_LIMIT, deadline=deadline,
                           bound=lower, reason=why)
    return conclude(problem="replicas", method=method, instance=instance, solution=build_solution(instance, plan),
                    evaluate=evaluate, deadline=deadline, proven_optimal=False, bound=lower,
                    reason=f"{why}; the greedy warm start's plan")
