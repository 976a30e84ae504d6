"""The table DP of the pipeline composition: D_τ, the least Σ t + Σ c under a bottleneck τ.

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
for each b) and is a shifted elementwise minimum over the rows that hold a finite value.

A run may be given a *budget*: it then drops every state whose cost plus a lower bound on
the blocks still to be added in front (``remaining[r]``, see ``bound.py``) reaches the
budget, and answers D_τ exactly when D_τ < budget, INF otherwise. The search over τ that
calls it is in ``dp.py``; the proofs are in ``formulations/pipeline.md``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from hetopt.errors import SolverBug
from hetopt.family import Deadline
from hetopt.pipeline.options import max_stages, usable_options
from hetopt.pipeline.problem import PipelineInstance

INF = np.inf

#: Most DP cells (8 bytes each) one run may hold at once: tables are made only for usage
#: vectors a pipeline reaches and dropped when the budget empties them, and a run stops
#: (``_TooLarge``) when they would exceed this. 2e8 cells = 1.6 GB, a third of what a
#: 2-core benchmark box can spare.
MAX_DP_CELLS = 200_000_000
#: Most usage vectors Π (n_K + 1) dp lists: beyond it listing them alone would not finish
#: (64 distinct islands have 2^64). 10^6 vectors of a tuple each are ~100 MB.
MAX_USAGE_STATES = 1_000_000


class _Timeout(Exception):
    """The deadline passed inside one DP run."""


class _TooLarge(Exception):
    """One DP run would hold more than its ``max_cells`` (``MAX_DP_CELLS``) cells."""


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

    @property
    def listed(self) -> bool:
        """The usage vectors were listed (their number was within the limit :func:`_prepare` was given)."""
        return bool(self.usage)  # the vector of no island used is always among them


def _prepare(instance: PipelineInstance, max_usage_states: int = MAX_USAGE_STATES) -> _Prep:
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
    fits = count <= max_usage_states
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
        out.append(_undominated(list(by_key.values())))
    return out


def _undominated(groups: list[_Group]) -> list[_Group]:
    """Drop, for each b, a group's entry when a group of the same slice and role with fewer
    stages is no dearer there; drop groups left with no entry.

    Exact: that block leads from (r, b) to the same r − k with fewer stages behind
    (min(b + n′, B) ≤ min(b + n, B)) at no more cost, and fewer stages behind only allows
    more blocks in front (memory tightens with b), so every completion stays open to it.
    About half the groups of scale-16x128 go, and with them half the transitions.
    """
    kept: list[_Group] = []
    by_slice: dict[tuple, list[_Group]] = {}
    for g in groups:
        by_slice.setdefault((g.layers, g.role), []).append(g)
    for same in by_slice.values():
        same.sort(key=lambda g: g.stages)
        for at, g in enumerate(same):
            for fewer in same[:at]:
                g.best[fewer.best <= g.best] = INF
            if np.isfinite(g.best).any():
                kept.append(g)
    return kept


def _push(target: np.ndarray, cand: np.ndarray, rows: slice, n: int, cap: int, b0: int) -> None:
    """target[rows, min(b + n, B)] ← min(·, cand[:, b − b0]) for b = b0, b0 + 1, …

    ``cand`` holds exactly the rows ``rows`` and the columns b0.. of the stages-behind axis.
    """
    w = cand.shape[1]
    direct = min(cap - n + 1, b0 + w)  # b < direct maps to b + n ≤ B
    if direct > b0:
        view = target[rows, b0 + n : direct + n]
        np.minimum(view, cand[:, : direct - b0], out=view)
    if direct < b0 + w:
        # every b ≥ max(direct, b0) lands in the capped column; when even b0 + n > B
        # (direct < b0) that is all of them, not the last -(direct - b0) columns
        tail = cand[:, max(direct - b0, 0) :].min(axis=1)
        col = target[rows, cap]
        np.minimum(col, tail, out=col)


@dataclass
class _Box:
    """A finished table kept as the box of its finite cells: rows r0.., columns b0.. ."""

    r0: int
    b0: int
    values: np.ndarray

    @classmethod
    def of(cls, dense: np.ndarray) -> "_Box":
        fin = np.isfinite(dense)
        rows, cols = np.flatnonzero(fin.any(axis=1)), np.flatnonzero(fin.any(axis=0))
        if rows.size == 0:
            return cls(0, 0, np.zeros((0, 0)))
        r0, r1, b0, b1 = int(rows[0]), int(rows[-1]), int(cols[0]), int(cols[-1])
        return cls(r0, b0, dense[r0 : r1 + 1, b0 : b1 + 1].copy())

    @property
    def cells(self) -> int:
        return int(self.values.size)

    def finite(self) -> int:
        return int(np.isfinite(self.values).sum())

    def row0(self) -> np.ndarray:
        return self.values[0] if self.r0 == 0 and self.values.size else np.zeros(0)

    def at(self, r: int, b: int) -> float:
        i, j = r - self.r0, b - self.b0
        if 0 <= i < self.values.shape[0] and 0 <= j < self.values.shape[1]:
            return float(self.values[i, j])
        return INF


@dataclass
class RunResult:
    """One DP run: D_τ (INF when none below the budget), its plan, and counters."""

    value: float
    plan: list[int] | None
    cells: int  # finite cells left in the tables
    pruned: int  # finite cells the budget dropped
    cut: bool  # the budget dropped something: INF then means D_τ ≥ budget, not D_τ = ∞
    tables: int  # (usage, class) tables made


@dataclass
class _Tables:
    """One run's state tables by (usage index, link class), with the counters it reports."""

    shape: tuple[int, int]  # (L + 1, B + 1): rows r and stages-behind columns b
    max_cells: int = MAX_DP_CELLS  # most cells held at once (``_TooLarge`` beyond)
    tables: dict = field(default_factory=dict)  # dense while being filled, then a _Box
    boxed: int = 0  # cells held: dense tables still being filled plus the boxes of finished ones
    made: int = 0
    pruned: int = 0
    cut: bool = False

    @property
    def per_table(self) -> int:
        """Cells of one dense table."""
        return self.shape[0] * self.shape[1]

    def table(self, x: int, cls: int) -> np.ndarray:
        """The dense table of (x, cls), made on first use; ``_TooLarge`` past ``max_cells``."""
        key = (x, cls)
        if key not in self.tables:
            self.boxed += self.per_table
            if self.boxed > self.max_cells:
                raise _TooLarge
            self.tables[key] = np.full(self.shape, INF)
            self.made += 1
        return self.tables[key]

    def box(self, keys: list[tuple[int, int]]) -> None:
        """Keep only the finite box of each dense table of ``keys`` (nothing reaches them any more)."""
        for key in keys:
            if key in self.tables and isinstance(self.tables[key], np.ndarray):
                box = _Box.of(self.tables[key])
                self.boxed += box.cells - self.tables[key].size
                self.tables[key] = box


