"""Combinatorial lower bounds for the composition: covering layers with the islands' options.

Both are knapsacks over the islands (at most n_K options on islands of kind K, one per
island), with every stage and every link ≤ τ and slice lengths adding up to exactly r, that
keep the roles (one front block, one back block) and the least link into each block that has
a block in front of it, and drop memory and the order of the blocks:

* R_τ (:func:`pipeline_bound`), over whole pipelines: D_τ ≥ R_τ, and
  T* ≥ min_τ max(R_τ, ·) + (M − 1)·τ over the thresholds still open (the bound ``dp``
  reports when its search stops early);
* F_τ(r) (:func:`front_bound`, :func:`unused_front_bound` on the islands a state left free),
  over the blocks in front of a DP state at first covered layer r: a state of cost G
  completes to at least G + F_τ(r) (the DP's pruning test).

Per kind, n_K rounds of a min-plus convolution over the layers, O(Σ_K n_K · L²) per τ. See
``formulations/pipeline.md``, "Budgets and the cover bounds".
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence

import numpy as np

from hetopt.family import Deadline
from hetopt.pipeline.dp_table import _prepare
from hetopt.pipeline.options import bottleneck_candidates
from hetopt.pipeline.problem import PipelineInstance

#: Relative amount by which the bound is lowered before it is used: it adds the same times
#: as the DP and ``evaluate`` in another order, so it may round up by a few ulps (~1e-16
#: relative per addition, at most a few thousand additions); 1e-12 covers that with room.
ROUNDING_MARGIN = 1e-12



def example_instance() -> PipelineInstance:
    """The instance of this module's examples: 3 layers, M = 4, two islands of one GPU (8 GiB),
    each with a 1-layer and a 2-layer option of one stage (0.1 s forward, 0.2 s backward per layer)."""
    from hetopt.pipeline.problem import GIB, PipelineIsland, PipelineOption, StagePlan

    islands = tuple(PipelineIsland(f"i{k}", 1, 8 * GIB) for k in range(2))
    options = tuple(PipelineOption(k, ell, (StagePlan(ell, 0.1 * ell, 0.2 * ell, GIB, GIB),))
                    for k in range(2) for ell in (1, 2))
    return PipelineInstance("x", 3, 4, islands, options, ((0.0, 0.0), (0.0, 0.0)))

def _link_in(instance: PipelineInstance, kinds: list[list[int]], tau: float) -> list[float]:
    """Per kind: the least link c(i, j) ≤ τ from its islands to another island with usable options
    (``inf`` when there is none): every block with a block in front of it pays at least this."""
    hosts = [i for members in kinds for i in members]
    out = []
    for members in kinds:
        i = members[0]
        near = [instance.link_s[i][j] for j in hosts if j != i and instance.link_s[i][j] <= tau]
        out.append(min(near, default=np.inf))
    return out


def _cheapest(instance: PipelineInstance, options: list[int], tau: float, layers: int) -> dict[str, np.ndarray]:
    """Per position (``front``, ``middle``, ``back``, ``whole``): best[k] = the least Σ t of an
    option of one island covering k layers with every stage ≤ τ whose role allows that position."""
    fits = {"front": ("first", "any"), "middle": ("middle", "any"), "back": ("last", "any"), "whole": ("whole", "any")}
    best = {pos: np.full(layers + 1, np.inf) for pos in fits}
    for o in options:
        opt = instance.options[o]
        if opt.max_time_s > tau:
            continue
        for pos, roles in fits.items():
            if opt.role in roles and opt.total_time_s < best[pos][opt.layers]:
                best[pos][opt.layers] = opt.total_time_s
    return best


def _step(into: np.ndarray, source: np.ndarray, cost: np.ndarray) -> None:
    """into[..., r] = min(into[..., r], min_k source[..., r − k] + cost[k]): one more block (min-plus)."""
    L = into.shape[-1] - 1
    for k in np.flatnonzero(np.isfinite(cost)):
        np.minimum(into[..., k:], source[..., : L + 1 - k] + cost[k], out=into[..., k:])


def pipeline_bound(instance: PipelineInstance, kinds: list[list[int]], options: list[list[int]], tau: float) -> float:
    """R_τ: a lower bound on Σ t + Σ c of every pipeline with bottleneck ≤ τ (``inf``: none
    covers the model), lowered by ``ROUNDING_MARGIN``.

    A knapsack over the islands, each unused or holding one block as the front (a ``first``
    option), a middle or the back (``last``) block, or alone (``whole``, all L layers); the
    middle and back blocks pay the least link into their island (:func:`_link_in`), since each
    has a block in front of it. Memory and the order of the blocks are dropped.

    Parameters
    ----------
    kinds
        The islands of each kind (interchangeable islands), as ``dp_table._prepare`` groups them.
    options
        Per island, its usable options.
    tau
        The bottleneck: only options whose every stage takes at most ``tau``, and links of at
        most ``tau``, count.

    Examples
    --------
    >>> inst = example_instance()
    >>> round(pipeline_bound(inst, [[0, 1]], [[0, 1], [2, 3]], 1.0), 6)  # two blocks: 1 + 2 layers
    0.9
    """
    L = instance.layers
    reach = np.full((2, 2, L + 1), np.inf)  # [front placed, back placed, layers covered]
    reach[0, 0, 0] = 0.0
    alone = np.inf
    for members, link in zip(kinds, _link_in(instance, kinds, tau)):
        best = _cheapest(instance, options[members[0]], tau, L)
        alone = min(alone, best["whole"][L])
        middle, back = best["middle"] + link, best["back"] + link
        for _ in members:
            nxt = reach.copy()
            _step(nxt, reach, middle)
            _step(nxt[1], reach[0], best["front"])
            _step(nxt[:, 1], reach[:, 0], back)
            reach = nxt
    return float(min(reach[1, 1, L], alone)) * (1.0 - ROUNDING_MARGIN)


def front_bound(instance: PipelineInstance, kinds: list[list[int]], options: list[list[int]], tau: float) -> np.ndarray:
    """F_τ(r) for r = 0..L: a lower bound on the cost of the blocks in front of a DP state
    whose first covered layer is r, on any islands (``inf`` where none covers exactly r layers),
    lowered by ``ROUNDING_MARGIN``.

    Those blocks are one front block (a ``first`` option) and middle ones, and each pays its
    option's Σ t and the link to the block behind it (at least :func:`_link_in`); F_τ(0) = 0.

    Examples
    --------
    >>> inst = example_instance()
    >>> [round(float(x), 6) for x in front_bound(inst, [[0, 1]], [[0, 1], [2, 3]], 1.0)]
    [0.0, 0.3, 0.6, 0.9]
    """
    return unused_front_bound(instance, kinds, options, tau, [tuple(0 for _ in kinds)])[0]


def unused_front_bound(instance: PipelineInstance, kinds: list[list[int]], options: list[list[int]], tau: float,
                       usage: Sequence[tuple[int, ...]] | np.ndarray) -> np.ndarray:
    """H[x, r]: F_τ(r) restricted to the islands a DP state ``usage[x]`` has not used yet.

    The blocks in front of a state with usage u lie on the n_K − u_K islands of each kind it
    has left, so this is the same knapsack over fewer islands: at least as strong as
    :func:`front_bound`, and still a lower bound on the cost of the blocks still to come.
    Computed for every vector of free islands at once, one kind after the other
    (O(Π_K (n_K + 1) · L²) per τ), then read off at n − u.

    Examples
    --------
    >>> h = unused_front_bound(inst := example_instance(),
    ...                        [[0, 1]], [[0, 1], [2, 3]], 1.0, [(0,), (1,), (2,)])
    >>> [[round(float(x), 6) for x in row] for row in h]
    [[0.0, 0.3, 0.6, 0.9], [0.0, 0.3, 0.6, inf], [0.0, inf, inf, inf]]
    """
    L = instance.layers
    # q[v, f, r] over the kinds processed so far (mixed radix, last kind fastest); f: front block placed
    q = np.full((1, 2, L + 1), np.inf)
    q[0, 0, 0] = 0.0
    for members, link in zip(kinds, _link_in(instance, kinds, tau)):
        best = _cheapest(instance, options[members[0]], tau, L)
        front, middle = best["front"] + link, best["middle"] + link
        layers = [q]
        for _ in members:  # q with one more free island of this kind: unused, the front or a middle block
            prev = layers[-1]
            nxt = prev.copy()
            _step(nxt, prev, middle)
            _step(nxt[:, 1], prev[:, 0], front)
            layers.append(nxt)
        q = np.stack(layers, axis=1).reshape(-1, 2, L + 1)
    h = q[:, 1].copy()
    h[:, 0] = 0.0  # nothing in front of a state at layer 0
    radix = [len(m) + 1 for m in kinds]
    strides = np.cumprod([1] + radix[::-1][:-1])[::-1]
    # usage as one array (the DP passes it so, once per search: a list of 262,144 tuples took 2 s per run)
    free = np.array([len(m) for m in kinds], dtype=np.int64) - np.asarray(usage, dtype=np.int64).reshape(len(usage), len(kinds))
    return h[free @ strides] * (1.0 - ROUNDING_MARGIN)


def unused_front_work(instance: PipelineInstance, kinds: list[list[int]], options: list[list[int]], tau: float) -> int:
    """Element operations :func:`unused_front_bound` would take at τ (to decide whether to use it).

    Kind K runs n_K rounds, each a min-plus step per slice length of its middle options (over
    both values of "front placed") and of its front options, over the vectors of the kinds
    before it times the layers: Σ_K n_K · (2·|k_K^middle| + |k_K^front|) · Π_{K' < K} (n_K' + 1) · (L + 1).

    Examples
    --------
    >>> unused_front_work(example_instance(), [[0, 1]], [[0, 1], [2, 3]], 1.0)
    48
    """
    L = instance.layers
    work, vectors = 0, 1
    for members in kinds:
        best = _cheapest(instance, options[members[0]], tau, L)
        steps = 2 * int(np.isfinite(best["middle"]).sum()) + int(np.isfinite(best["front"]).sum())
        work += len(members) * steps * vectors * (L + 1)
        vectors *= len(members) + 1
    return work


def least_over_thresholds(intervals: Sequence[tuple[int, int, float]], relaxed: Callable[[int], float],
                          cands: Sequence[float], microbatches: int, *, stop_at: float = math.inf,
                          splits: int = 1 << 30, deadline: Deadline | None = None) -> float:
    """A lower bound on min f(i) = max(d, R_{c_i}) + (M − 1)·c_i over the indices of ``intervals``.

    Each interval (lo, hi, d) has the bound max(d, R_{c_hi}) + (M − 1)·c_lo (R is
    non-increasing in i, c increasing); the least one is split in two, one more ``relaxed``
    value each, until the least is a single index (then it is the minimum itself), reaches
    ``stop_at``, ``splits`` were made or ``deadline`` expires. Every step keeps a valid bound.

    Examples
    --------
    >>> R = [9.0, 5.0, 3.0, 2.0, 2.0]   # R_{c_i}, non-increasing
    >>> c = [0.1, 0.2, 0.3, 0.4, 0.5]
    >>> least_over_thresholds([(0, 4, 0.0)], R.__getitem__, c, 11)   # min(10, 7, 6, 6, 7)
    6.0
    >>> least_over_thresholds([(0, 4, 0.0)], R.__getitem__, c, 11, splits=0)   # R at the top, c at the bottom
    3.0
    """
    heap = [(max(d, relaxed(hi)) + (microbatches - 1) * cands[lo], lo, hi, d) for lo, hi, d in intervals]
    heapq.heapify(heap)
    for _ in range(splits):
        if not heap or heap[0][0] >= stop_at or heap[0][1] == heap[0][2] or (deadline is not None and deadline.expired()):
            break
        _, lo, hi, d = heapq.heappop(heap)
        mid = (lo + hi) // 2
        for a, b in ((lo, mid), (mid + 1, hi)):
            heapq.heappush(heap, (max(d, relaxed(b)) + (microbatches - 1) * cands[a], a, b, d))
    return heap[0][0] if heap else math.inf


def composition_bound(instance: PipelineInstance, *, stop_at: float = math.inf, deadline: Deadline | None = None) -> float:
    """A lower bound on the closed-form T of every pipeline of ``instance``, without a DP run:
    min over the bottleneck candidates c_i of R_{c_i} + (M − 1)·c_i (:func:`pipeline_bound`,
    :func:`least_over_thresholds`); ``inf`` when no choice of options makes a pipeline.

    For any number of island kinds (it lists no usage vectors), so also where ``dp`` declines.
    With ``stop_at`` it stops refining once the bound reaches that value (a planner proving a
    micro-batch size cannot beat its best plan needs no more); a ``deadline`` that expires
    leaves a weaker bound, still valid.

    Examples
    --------
    >>> round(composition_bound(example_instance()), 6)   # the DP's optimum: 0.9 + 3 × 0.6
    2.7
    """
    prep = _prepare(instance, 0)  # kinds and options; no usage vectors
    cands = bottleneck_candidates(instance)
    if not cands:
        return math.inf
    cache: dict[int, float] = {}

    def relaxed(i: int) -> float:
        if i not in cache:
            cache[i] = pipeline_bound(instance, prep.kinds, prep.options, cands[i])
        return cache[i]

    return least_over_thresholds([(0, len(cands) - 1, 0.0)], relaxed, cands, instance.microbatches,
                                 stop_at=stop_at, deadline=deadline)
