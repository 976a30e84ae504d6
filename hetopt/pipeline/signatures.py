"""Island signatures and the bottleneck window: what the aggregated models are built from.

Islands of one *signature* (equal GPUs and memory, the same usable options up to the island,
and the same link time to every other island) are interchangeable: swapping two of them in a
plan changes no cost and breaks no rule, so the aggregated models count the islands of each
signature a plan uses instead of naming them (``formulations/pipeline.md``, "The level model").

Two valid bounds narrow the bottleneck β before any model is built:

* the *slot floor* (:func:`slot_floor`): the b-th block from the back has at least b stages
  behind it, so its option must allow b (1F1B memory). If no assignment of the islands to
  the slots b = 0, 1, … covers L layers with options of every stage ≤ θ that fit their slot,
  no plan has β ≤ θ. A maximum-weight assignment decides it; bisection over the candidate
  values gives the least θ that passes.
* the *ceiling* (:func:`bottleneck_ceiling`): a plan no worse than a known one of time U has
  (M − 1)·β ≤ U − A ≤ U − L·min_o(Σt_o / k_o).

Neither uses the DP: they are the models' own relaxations (the DP has its own bounds).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetopt.pipeline.options import usable_options
from hetopt.pipeline.problem import PipelineInstance

#: Margin on the known plan's time U when it bounds the bottleneck, relative to U: the
#: ceiling is a recomputed difference and quotient, and the known plan's own β must never be
#: cut off by a rounding (far above a double's 1e-16).
CEILING_RTOL = 1e-9


def option_key(instance: PipelineInstance, o: int) -> tuple:
    """What makes two options of different islands the same option: slice, role and stages."""
    opt = instance.options[o]
    return (opt.layers, opt.role, tuple((s.layers, s.forward_s, s.backward_s, s.static_bytes, s.activation_bytes,
                                         s.gpus) for s in opt.stages))


@dataclass(frozen=True)
class Signatures:
    """The islands grouped by signature.

    Attributes
    ----------
    kinds
        The hosting islands (those with a usable option) of each signature, ascending.
    options
        Per signature, its first island's usable options in canonical order (the options of
        every island of the signature are these, up to the island).
    link
        link[K][K'] = c(i, j) for an island i of K and another island j of K'; None for
        K = K' with a single island (no such pair).
    twin
        (island, option key) -> that island's option: the concrete option a kind's option
        becomes on another island of the kind.
    """

    kinds: tuple[tuple[int, ...], ...]
    options: tuple[tuple[int, ...], ...]
    link: tuple[tuple[float | None, ...], ...]
    twin: dict[tuple[int, tuple], int]

    @property
    def counts(self) -> tuple[int, ...]:
        """n_K, the islands of each signature."""
        return tuple(len(k) for k in self.kinds)

    @property
    def repeated(self) -> bool:
        """Whether some signature has two islands or more (the aggregation counts something)."""
        return any(len(k) > 1 for k in self.kinds)

    def kind_of_option(self) -> dict[int, int]:
        """Each signature option (an option of a kind's first island) -> its signature."""
        return {o: K for K, opts in enumerate(self.options) for o in opts}


def signatures(instance: PipelineInstance) -> Signatures:
    """Group the hosting islands into signatures.

    Two islands share a signature when they have equal GPUs and memory, the same usable
    options (by :func:`option_key`) and, for every other hosting island x, c(x, i) = c(x, i').
    Islands are added to the first group all of whose members they match, so every two
    members of a group match (and, with three or more, c(i, i') is the same for every pair).

    Examples
    --------
    >>> from hetopt import load
    >>> from hetopt.catalog import instances_dir
    >>> sig = signatures(load(instances_dir() / "pipeline" / "scale-16x128.toml"))
    >>> sig.counts
    (2, 2, 2, 2, 2, 2, 2, 2)
    """
    usable = usable_options(instance)
    own: dict[int, list[int]] = {}
    for o in usable:
        own.setdefault(instance.options[o].island, []).append(o)
    hosts = sorted(own)
    for i in hosts:
        own[i].sort(key=lambda o: option_key(instance, o))
    c = instance.link_s

    def same(i: int, j: int) -> bool:
        a, b = instance.islands[i], instance.islands[j]
        return ((a.gpus, a.memory_bytes) == (b.gpus, b.memory_bytes)
                and [option_key(instance, o) for o in own[i]] == [option_key(instance, o) for o in own[j]]
                and all(c[x][i] == c[x][j] for x in hosts if x not in (i, j)))

    kinds: list[list[int]] = []
    for i in hosts:
        for group in kinds:
            if all(same(i, j) for j in group):
                group.append(i)
                break
        else:
            kinds.append([i])
    link = []
    for a in kinds:
        row = []
        for b in kinds:
            other = [j for j in b if j != a[0]]
            row.append(c[a[0]][other[0]] if other else None)
        link.append(tuple(row))
    twin = {(i, option_key(instance, o)): o for i in hosts for o in own[i]}
    return Signatures(tuple(tuple(k) for k in kinds), tuple(tuple(own[k[0]]) for k in kinds), tuple(link), twin)


def _slot_cover(instance: PipelineInstance, sig: Signatures, theta: float) -> float:
    """The most layers an assignment of the islands to slots 0, 1, … can cover under θ."""
    from scipy.optimize import linear_sum_assignment

    copies = [K for K, members in enumerate(sig.kinds) for _ in members]
    slots = len(copies)
    best = np.zeros((len(sig.kinds), slots))  # best[K, b]: most layers of an option of K at slot b
    for K, opts in enumerate(sig.options):
        for o in opts:
            opt = instance.options[o]
            if opt.max_time_s > theta:
                continue
            limit = instance.behind_limits[o]
            top = slots if limit is None else min(limit + 1, slots)
            np.maximum(best[K, :top], opt.layers, out=best[K, :top])
    weights = best[copies]
    rows, cols = linear_sum_assignment(weights, maximize=True)
    return float(weights[rows, cols].sum())


def slot_floor(instance: PipelineInstance, sig: Signatures, values: list[float]) -> float | None:
    """The least value θ of ``values`` (sorted) at which the slot relaxation covers L layers;
    None when even the largest does not (then no plan exists).

    Every plan's bottleneck is at least this (module docstring): block b from the back has
    at least b stages behind it, islands are used once, and its option covers at most the most
    layers of an option of its signature with every stage ≤ β that allows b stages behind.

    Examples
    --------
    >>> from hetopt import load
    >>> from hetopt.catalog import instances_dir
    >>> from hetopt.pipeline.options import bottleneck_candidates
    >>> inst = load(instances_dir() / "pipeline" / "scale-16x128.toml")
    >>> round(slot_floor(inst, signatures(inst), bottleneck_candidates(inst)), 6)
    0.261434
    """
    if not values or _slot_cover(instance, sig, values[-1]) < instance.layers:
        return None
    lo, hi = 0, len(values) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if _slot_cover(instance, sig, values[mid]) >= instance.layers:
            hi = mid
        else:
            lo = mid + 1
    return values[lo]


def bottleneck_ceiling(instance: PipelineInstance, upper: float | None) -> float:
    """The largest bottleneck of a plan no worse than ``upper`` (inf without one, or M = 1).

    (M − 1)·β ≤ T − A and A ≥ L · min_o (Σt_o / k_o) (the blocks cover L layers; links add
    ≥ 0), widened by ``CEILING_RTOL``·U so that the known plan itself always stays in.

    Examples
    --------
    >>> from hetopt.pipeline.problem import PipelineIsland, PipelineOption, StagePlan
    >>> opt = PipelineOption(0, 4, (StagePlan(4, 0.25, 0.75, 0.0, 0.0),))
    >>> inst = PipelineInstance("x", 4, 3, (PipelineIsland("A", 1, 1e12),), (opt,), ((0.0,),))
    >>> bottleneck_ceiling(inst, 3.0) >= 1.0  # the plan: A = 1, β = 1, T = 1 + 2·1
    True
    """
    if upper is None or instance.microbatches <= 1:
        return float("inf")
    usable = usable_options(instance)
    least_sum = instance.layers * min(instance.options[o].total_time_s / instance.options[o].layers for o in usable)
    return (max(0.0, upper - least_sum) + CEILING_RTOL * upper) / (instance.microbatches - 1)
