"""The time side shared by every method: capacities at a time τ and the optimal batch split.

For a time τ, candidate c can run at most cap_c(τ) = max{n ≤ N : T_c(n) ≤ τ} micro-batches
(0 when T_c(1) > τ). Every figure here is computed with the same floating-point formula as
``Candidate.time`` (f + (n − 1)·p), so "T_c(n) ≤ τ" means the same thing here and in
``evaluate``.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Sequence

import numpy as np

from hetopt.replicas.problem import ReplicasInstance

class Times:
    """The candidates' (f_c, p_c) as arrays, for vectorized capacities.

    Examples
    --------
    >>> from hetopt.replicas.problem import Candidate, IslandShape
    >>> inst = ReplicasInstance("x", 4, (IslandShape("A", 2),),
    ...                         (Candidate("a", (1,), 1.0, 0.5, 0.0, 1e9),))
    >>> Times(inst).caps(2.0).tolist()
    [3]
    """

    def __init__(self, instance: ReplicasInstance, candidates: Sequence[int] | None = None) -> None:
        idx = range(len(instance.candidates)) if candidates is None else candidates
        self.index = np.asarray(list(idx), dtype=np.int64)
        self.fill = np.array([instance.candidates[c].fill_s for c in self.index], dtype=float)
        self.per = np.array([instance.candidates[c].per_microbatch_s for c in self.index], dtype=float)
        self.n = instance.microbatches

    def time(self, n: np.ndarray) -> np.ndarray:
        """T_c(n) for every candidate (n an array of the same length, n ≥ 1)."""
        return self.fill + (n - 1) * self.per

    def caps(self, tau: float) -> np.ndarray:
        """cap_c(τ) for every candidate, int64 in [0, N]."""
        n_max = self.n
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            guess = np.where(self.per > 0, np.floor((tau - self.fill) / np.where(self.per > 0, self.per, 1.0)) + 1,
                             np.where(self.fill <= tau, n_max, 0))
        n = np.clip(np.nan_to_num(guess, nan=0.0, posinf=n_max, neginf=0.0), 0, n_max).astype(np.int64)
        # the division may round either way: settle on the exact formula
        for _ in range(3):
            n -= (n >= 1) & (self.fill + (n - 1) * self.per > tau)
            n += (n < n_max) & (self.fill + n * self.per <= tau)
        return n

    def value_at_or_below(self, tau: float) -> float:
        """The largest T_c(n) ≤ τ over all candidates (−inf when none)."""
        n = self.caps(tau)
        ok = n >= 1
        return float(np.max((self.fill + (n - 1) * self.per)[ok])) if ok.any() else -np.inf

    def value_above(self, tau: float) -> float:
        """The smallest T_c(n) > τ over all candidates (inf when none)."""
        n = self.caps(tau)
        ok = n < self.n
        return float(np.min((self.fill + n * self.per)[ok])) if ok.any() else np.inf


def cap(fill: float, per: float, n_max: int, tau: float) -> int:
    """cap(τ) of one candidate, in pure Python (the scalar twin of :meth:`Times.caps`).

    Examples
    --------
    >>> cap(1.0, 0.5, 10, 2.0), cap(1.0, 0.5, 10, 0.9), cap(1.0, 0.0, 10, 1.0)
    (3, 0, 10)
    """
    if not fill <= tau:
        return 0
    if per <= 0:
        return n_max
    n = min(n_max, int((tau - fill) / per) + 1)
    # the division may round either way: settle on the exact formula
    while n > 1 and fill + (n - 1) * per > tau:
        n -= 1
    while n < n_max and fill + n * per <= tau:
        n += 1
    return n


def optimal_split(instance: ReplicasInstance, chosen: Sequence[int]) -> tuple[list[tuple[int, int]], float]:
    """The split of the N micro-batches over the replicas ``chosen`` with the least max T_r(n_r).

    Parameters
    ----------
    chosen
        Candidate indices, one per replica (repeats allowed), at most N of them.

    Returns
    -------
    (pairs, tau)
        (candidate, micro-batches) per replica and τ* = max_r T_r(n_r), the least possible:
        the smallest value T_c(n) at which every replica can take one micro-batch and
        together they can take N (Σ_r cap_r(τ) ≥ N).

    Examples
    --------
    >>> from hetopt.replicas.problem import Candidate, IslandShape
    >>> inst = ReplicasInstance("x", 5, (IslandShape("A", 2),),
    ...     (Candidate("fast", (1,), 1.0, 1.0, 0.0, 1e9), Candidate("slow", (1,), 2.0, 2.0, 0.0, 1e9)))
    >>> optimal_split(inst, [0, 1])
    ([(0, 3), (1, 2)], 4.0)
    """
    n_total = instance.microbatches
    if not chosen or len(chosen) > n_total:
        raise ValueError(f"a split needs 1 to {n_total} replicas (got {len(chosen)})")
    multiplicity = Counter(int(c) for c in chosen)
    distinct = sorted(multiplicity)
    fill = [instance.candidates[c].fill_s for c in distinct]
    per = [instance.candidates[c].per_microbatch_s for c in distinct]
    mult = [multiplicity[c] for c in distinct]

    def count(tau: float) -> int:
        return sum(m * cap(f, p, n_total, tau) for f, p, m in zip(fill, per, mult))

    # every replica runs one micro-batch: τ* ≥ max f (and at max f a flat candidate takes all N)
    tau = max(fill)
    if count(tau) < n_total:
        # all p > 0 here. The continuous count Σ m((τ − f)/p + 1) reaches N at τ0; the real
        # count is below it, and at least N by τ0 + max p: walk the values up from
        # τ0 − max p (or max f) in order until the count reaches N.
        rate = sum(m / p for p, m in zip(per, mult))
        tau0 = (n_total - sum(m * (1 - f / p) for f, p, m in zip(fill, per, mult))) / rate
        start = max(tau, tau0 - max(per))
        if count(start) >= n_total:  # rounding put the start too high: walk from max f
            start = tau
        caps = [cap(f, p, n_total, start) for f, p in zip(fill, per)]
        total = sum(m * k for m, k in zip(mult, caps))
        heap = [(f + k * p, i) for i, (f, p, k) in enumerate(zip(fill, per, caps)) if k < n_total]
        heapq.heapify(heap)
        while total < n_total:
            tau, i = heapq.heappop(heap)
            caps[i] += 1
            total += mult[i]
            if caps[i] < n_total:
                heapq.heappush(heap, (fill[i] + caps[i] * per[i], i))
    pairs: list[tuple[int, int]] = []
    for c, f, p, m in zip(distinct, fill, per, mult):
        pairs += [(c, cap(f, p, n_total, tau))] * m
    excess = sum(n for _, n in pairs) - n_total
    # give back the surplus from the largest shares (times only fall; each keeps ≥ 1)
    for i in sorted(range(len(pairs)), key=lambda k: -pairs[k][1]):
        if excess <= 0:
            break
        c, n = pairs[i]
        take = min(excess, n - 1)
        pairs[i] = (c, n - take)
        excess -= take
    slowest = max(instance.candidates[c].time(n) for c, n in pairs)
    return pairs, slowest
