"""A combinatorial lower bound for the composition: covering layers with the islands' options.

R_τ(r) = the least Σ_o T_o over choices of options, at most n_K of them on islands of kind K
(one per island), with every stage ≤ τ and slice lengths adding up to exactly r. It drops
memory, roles, links and the order of the blocks, so every pipeline whose blocks cover r
layers under τ costs at least R_τ(r): the blocks in front of a DP state are such a choice,
and so is a whole pipeline (r = L). Hence

* D_τ ≥ R_τ(L), and T* ≥ min_τ max(R_τ(L), ·) + (M − 1)·τ over the thresholds still open
  (the bound ``dp`` reports when its search stops early);
* a DP state of cost F at first covered layer r completes to at least F + R_τ(r) (its
  pruning test).

It is a knapsack over kinds: per kind, n_K rounds of a min-plus convolution over the layers,
O(Σ_K n_K · L²) per τ. See ``formulations/pipeline.md``, "Bounds".
"""

from __future__ import annotations

import numpy as np

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

def cover_bound(instance: PipelineInstance, kinds: list[list[int]], options: list[list[int]], tau: float) -> np.ndarray:
    """R_τ(r) for r = 0..L (``inf`` where no choice covers exactly r layers), lowered by ``ROUNDING_MARGIN``.

    Parameters
    ----------
    kinds
        The islands of each kind (interchangeable islands), as ``dp_table._prepare`` groups them.
    options
        Per island, its usable options.
    tau
        The bottleneck: only options whose every stage takes at most ``tau`` count.

    Examples
    --------
    >>> inst = example_instance()
    >>> [round(float(x), 6) for x in cover_bound(inst, [[0, 1]], [[0, 1], [2, 3]], 1.0)]
    [0.0, 0.3, 0.6, 0.9]
    """
    L = instance.layers
    reach = np.full(L + 1, np.inf)
    reach[0] = 0.0
    for members in kinds:
        best = _cheapest(instance, options[members[0]], tau, L)
        ks = np.flatnonzero(np.isfinite(best))
        for _ in members:
            # reach'[r] = min(reach[r], min_k reach[r − k] + best[k]): the island may stay unused
            nxt = reach.copy()
            for k in ks:
                np.minimum(nxt[k:], reach[: L + 1 - k] + best[k], out=nxt[k:])
            reach = nxt
    return reach * (1.0 - ROUNDING_MARGIN)


def _cheapest(instance: PipelineInstance, options: list[int], tau: float, layers: int) -> np.ndarray:
    """best[k] = the least Σ t of an option (of one island) covering k layers with every stage ≤ τ."""
    best = np.full(layers + 1, np.inf)
    for o in options:
        opt = instance.options[o]
        if opt.max_time_s <= tau and opt.total_time_s < best[opt.layers]:
            best[opt.layers] = opt.total_time_s
    return best


def unused_cover_bound(instance: PipelineInstance, kinds: list[list[int]], options: list[list[int]], tau: float,
                       usage: list[tuple[int, ...]]) -> np.ndarray:
    """H[x, r]: R_τ(r) restricted to the islands a DP state ``usage[x]`` has not used yet.

    The blocks in front of a state with usage u lie on the n_K − u_K islands of each kind it
    has left, so this is the same knapsack over fewer islands: at least as strong as
    :func:`cover_bound`, and still a lower bound on the cost of the blocks still to come.
    Computed for every vector of free islands at once, one kind after the other
    (O(Π_K (n_K + 1) · L²) per τ), then read off at n − u.

    Examples
    --------
    >>> h = unused_cover_bound(inst := example_instance(),
    ...                        [[0, 1]], [[0, 1], [2, 3]], 1.0, [(0,), (1,), (2,)])
    >>> [[round(float(x), 6) for x in row] for row in h]
    [[0.0, 0.3, 0.6, 0.9], [0.0, 0.3, 0.6, inf], [0.0, inf, inf, inf]]
    """
    L = instance.layers
    q = np.full((1, L + 1), np.inf)  # q[v, r] over the kinds processed so far (mixed radix, last kind fastest)
    q[0, 0] = 0.0
    for members in kinds:
        best = _cheapest(instance, options[members[0]], tau, L)
        ks = np.flatnonzero(np.isfinite(best))
        layers = [q]
        for _ in members:  # q with one more free island of this kind: a min-plus step over k (or unused)
            prev = layers[-1]
            nxt = prev.copy()
            for k in ks:
                np.minimum(nxt[:, k:], prev[:, : L + 1 - k] + best[k], out=nxt[:, k:])
            layers.append(nxt)
        q = np.stack(layers, axis=1).reshape(-1, L + 1)
    radix = [len(m) + 1 for m in kinds]
    strides = np.cumprod([1] + radix[::-1][:-1])[::-1]
    free = np.array([[len(m) - c for m, c in zip(kinds, u)] for u in usage], dtype=np.int64).reshape(len(usage), len(kinds))
    return q[free @ strides] * (1.0 - ROUNDING_MARGIN)


def unused_cover_work(instance: PipelineInstance, kinds: list[list[int]], options: list[list[int]], tau: float) -> int:
    """Element operations :func:`unused_cover_bound` would take at τ (to decide whether to use it).

    Kind K runs n_K min-plus steps, one per slice length its options cover under τ, each over
    the vectors of the kinds before it times the layers: Σ_K n_K · |k_K| · Π_{K' < K} (n_K' + 1) · (L + 1).

    Examples
    --------
    >>> unused_cover_work(example_instance(), [[0, 1]], [[0, 1], [2, 3]], 1.0)
    16
    """
    L = instance.layers
    work, vectors = 0, 1
    for members in kinds:
        lengths = {instance.options[o].layers for o in options[members[0]] if instance.options[o].max_time_s <= tau}
        work += len(members) * len(lengths) * vectors * (L + 1)
        vectors *= len(members) + 1
    return work
