"""The stage configurations of the mixed family and the exact split of a micro-batch.

A stage's *layout* picks, per GPU type, nothing or (TP degree t_g, replicas r_g); its
*split* picks the shares y_g. For a layout, a layer range and a flight, the split that
minimizes the slowest member's time is :func:`best_split` (exact); everything else of the
stage (GPUs used, sync) depends on the layout alone, so the DP prices a layout with its
best split (``formulations/mixed.md``, "The split").
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterator

from hetopt.budget import CLOCK_EVERY, Deadline
from hetopt.mixed.problem import Member, MixedInstance, member_fits, member_time_s, stage_time_s


def type_choices(instance: MixedInstance, g: int) -> list[tuple[int, int, int] | None]:
    """None (type g unused) and every (tp index, degree, replicas) its GPUs and b allow."""
    grp, b = instance.gpus[g], instance.microbatch_size
    out: list[tuple[int, int, int] | None] = [None]
    for k, tab in enumerate(grp.tp):
        out += [(k, tab.degree, r) for r in range(1, min(grp.count // tab.degree, b) + 1)]
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


def best_split(instance: MixedInstance, first: int, end: int, layout, flight: int) -> tuple[float, tuple[int, ...]] | None:
    """min over shares of max_g time_g(t_g, y_g), s.t. Σ r_g y_g = b and every member fits.

    Exact: the feasible shares of each member at a threshold θ grow with θ, so the least θ
    among the members' time values for which a subset sum reaches b is found by bisection;
    the subset sum runs on bit sets.

    Returns
    -------
    (seconds, shares) or None
        The slowest member's time and the share of each member (layout order); None when no
        split fits.

    Examples
    --------
    >>> from hetopt.mixed.synthetic import hand_instance
    >>> best_split(hand_instance(), 0, 2, ((0, 0, 1, 2),), 1)
    (2.0, (1,))
    """
    b = instance.microbatch_size
    options = []  # per member: (time, share) that fit
    for g, k, _t, r in layout:
        opts = [(member_time_s(instance, first, end, g, k, y), y) for y in range(1, b // r + 1)
                if member_fits(instance, first, end, g, k, y, flight)]
        if not opts:
            return None
        options.append(opts)
    values = sorted({v for opts in options for v, _ in opts})

    def reach(theta: float) -> list[int] | None:
        """Bit sets of the sums reachable by the first j members (j = 0..), or None if b is not."""
        mask = (1 << (b + 1)) - 1
        sets = [1]
        for (g, k, t, r), opts in zip(layout, options):
            cur = 0
            for v, y in opts:
                if v <= theta:
                    cur |= sets[-1] << (r * y)
            sets.append(cur & mask)
        return sets if sets[-1] >> b & 1 else None

    if reach(values[-1]) is None:
        return None
    # the least value at which b is reachable (feasibility is monotone in θ)
    theta = values[bisect.bisect_left(range(len(values)), True, key=lambda i: reach(values[i]) is not None)]
    sets = reach(theta)
    shares, left = [], b
    for j in range(len(layout) - 1, -1, -1):  # walk back through the bit sets
        r = layout[j][3]
        y = next(y for v, y in options[j] if v <= theta and r * y <= left and sets[j] >> (left - r * y) & 1)
        shares.append(y)
        left -= r * y
    return theta, tuple(reversed(shares))


def stage_options(instance: MixedInstance, first: int, end: int, flight: int,
                  deadline: Deadline | None = None) -> list[tuple[tuple[int, ...], float, tuple]]:
    """The undominated stage choices on layers first..end−1 at ``flight``: (GPUs used per type, t_s, members).

    A choice is dropped when another uses no more GPUs of any type and is no slower (it can
    replace it in any plan). ``members`` are (gpu, degree, replicas, share) tuples.

    Raises
    ------
    TimeoutError
        When ``deadline`` expires (read every ``CLOCK_EVERY`` layouts).
    """
    best: dict[tuple[int, ...], tuple[float, tuple]] = {}
    for n, layout in enumerate(layouts(instance)):
        if deadline is not None and n % CLOCK_EVERY == 0 and deadline.expired():
            raise TimeoutError
        split = best_split(instance, first, end, layout, flight)
        if split is None:
            continue
        compute, shares = split
        t = stage_time_s(instance, first, end, [(g, d, r) for g, _k, d, r in layout], compute)
        use = [0] * instance.num_types
        for g, _k, d, r in layout:
            use[g] = d * r
        key = tuple(use)
        if key not in best or t < best[key][0]:
            best[key] = (t, tuple((g, d, r, y) for (g, _k, d, r), y in zip(layout, shares)))
    ordered = sorted(best.items(), key=lambda kv: (kv[1][0], sum(kv[0])))
    kept: list[tuple[tuple[int, ...], float, tuple]] = []
    for use, (t, members) in ordered:
        if not any(all(a <= b for a, b in zip(u, use)) for u, _, _ in kept):
            kept.append((use, t, members))
    return kept


def _member_choices(instance: MixedInstance, g: int) -> list[Member | None]:
    """None, and every (degree, replicas, share) of type g with r·t ≤ N_g and r·y ≤ b."""
    grp, b = instance.gpus[g], instance.microbatch_size
    out: list[Member | None] = [None]
    for tab in grp.tp:
        for r in range(1, min(grp.count // tab.degree, b) + 1):  # r ≤ b: every replica holds a sample
            out += [Member(g, tab.degree, r, y) for y in range(1, b // r + 1)]
    return out


def stage_members(instance: MixedInstance) -> list[tuple[Member, ...]]:
    """Every member set of one stage whose shares add up to b (GPU counts checked per plan)."""
    out = []
    for pick in itertools.product(*(_member_choices(instance, g) for g in range(instance.num_types))):
        members = tuple(m for m in pick if m is not None)
        if members and sum(m.replicas * m.share for m in members) == instance.microbatch_size:
            out.append(members)
    return out


def member_set_bound(instance: MixedInstance) -> int:
    """Π_g (choices of type g, "unused" included): at least the member sets of one stage,
    counted without listing them (``stage_members`` filters this product).

    >>> from hetopt.mixed.synthetic import hand_instance
    >>> member_set_bound(hand_instance())  # none, 1×y1, 1×y2, 2×y1
    4
    """
    return math.prod(len(_member_choices(instance, g)) for g in range(instance.num_types))
