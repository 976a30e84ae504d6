"""The time side shared by every method: capacities at a time τ and the optimal batch split.

For a time τ, candidate c can run at most cap_c(τ) = max{n ≤ N : T_c(n) ≤ τ} micro-batches
(0 when T_c(1) > τ). Every figure here is computed with the same floating-point formula as
``Candidate.time`` (f + (n − 1)·p), so "T_c(n) ≤ τ" means the same thing here and in
``evaluate``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from hetopt.replicas.problem import ReplicasInstance

#: Bisection steps in :func:`optimal_split` before it gives up narrowing by halves and
#: walks the remaining values one by one (never reached on real data: 64 halvings of a
#: double's range leave adjacent floats).
MAX_BISECTIONS = 2200


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


def _count(fill: np.ndarray, per: np.ndarray, mult: np.ndarray, n_max: int, tau: float) -> tuple[int, bool]:
    times = Times.__new__(Times)
    times.fill, times.per, times.n = fill, per, n_max
    caps = times.caps(tau)
    return int(np.dot(mult, caps)), bool((caps >= 1).all())


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
    times = Times(instance, distinct)
    mult = np.array([multiplicity[c] for c in distinct], dtype=np.int64)

    def feasible(tau: float) -> bool:
        total, all_run = _count(times.fill, times.per, mult, n_total, tau)
        return all_run and total >= n_total

    lo = float(np.max(times.fill)) if len(distinct) else 0.0
    if feasible(lo):
        tau = lo
    else:
        hi = float(np.max(times.fill + (n_total - 1) * times.per))  # every replica could take all N
        steps = 0
        # invariant: infeasible at lo, feasible at hi; stop when (lo, hi] holds one value
        while times.value_above(lo) < times.value_at_or_below(hi):
            mid = lo + (hi - lo) / 2
            steps += 1
            if mid <= lo or mid >= hi or steps > MAX_BISECTIONS:  # adjacent floats: walk up
                nxt = times.value_above(lo)
                if feasible(nxt):
                    hi = nxt
                    break
                lo = nxt
                continue
            if feasible(mid):
                hi = mid
            else:
                lo = mid
        tau = times.value_at_or_below(hi)
    caps = times.caps(tau)
    pairs: list[tuple[int, int]] = []
    for c, cap, m in zip(distinct, caps.tolist(), mult.tolist()):
        pairs += [(c, int(cap))] * m
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
