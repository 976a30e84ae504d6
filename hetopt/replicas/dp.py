"""Exact DP for the replicas family: a knapsack over island counts inside a search on τ.

For a time τ, every candidate c can run at most cap_c(τ) micro-batches. The knapsack

    G[s, r] = max Σ cap_c(τ) over multisets of r candidates using exactly s islands per shape

(islands of one shape are interchangeable, so s, the vector of islands used, is the whole
state) is filled candidate by candidate in order of their sync ratio ρ_c = g_c / w_c. After
the candidates of ratio ≤ ρ_k, ``F[k][R] = max_{s, r ≤ R} G[s, r]``; the pair (k, R) is
feasible at τ when F[k][R] ≥ N, and

    S(τ) = min over feasible (k, R) of σ(k, R),   σ(k, R) = max_{c: ρ_c ≤ ρ_k} ring(g_c, R, w_c).

The optimum is min_τ τ + S(τ) over the values τ = T_c(n) (``formulations/replicas.md``
proves it). S is non-increasing in τ, so a best-first search over intervals of values
(lower bound of an interval (a, b]: its smallest value plus S(b)) finds it with few
knapsacks and keeps a proven bound when stopped.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from hetopt.errors import SolverBug
from hetopt.family import Deadline, conclude, no_solution
from hetopt.replicas.heuristic import greedy_plan
from hetopt.replicas.limits import components, dp_limit_hit, model_limit_hit, table_sizes
from hetopt.replicas.problem import (
    ReplicasInstance,
    build_solution,
    evaluate,
    infeasible_reason,
    ring_s,
    usable_candidates,
)
from hetopt.replicas.split import Times, optimal_split
from hetopt.result import Result, Status

#: Most state indices kept between knapsacks (int64: 10^7 are 80 MB); past it the moves
#: are recomputed for every τ.
MAX_KEPT_MOVES = 10_000_000
#: Seconds past the time limit the plan's last knapsack (with choice tables) may run
#: before the DP falls back to the known plan: half of ``TIME_LIMIT_SLACK_S``.
REBUILD_SLACK_S = 0.5
#: Unreachable knapsack cell (far below any Σ cap, which is capped at N ≤ 2^20).
UNREACHABLE = -(2**40)


class _Stopped(Exception):
    """The deadline passed inside a knapsack (raised between two candidates)."""


class Component:
    """The per-τ knapsack of one group of candidates over the shapes they use."""

    def __init__(self, instance: ReplicasInstance, candidates: list[int], class_of: dict[int, int],
                 num_classes: int, r_max: int) -> None:
        self.n = instance.microbatches
        cands = instance.candidates
        self.dims = [s for s in range(instance.num_shapes) if any(cands[c].uses[s] for c in candidates)]
        self.limits = np.array([instance.counts[s] for s in self.dims], dtype=np.int64)
        radix = self.limits + 1
        self.strides = np.ones(len(self.dims), dtype=np.int64)
        for i in range(len(self.dims) - 2, -1, -1):
            self.strides[i] = self.strides[i + 1] * radix[i + 1]
        self.states = math.prod(int(x) for x in radix)  # table_sizes() has bounded it
        self.r_max = min(r_max, sum(instance.copies(c) for c in candidates))
        self.r_width = r_max + 1  # the width of F, shared by every component
        self.order = sorted(candidates, key=lambda c: (class_of[c], c))
        self.class_of = class_of
        self.num_classes = num_classes
        self.uses = {c: np.array([cands[c].uses[s] for s in self.dims], dtype=np.int64) for c in self.order}
        self.offset = {c: int(np.dot(self.uses[c], self.strides)) for c in self.order}
        self.copies = {c: min(instance.copies(c), self.r_max) for c in self.order}
        self._digits = None
        self._moves: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._kept = 0

    @property
    def cells(self) -> int:
        """Cells of its table: states × (R_max + 1)."""
        return self.states * (self.r_max + 1)

    def digits(self) -> np.ndarray:
        """Islands used per (dimension) shape of every state index."""
        if self._digits is None:
            idx = np.arange(self.states, dtype=np.int64)
            self._digits = np.stack([(idx // st) % (lim + 1) for st, lim in zip(self.strides, self.limits)], axis=1)
        return self._digits

    def moves(self, c: int, copies: int) -> tuple[np.ndarray, np.ndarray]:
        """(source states, target states) of adding ``copies`` copies of candidate c.

        They do not depend on τ, so they are kept for the next knapsack (up to
        ``MAX_KEPT_MOVES`` indices in all).
        """
        key = (c, copies)
        if key in self._moves:
            return self._moves[key]
        fits = np.all(self.digits() + copies * self.uses[c] <= self.limits, axis=1)
        src = np.nonzero(fits)[0]
        move = (src, src + copies * self.offset[c])
        if self._kept + 2 * src.size <= MAX_KEPT_MOVES:
            self._moves[key] = move
            self._kept += 2 * src.size
        return move

    def run(self, cap_of: dict[int, int], *, last_class: int | None = None, choices: bool = False,
            deadline: Deadline | None = None):
        """Fill the knapsack for the capacities ``cap_of`` (candidate -> cap at τ).

        Returns
        -------
        (F, G, choice)
            F[k][r] (classes × (R_max + 1), the most Σ cap with ≤ r replicas of class ≤ k),
            the final table G[s, r], and per candidate the copies chosen per cell (when
            ``choices``; else None).
        """
        g = np.full((self.states, self.r_max + 1), UNREACHABLE, dtype=np.int64)
        g[0, 0] = 0
        f = np.full((self.num_classes, self.r_max + 1), UNREACHABLE, dtype=np.int64)
        choice: dict[int, np.ndarray] = {}
        done_class = -1
        for c in self.order:
            k = self.class_of[c]
            if last_class is not None and k > last_class:
                break
            if deadline is not None and deadline.expired():  # one candidate's copies is the unit of work
                raise _Stopped
            while done_class < k - 1:  # snapshot the classes finished before c's
                done_class += 1
                f[done_class] = np.maximum.accumulate(g.max(axis=0))
            cap = cap_of[c]
            if cap < 1:
                continue
            new = g.copy()
            pick = np.zeros(g.shape, dtype=np.uint16) if choices else None
            for copies in range(1, self.copies[c] + 1):
                # one copy count is a pass over up to MAX_DP_CELLS cells (about 0.01 s): the
                # unit of work, so a candidate of hundreds of copies cannot overrun the limit
                if deadline is not None and deadline.expired():
                    raise _Stopped
                src, dst = self.moves(c, copies)
                if src.size == 0:
                    break
                gain = np.minimum(g[src, : self.r_max + 1 - copies] + copies * cap, self.n)
                current = new[dst, copies:]
                better = gain > current
                new[dst, copies:] = np.where(better, gain, current)
                if choices:
                    block = pick[dst, copies:]
                    pick[dst, copies:] = np.where(better, copies, block)
            g = new
            if choices:
                choice[c] = pick
        while done_class < self.num_classes - 1:
            done_class += 1
            f[done_class] = np.maximum.accumulate(g.max(axis=0))
        # more replicas than this component can hold add nothing: extend F flat to R_max
        f = np.concatenate([f, np.repeat(f[:, -1:], self.r_width - f.shape[1], axis=1)], axis=1)
        return f, g, (choice if choices else None)

    def rebuild(self, cap_of: dict[int, int], k: int, r: int, value: int, deadline: Deadline | None = None) -> list[int]:
        """A multiset of ≤ r candidates of class ≤ k whose Σ cap is ``value`` (F[k][r])."""
        _, g, choice = self.run(cap_of, last_class=k, choices=True, deadline=deadline)
        cells = np.argwhere(g[:, : r + 1] == value)
        s, used = (int(x) for x in cells[0])
        chosen: list[int] = []
        for c in reversed([c for c in self.order if c in choice]):
            copies = int(choice[c][s, used])
            chosen += [c] * copies
            s -= copies * self.offset[c]
            used -= copies
        if s != 0 or used != 0:
            raise SolverBug("replicas/dp: the choice tables do not lead back to the empty state")
        return chosen


def _join(a: np.ndarray, b: np.ndarray, r_max: int) -> np.ndarray:
    """Max-plus convolution over R of two (classes × (R + 1)) tables, at most ``r_max`` replicas."""
    out = np.full((a.shape[0], r_max + 1), UNREACHABLE, dtype=np.int64)
    for x in range(min(a.shape[1], r_max + 1)):
        width = min(b.shape[1], r_max + 1 - x)
        out[:, x: x + width] = np.maximum(out[:, x: x + width], a[:, x: x + 1] + b[:, :width])
    return np.maximum.accumulate(out, axis=1)


class Knapsack:
    """The per-τ knapsack over island counts (see the module docstring), by components."""

    def __init__(self, instance: ReplicasInstance, candidates: list[int], deadline: Deadline | None = None) -> None:
        self.instance = instance
        self.n = instance.microbatches
        cands = instance.candidates
        self.r_max = min(instance.max_replicas, sum(instance.copies(c) for c in candidates))
        # classes: runs of equal sync ratio, in increasing order
        self.order = sorted(candidates, key=lambda c: (cands[c].sync_ratio, c))
        ratios = sorted({cands[c].sync_ratio for c in self.order})
        rank = {ratio: k for k, ratio in enumerate(ratios)}
        self.class_of = {c: rank[cands[c].sync_ratio] for c in self.order}
        self.num_classes = len(ratios)
        self.parts = [Component(instance, group, self.class_of, self.num_classes, self.r_max)
                      for group in components(instance, candidates)]
        # σ(k, R): the ring at the slowest member allowed by class k. The members of a class
        # share g/w, and so their ring at every R: one row per class (table_sizes bounds them)
        self.sync = np.zeros((self.num_classes, self.r_max + 1))
        first_of = {}
        for c in self.order:
            first_of.setdefault(self.class_of[c], c)
        for k, c in first_of.items():
            if deadline is not None and deadline.expired():
                raise _Stopped
            self.sync[k] = [ring_s(cands[c].gradient_bytes, r, cands[c].bandwidth, instance.hop_latency_s)
                            for r in range(self.r_max + 1)]
        self.sync = np.maximum.accumulate(self.sync, axis=0)
        self.times = Times(instance, self.order)

    @property
    def cells(self) -> int:
        """Cells of all the components' tables."""
        return sum(p.cells for p in self.parts)

    @property
    def states(self) -> int:
        """Island-count states of all the components."""
        return sum(p.states for p in self.parts)

    @property
    def choice_bytes(self) -> int:
        """Bytes of the choice tables of the final pass (two per cell and candidate)."""
        return sum(2 * p.cells * len(p.order) for p in self.parts)

    def caps(self, tau: float) -> dict[int, int]:
        """cap_c(τ) per candidate."""
        return dict(zip(self.order, self.times.caps(tau).tolist()))

    def run(self, tau: float, deadline: Deadline | None = None) -> np.ndarray:
        """F[k][R] at τ over all the components joined (raises ``_Stopped`` past ``deadline``)."""
        cap_of = self.caps(tau)
        total = None
        for part in self.parts:
            f, _, _ = part.run(cap_of, deadline=deadline)
            total = f if total is None else _join(total, f, self.r_max)
        return np.minimum(total, self.n)

    def rebuild(self, tau: float, k: int, r: int, deadline: Deadline | None = None) -> list[int]:
        """The multiset (candidate per replica) behind the feasible pair (k, R) at τ."""
        cap_of = self.caps(tau)
        tables = [np.minimum(p.run(cap_of, last_class=k, deadline=deadline)[0][k], self.n) for p in self.parts]
        # prefix joins, to split R between the components from the last one back
        prefix = [tables[0]]
        for t in tables[1:]:
            prefix.append(np.minimum(_join(prefix[-1][None, :], t[None, :], self.r_max)[0], self.n))
        need = self.n
        chosen: list[int] = []
        left = r
        for i in range(len(self.parts) - 1, -1, -1):
            if i == 0:
                take = left
            else:
                take = next(x for x in range(left + 1) if min(prefix[i - 1][left - x] + tables[i][x], self.n) >= need)
            take = min(take, self.parts[i].r_max)  # past its own R_max a component's F is flat
            value = int(tables[i][take])
            if value > 0:
                chosen += self.parts[i].rebuild(cap_of, k, take, value, deadline)
            need -= value
            left -= take
        if need > 0:
            raise SolverBug("replicas/dp: the rebuilt replicas cannot run the N micro-batches")
        return chosen

    def best_pair(self, f: np.ndarray) -> tuple[float, int, int]:
        """S(τ) from F: (σ, k, R) of the cheapest feasible pair, (inf, -1, -1) when none."""
        feasible = f >= self.n
        feasible[:, 0] = False
        if not feasible.any():
            return math.inf, -1, -1
        sync = np.where(feasible, self.sync, np.inf)
        k, r = np.unravel_index(int(np.argmin(sync)), sync.shape)
        return float(sync[k, r]), int(k), int(r)


