"""Splitting the FSDP training state once every GPU's micro-batch is fixed.

Two ways, reported side by side:

* :func:`lp_partition`, exact: the LP "minimize the largest memory utilization U subject to
  β_i + a·m_i + r_i·S ≤ U·C_i, r_i·S ≤ φ·C_i − β_i − a·m_i, Σ r_i = 1, r ≥ 0", solved by
  HiGHS (highspy, passed as a sparse model: it runs after every solve, so its overhead counts);
* :func:`greedy_partition`, Cephalo's: hand the state out in L equal units, each to the GPU
  whose memory utilization is lowest among those where the unit still fits.

:func:`waterfill_utilization` is the LP's optimum in closed form, used by the tests to check it.
"""

from __future__ import annotations

import heapq

import highspy
import numpy as np

from hetopt.allocation.problem import memory_limit
from hetopt.backends import silence_highs_banner

#: Units of Cephalo's greedy when the instance gives no layer count: fine enough that the
#: greedy's rounding is visible but small (1% of the state per unit).
DEFAULT_GREEDY_UNITS = 100


def _check(capacity: np.ndarray, state: float) -> None:
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
    _check(capacity, state)
    n = used.size
    if state == 0:  # nothing to place: any split is optimal; an even one reads best
        return np.full(n, 1.0 / n), float(np.max(used / capacity))
    # bytes in units of the largest capacity: HiGHS takes matrix entries of 1e15 and more
    # for infinite, and memory up to 2^50 bytes per GPU is accepted (limits.MAX_MEMORY_GIB);
    # utilization and shares are ratios, unchanged by the unit
    unit = float(np.max(capacity))
    used, capacity, usable, state = used / unit, capacity / unit, usable / unit, state / unit
    lp, k, member = _class_lp(used, capacity, usable, state)
    silence_highs_banner()
    solver = highspy.Highs()
    solver.setOptionValue("output_flag", False)
    solver.passModel(lp)
    solver.run()
    if solver.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        # At exactly full memory, (III) holds with FLOOR_SLACK's rounding while the LP's
        # hard limits sum to a hair under 1 (or to 0: every GPU filled to the byte) and HiGHS
        # calls it infeasible. The one split left then fills every GPU towards the limit
        # evaluate checks (problem.memory_limit: one tolerance for both), in proportion to the
        # room below it; else no split fits.
        shares = _fill_to_limits(used, usable, state)
        if shares is None:
            raise ValueError(f"no state split fits: {solver.modelStatusToString(solver.getModelStatus())}")
        return shares, float(np.max((used + shares * state) / capacity))
    level = float(solver.getInfo().objective_function_value)
    # The LP has many optimal splits when the bottleneck GPU is not the only one with room;
    # report the one that fills every GPU towards the same level U*, which treats identical
    # GPUs alike: r_i ∝ max(0, U*·C_i − used_i). At the optimum Σ max(0, U*·C_i − used_i) ≥ S,
    # so scaling down to Σ r = 1 keeps every GPU at or below U* (and so within φ·C).
    room = np.maximum(0.0, level * capacity - used)
    if room.sum() <= 0.0:  # only when U* is set by GPUs with no room at all: take the LP's split
        room = np.clip(np.asarray(solver.getSolution().col_value[:k]), 0.0, None)[member]
    shares = _within_limits(room / room.sum(), used, usable, state)
    return shares, float(np.max((used + shares * state) / capacity))


def _class_lp(used: np.ndarray, capacity: np.ndarray, usable: np.ndarray,
              state: float) -> tuple[highspy.HighsLp, int, np.ndarray]:
    """The LP over classes of identical GPUs; its class count and each GPU's class."""
    # GPUs with the same (used, C, φ·C) are interchangeable: the LP is convex and symmetric in
    # them, so it has an optimum giving each class one share. Solving over the k classes, each
    # counted n_c times in the sum row, gives the same U* with k instead of n columns (four
    # rows for 100,000 GPUs of four kinds instead of 100,000).
    classes, member, count = np.unique(np.stack([used, capacity, usable], axis=1), axis=0, return_inverse=True,
                                       return_counts=True)
    member = member.reshape(-1)
    c_used, c_capacity, c_usable = classes[:, 0], classes[:, 1], classes[:, 2]
    k = len(classes)
    # variables r_0..r_{k-1}, U; minimize U
    # rows: r_c·S − U·C_c ≤ −used_c (c < k), and Σ n_c·r_c = 1; column-wise sparse matrix
    start = np.r_[np.arange(0, 2 * k, 2), 2 * k, 3 * k].astype(np.int32)
    index = np.empty(3 * k, dtype=np.int32)
    value = np.empty(3 * k)
    index[0 : 2 * k : 2], index[1 : 2 * k : 2] = np.arange(k), k  # r_c: its row and the sum row
    value[0 : 2 * k : 2], value[1 : 2 * k : 2] = state, count
    index[2 * k :], value[2 * k :] = np.arange(k), -c_capacity  # U in every utilization row
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = k + 1, k + 1
    lp.col_cost_ = np.r_[np.zeros(k), 1.0]
    lp.col_lower_ = np.zeros(k + 1)
    lp.col_upper_ = np.r_[np.maximum(0.0, (c_usable - c_used) / state), highspy.kHighsInf]
    lp.row_lower_ = np.r_[np.full(k, -highspy.kHighsInf), 1.0]
    lp.row_upper_ = np.r_[-c_used, 1.0]
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = start, index, value
    return lp, k, member


