"""Exact dynamic programs for the allocation problem.

* :func:`solve_dp_faithful`: Cephalo's recurrence D(i, j, k), GPU by GPU, vectorized over
  the (j, k) table with numpy. O(N·B·K·B·log B) work; the reference.
* :func:`solve_dp`: the same optimum, fast. The objective is a bottleneck, so "is there a
  plan with every T_i ≤ τ" is monotone in τ; it is decided by a min-plus DP h_τ(j) = least
  Σ m_i over plans of total batch j, built per group by repeated squaring (GPUs of a group
  are interchangeable), and τ is binary-searched over the sorted distinct option times.

See ``formulations/allocation.md`` for the recurrences and the proof that both are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from hetopt.allocation.options import (
    Options,
    capacity_lower_bound,
    enumerate_options,
    first_of_each_batch,
    pareto_options,
    why_infeasible,
)
from hetopt.allocation.heuristic import greedy_choices
from hetopt.allocation.plan import build_solution
from hetopt.allocation.problem import AllocationInstance, evaluate
from hetopt.errors import SolverBug
from hetopt.family import Deadline, conclude, no_solution
from hetopt.result import Result, Status

INF = np.inf


# ----------------------------------------------------------------------------- fast DP


@dataclass
class _Pool:
    """Some GPUs taken together: h[j] = least Σ m over their plans of total batch j.

    ``lo..hi`` is the range where h is finite (empty when lo > hi). A leaf is one GPU of
    ``group``; an inner node joins ``left`` and ``right`` and, when kept, ``split[j]`` is the
    batch the optimum gives ``left``.
    """

    h: np.ndarray
    lo: int
    hi: int
    group: int = -1
    left: _Pool | None = None
    right: _Pool | None = None
    split: np.ndarray | None = None


def _leaf(w: np.ndarray, group: int) -> _Pool:
    finite = np.flatnonzero(np.isfinite(w))
    lo, hi = (int(finite[0]), int(finite[-1])) if finite.size else (1, 0)
    return _Pool(w, lo, hi, group=group)


def _minplus(a: _Pool, b: _Pool, keep_split: bool) -> tuple[np.ndarray, int, int, np.ndarray | None]:
    """z[j] = min_i a.h[i] + b.h[j − i] over the finite ranges only, and the argmin i.

    Work is (length of z's range) × (shorter input range): when τ is tight the ranges are
    short, which is what makes the search cheap near the optimum.
    """
    length = a.h.size
    z = np.full(length, INF)
    split = np.full(length, -1, dtype=np.int64) if keep_split else None
    lo, hi = a.lo + b.lo, min(a.hi + b.hi, length - 1)
    if a.lo > a.hi or b.lo > b.hi or lo > hi:
        return z, 1, 0, split
    short, long_, swapped = (a, b, False) if a.hi - a.lo <= b.hi - b.lo else (b, a, True)
    xs = short.h[short.lo : short.hi + 1]
    ys = long_.h[long_.lo : long_.hi + 1]
    width, count = xs.size, hi - lo + 1
    padded = np.concatenate([np.full(width - 1, INF), ys, np.full(max(0, count - ys.size), INF)])
    # row t holds ys[t], ys[t-1], ..., ys[t-width+1], aligned with xs[0], xs[1], ...
    table = xs[None, :] + sliding_window_view(padded, width)[:count, ::-1]
    best = table.argmin(axis=1)
    z[lo : hi + 1] = table[np.arange(count), best]
    finite = np.flatnonzero(np.isfinite(z))
    if keep_split:
        to_short = best + short.lo
        split[lo : hi + 1] = np.arange(lo, hi + 1) - to_short if swapped else to_short
    if finite.size == 0:
        return z, 1, 0, split
    return z, int(finite[0]), int(finite[-1]), split


def _join(a: _Pool, b: _Pool, keep_split: bool, counter: list[int]) -> _Pool:
    counter[0] += 1
    h, lo, hi, split = _minplus(a, b, keep_split)
    return _Pool(h, lo, hi, left=a, right=b, split=split)


def _join_at(a: _Pool, b: _Pool, total: int, counter: list[int]) -> _Pool:
    """The root join: only h[total] and its split are needed, O(range) work."""
    counter[0] += 1
    h = np.full(a.h.size, INF)
    split = np.full(a.h.size, -1, dtype=np.int64)
    first, last = max(a.lo, total - b.hi), min(a.hi, total - b.lo)
    if first <= last:
        i = np.arange(first, last + 1)
        values = a.h[i] + b.h[total - i]
        k = int(values.argmin())
        h[total], split[total] = values[k], first + k
    return _Pool(h, total, total, left=a, right=b, split=split)


def _power(leaf: _Pool, count: int, keep_split: bool, counter: list[int]) -> _Pool:
    """``count`` copies of one GPU, by repeated squaring: O(log count) joins."""
    result: _Pool | None = None
    base = leaf
    while count:
        if count & 1:
            result = base if result is None else _join(result, base, keep_split, counter)
        count >>= 1
        if count:
            base = _join(base, base, keep_split, counter)
    assert result is not None
    return result


def _least_microbatch(options: Options, tau: float, length: int) -> tuple[np.ndarray, np.ndarray]:
    """w[b] = least m over options of batch b with T ≤ τ (inf if none), and that option's index."""
    w = np.full(length, INF)
    index = np.full(length, -1, dtype=np.int64)
    ok = np.flatnonzero(options.time <= tau)
    # options are sorted by (b, m): the first admissible option of each batch has the least m
    b = options.batch[ok]
    first = first_of_each_batch(b)
    w[b[first]] = options.microbatch_size[ok][first]
    index[b[first]] = ok[first]
    return w, index


def _cluster(instance: AllocationInstance, options: list[Options], tau: float, keep_split: bool, counter: list[int]):
    """The pool of all GPUs at threshold τ; its h is valid at index B only."""
    length = instance.global_batch + 1
    pools, picks = [], []
    for g, grp in enumerate(instance.groups):
        w, index = _least_microbatch(options[g], tau, length)
        picks.append(index)
        pools.append(_power(_leaf(w, g), grp.count, keep_split, counter))
    pool = pools[0]
    for k, nxt in enumerate(pools[1:], start=2):
        last = k == len(pools)
        pool = _join_at(pool, nxt, instance.global_batch, counter) if last else _join(pool, nxt, keep_split, counter)
    return pool, picks


def _batches(pool: _Pool, total: int, out: list[tuple[int, int]]) -> None:
    """Walk the kept splits down to the leaves: (group, batch) per GPU, groups in order."""
    if pool.left is None:
        out.append((pool.group, total))
        return
    assert pool.split is not None and pool.right is not None
    first = int(pool.split[total])
    _batches(pool.left, first, out)
    _batches(pool.right, total - first, out)


def _choices_at(instance: AllocationInstance, options: list[Options], tau: float, counter: list[int]) -> list[tuple[int, int]]:
    pool, picks = _cluster(instance, options, tau, True, counter)
    leaves: list[tuple[int, int]] = []
    _batches(pool, instance.global_batch, leaves)
    leaves.sort(key=lambda gb: gb[0])  # stable: file order of groups
    choices = []
    for g, b in leaves:
        o = picks[g][b]
        choices.append((int(options[g].microbatch_size[o]), int(options[g].microbatches[o])))
    return choices


def solve_dp(instance: AllocationInstance, *, time_limit: float | None = None, bracket: bool = True) -> Result:
    """Exact: binary search on the bottleneck τ, each step a grouped min-plus DP.

    Parameters
    ----------
    instance
        The allocation instance.
    time_limit
        Seconds. When reached, the best plan found so far is returned as FEASIBLE with the
        proven bound (the smallest τ not yet ruled out).
    bracket
        Start the search between the capacity lower bound and the greedy plan's time
        (default). False searches all option times: slower, used by the tests to exercise
        the threshold decisions on instances where the bounds already meet.

    Returns
    -------
    Result
        ``stats``: ``thresholds`` (τ values decided), ``candidates`` (distinct option
        times), ``options`` (after Pareto pruning), ``joins`` (min-plus convolutions).

    Examples
    --------
    >>> from hetopt.allocation.problem import GIB, GpuGroup, Latency
    >>> f = Latency((0.010, 0.018, 0.026))
    >>> inst = AllocationInstance("x", 8, (GpuGroup("A", 2, 16 * GIB, GIB, f, f),), GIB, 4 * GIB)
    >>> r = solve_dp(inst)
    >>> r.status.value, [(p.microbatch_size, p.microbatches) for p in r.solution.gpus]
    ('OPTIMAL', [(4, 1), (4, 1)])
    """
    deadline = Deadline(time_limit)
    reason = why_infeasible(instance)
    if reason is not None:
        return no_solution(problem="allocation", method="dp", status=Status.INFEASIBLE, deadline=deadline, reason=reason)
    options = [pareto_options(enumerate_options(instance, g)) for g in range(len(instance.groups))]
    candidates = np.unique(np.concatenate([o.time for o in options]))
    counter = [0]
    budget = instance.microbatch_budget
    big_b = instance.global_batch

    def feasible(tau: float) -> bool:
        pool, _ = _cluster(instance, options, tau, False, counter)
        return bool(pool.h[big_b] <= budget)

    # invariant: candidates[hi] is feasible (all options allowed, or the greedy plan's time:
    # some plan exists by the presolve); every candidate below lo is infeasible
    lo, hi = 0, candidates.size - 1
    greedy = greedy_choices(instance, options) if bracket else None
    if bracket:
        lo = int(np.searchsorted(candidates, capacity_lower_bound(instance, options, candidates)))
    if greedy is not None:  # a plan of time U exists: T* ≤ U, so start the search there
        upper = max(instance.time(g, ell, m) for g, (m, ell) in zip(instance.group_of_gpu, greedy))
        hi = min(hi, max(lo, int(np.searchsorted(candidates, upper, side="right")) - 1))
    tried = 0
    timed_out = False
    while lo < hi:
        if deadline.expired():
            timed_out = True
            break
        mid = (lo + hi) // 2
        tried += 1
        if feasible(float(candidates[mid])):
            hi = mid
        else:
            lo = mid + 1
    choices = _choices_at(instance, options, float(candidates[hi]), counter)
    stats = {
        "thresholds": tried,
        "candidates": int(candidates.size),
        "options": int(sum(len(o) for o in options)),
        "joins": counter[0],
    }
    return conclude(
        problem="allocation",
        method="dp",
        instance=instance,
        solution=build_solution(instance, choices),
        evaluate=evaluate,
        deadline=deadline,
        proven_optimal=not timed_out,
        bound=float(candidates[lo]),
        stats=stats,
    )


# ------------------------------------------------------------------------ faithful DP


def faithful_work(instance: AllocationInstance) -> int:
    """Cells × options the faithful DP touches: (B+1)·(K+1)·Σ_i |options_i|, for thresholds."""
    u = instance.max_microbatch_per_group
    k_max = min(instance.global_batch, sum(u[g] * grp.count for g, grp in enumerate(instance.groups)))
    bmax = instance.global_batch - (instance.num_gpus - 1)
    options = sum(grp.count * sum(bmax // m for m in range(1, max(u[g], 0) + 1)) for g, grp in enumerate(instance.groups))
    return (instance.global_batch + 1) * (k_max + 1) * options


def solve_dp_faithful(instance: AllocationInstance, *, time_limit: float | None = None) -> Result:
    """Cephalo's recurrence, as published: D(i, j, k) over GPUs, total batch j, Σ m = k.

    D(i, j, k) = min over (ℓ, m) of max(D(i−1, j − ℓ·m, k − m), T_i(ℓ, m)), D(0, 0, 0) = 0;
    the optimum is min over k ≤ K* of D(N, B, k), the plan found by backtracking. Every
    option of every GPU is tried (no pruning); each option updates the whole (j, k) table
    at once with numpy.

    Returns
    -------
    Result
        TIME_LIMIT (no solution) when the time limit is reached; ``stats["cells"]`` is the
        table size, ``stats["updates"]`` the options applied.
    """
    deadline = Deadline(time_limit)
    reason = why_infeasible(instance)
    if reason is not None:
        return no_solution(
            problem="allocation", method="dp-faithful", status=Status.INFEASIBLE, deadline=deadline, reason=reason
        )
    big_b = instance.global_batch
    u = instance.max_microbatch_per_group
    k_max = min(big_b, sum(u[g] * grp.count for g, grp in enumerate(instance.groups)))
    options = [enumerate_options(instance, g) for g in range(len(instance.groups))]
    table = np.full((big_b + 1, k_max + 1), INF)
    table[0, 0] = 0.0
    chosen: list[np.ndarray] = []
    updates = 0
    for g in instance.group_of_gpu:
        opts = options[g]
        new = np.full_like(table, INF)
        pick = np.full(table.shape, -1, dtype=np.int32)
        for o in range(len(opts)):
            b, m, t = int(opts.batch[o]), int(opts.microbatch_size[o]), float(opts.time[o])
            if m > k_max:
                continue
            candidate = np.maximum(table[: big_b + 1 - b, : k_max + 1 - m], t)
            target = new[b:, m:]
            better = candidate < target
            target[better] = candidate[better]
            pick[b:, m:][better] = o
            updates += 1
            if updates % 256 == 0 and deadline.expired():
                break
        if deadline.expired():
            return no_solution(
                problem="allocation",
                method="dp-faithful",
                status=Status.TIME_LIMIT,
                deadline=deadline,
                reason=f"time limit reached after {len(chosen) + 1} of {instance.num_gpus} GPUs",
            )
        chosen.append(pick)
        table = new
    budget = min(instance.microbatch_budget, k_max)
    k = int(np.argmin(table[big_b, : budget + 1])) if budget >= 0 else 0
    if budget < 0 or not np.isfinite(table[big_b, k]):  # the presolve says a plan exists; this is a bug
        raise SolverBug("allocation/dp-faithful found no plan where the presolve proved one exists")
    choices: list[tuple[int, int]] = []
    j = big_b
    for i in range(instance.num_gpus - 1, -1, -1):
        opts = options[instance.group_of_gpu[i]]
        o = int(chosen[i][j, k])
        m, ell = int(opts.microbatch_size[o]), int(opts.microbatches[o])
        choices.append((m, ell))
        j -= m * ell
        k -= m
    choices.reverse()
    return conclude(
        problem="allocation",
        method="dp-faithful",
        instance=instance,
        solution=build_solution(instance, choices),
        evaluate=evaluate,
        deadline=deadline,
        proven_optimal=True,
        stats={"cells": int(table.size), "updates": updates},
    )