def solve_dp(instance: ReplicasInstance, *, time_limit: float | None = None) -> Result:
    """Solve exactly: best-first search on τ, a knapsack over island counts at each step.

    Declines when a knapsack table would exceed ``MAX_DP_CELLS`` cells (or the choice
    tables ``MAX_CHOICE_BYTES``). Stopped by the time limit it returns the best plan found
    (the greedy's at least) as FEASIBLE with the search's proven bound.

    Returns
    -------
    Result
        ``stats``: knapsacks (τ values tried), states, cells, candidates, classes, components.

    Examples
    --------
    >>> from hetopt.replicas.problem import Candidate, IslandShape
    >>> inst = ReplicasInstance("x", 8, (IslandShape("A", 2),),
    ...                         (Candidate("a", (1,), 1.0, 0.5, 1e9, 1e11),), hop_latency_s=0.0)
    >>> r = solve_dp(inst)
    >>> r.status.value, round(r.objective, 6)  # two replicas of 4: 2.5 + 0.01 + the ring's 8.4 µs launch
    ('OPTIMAL', 2.510008)
    """
    deadline = Deadline(time_limit)
    reason = infeasible_reason(instance)
    if reason is not None:
        return no_solution(problem="replicas", method="dp", status=Status.INFEASIBLE, deadline=deadline, reason=reason)
    usable = usable_candidates(instance)
    # every limit is checked on the sizes the counts give, before any table is built
    sizes = table_sizes(instance, usable)
    stats = {"states": sizes["states"], "cells": sizes["cells"], "candidates": len(usable),
             "classes": sizes["classes"], "components": sizes["components"]}
    hit = dp_limit_hit(instance, sizes)
    if hit is not None:
        model_hit = model_limit_hit(instance, "the MILP and CP-SAT models")
        advice = ("use milp or cpsat (their size grows with candidates, not island counts)" if model_hit is None
                  else f"milp and cpsat decline it too ({model_hit}): use greedy")
        return no_solution(problem="replicas", method="dp", status=Status.DECLINED, deadline=deadline, stats=stats,
                           reason=f"{hit}; {advice}")
    lowest = min(instance.candidates[c].fill_s for c in usable)  # no plan is faster than the fastest single pass
    best_value, best_plan = math.inf, None
    greedy = greedy_plan(instance, deadline)
    if greedy is not None:
        best_plan = greedy
        best_value = evaluate(instance, build_solution(instance, greedy)).objective
    try:
        knap = Knapsack(instance, usable, deadline)
    except _Stopped:
        if best_plan is None:
            return no_solution(problem="replicas", method="dp", status=Status.TIME_LIMIT, deadline=deadline,
                               bound=lowest, reason="time limit reached while building the DP's tables", stats=stats)
        return conclude(problem="replicas", method="dp", instance=instance, solution=build_solution(instance, best_plan),
                        evaluate=evaluate, deadline=deadline, proven_optimal=False, bound=lowest, stats=stats)
    search = _Search(instance, knap, deadline, time_limit, stats, lowest, best_value, best_plan)
    if deadline.expired():
        return search.finish(False)
    try:
        return search.run()
    except _Stopped:
        return search.finish(False)


