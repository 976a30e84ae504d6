"""Splitting the FSDP training state once every GPU's micro-batch is fixed.

Two ways, reported side by side:

* :func:`lp_partition`, exact: the LP "minimize the largest memory utilization U subject to
  β_i + a·m_i + r_i·S ≤ U·C_i, r_i·S ≤ φ·C_i − β_i − a·m_i, Σ r_i = 1, r ≥ 0", solved by
  HiGHS through :func:`scipy.optimize.linprog`;
* :func:`greedy_partition`, Cephalo's: hand the state out in L equal units, each to the GPU
  whose memory utilization is lowest among those where the unit still fits.

:func:`waterfill_utilization` is the LP's optimum in closed form, used by the tests to check it.
"""

from __future__ import annotations

import heapq

import numpy as np
from scipy.optimize import brentq, linprog

#: Units of Cephalo's greedy when the instance gives no layer count: fine enough that the
#: greedy's rounding is visible but small (1% of the state per unit).
DEFAULT_GREEDY_UNITS = 100


def _check(used: np.ndarray, capacity: np.ndarray, usable: np.ndarray, state: float) -> None:
    if state < 0 or np.any(capacity <= 0):
        raise ValueError("state must be >= 0 and capacities > 0")


def lp_partition(used: np.ndarray, capacity: np.ndarray, usable: np.ndarray, state: float) -> tuple[np.ndarray, float]:
    """Exact split minimizing the largest memory utilization, by LP.

    Parameters
    ----------
    used
        β_i + a·m_i per GPU, bytes.
    capacity
        C_i per GPU, bytes (utilization is measured against it).
    usable
        φ·C_i per GPU, bytes: the hard limit.
    state
        S, bytes.

    Returns
    -------
    (shares, max_utilization)
        r_i (summing to 1) and U*. Raises ValueError if no split fits.

    Examples
    --------
    >>> r, u = lp_partition(np.array([2.0, 2.0]), np.array([10.0, 30.0]), np.array([8.0, 24.0]), 8.0)
    >>> [round(float(x), 6) for x in r], round(u, 6)
    ([0.125, 0.875], 0.3)
    """
    _check(used, capacity, usable, state)
    n = used.size
    if state == 0:  # nothing to place: any split is optimal; an even one reads best
        return np.full(n, 1.0 / n), float(np.max(used / capacity))
    # variables: r_0..r_{n-1}, U; minimize U
    c = np.r_[np.zeros(n), 1.0]
    a_ub = np.hstack([np.diag(np.full(n, state)), -capacity[:, None]])
    b_ub = -used
    a_eq = np.r_[np.ones(n), 0.0][None, :]
    bounds = [(0.0, max(0.0, (usable[i] - used[i]) / state)) for i in range(n)] + [(0.0, None)]
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=[1.0], bounds=bounds, method="highs")
    if res.status != 0:
        raise ValueError(f"no state split fits: {res.message}")
    shares = np.clip(res.x[:n], 0.0, None)
    shares /= shares.sum()
    return shares, float(np.max((used + shares * state) / capacity))


def waterfill_utilization(used: np.ndarray, capacity: np.ndarray, state: float) -> float:
    """The LP's optimum U* in closed form: the U with Σ max(0, U·C_i − used_i) = S.

    Valid when the hard limits do not bind (U* ≤ φ), which the LP checks separately.

    Examples
    --------
    >>> round(waterfill_utilization(np.array([2.0, 2.0]), np.array([10.0, 30.0]), 8.0), 6)
    0.3
    """
    lo = float(np.max(used / capacity)) if state > 0 else float(np.max(used / capacity))
    if state == 0:
        return lo

    def excess(u: float) -> float:
        return float(np.sum(np.maximum(0.0, u * capacity - used))) - state

    hi = lo + state / float(capacity.sum()) + 1.0
    while excess(hi) < 0:
        hi *= 2
    # the smallest U at which the water reaches S (excess is continuous and increasing above lo)
    base = float(np.min(used / capacity))
    return max(lo, brentq(excess, base, hi, xtol=1e-15, rtol=1e-15))


def greedy_partition(
    used: np.ndarray, capacity: np.ndarray, usable: np.ndarray, state: float, units: int
) -> tuple[np.ndarray, float] | None:
    """Cephalo's greedy: ``units`` pieces of S/units, each to the least-utilized GPU where it fits.

    Returns
    -------
    (shares, max_utilization) or None
        None when some piece fits on no GPU (the greedy fails where the LP may not).

    Examples
    --------
    >>> r, u = greedy_partition(np.array([2.0, 2.0]), np.array([10.0, 30.0]), np.array([8.0, 24.0]), 8.0, 8)
    >>> r.tolist(), round(u, 6)
    ([0.125, 0.875], 0.3)
    """
    _check(used, capacity, usable, state)
    n = used.size
    piece = state / units
    pieces = np.zeros(n, dtype=np.int64)
    load = used.astype(float).copy()
    heap = [(load[i] / capacity[i], i) for i in range(n)]
    heapq.heapify(heap)
    for _ in range(units):
        while heap and load[heap[0][1]] + piece > usable[heap[0][1]] * (1.0 + 1e-12):
            heapq.heappop(heap)  # full: loads only grow, so no later piece fits there either
        if not heap:
            return None
        _, i = heapq.heappop(heap)
        pieces[i] += 1
        load[i] += piece
        heapq.heappush(heap, (load[i] / capacity[i], i))
    shares = pieces / units
    return shares, float(np.max(load / capacity))
