"""Tangram's composition, exact: bottleneck enumeration around a memoized DP built from the back.

For a bottleneck τ, D_τ = least Σ t + Σ c over pipelines whose stages and links all take at
most τ. The DP adds blocks in front of a suffix of the pipeline; its state after a block is

    (u, κ, r, b) = (islands used, link class of the front island, first covered layer,
                    stages behind the front of the suffix),

so the in-flight count of every stage of the block being added, min(b + n − q, M), is known
when it is added and its 1F1B memory is checked there. Identical islands (same GPUs,
memory, options and links) are interchangeable, so ``u`` counts islands used per *kind*
(a bitmask when all islands differ), and ``κ`` keeps only what the link to the next block
in front depends on. Each state is a numpy array over (r, b); a transition adds one group
of options of one kind (same slice length, stage count and role; under τ the cheapest one
for each b) and is a shifted elementwise minimum.

Then T* = min_τ D_τ + (M − 1)·τ over the sorted distinct candidate values, and the scan
stops once (M − 1)·τ + D_∞ ≥ the best total (D_∞ ≤ D_τ for every τ). The proof that this
is exact is in ``formulations/pipeline.md``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from hetopt.errors import SolverBug
from hetopt.family import Deadline, conclude, no_solution
from hetopt.pipeline.options import GENERIC_INFEASIBLE, bottleneck_candidates, max_stages, usable_options, why_infeasible
from hetopt.pipeline.plan import blocks_from_choices, build_solution
from hetopt.pipeline.problem import PipelineInstance, PipelineSolution, evaluate
from hetopt.result import Result, Status

INF = np.inf

#: Largest DP table (usage states × link classes × (L + 1) × (B + 1) cells, 8 bytes each)
#: dp will build: 2e8 cells = 1.6 GB, a third of what a 2-core benchmark box can spare.
MAX_DP_CELLS = 200_000_000


class _Timeout(Exception):
    """The deadline passed inside one DP run."""


def _link_classes(instance: PipelineInstance, islands: list[int]) -> list[list[int]]:
    """Islands j, j' are link-equivalent when c(i, j) = c(i, j') for every other island i.

    Classes are built so that every two members are equivalent (checked pairwise), so the
    link from a new island i to the class of the block behind it is well defined.
    """
    c = instance.link_s
    classes: list[list[int]] = []
    for j in islands:
        for cl in classes:
            if all(all(c[i][j] == c[i][m] for i in islands if i not in (j, m)) for m in cl):
                cl.append(j)
                break
        else:
            classes.append([j])
    return classes


def _option_key(instance: PipelineInstance, o: int) -> tuple:
    opt = instance.options[o]
    return (opt.layers, opt.role, tuple((s.layers, s.forward_s, s.backward_s, s.static_bytes, s.activation_bytes, s.gpus) for s in opt.stages))


@dataclass
class _Prep:
    """Everything about the instance the DP runs share, independent of τ."""

    kinds: list[list[int]]  # islands of each kind
    kind_class: list[int]
    link: np.ndarray  # link[K, κ] = c(island of kind K, island of class κ), inf when never used
    options: list[list[int]]  # per island: its usable options in canonical order
    cap: int  # B: stages-behind values ≥ B behave alike
    radix: list[int]  # n_K + 1
    usage: list[tuple[int, ...]]  # every usage vector, by number of islands used (empty when too many)
    skipped: int
    usage_count: int  # Π (n_K + 1), known before the vectors are listed

    @property
    def cells(self) -> int:
        """Cells of one (usage, class) table layer per layer row: usage states × classes × (B + 1)."""
        return self.usage_count * len(self.link[0]) * (self.cap + 1)


def _prepare(instance: PipelineInstance) -> _Prep:
    usable = usable_options(instance)
    per_island: dict[int, list[int]] = {}
    for o in usable:
        per_island.setdefault(instance.options[o].island, []).append(o)
    islands = sorted(per_island)
    classes = _link_classes(instance, islands)
    class_of = {j: k for k, cl in enumerate(classes) for j in cl}
    options = [[] for _ in instance.islands]
    signature: dict[tuple, list[int]] = {}
    for i in islands:
        options[i] = sorted(per_island[i], key=lambda o: _option_key(instance, o))
        isl = instance.islands[i]
        sig = (isl.gpus, isl.memory_bytes, class_of[i], tuple(_option_key(instance, o) for o in options[i]))
        signature.setdefault(sig, []).append(i)
    kinds = list(signature.values())
    link = np.full((len(kinds), len(classes)), INF)
    for K, members in enumerate(kinds):
        rep = members[0]
        for k, cl in enumerate(classes):
            other = [m for m in cl if m != rep]
            if other:
                link[K, k] = instance.link_s[rep][other[0]]
    limits = [instance.behind_limits[o] for o in usable]
    finite = [lim for lim in limits if lim is not None]
    cap = min(max(finite) + 1 if finite else 0, max_stages(instance))
    radix = [len(m) + 1 for m in kinds]
    count = math.prod(radix)
    # list the usage vectors only when dp will run: 2^64 of them would never finish
    fits = count * len(classes) * (cap + 1) * (instance.layers + 1) <= MAX_DP_CELLS
    usage = sorted(itertools.product(*(range(r) for r in radix)), key=sum) if fits else []
    return _Prep(kinds, [class_of[m[0]] for m in kinds], link, options, cap, radix, usage, len(instance.options) - len(usable), count)


@dataclass
class _Group:
    """Options of one kind with the same slice length k, stage count n and role, under τ."""

    layers: int
    stages: int
    role: str
    best: np.ndarray  # best[b] = least Σ t of a member that fits with b stages behind
    arg: np.ndarray  # canonical position of that member
    members: list[int] = field(default_factory=list)


def _groups(instance: PipelineInstance, prep: _Prep, tau: float) -> list[list[_Group]]:
    out = []
    for members in prep.kinds:
        rep = members[0]
        by_key: dict[tuple, _Group] = {}
        for pos, o in enumerate(prep.options[rep]):
            opt = instance.options[o]
            if opt.max_time_s > tau:
                continue
            key = (opt.layers, len(opt.stages), opt.role)
            g = by_key.get(key)
            if g is None:
                g = by_key[key] = _Group(*key, np.full(prep.cap + 1, INF), np.full(prep.cap + 1, -1))
            lim = instance.behind_limits[o]
            top = prep.cap if lim is None else min(lim, prep.cap)
            better = opt.total_time_s < g.best[: top + 1]
            g.best[: top + 1][better] = opt.total_time_s
            g.arg[: top + 1][better] = pos
        out.append(list(by_key.values()))
    return out


def _push(target: np.ndarray, cand: np.ndarray, rows: slice, n: int, cap: int) -> None:
    """target[r − k, min(b + n, B)] ← min(·, cand[r − k, b]) for the target rows ``rows``."""
    direct = cap - n + 1  # b < direct maps to b + n ≤ B
    if direct > 0:
        view = target[rows, n:]
        np.minimum(view, cand[rows, :direct], out=view)
    if direct <= cap:
        tail = cand[rows, max(direct, 0) :].min(axis=1)
        col = target[rows, cap]
        np.minimum(col, tail, out=col)


def _run(instance: PipelineInstance, prep: _Prep, tau: float, deadline: Deadline) -> tuple[float, list[int] | None, int]:
    """One DP at bottleneck τ: (D_τ, the option indices front to back, finite cells)."""
    L, B = instance.layers, prep.cap
    link = np.where(prep.link <= tau, prep.link, INF)
    groups = _groups(instance, prep, tau)
    index = {u: k for k, u in enumerate(prep.usage)}
    tables: dict[int, np.ndarray] = {}
    n_classes = link.shape[1]

    def table(u: tuple[int, ...]) -> np.ndarray:
        k = index[u]
        if k not in tables:
            tables[k] = np.full((n_classes, L + 1, B + 1), INF)
        return tables[k]

    zero = tuple(0 for _ in prep.kinds)
    for K, gs in enumerate(groups):  # the last block: no link behind it, b = 0, source row L
        nxt = tuple(c + (j == K) for j, c in enumerate(zero))
        for g in gs:
            ok = ("whole", "any") if g.layers == L else ("last", "any")
            if g.layers <= L and g.role in ok and g.best[0] < INF:
                t = table(nxt)[prep.kind_class[K], L - g.layers]
                col = min(g.stages, B)
                t[col] = min(t[col], g.best[0])
    for u in prep.usage:
        if sum(u) == 0 or index[u] not in tables:
            continue
        if deadline.expired():
            raise _Timeout
        here = tables[index[u]]
        for K, gs in enumerate(groups):
            if u[K] + 1 >= prep.radix[K] or not gs:
                continue
            front = (here + link[K][:, None, None]).min(axis=0)  # G[r, b] = min_κ F + c(K, κ)
            if not np.isfinite(front).any():
                continue
            target = table(tuple(c + (j == K) for j, c in enumerate(u)))[prep.kind_class[K]]
            for g in gs:
                k = g.layers
                if k > L:
                    continue
                first = g.role in ("first", "any")
                middle = g.role in ("middle", "any")
                if not (first or middle):
                    continue
                cand = front[k:, :] + g.best[None, :]
                rows = slice(0 if first else 1, L + 1 - k if middle else 1)
                _push(target, cand, rows, g.stages, B)
    cells = sum(int(np.isfinite(t).sum()) for t in tables.values())
    best, where = INF, None
    for k, t in tables.items():
        row = t[:, 0, :]
        if row.size and row.min() < best:
            best = float(row.min())
            c, b = np.unravel_index(int(row.argmin()), row.shape)
            where = (prep.usage[k], int(c), 0, int(b))
    if where is None:
        return INF, None, cells
    return best, _rebuild(instance, prep, groups, link, tables, index, where), cells


def _rebuild(instance, prep, groups, link, tables, index, state) -> list[int]:
    """Walk from the front block to the back, finding a transition that gives each value."""
    L, B = instance.layers, prep.cap
    pools = [list(m) for m in prep.kinds]
    chosen: list[int] = []
    u, cls, r, b = state
    value = tables[index[u]][cls, r, b]
    while True:
        step = None
        for K, gs in enumerate(groups):
            if u[K] == 0 or prep.kind_class[K] != cls:
                continue
            prev = tuple(c - (j == K) for j, c in enumerate(u))
            for g in gs:
                src = r + g.layers
                if src > L:
                    continue
                olds = [b - g.stages] if b < B else range(max(0, B - g.stages), B + 1)
                for old in olds:
                    if old < 0 or g.best[old] == INF:
                        continue
                    if sum(prev) == 0:
                        ok = ("whole", "any") if r == 0 else ("last", "any")
                        if src == L and old == 0 and g.role in ok and g.best[0] == value:
                            step = (K, g, old, None, 0.0)
                    else:
                        ok = ("first", "any") if r == 0 else ("middle", "any")
                        t = tables.get(index[prev])
                        if g.role in ok and t is not None:
                            for c2 in range(link.shape[1]):
                                if (t[c2, src, old] + link[K, c2]) + g.best[old] == value:
                                    step = (K, g, old, c2, t[c2, src, old])
                                    break
                    if step:
                        break
                if step:
                    break
            if step:
                break
        if step is None:
            raise SolverBug("pipeline dp: no transition reproduces a table value")
        K, g, old, c2, before = step
        island = pools[K].pop(0)
        chosen.append(prep.options[island][int(g.arg[old])])
        if c2 is None:
            return chosen
        u, cls, r, b, value = tuple(c - (j == K) for j, c in enumerate(u)), c2, r + g.layers, old, before


def solve_dp(instance: PipelineInstance, *, time_limit: float | None = None) -> Result:
    """Solve by bottleneck enumeration around the DP above.

    Returns
    -------
    Result
        OPTIMAL, INFEASIBLE (with the reason), FEASIBLE with a bound when the time limit
        stops the scan after a plan was found, TIME_LIMIT before one, DECLINED when the DP
        table would exceed ``MAX_DP_CELLS``. ``stats``: thresholds_tried, thresholds,
        states_memoized (finite table cells over all runs), options_skipped (fit no
        position in memory), kinds, usage_states, link_classes, behind_cap.
    """
    deadline = Deadline(time_limit)
    reason = why_infeasible(instance)
    if reason is not None:
        return no_solution(problem="pipeline", method="dp", status=Status.INFEASIBLE, deadline=deadline, reason=reason)
    prep = _prepare(instance)
    cands = bottleneck_candidates(instance)
    stats = {
        "thresholds_tried": 0, "thresholds": len(cands), "states_memoized": 0, "options_skipped": prep.skipped,
        "kinds": len(prep.kinds), "usage_states": prep.usage_count, "link_classes": int(prep.link.shape[1]), "behind_cap": prep.cap,
    }
    if prep.cells * (instance.layers + 1) > MAX_DP_CELLS:
        return no_solution(
            problem="pipeline", method="dp", status=Status.DECLINED, deadline=deadline, stats=stats,
            reason=f"the DP table would hold {prep.cells * (instance.layers + 1):.3g} cells, above {MAX_DP_CELLS:.3g}: "
            f"{len(prep.kinds)} distinct island kinds are too many for the bitmask DP; use milp or cpsat",
        )
    M = instance.microbatches
    best_t, best_plan, sum_min = math.inf, None, math.inf

    def attempt(tau: float) -> float:
        nonlocal best_t, best_plan
        value, plan, cells = _run(instance, prep, tau, deadline)
        stats["thresholds_tried"] += 1
        stats["states_memoized"] += cells
        if plan is not None:
            t = evaluate(instance, _bare(instance, plan)).objective
            if t < best_t:
                best_t, best_plan = t, plan
        return value

    lo = 0
    try:
        sum_min = attempt(math.inf)  # D_∞: a lower bound on Σt + Σc of every pipeline
        if sum_min == INF:
            return no_solution(
                problem="pipeline", method="dp", status=Status.INFEASIBLE, deadline=deadline, stats=stats,
                reason=GENERIC_INFEASIBLE.format(layers=instance.layers),
            )
        # feasibility is monotone in τ: binary-search the smallest feasible threshold
        hi = len(cands) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if attempt(cands[mid]) < INF:
                hi = mid
            else:
                lo = mid + 1
        while lo < len(cands) and (M - 1) * cands[lo] + sum_min < best_t:
            attempt(cands[lo])
            lo += 1
    except _Timeout:
        if best_plan is None:
            return no_solution(problem="pipeline", method="dp", status=Status.TIME_LIMIT, deadline=deadline, stats=stats,
                               reason="time limit reached before the DP found a pipeline")
        bound = (M - 1) * cands[lo] + sum_min if sum_min < INF else None
        return _conclude(instance, best_plan, deadline, False, bound, stats)
    return _conclude(instance, best_plan, deadline, True, None, stats)


def _bare(instance: PipelineInstance, plan: list[int]) -> PipelineSolution:
    return PipelineSolution(blocks_from_choices(instance, plan))


def _conclude(instance, plan, deadline, optimal, bound, stats) -> Result:
    return conclude(
        problem="pipeline", method="dp", instance=instance, solution=build_solution(instance, blocks_from_choices(instance, plan)),
        evaluate=evaluate, deadline=deadline, proven_optimal=optimal, bound=bound, stats=stats,
    )