class _Search:
    """The best-first search on τ: its best plan so far and the bound it has proven."""

    def __init__(self, instance: ReplicasInstance, knap: Knapsack, deadline: Deadline, time_limit: float | None,
                 stats: dict, lowest: float, best_value: float, best_plan: list | None) -> None:
        self.instance, self.knap, self.deadline, self.time_limit = instance, knap, deadline, time_limit
        self.stats, self.lowest = stats, lowest
        self.best_value, self.best_plan, self.best_pair = best_value, best_plan, None
        self.knapsacks = 0
        times = knap.times
        # the largest τ worth trying: every candidate runs all N (or just below the greedy plan)
        self.top = float(np.max(times.fill + (instance.microbatches - 1) * times.per))
        if best_value < math.inf:
            self.top = min(self.top, times.value_at_or_below(best_value))
        self.bound = lowest

    def at(self, tau: float) -> tuple[float, int, int]:
        """One knapsack at τ: its best S(τ) and the (k, r) giving it."""
        self.knapsacks += 1
        return self.knap.best_pair(self.knap.run(tau, self.deadline))

    def offer(self, tau: float, s: float, k: int, r: int) -> None:
        """Keep τ + S(τ) as the best value when it beats the best so far."""
        if tau + s < self.best_value:
            self.best_value, self.best_pair = tau + s, (tau, k, r)

    def finish(self, proven: bool) -> Result:
        """The answer: the best plan (rebuilt from its knapsack, or the greedy's) with the bound."""
        instance, deadline, stats = self.instance, self.deadline, self.stats
        plan = self.best_plan
        if self.best_pair is not None:
            tau, k, r = self.best_pair
            # the plan's last knapsack may use part of the slack; stopped there, the known
            # plan (the greedy's) is returned, never an unproven claim
            rebuilding = Deadline(None if self.time_limit is None else deadline.remaining() + REBUILD_SLACK_S)
            try:
                plan, _ = optimal_split(instance, self.knap.rebuild(tau, k, r, rebuilding))
            except _Stopped:
                proven = False
        if plan is None:
            return no_solution(problem="replicas", method="dp", status=Status.TIME_LIMIT, deadline=deadline,
                               bound=self.bound, reason="time limit reached before the DP found a plan",
                               stats=dict(stats, knapsacks=self.knapsacks))
        return conclude(problem="replicas", method="dp", instance=instance, solution=build_solution(instance, plan),
                        evaluate=evaluate, deadline=deadline, proven_optimal=proven, bound=self.bound,
                        stats=dict(stats, knapsacks=self.knapsacks))

    def run(self) -> Result:
        """Search the intervals of τ by their lower bounds until none can beat the best value."""
        times, top, lowest = self.knap.times, self.top, self.lowest
        s_top, k_top, r_top = self.at(top)
        if math.isinf(s_top):
            if self.best_plan is not None:
                raise SolverBug("replicas/dp: the knapsack finds no plan at τ where the greedy has one")
            return no_solution(problem="replicas", method="dp", status=Status.INFEASIBLE, deadline=self.deadline,
                               reason="no multiset of candidates fits the islands",
                               stats=dict(self.stats, knapsacks=self.knapsacks))
        self.offer(top, s_top, k_top, r_top)
        # intervals (a, b] of values with S(b) known; key: the interval's lower bound
        heap = [(lowest + s_top, -math.inf, top, s_top)]
        while heap:
            lb, a, b, s_b = heap[0]
            self.bound = min(lb, self.best_value)
            if lb >= self.best_value:
                return self.finish(True)
            if self.deadline.expired():
                return self.finish(False)
            heapq.heappop(heap)
            first = times.value_above(a) if a > -math.inf else lowest
            if first >= b:  # the interval holds b alone, already tried
                continue
            mid_real = first + (b - first) / 2
            mid = times.value_at_or_below(mid_real)
            if mid >= b:
                mid = first
            s_mid, k_mid, r_mid = self.at(mid)
            self.offer(mid, s_mid, k_mid, r_mid)
            for lo, hi, s_hi in ((a, mid, s_mid), (mid, b, s_b)):
                lo_first = times.value_above(lo) if lo > -math.inf else lowest
                # an interval holding only its already-tried end needs no visit
                if lo_first < hi and lo_first + s_hi < self.best_value:
                    heapq.heappush(heap, (lo_first + s_hi, lo, hi, s_hi))
        self.bound = self.best_value
        return self.finish(True)
