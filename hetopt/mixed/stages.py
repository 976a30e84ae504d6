"""The stage configurations of the mixed family and the exact split of a micro-batch.

A stage's *layout* picks, per GPU type, nothing or (TP degree t_g, replica count r_g, r_g·t_g
whole units); its *split* picks the samples n_g each type holds (Σ n_g = b), spread evenly over
the type's r_g identical replicas. For a layout, a layer range and a flight, the split that
minimizes the slowest replica's time is :func:`best_split` (exact); everything else of the
stage (GPUs used, sync) depends on the layout alone, so the DP prices a layout with its best
split (``formulations/mixed.md``, "The split"). :func:`stage_options` does this for every
layout of a range at once (numpy over the replica counts).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterator

import numpy as np

from hetopt.budget import Deadline
from hetopt.mixed.problem import (
    Member,
    MixedInstance,
    fits_memory,
    link_bytes,
    member_fits,
    member_time_s,
    range_sum,
)


def replica_counts(instance: MixedInstance, g: int, degree: int) -> list[int]:
    """The replica counts r of type g at TP ``degree``: 1 ≤ r ≤ b, r·t ≤ N_g, r·t whole units.

    >>> from hetopt.mixed.synthetic import hand_instance
    >>> replica_counts(hand_instance(), 0, 1)
    [1, 2]
    """
    grp, b = instance.gpus[g], instance.microbatch_size
    return [r for r in range(1, min(grp.count // degree, b) + 1) if r * degree % grp.unit == 0]


def type_choices(instance: MixedInstance, g: int) -> list[tuple[int, int, int] | None]:
    """None (type g unused) and every (tp index, degree, replicas) its GPUs, units and b allow."""
    out: list[tuple[int, int, int] | None] = [None]
    for k, tab in enumerate(instance.gpus[g].tp):
        out += [(k, tab.degree, r) for r in replica_counts(instance, g, tab.degree)]
    return out


def layouts(instance: MixedInstance) -> Iterator[tuple[tuple[int, int, int, int], ...]]:
    """Every non-empty layout: (gpu, tp index, degree, replicas) per type used, Σ r ≤ b."""
    for pick in itertools.product(*(type_choices(instance, g) for g in range(instance.num_types))):
        members = tuple((g, *c) for g, c in enumerate(pick) if c is not None)
        if members and sum(m[3] for m in members) <= instance.microbatch_size:
            yield members


def layout_count(instance: MixedInstance) -> int:
    """How many layouts :func:`layouts` yields at most (the product of the choices, without the Σ r ≤ b filter)."""
    return math.prod(len(type_choices(instance, g)) for g in range(instance.num_types)) - 1


def _fitting_times(instance: MixedInstance, first: int, end: int, g: int, k: int, flight: int) -> list[float]:
    """τ_g(t, y) for y = 1..F, F the largest share that fits at ``flight`` (the fitting shares
    are 1..F: activations do not decrease with y); non-decreasing."""
    out = []
    for y in range(1, instance.gpus[g].tp[k].shares + 1):
        if not member_fits(instance, first, end, g, k, y, flight):
            break
        out.append(member_time_s(instance, first, end, g, k, y))
    return out


def best_split(instance: MixedInstance, first: int, end: int, layout, flight: int) -> tuple[float, tuple[int, ...]] | None:
    """min over samples n_g of max_g τ_g(t_g, ⌈n_g/r_g⌉), s.t. Σ n_g = b, r_g ≤ n_g and every replica fits.

    Exact: at a threshold θ a type can hold any n_g from r_g to r_g·Y_g(θ), Y_g(θ) the largest
    share that fits and takes at most θ (even spreading; the tables do not decrease in y), so
    θ is feasible iff Σ r_g ≤ b ≤ Σ r_g·Y_g(θ); that is monotone in θ, and the least feasible θ
    among the members' time values (found by bisection) is the optimum.

    Returns
    -------
    (seconds, samples) or None
        The slowest replica's time and the samples of each member (layout order); None when
        no split fits.

    Examples
    --------
    >>> from hetopt.mixed.synthetic import hand_instance
    >>> best_split(hand_instance(), 0, 2, ((0, 0, 1, 2),), 1)
    (2.0, (2,))
    """
    b = instance.microbatch_size
    if sum(m[3] for m in layout) > b:
        return None
    times = [_fitting_times(instance, first, end, g, k, flight) for g, k, _t, _r in layout]
    if not all(times):
        return None
    low = max(ts[0] for ts in times)  # every type holds one sample per replica at least
    values = sorted({v for ts in times for v in ts if v >= low})

    def capacity(theta: float) -> int:
        return sum(m[3] * bisect.bisect_right(ts, theta) for m, ts in zip(layout, times))

    if capacity(values[-1]) < b:
        return None
    theta = values[bisect.bisect_left(values, True, key=lambda v: capacity(v) >= b)]
    samples = [m[3] for m in layout]
    left = b - sum(samples)
    for j, (m, ts) in enumerate(zip(layout, times)):  # fill each type up to r·Y(θ)
        more = min(left, m[3] * bisect.bisect_right(ts, theta) - samples[j])
        samples[j] += more
        left -= more
    return theta, tuple(samples)


def _range_tables(instance: MixedInstance, first: int, end: int, flight: int):
    """Per (type, tp index): the fitting times τ(y), y = 1..F, as a numpy array (None when F = 0).

    The range's rows are ``TpTables.range_times`` and ``range_activations``, the sums
    ``member_time_s`` and ``member_fits`` take, float for float: the threshold search needs
    them non-decreasing in y, and the plan it picks must be the one ``evaluate`` prices.
    """
    out = {}
    for g, grp in enumerate(instance.gpus):
        for k, tab in enumerate(grp.tp):
            static = range_sum(tab.static_bytes, first, end)
            fits = fits_memory(static, flight, tab.range_activations(first, end), grp.memory_bytes)
            f = int(np.argmin(fits)) if not fits.all() else len(fits)
            out[g, k] = tab.range_times(first, end)[:f] if f else None
    return out


#: Most entries of one (replica counts × candidate times) matrix of :func:`stage_options`; larger
#: grids are priced in chunks (8·10^6 int64 entries are 64 MB).
CHUNK_ENTRIES = 8_000_000


def stage_options(instance: MixedInstance, first: int, end: int, flight: int,
                  deadline: Deadline | None = None) -> list[tuple[tuple[int, ...], float, tuple]]:
    """The undominated stage choices on layers first..end−1 at ``flight``: (units used per type, t_s, members).

    Every layout is priced with its exact best split (the threshold argument of
    :func:`best_split`, in numpy for all replica counts of one TP choice at once); of the
    layouts with the same units the fastest is kept, and a choice is dropped when another
    uses no more units of any type and is no slower (it can replace it in any plan).
    ``members`` are (gpu, degree, replicas, samples) tuples; the list is sorted by t_s.

    Raises
    ------
    TimeoutError
        When ``deadline`` expires (read once per TP choice and chunk).
    """
    G, b, M = instance.num_types, instance.microbatch_size, instance.microbatches
    tables = _range_tables(instance, first, end, flight)
    nbytes = instance.gradient_range_bytes(first, end)
    buckets = instance.bucket_prefix[end] - instance.bucket_prefix[first]
    strides = np.cumprod([1] + [grp.units + 1 for grp in instance.gpus[:-1]], dtype=np.int64)
    picks: list[tuple] = []
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # flat units, t_s, pick id, counts
    for pick in itertools.product(*([None, *range(len(grp.tp))] for grp in instance.gpus)):
        used = [(g, k) for g, k in enumerate(pick) if k is not None]
        if not used or any(tables[g, k] is None for g, k in used):
            continue
        degrees = [instance.gpus[g].tp[k].degree for g, k in used]
        counts = [np.asarray(replica_counts(instance, g, t), dtype=np.int64) for (g, _k), t in zip(used, degrees)]
        if any(len(c) == 0 for c in counts):
            continue
        grid = [x.ravel() for x in np.meshgrid(*counts, indexing="ij")]
        keep = sum(grid) <= b
        grid = [x[keep] for x in grid]
        if not len(grid[0]):
            continue
        times = [tables[g, k] for g, k in used]
        low = max(float(ts[0]) for ts in times)
        values = np.unique(np.concatenate(times))
        values = values[values >= low]
        most = [np.searchsorted(ts, values, side="right") for ts in times]  # Y_g(θ) per candidate θ
        mixed = len(used) > 1
        slowest = max(link_bytes(nbytes, t, instance.gpus[g].unit)
                      / (min(instance.gpus[g].bandwidth, instance.cross_bandwidth) if mixed
                         else instance.gpus[g].bandwidth) for (g, _k), t in zip(used, degrees))
        picks.append((tuple(used), tuple(degrees)))
        step = max(1, CHUNK_ENTRIES // len(values))
        for lo in range(0, len(grid[0]), step):
            if deadline is not None and deadline.expired():
                raise TimeoutError
            part = [x[lo:lo + step] for x in grid]
            # capacity Σ r_g·Y_g(θ): non-decreasing in θ; the least θ reaching b is the best split
            cap = sum(r[:, None] * y[None, :] for r, y in zip(part, most))
            ok = cap >= b
            feasible = ok[:, -1]
            if not feasible.any():
                continue
            part = [x[feasible] for x in part]
            theta = values[ok[feasible].argmax(axis=1)]
            total = sum(part)
            sync = np.where(total > 1, 2.0 * (total - 1) / total * slowest, 0.0)
            # the ring's exposed part (``problem.exposed_sync_s``), elementwise
            exposed = np.where(sync > 0, np.maximum(sync - instance.overlap * theta, sync / buckets), 0.0)
            stage_t = theta + exposed / M
            flat = np.zeros(len(theta), dtype=np.int64)
            reps = np.zeros((len(theta), G), dtype=np.int64)
            for (g, _k), t, r in zip(used, degrees, part):
                flat += r * t // instance.gpus[g].unit * strides[g]
                reps[:, g] = r
            found.append((flat, stage_t, np.full(len(theta), len(picks) - 1), reps, theta))
    if not found:
        return []
    flat, stage_t, pick_id, reps, theta = (np.concatenate(x) for x in zip(*found))
    # per units vector the fastest layout (first of each flat index after sorting by (flat, t))
    order = np.lexsort((stage_t, flat))
    first_of = order[np.r_[True, flat[order][1:] != flat[order][:-1]]]
    # drop a choice when another uses no more units of every type and is no slower
    first_of = first_of[np.lexsort((flat[first_of], stage_t[first_of]))]
    units = (flat[first_of, None] // strides[None, :]) % np.asarray([grp.units + 1 for grp in instance.gpus])
    kept: list[tuple[tuple[int, ...], float, tuple]] = []
    kept_units = np.empty((0, G), dtype=np.int64)
    for j, p in enumerate(first_of):
        use = units[j]
        if len(kept_units) and (kept_units <= use).all(axis=1).any():
            continue
        kept_units = np.vstack([kept_units, use[None, :]])
        used, _degrees = picks[pick_id[p]]
        kept.append((tuple(int(x) for x in use), float(stage_t[p]),
                     _members(instance, used, tuple(int(reps[p, g]) for g, _k in used), float(theta[p]), tables)))
    return kept


def _members(instance: MixedInstance, used, reps, theta: float, tables) -> tuple:
    """(gpu, degree, replicas, samples) per type used: r each, then filled up to r·Y(θ) until b."""
    samples = list(reps)
    left = instance.microbatch_size - sum(samples)
    for j, ((g, k), r) in enumerate(zip(used, reps)):
        more = min(left, r * int(np.searchsorted(tables[g, k], theta, side="right")) - samples[j])
        samples[j] += more
        left -= more
    assert left == 0, "the threshold's capacity reaches b"
    return tuple((g, instance.gpus[g].tp[k].degree, r, n) for (g, k), r, n in zip(used, reps, samples))


def _member_choices(instance: MixedInstance, g: int) -> list[Member | None]:
    """None, and every (degree, replicas, samples) of type g: r allowed, r ≤ n ≤ min(b, r·Y)."""
    grp, b = instance.gpus[g], instance.microbatch_size
    out: list[Member | None] = [None]
    for tab in grp.tp:
        for r in replica_counts(instance, g, tab.degree):
            out += [Member(g, tab.degree, r, n) for n in range(r, min(b, r * tab.shares) + 1)]
    return out


def stage_members(instance: MixedInstance) -> list[tuple[Member, ...]]:
    """Every member set of one stage whose samples add up to b (GPU counts checked per plan)."""
    out = []
    for pick in itertools.product(*(_member_choices(instance, g) for g in range(instance.num_types))):
        members = tuple(m for m in pick if m is not None)
        if members and sum(m.samples for m in members) == instance.microbatch_size:
            out.append(members)
    return out


def member_set_bound(instance: MixedInstance) -> int:
    """Π_g (choices of type g, "unused" included): at least the member sets of one stage,
    counted without listing them (``stage_members`` filters this product).

    >>> from hetopt.mixed.synthetic import hand_instance
    >>> member_set_bound(hand_instance())  # none, 1×n1, 1×n2, 2×n2
    4
    """
    return math.prod(member_choice_count(instance, g) for g in range(instance.num_types))


def member_choice_count(instance: MixedInstance, g: int) -> int:
    """``len(_member_choices(instance, g))`` by arithmetic: 1 (unused) plus, per TP degree and
    allowed replica count r, the sample counts r..min(b, r·Y). A huge instance is declined by
    this count at once (4,096 GPUs a type: 164,480 choices were built just to be counted).

    >>> from hetopt.mixed.synthetic import hand_instance
    >>> member_choice_count(hand_instance(), 0)  # none, 1×n1, 1×n2, 2×n2
    4
    """
    grp, b = instance.gpus[g], instance.microbatch_size
    return 1 + sum(max(0, min(b, r * tab.shares) - r + 1)
                   for tab in grp.tp for r in replica_counts(instance, g, tab.degree))