def _shapes(groups: list[list[_Group]]) -> list[tuple]:
    """Per kind: the groups' slice lengths, least cost over b, and roles (first-capable, middle-capable)."""
    return [
        (np.array([g.layers for g in gs], dtype=np.int64), np.array([g.best.min() for g in gs]) if gs else np.zeros(0),
         (np.array([g.role in ("first", "any") for g in gs], dtype=bool), np.array([g.role in ("middle", "any") for g in gs], dtype=bool)))
        for gs in groups
    ]


def _last_blocks(prep: _Prep, groups: list[list[_Group]], L: int):
    """Each group that may be the last block, as ``(K, usage, group)``: its kind K, the usage
    vector of that one island of kind K, the group (its slice fits, its role allows the end of
    the model, or the whole model when it holds all L layers, and it fits with no stage behind)."""
    zero = tuple(0 for _ in prep.kinds)
    for K, gs in enumerate(groups):
        nxt = tuple(c + (j == K) for j, c in enumerate(zero))
        for g in gs:
            ok = ("whole", "any") if g.layers == L else ("last", "any")
            if g.layers <= L and g.role in ok and g.best[0] < INF:
                yield K, nxt, g


def _seed(state: _Tables, instance: PipelineInstance, prep: _Prep, groups: list[list[_Group]], index: dict) -> None:
    """Enter each possible last block: no link behind it, b = 0, source row L."""
    L, B = instance.layers, prep.cap
    for K, nxt, g in _last_blocks(prep, groups, L):
        t = state.table(index[nxt], prep.kind_class[K])[L - g.layers]
        col = min(g.stages, B)
        t[col] = min(t[col], g.best[0])


