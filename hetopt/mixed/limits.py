"""The mixed family's size limits, one place for all: which method declines what.

Every limit is decided from the instance's counts alone, before any table or model is built,
so a method declines at once and names the limit.
"""

from __future__ import annotations

import math

from hetopt.mixed.problem import MixedInstance
from hetopt.mixed.stages import layout_count

#: Most stage pricings (layer ranges × flights × layouts, an upper bound: the DP prices only the
#: (range, flight) pairs it reaches, about a third of them) the DP may need: a best split takes
#: 20-60 µs in Python, so 5·10^5 of them stay within about 30 s (measured: 2.5·10^5 in 5 s).
MAX_PRICINGS = 500_000
#: Most DP states (start layer × GPUs used per type × stages after, capped at M).
MAX_STATES = 2_000_000
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
    """Layer ranges × flights × layouts (an upper bound on the best splits to compute)."""
    L = instance.layers
    return L * (L + 1) // 2 * flights(instance) * layout_count(instance)


def states(instance: MixedInstance) -> int:
    """(L + 1) · Π_g (N_g + 1) · (min(cap, L) + 1), Python integers (no overflow)."""
    used = math.prod(g.count + 1 for g in instance.gpus)
    return (instance.layers + 1) * used * (min(after_cap(instance), instance.layers) + 1)


def dp_limit_hit(instance: MixedInstance) -> str | None:
    """Which of the DP's limits the instance passes, or None."""
    p = pricings(instance)
    if p > MAX_PRICINGS:
        return f"{p} stage pricings (layer ranges × flights × layouts) exceed the DP's limit of {MAX_PRICINGS}"
    s = states(instance)
    if s > MAX_STATES:
        return f"{s} states (layers × GPUs used per type × stages after) exceed the DP's limit of {MAX_STATES}"
    return None


def split_count(instance: MixedInstance) -> int:
    """Explicit (t, r, y) choices per stage the MILP enumerates: Π_g (1 + Σ_t Σ_r ⌊b/r⌋), times ranges × flights."""
    b = instance.microbatch_size
    per = math.prod(1 + sum(b // r for tab in g.tp for r in range(1, min(g.count // tab.degree, b) + 1))
                    for g in instance.gpus)
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
