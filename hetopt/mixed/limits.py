"""The mixed family's size limits, one place for all: which method declines what.

Every limit is decided from the instance's counts alone, before any table or model is built,
so a method declines at once and names the limit.
"""

from __future__ import annotations

import itertools
import math

from hetopt.mixed.problem import MixedInstance
from hetopt.mixed.stages import replica_counts

#: Most threshold tests of the stage pricing (layer ranges × flights × Σ over TP choices of
#: replica-count combinations × candidate times, an upper bound: the DP prices only the
#: (range, flight) pairs it reaches): ``stages.stage_options`` runs them in numpy, a few ns
#: each, so 2·10^9 stay within about 10-30 s.
MAX_PRICINGS = 2_000_000_000
#: Most DP states (start layer × units used per type × stages after, capped at M): each is a
#: Python loop over its stage choices.
MAX_STATES = 200_000
#: Most (layer range, flight, per-type (t, r, y)) stage choices the MILP enumerates before
#: pruning (each explicit split is an evaluation): beyond it the MILP declines.
MAX_MILP_SPLITS = 400_000


def flights(instance: MixedInstance) -> int:
    """Distinct in-flight counts a stage can have: min(L, M)."""
    return min(instance.layers, instance.microbatches)


def after_cap(instance: MixedInstance) -> int:
    """Stages after a stage are counted up to max(M − 1, 1): beyond it the flight is M and
    only "is it the last stage" (k ≥ 1) still matters."""
    return max(instance.microbatches - 1, 1)


def pricings(instance: MixedInstance) -> int:
    """Layer ranges × flights × Σ_TP choices Π_g (replica counts) × Σ_g (rows): the threshold tests."""
    L = instance.layers
    per_type = [[(len(replica_counts(instance, g, tab.degree)), tab.shares) for tab in grp.tp]
                for g, grp in enumerate(instance.gpus)]
    work = 0
    for pick in itertools.product(*([None, *ch] for ch in per_type)):
        used = [c for c in pick if c is not None]
        if used:
            work += math.prod(c[0] for c in used) * sum(c[1] for c in used)
    return L * (L + 1) // 2 * flights(instance) * work


def state_count(layers: int, units, microbatches: int) -> int:
    """(L + 1) · Π_g (units_g + 1) · (min(max(M − 1, 1), L) + 1), from the counts alone (so a
    builder can tell before it prices any table).

    >>> state_count(6, (8, 24), 4)  # Sailor's a8v24 in nodes, 6 blocks, M = 4
    6300
    """
    return (layers + 1) * math.prod(u + 1 for u in units) * (min(max(microbatches - 1, 1), layers) + 1)


def states(instance: MixedInstance) -> int:
    """(L + 1) · Π_g (N_g / unit_g + 1) · (min(cap, L) + 1), Python integers (no overflow)."""
    return state_count(instance.layers, [g.units for g in instance.gpus], instance.microbatches)


def dp_limit_hit(instance: MixedInstance) -> str | None:
    """Which of the DP's limits the instance passes, or None."""
    p = pricings(instance)
    if p > MAX_PRICINGS:
        return (f"{p} threshold tests of the stage pricing (layer ranges × flights × replica counts × times) "
                f"exceed the DP's limit of {MAX_PRICINGS}")
    s = states(instance)
    if s > MAX_STATES:
        return f"{s} states (layers × units used per type × stages after) exceed the DP's limit of {MAX_STATES}"
    return None


def split_count(instance: MixedInstance) -> int:
    """Explicit (t, r, n) choices per stage the MILP enumerates: Π_g (1 + Σ_t Σ_r (min(b, r·Y) − r + 1)),
    times ranges × flights."""
    b = instance.microbatch_size
    per = math.prod(1 + sum(min(b, r * tab.shares) - r + 1 for tab in grp.tp
                            for r in replica_counts(instance, g, tab.degree))
                    for g, grp in enumerate(instance.gpus))
    L = instance.layers
    return L * (L + 1) // 2 * flights(instance) * per


def milp_limit_hit(instance: MixedInstance) -> str | None:
    """Why the MILP declines (too many explicit stage choices), or None."""
    n = split_count(instance)
    if n > MAX_MILP_SPLITS:
        dp = dp_limit_hit(instance)
        advice = "use dp" if dp is None else f"dp declines it too ({dp})"
        return f"{n} explicit stage choices exceed the MILP's limit of {MAX_MILP_SPLITS}; {advice}"
    return None