def _prune(state: _Tables, x: int, keys: list, remaining: np.ndarray | None, budget: float) -> list[int]:
    """Drop the states of usage x over the budget (when ``remaining`` is given) and the emptied
    tables; return the link classes with states before layer L's front (rows ≥ 1)."""
    live = []
    for key in keys:
        here = state.tables[key]
        if remaining is not None:
            drop = (here + remaining[x if remaining.shape[0] > 1 else 0][:, None]) >= budget
            drop &= np.isfinite(here)
            n_drop = int(drop.sum())
            if n_drop:
                state.cut = True
                state.pruned += n_drop
                here[drop] = INF
        if np.isfinite(here[1:]).any():
            live.append(key[1])
        elif not np.isfinite(here[0]).any():
            del state.tables[key]  # nothing of it lies on a pipeline under the budget
            state.boxed -= state.per_table
    return live


def _extend(state: _Tables, prep: _Prep, groups: list[list[_Group]], shapes: list[tuple], link: np.ndarray,
            index: dict, u: tuple, live: list[int], remaining: np.ndarray | None, budget: float) -> None:
    """Make every transition from usage u's live tables: one more block in front, of each kind."""
    x, B = index[u], prep.cap
    L = state.shape[0] - 1
    # the live rows and stages-behind columns of this usage vector, over its classes
    mask = np.zeros(state.shape, dtype=bool)
    for cls in live:
        mask |= np.isfinite(state.tables[(x, cls)])
    mask[0] = False
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    rlo, rhi, blo, bhi = int(rows[0]), int(rows[-1]), int(cols[0]), int(cols[-1])
    stack = np.stack([state.tables[(x, cls)][rlo : rhi + 1, blo : bhi + 1] for cls in live])
    src = np.arange(rlo, rhi + 1)
    for K, gs in enumerate(groups):
        if u[K] + 1 >= prep.radix[K] or not gs:
            continue
        # G[r, b] = min_κ F[κ, r, b] + c(K, κ), over the live rows and columns only
        front = (stack + link[K, live][:, None, None]).min(axis=0)
        nxt = tuple(c + (j == K) for j, c in enumerate(u))
        ks, least, roles = shapes[K]
        # which (group, source row) pairs can lead under the budget: a lower bound on the
        # value they give, min_b G[r, b] + min_b best[b], plus what the target still needs
        trow = src[None, :] - ks[:, None]
        ahead = remaining[index[nxt] if remaining.shape[0] > 1 else 0][np.clip(trow, 0, L)] if remaining is not None else 0.0
        score = front.min(axis=1)[None, :] + least[:, None] + ahead
        alive = (trow >= 0) & np.where(trow == 0, roles[0][:, None], roles[1][:, None])  # row 0: first; ≥ 1: middle
        reach = alive & (score < INF)
        alive &= score < budget
        if not state.cut and (reach != alive).any():
            state.cut = True
        chosen = np.flatnonzero(alive.any(axis=1))
        if chosen.size == 0:
            continue
        target = state.table(index[nxt], prep.kind_class[K])
        sub = alive[chosen]
        # per chosen group, its first and last alive source row (offsets from rlo)
        first_at = sub.argmax(axis=1)
        last_at = sub.shape[1] - 1 - sub[:, ::-1].argmax(axis=1)
        for g_at, s_lo, s_hi in zip(chosen.tolist(), first_at.tolist(), last_at.tolist()):
            g = gs[g_at]
            t_lo = rlo + s_lo - g.layers
            cand = front[s_lo : s_hi + 1] + g.best[None, blo : bhi + 1]
            _push(target, cand, slice(t_lo, t_lo + s_hi - s_lo + 1), g.stages, B, blo)