def _within_limits(shares: np.ndarray, used: np.ndarray, usable: np.ndarray, state: float) -> np.ndarray:
    """Shares clipped to each GPU's hard limit, the clipped part handed to the GPUs with room left."""
    # HiGHS meets the rows within ~1e-7 of the largest capacity, which is far from exact on
    # a GPU 10^6 times smaller: clip every share to its hard limit φ·C_i − used_i and hand
    # what was clipped to the GPUs with room left, in proportion to that room (Σ of the
    # limits ≥ 1 by (III), so it fits)
    limit = np.maximum(0.0, usable - used) / state
    clipped = np.minimum(shares, limit)
    missing = 1.0 - clipped.sum()
    slack = limit - clipped
    if missing <= 0:
        return clipped
    if slack.sum() >= missing:
        return np.minimum(clipped + missing * slack / slack.sum(), limit)
    # the limits hold a hair under all of the state (memory exactly full, within (III)'s
    # FLOOR_SLACK): fill every GPU to its limit, within evaluate's tolerance, or no split fits
    shares = _fill_to_limits(used, usable, state)
    if shares is None:
        raise ValueError(f"no state split fits: the GPUs' limits hold {float(limit.sum()):.12g} of the state")
    return shares


def _fill_to_limits(used: np.ndarray, usable: np.ndarray, state: float) -> np.ndarray | None:
    """Shares ∝ each GPU's room up to ``problem.memory_limit`` (φ·C_i within evaluate's
    tolerance, minus used_i), summing to 1, or None when that room cannot hold the state:
    the split of a cluster whose memory is exactly full.

    The room is the one ``evaluate`` allows, not φ·C_i − used_i: a GPU filled to the byte by
    its micro-batch has no room below φ·C_i, yet a state of a few bytes on it is an answer
    that ``evaluate`` accepts, so the split must find it (issue 44: rooms of exactly 0 and a
    state of 1e-7 bytes were refused as "no state split fits", exit 2, on a valid instance).

    >>> _fill_to_limits(np.array([2.0, 2.0]), np.array([6.0, 6.0]), 8.0 * (1 + 1e-12)).tolist()
    [0.5, 0.5]
    >>> _fill_to_limits(np.array([6.0, 6.0]), np.array([6.0, 6.0]), 1e-9).tolist()  # full, a hair of state
    [0.5, 0.5]
    >>> _fill_to_limits(np.array([2.0, 2.0]), np.array([6.0, 6.0]), 9.0) is None
    True
    """
    limit = memory_limit(usable)
    room = np.maximum(0.0, limit - used)
    if room.sum() <= 0.0:
        return None
    shares = room / room.sum()
    if np.any(used + shares * state > limit):
        return None
    return shares


def waterfill_utilization(used: np.ndarray, capacity: np.ndarray, state: float) -> float:
    """The LP's optimum U* in closed form: the U with Σ max(0, U·C_i − used_i) = S.

    Valid when the hard limits do not bind (U* ≤ φ), which the LP checks separately.

    Examples
    --------
    >>> round(waterfill_utilization(np.array([2.0, 2.0]), np.array([10.0, 30.0]), 8.0), 6)
    0.3
    """
    from scipy.optimize import brentq  # here: only the tests call this, and the dp path should not load SciPy

    lo = float(np.max(used / capacity))
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
    _check(capacity, state)
    n = used.size
    piece = state / units
    pieces = np.zeros(n, dtype=np.int64)
    load = used.astype(float).copy()
    # a GPU where even the first piece does not fit never takes one (loads only grow): left
    # out of the heap at once rather than popped from it (100,000 full GPUs cost 0.25 s)
    room = np.flatnonzero(load + piece <= usable * (1.0 + 1e-12))
    heap = [(load[i] / capacity[i], i) for i in room.tolist()]
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
