"""The fast exact DP for the allocation problem (``dp``); ``dp-faithful`` is in ``dp_faithful.py``.

The objective is a bottleneck, so "is there a plan with every T_i ≤ τ" is monotone in τ and
the optimum T* is the least option time at which it holds. For a fixed τ a GPU's options
are ranges, not tables: for each micro-batch size m, the counts ℓ = 1..L_m(τ) (T grows with
ℓ), found by a vectorized bisection. The decision is a min-plus DP h(v) = least Σ m over
plans of total batch offset v, built per group by repeated squaring (GPUs of a group are
interchangeable), over a *window*: either the batch above every GPU's smallest admissible
batch (forward) or the deficit below every GPU's largest (backward), whichever is shorter.
Near T* the deficit is small whatever B is, so the work does not grow with B.

See ``formulations/allocation.md`` ("The fast DP") for the proof that it is exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from hetopt.allocation.dp_faithful import faithful_work, solve_dp_faithful
from hetopt.allocation.options import why_infeasible
from hetopt.allocation.plan import build_solution
from hetopt.allocation.problem import AllocationInstance, evaluate
from hetopt.checks import check_bool, check_choice
from hetopt.errors import SolverBug
from hetopt.family import Deadline, conclude, no_solution
from hetopt.result import Result, Status

__all__ = ["MAX_WINDOW", "faithful_work", "solve_dp", "solve_dp_faithful"]

INF = np.inf

#: Longest DP window, samples: one min-plus join costs up to MAX_WINDOW² additions (2.7e8,
#: about a second), and a decision a few dozen joins. Every instance with B ≤ MAX_WINDOW
#: fits (the window is at most B); larger ones fit when the deficit near T* does.
MAX_WINDOW = 1 << 14
#: Most (group, micro-batch size) pairs, Σ_g u_g, dp keeps as ranges: about ten float64 and
#: int64 arrays of this length (~700 MB). Reached only with tiny activations per sample
#: (u_g near B) on many groups; above it dp declines.
MAX_RANGE_ENTRIES = 1 << 23
#: Elements of one block of a min-plus join (32 MiB of float64): bounds its memory.
JOIN_BLOCK = 1 << 22
#: Split cells (int32) one decision may keep to rebuild the plan: 1 GiB.
MAX_SPLIT_CELLS = 1 << 28
#: When at most this many option times lie in the search interval, the next τ to decide is
#: their exact median (enumerated); above it, a median of range midpoints (still inside).
EXACT_PIVOT_OPTIONS = 1 << 20
#: The first step of the upward search from the least τ not ruled out, relative to τ:
#: the window grows with the step, so start tiny and multiply by ``STEP_GROWTH``.
FIRST_STEP = 2.0**-20
STEP_GROWTH = 4.0


class _Expired(Exception):
    """The deadline passed inside a decision."""


class _TooWide(Exception):
    """A decision needs a window longer than MAX_WINDOW (or more split cells than allowed)."""

    def __init__(self, window: int, limit: int, what: str) -> None:
        super().__init__(f"{what} {window} exceeds dp's limit of {limit}")
        self.window, self.limit, self.what = window, limit, what


# --------------------------------------------------------------------- options as ranges


#: Entries of one chunk of a pass over every (group, m) entry. Long passes (listing the
#: options, a bisection round, a least or largest option time) go chunk by chunk and read
#: the clock between chunks, so a time limit is kept to about one chunk's work (~10 ms)
#: however many entries there are; a short instance is one chunk, done whole, so even a
#: zero limit returns a bound.
CHUNK_ENTRIES = 1 << 18


class _Ranges:
    """Every (group, m) of the instance, flat: the options are ℓ = 1..lmax (times grow with ℓ).

    ``times`` repeats ``AllocationInstance.times`` operation by operation, so the option
    times compared with τ here are the floats ``evaluate`` recomputes. With a ``deadline``,
    every pass over the entries raises ``_Expired`` between chunks once it has passed.
    """

    def __init__(self, instance: AllocationInstance, deadline: Deadline | None = None,
                 chunk_entries: int = CHUNK_ENTRIES) -> None:
        """List the options, chunk by chunk (``chunk_entries`` entries); ``fastest[g]`` is group g's least option time."""
        self.instance = instance
        self.deadline = deadline
        self.chunk = chunk = chunk_entries
        u = [max(0, x) for x in instance.max_microbatch_per_group]
        n = int(sum(u))
        bmax = instance.global_batch - (instance.num_gpus - 1)
        self.starts = np.cumsum([0] + u[:-1]).astype(np.int64)
        self.sizes = np.asarray(u, dtype=np.int64)
        self.counts_per_group = np.asarray([grp.count for grp in instance.groups], dtype=np.int64)
        self.group = np.empty(n, dtype=np.int64)
        self.m = np.empty(n, dtype=np.int64)
        self.f, self.g = np.empty(n), np.empty(n)
        self.ag, self.rs = np.empty(n), np.empty(n)
        self.lmax = np.empty(n, dtype=np.int64)
        self.fastest = np.full(len(u), INF)
        uneven = 1.0 + instance.uneven_shard_overhead
        unclocked = 0  # entries listed since the clock was last read
        for g, (grp, x) in enumerate(zip(instance.groups, u)):
            even = instance.even_shard_max_microbatch_per_group[g]
            start = int(self.starts[g])
            for first in range(0, x, chunk):
                if unclocked >= chunk:
                    self.tick()
                    unclocked = 0
                unclocked += min(x - first, chunk)
                m = np.arange(first + 1, min(x, first + chunk) + 1, dtype=np.int64)
                at = slice(start + first, start + first + m.size)
                self.group[at], self.m[at], self.lmax[at] = g, m, bmax // m
                self.f[at], self.g[at] = grp.forward(m), grp.backward(m)
                penalty = np.where(m > even, uneven, 1.0)
                self.ag[at] = instance.allgather_s * penalty
                self.rs[at] = instance.reducescatter_s * penalty
                self.fastest[g] = min(self.fastest[g], float(self.times(np.ones(m.size), at).min()))

    def tick(self) -> None:
        """Raise ``_Expired`` once the deadline has passed (no-op without one)."""
        if self.deadline is not None and self.deadline.expired():
            raise _Expired

    def times(self, ell: np.ndarray, sel: slice | np.ndarray = slice(None)) -> np.ndarray:
        """T(ℓ, m) for the selected (group, m) entries."""
        ell = np.asarray(ell, dtype=float)
        fwd = ell * self.f[sel]
        bwd = ell * self.g[sel] + (ell - 1.0) * self.instance.accumulation_overhead_s
        ag, rs = self.ag[sel], self.rs[sel]
        return np.maximum(ag, fwd) + np.maximum(ag + rs, fwd + bwd)

    def _chunks(self) -> list[slice]:
        """The entries in chunks of ``chunk_entries``."""
        n = self.m.size
        return [slice(a, min(n, a + self.chunk)) for a in range(0, n, self.chunk)]

    def counts(self, tau: float, lo: np.ndarray | None = None, hi: np.ndarray | None = None) -> np.ndarray:
        """L_m(τ): the largest ℓ ≤ lmax with T(ℓ, m) ≤ τ (0 when none), knowing lo ≤ L ≤ hi.

        A bisection per entry, run chunk by chunk; the clock is read before every round.
        """
        lo = np.zeros_like(self.lmax) if lo is None else lo.copy()
        hi = self.lmax.copy() if hi is None else hi.copy()
        for chunk in self._chunks():
            open_ = np.flatnonzero(lo[chunk] < hi[chunk]) + chunk.start
            while open_.size:
                self.tick()
                mid = (lo[open_] + hi[open_] + 1) // 2
                ok = self.times(mid, open_) <= tau
                lo[open_] = np.where(ok, mid, lo[open_])
                hi[open_] = np.where(ok, hi[open_], mid - 1)
                open_ = open_[lo[open_] < hi[open_]]
        return lo

    def _extreme(self, ell: np.ndarray, keep: np.ndarray, reduce, empty: float) -> float:
        """``reduce`` (min or max) of T(ℓ, m) over the entries where ``keep``, chunk by chunk."""
        out = empty
        for i, chunk in enumerate(self._chunks()):
            if i:
                self.tick()
            sel = np.flatnonzero(keep[chunk]) + chunk.start
            if sel.size:
                out = reduce(out, float(reduce.reduce(self.times(ell[sel], sel))))
        return out

    def next_time(self, counts: np.ndarray) -> float:
        """The least option time above the set ``counts`` (inf when every option is in it)."""
        return self._extreme(counts + 1, counts < self.lmax, np.minimum, INF)

    def last_time(self, counts: np.ndarray) -> float:
        """The largest option time in the set ``counts``."""
        return self._extreme(counts, counts > 0, np.maximum, -INF)

    def pivot(self, low: np.ndarray, high: np.ndarray, first: float, last: float) -> float:
        """An option time in [first, last) between the sets ``low`` ⊂ ``high``, near their median."""
        gap = high - low
        total = int(gap.sum())
        sel = np.flatnonzero(gap > 0)
        if total <= EXACT_PIVOT_OPTIONS:
            starts = np.repeat(np.cumsum(gap[sel]) - gap[sel], gap[sel])
            ell = np.repeat(low[sel], gap[sel]) + (np.arange(total) - starts) + 1
            times = self.times(ell, np.repeat(sel, gap[sel]))
            pick = float(np.partition(times, (total - 1) // 2)[(total - 1) // 2])
        else:
            mid = (low + high + 1) // 2
            times = np.empty(sel.size)
            for a in range(0, sel.size, self.chunk):
                if a:
                    self.tick()
                part = sel[a : a + self.chunk]
                times[a : a + part.size] = self.times(mid[part], part)
            pick = float(np.median(times))
            pick = self.last_time(self.counts(pick, low, high))  # snap to an option time
        return pick if first <= pick < last else first

    def segment(self, g: int) -> slice:
        """The entries of group g."""
        start = int(self.starts[g])
        return slice(start, start + int(self.sizes[g]))

    def per_group_max(self, values: np.ndarray) -> np.ndarray:
        """Max of ``values`` within each group's segment (groups with u = 0 get 0)."""
        out = np.zeros(len(self.starts), dtype=np.int64)
        nonempty = self.sizes > 0
        if self.m.size:
            out[nonempty] = np.maximum.reduceat(values, self.starts[nonempty])
        return out


# --------------------------------------------------------------------------- the DP


@dataclass
class _Node:
    """Some GPUs taken together: h[v] = least Σ m over their plans of window offset v.

    ``lo..hi`` is the finite range of h. A leaf is one GPU of ``group``: its batch at offset
    v is ``base − v`` on the deficit window (``backward``), else ``base + v``; an inner node joins ``left`` and ``right`` and ``split[v]`` is
    the offset the optimum gives ``left``. ``h`` is dropped once no join needs it.
    """

    h: np.ndarray | None
    lo: int
    hi: int
    group: int = -1
    base: int = 0
    backward: bool = False
    left: _Node | None = None
    right: _Node | None = None
    split: np.ndarray | None = None


def _minplus(
    a: _Node, b: _Node, length: int, keep: bool, deadline: Deadline | None = None
) -> tuple[np.ndarray, int, int, np.ndarray | None]:
    """z[v] = min_i a.h[i] + b.h[v − i] over the finite ranges, in blocks of JOIN_BLOCK cells."""
    z = np.full(length, INF)
    split = np.full(length, -1, dtype=np.int32) if keep else None
    lo, hi = a.lo + b.lo, min(a.hi + b.hi, length - 1)
    if a.lo > a.hi or b.lo > b.hi or lo > hi:
        return z, 1, 0, split
    short, long_, swapped = (a, b, False) if a.hi - a.lo <= b.hi - b.lo else (b, a, True)
    xs = short.h[short.lo : short.hi + 1]
    ys = long_.h[long_.lo : long_.hi + 1]
    width, count = xs.size, hi - lo + 1
    padded = np.concatenate([np.full(width - 1, INF), ys, np.full(max(0, count - ys.size), INF)])
    windows = sliding_window_view(padded, width)
    rows = max(1, JOIN_BLOCK // width)
    for first in range(0, count, rows):
        if deadline is not None and deadline.expired():
            raise _Expired
        last = min(count, first + rows)
        # row t holds ys[t], ys[t-1], ..., ys[t-width+1], aligned with xs[0], xs[1], ...
        table = xs[None, :] + windows[first:last, ::-1]
        best = table.argmin(axis=1)
        z[lo + first : lo + last] = table[np.arange(last - first), best]
        if keep:
            to_short = best + short.lo
            at = np.arange(lo + first, lo + last)
            split[lo + first : lo + last] = at - to_short if swapped else to_short
    finite = np.flatnonzero(np.isfinite(z))
    if finite.size == 0:
        return z, 1, 0, split
    return z, int(finite[0]), int(finite[-1]), split


class _Decision:
    """One decision P(τ): the DP over the window, with its tree when ``keep``."""

    def __init__(self, ranges: _Ranges, deadline: Deadline, keep_limit: int) -> None:
        self.ranges = ranges
        self.deadline = deadline
        self.keep_limit = keep_limit
        self.joins = 0
        self.widest = 0

    def _join(self, a: _Node, b: _Node, length: int, keep: bool) -> _Node:
        if self.deadline.expired():
            raise _Expired
        self.joins += 1
        h, lo, hi, split = _minplus(a, b, length, keep, self.deadline)
        return _Node(h, lo, hi, left=a, right=b, split=split)

    def _join_at(self, a: _Node, b: _Node, target: int) -> _Node:
        """The root: only h[target] and its split are needed, O(range) work."""
        self.joins += 1
        h = np.full(target + 1, INF)
        split = np.full(target + 1, -1, dtype=np.int32)
        first, last = max(a.lo, target - b.hi), min(a.hi, target - b.lo)
        if first <= last:
            i = np.arange(first, last + 1)
            values = a.h[i] + b.h[target - i]
            k = int(values.argmin())
            h[target], split[target] = values[k], first + k
        return _Node(h, target, target, left=a, right=b, split=split)

    def _power(self, leaf: _Node, count: int, length: int, keep: bool) -> _Node:
        """``count`` copies of one GPU by repeated squaring: O(log count) joins."""
        result: _Node | None = None
        base = leaf
        while count:
            if count & 1:
                result = base if result is None else self._join(result, base, length, keep)
            count >>= 1
            if count:
                base = self._join(base, base, length, keep)
        if result is None:
            raise SolverBug("allocation/dp: a group with no GPU reached the DP")
        return result

    def run(self, counts: np.ndarray, budget: int, big_b: int, orientation: str | None) -> tuple[_Node, int] | None:
        """The DP's root and target offset at the option set ``counts`` when a plan with
        Σ b = B and Σ m ≤ budget exists, else None."""
        r = self.ranges
        usable = counts > 0
        groups = len(r.starts)
        if not np.all(np.bincount(r.group[usable], minlength=groups) > 0):
            return None  # a group has no option: its GPUs cannot run
        batches = np.where(usable, r.m * counts, 0)
        top = r.per_group_max(batches)  # the largest batch of each group
        bottom = r.per_group_max(np.where(usable, -r.m, -(1 << 62)))
        bottom = -bottom  # the smallest batch (the least admissible m, ℓ = 1)
        n = r.counts_per_group
        deficit, surplus = int((n * top).sum()) - big_b, big_b - int((n * bottom).sum())
        if deficit < 0 or surplus < 0:
            return None
        backward = deficit <= surplus if orientation is None else orientation == "deficit"
        target = deficit if backward else surplus
        self.widest = max(self.widest, target)
        if target > MAX_WINDOW:
            raise _TooWide(target, MAX_WINDOW, "the DP window (samples)")
        length = target + 1
        joins_bound = int(sum(2 * int(c).bit_length() for c in n)) + groups
        if joins_bound * length > self.keep_limit:
            raise _TooWide(joins_bound * length, self.keep_limit, "the plan's split table (cells)")
        keep = True  # the splits of every decision are kept: the feasible one is the plan
        pool: _Node | None = None
        for g in range(groups):
            leaf = self._leaf(g, counts, int(bottom[g]), int(top[g]), backward, target)
            power = self._power(leaf, int(n[g]), length, keep)
            if pool is None:
                pool = power
            elif g == groups - 1:
                pool = self._join_at(pool, power, target)
            else:
                pool = self._join(pool, power, length, keep)
            _release(pool.left)
            _release(pool.right)
        if pool is None:
            raise SolverBug("allocation/dp: an instance without groups reached the DP")
        value = pool.h[target] if pool.lo <= target <= pool.hi else INF
        return (pool, target) if value <= budget else None

    def _leaf(self, g: int, counts: np.ndarray, bottom: int, top: int, backward: bool, target: int) -> _Node:
        """w[v] = least m over the options of group g with batch at offset v (inf if none)."""
        r = self.ranges
        seg = r.segment(g)
        m, ell_max = r.m[seg], counts[seg]
        lo_b, hi_b = (max(bottom, top - target), top) if backward else (bottom, min(top, bottom + target))
        k0 = np.maximum(1, -(-lo_b // m))
        k1 = np.minimum(ell_max, hi_b // m)
        many = np.maximum(0, k1 - k0 + 1)
        total = int(many.sum())
        mm = np.repeat(m, many)
        k = np.repeat(k0, many) + (np.arange(total) - np.repeat(np.cumsum(many) - many, many))
        b = k * mm
        v = top - b if backward else b - bottom
        w = np.full(target + 1, INF)
        # entries run by increasing m, so the first occurrence of each offset has the least m
        offsets, first = np.unique(v, return_index=True)
        w[offsets] = mm[first]
        finite = offsets
        lo, hi = (int(finite[0]), int(finite[-1])) if finite.size else (1, 0)
        return _Node(w, lo, hi, group=g, base=top if backward else bottom, backward=backward)


def _release(node: _Node | None) -> None:
    """Drop the h arrays below a node once it has been joined (the splits stay)."""
    stack = [node]
    while stack:
        x = stack.pop()
        if x is None or x.h is None:
            continue
        x.h = None
        stack.extend((x.left, x.right))


def _batches(node: _Node, total: int, out: list[tuple[int, int]]) -> None:
    """Walk the splits down to the leaves: (group, batch) per GPU."""
    stack = [(node, total)]
    while stack:
        x, v = stack.pop()
        if x.left is None:
            out.append((x.group, x.base - v if x.backward else x.base + v))
            continue
        if x.split is None or x.right is None or x.split[v] < 0:
            raise SolverBug("allocation/dp: the plan's splits do not reach a leaf")
        first = int(x.split[v])
        stack.append((x.right, v - first))
        stack.append((x.left, first))


def _choices(ranges: _Ranges, counts: np.ndarray, root: _Node, target: int) -> list[tuple[int, int]]:
    """Per-GPU (m, ℓ) in file order: each GPU's batch, then its least admissible m."""
    leaves: list[tuple[int, int]] = []
    _batches(root, target, leaves)
    leaves.sort(key=lambda gb: gb[0])  # stable: groups in file order
    # GPUs of one group with one batch take the same option: look each (group, batch) up once
    # (a 100,000-GPU instance has a handful of them)
    picked: dict[tuple[int, int], tuple[int, int]] = {}
    choices = []
    for g, b in leaves:
        if (g, b) not in picked:
            seg = ranges.segment(g)
            m, ell_max = ranges.m[seg], counts[seg]
            ok = np.flatnonzero((b % m == 0) & (b // m <= ell_max) & (ell_max > 0))
            if ok.size == 0:
                raise SolverBug(f"allocation/dp: batch {b} of group {g} has no admissible option")
            mi = int(m[ok[0]])
            picked[(g, b)] = (mi, b // mi)
        choices.append(picked[(g, b)])
    return choices


# ------------------------------------------------------------------------- the search


#: The DP windows ``orientation`` may force (None: the shorter one).
ORIENTATIONS = ("forward", "deficit")


class _Search:
    """The search over option times τ: its decisions, its best plan and the bound it has proven."""

    def __init__(self, instance: AllocationInstance, ranges: _Ranges, deadline: Deadline, orientation: str | None,
                 least: float) -> None:
        self.ranges, self.deadline, self.orientation = ranges, deadline, orientation
        self.budget = instance.microbatch_budget
        self.big_b = instance.global_batch
        self.decision = _Decision(ranges, deadline, MAX_SPLIT_CELLS)
        self.tried = 0
        self.wide: _TooWide | None = None
        self.best: tuple[np.ndarray, _Node, int] | None = None
        # every `low` the search holds is ruled out, so the least option time above it is a
        # bound; the latest one computed is the answer's bound (the search ends computing it,
        # and a timed-out search keeps the last it computed instead of running one more pass)
        self.ruled_out = least

    def stats(self) -> dict:
        """The answer's stats: DP decisions, min-plus joins, the widest window."""
        return {"thresholds": self.tried, "joins": self.decision.joins, "window": self.decision.widest}

    def decide(self, counts: np.ndarray) -> bool:
        """Whether the DP finds a plan with these per-group counts (keeping it as the best)."""
        self.tried += 1
        found = self.decision.run(counts, self.budget, self.big_b, self.orientation)
        if found is None:
            return False
        self.best = (counts, *found)
        return True

    def capacity(self, counts: np.ndarray) -> bool:
        """Whether these counts pass the capacity bound: every group usable and Σ n_g·(largest batch) ≥ B."""
        ranges = self.ranges
        usable = counts > 0
        if not np.all(np.bincount(ranges.group[usable], minlength=len(ranges.starts)) > 0):
            return False
        top = ranges.per_group_max(np.where(usable, ranges.m * counts, 0))
        return int((ranges.counts_per_group * top).sum()) >= self.big_b

    def floor(self, low: np.ndarray) -> float:
        """The least option time above the ruled-out ``low``: the proven bound, updated."""
        self.ruled_out = max(self.ruled_out, self.ranges.next_time(low))
        return self.ruled_out

    def bisect(self, pred, low: np.ndarray, high: np.ndarray, last: float) -> tuple[np.ndarray, np.ndarray, float]:
        """Narrow [low, high] by pivots until no option time lies between them."""
        ranges = self.ranges
        # invariant: pred(low) false, pred(high) true, last = the largest option time in high
        while True:
            first = self.floor(low)
            if first >= last:
                return low, high, last
            if self.deadline.expired():
                raise _Expired
            tau = ranges.pivot(low, high, first, last)
            counts = ranges.counts(tau, low, high)
            if pred(counts):
                high, last = counts, ranges.last_time(counts)
            else:
                low = counts

    def climb(self, low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Decide upward from ``low`` in growing steps until a plan is found; return the new bracket."""
        ranges = self.ranges
        # upward from the least τ not ruled out, in growing steps: the window grows with τ,
        # so the first feasible τ found should be near T*. A τ whose window is too wide
        # becomes a ceiling (every larger τ is too wide as well), searched below by pivots.
        step = FIRST_STEP
        ceiling: np.ndarray | None = None
        while self.best is None:
            if self.deadline.expired():
                raise _Expired
            first = self.floor(low)
            if ceiling is None:
                counts = ranges.counts(first * (1.0 + step), low, high)
            else:
                top = ranges.last_time(ceiling)
                if first >= top:  # even the next option time needs too wide a window
                    raise self.wide
                counts = ranges.counts(ranges.pivot(low, ceiling, first, top), low, ceiling)
            try:
                found = self.decide(counts)
            except _TooWide as exc:
                ceiling, self.wide = counts, exc
                continue
            if found:
                high = counts
            else:
                low = counts
                step *= STEP_GROWTH
        return low, high

    def run(self, low: np.ndarray, high: np.ndarray, bracket: bool) -> None:
        """The whole search: the capacity bracket, the climb, then bisection by the DP."""
        if bracket:  # the capacity bound: cheap, no DP (a plan needs Σ n_g·(largest batch) ≥ B)
            low, _, _ = self.bisect(self.capacity, low, high, self.ranges.last_time(high))
        low, high = self.climb(low, high)
        self.bisect(self.decide, low, high, self.ranges.last_time(high))


def solve_dp(
    instance: AllocationInstance,
    *,
    time_limit: float | None = None,
    bracket: bool = True,
    orientation: str | None = None,
    chunk_entries: int = CHUNK_ENTRIES,
) -> Result:
    """Exact: the least option time τ at which a plan with every T_i ≤ τ exists.

    Parameters
    ----------
    instance
        The allocation instance.
    time_limit
        Seconds. When reached, the best plan found so far is returned as FEASIBLE with the
        proven bound (the least option time not yet ruled out), or TIME_LIMIT without one.
    bracket
        Rule out the thresholds below the capacity bound without a DP (default). False
        decides them by the DP too: slower, used by the tests to exercise the decisions.
    orientation
        "forward" or "deficit" forces the DP's window (tests); None takes the shorter.
    chunk_entries
        Entries a pass goes over between two reads of the clock (:data:`CHUNK_ENTRIES`); it changes
        nothing but when the clock is read.

    Raises
    ------
    InputError
        ``bracket`` not a bool, ``orientation`` not None or one of ``ORIENTATIONS``.

    Returns
    -------
    Result
        DECLINED when a decision would need a window longer than ``MAX_WINDOW`` before any
        plan was found (the reason gives the window and the limit). ``stats``:
        ``thresholds`` (DP decisions), ``joins`` (min-plus joins), ``window`` (the longest
        window a decision needed, samples, including one found too wide).

    Examples
    --------
    >>> from hetopt.allocation.problem import GIB, GpuGroup, Latency
    >>> f = Latency((0.010, 0.018, 0.026))
    >>> inst = AllocationInstance("x", 8, (GpuGroup("A", 2, 16 * GIB, GIB, f, f),), GIB, 4 * GIB)
    >>> r = solve_dp(inst)
    >>> r.status.value, [(p.microbatch_size, p.microbatches) for p in r.solution.gpus]
    ('OPTIMAL', [(4, 1), (4, 1)])
    """
    check_bool(bracket, "bracket")
    if orientation is not None:
        check_choice(orientation, "orientation", ORIENTATIONS)
    deadline = Deadline(time_limit)
    reason = why_infeasible(instance)
    if reason is not None:
        return no_solution(problem="allocation", method="dp", status=Status.INFEASIBLE, deadline=deadline, reason=reason)
    entries = sum(max(0, u) for u in instance.max_microbatch_per_group)
    if entries > MAX_RANGE_ENTRIES:
        return no_solution(
            problem="allocation", method="dp", status=Status.DECLINED, deadline=deadline,
            reason=f"{entries} (group, micro-batch size) pairs exceed dp's limit of {MAX_RANGE_ENTRIES} "
            f"(tiny activations per sample let micro-batches reach the global batch {instance.global_batch})",
        )
    try:
        ranges = _Ranges(instance, deadline, chunk_entries)
        # every option time below `least` is ruled out (some group has none faster than its
        # fastest), so it is a bound at any point
        least = float(ranges.fastest.max())
    except _Expired:
        return no_solution(problem="allocation", method="dp", status=Status.TIME_LIMIT, deadline=deadline,
                           reason="time limit reached while dp listed the options")
    search = _Search(instance, ranges, deadline, orientation, least)
    try:
        low = ranges.counts(float(np.nextafter(least, -INF)))
    except _Expired:
        return no_solution(problem="allocation", method="dp", status=Status.TIME_LIMIT, deadline=deadline, bound=least,
                           reason="time limit reached before dp found a plan")
    high = ranges.lmax.copy()  # every option: feasible by the presolve
    try:
        search.run(low, high, bracket)
        timed_out = False
    except _Expired:
        timed_out = True
    except _TooWide as wide:
        if search.best is None:
            return no_solution(
                problem="allocation", method="dp", status=Status.DECLINED, deadline=deadline,
                reason=f"{wide}: the plans near the optimum leave too much slack to decide exactly "
                f"(global batch {search.big_b}); no plan found", stats=search.stats(),
            )
        timed_out = True  # a plan is known, its optimality is not
    return _conclude(instance, ranges, search, deadline, timed_out)


def _conclude(instance: AllocationInstance, ranges: _Ranges, search: _Search, deadline: Deadline,
              timed_out: bool) -> Result:
    """The answer: the best plan found (OPTIMAL unless the search stopped early) or TIME_LIMIT without one."""
    bound = search.ruled_out
    if search.best is None:
        return no_solution(problem="allocation", method="dp", status=Status.TIME_LIMIT, deadline=deadline,
                           bound=bound, reason="time limit reached before dp found a plan", stats=search.stats())
    counts, root, target = search.best
    choices = _choices(ranges, counts, root, target)
    return conclude(
        problem="allocation", method="dp", instance=instance, solution=build_solution(instance, choices),
        evaluate=evaluate, deadline=deadline, proven_optimal=not timed_out, bound=bound, stats=search.stats()
    )