def _run(instance: PipelineInstance, prep: _Prep, tau: float, deadline: Deadline, *,
         budget: float = INF, remaining: np.ndarray | None = None, max_cells: int = MAX_DP_CELLS) -> RunResult:
    """One DP at bottleneck τ: D_τ and the option indices front to back.

    The states of one usage vector u and link class κ are a table over (r, b), made when a
    transition first reaches it. With a ``budget``, a state (u, κ, r, b) of cost F is
    dropped when F + remaining[x, r] ≥ budget (``remaining[x, r]`` ≤ the least cost of any
    blocks covering layers 0..r−1 on the islands ``prep.usage[x]`` leaves free), and the
    answer is D_τ when D_τ < budget, INF otherwise: a dropped state lies on no pipeline
    cheaper than the budget, so the states of every such pipeline survive. Transitions that
    could only produce dropped states are not made. ``_TooLarge`` when the tables would hold
    more than ``max_cells`` cells at once.
    """
    L, B = instance.layers, prep.cap
    link = np.where(prep.link <= tau, prep.link, INF)
    groups = _groups(instance, prep, tau)
    index = {u: k for k, u in enumerate(prep.usage)}
    state = _Tables((L + 1, B + 1), max_cells)
    n_classes = link.shape[1]
    prune = budget < INF and remaining is not None
    if not prune:
        budget = INF
    shapes = _shapes(groups)
    _seed(state, instance, prep, groups, index)
    for u in prep.usage:
        x = index[u]
        keys = [(x, cls) for cls in range(n_classes) if (x, cls) in state.tables]
        if sum(u) == 0 or not keys:
            continue
        if deadline.expired():
            raise _Timeout
        live = _prune(state, x, keys, remaining if prune else None, budget)
        # without live rows only complete pipelines (or nothing) are left: nothing goes in front of layer 0
        if live:
            _extend(state, prep, groups, shapes, link, index, u, live, remaining if prune else None, budget)
        state.box(keys)
    return _answer(instance, prep, groups, link, state, index, budget)


def _answer(instance: PipelineInstance, prep: _Prep, groups: list[list[_Group]], link: np.ndarray, state: _Tables,
            index: dict, budget: float) -> RunResult:
    """The least complete pipeline in the finished tables and its plan, or INF when none is under the budget."""
    tables = state.tables
    cells = sum(t.finite() for t in tables.values())
    best, where = INF, None
    for (x, cls), t in tables.items():
        r0 = t.row0()
        if r0.size and r0.min() < best:
            best = float(r0.min())
            where = (prep.usage[x], cls, 0, t.b0 + int(r0.argmin()))
    if where is None or best >= budget:
        return RunResult(INF, None, cells, state.pruned, state.cut or where is not None, state.made)
    return RunResult(best, _rebuild(instance, prep, groups, link, tables, index, where), cells, state.pruned, state.cut,
                     state.made)


def _rebuild(instance, prep, groups, link, tables, index, state) -> list[int]:
    """Walk from the front block to the back, finding a transition that gives each value."""
    L, B = instance.layers, prep.cap
    pools = [list(m) for m in prep.kinds]
    chosen: list[int] = []
    u, cls, r, b = state
    value = tables[(index[u], cls)].at(r, b)
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
                        if g.role in ok:
                            for c2 in range(link.shape[1]):
                                t = tables.get((index[prev], c2))
                                before = INF if t is None else t.at(src, old)
                                if (before + link[K, c2]) + g.best[old] == value:
                                    step = (K, g, old, c2, before)
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
