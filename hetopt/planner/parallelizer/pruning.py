"""The built-in parallelizer's Pareto filter: which priced layouts no other one dominates, and the
floors that let a layout go unpriced (exact; formulations/pipeline.md, "Pruning").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np


#: Up to this many kept rows the Pareto filter compares in Python (about 1 µs a row) rather than
#: in numpy (about 10 µs a call, whatever the rows): measured on Sailor's a4v4 plan, where the
#: filter ran 146,000 numpy comparisons against a handful of kept rows each.
PARETO_PYTHON_ROWS = 16

def by_group(groups: Sequence[tuple | None]) -> dict[tuple, list[int]]:
    """Row indices by job-wide group, rows outside every group (None) left out."""
    out: dict[tuple, list[int]] = {}
    for n, g in enumerate(groups):
        if g is not None:
            out.setdefault(g, []).append(n)
    return out

def pareto_indices(keys: np.ndarray, peak: Callable[[int], float], python_rows: int = PARETO_PYTHON_ROWS) -> list[int]:
    """Rows of ``keys`` (Σ t, max t, stages, −limit) that no other row dominates, in key order.

    The Pareto filter of :meth:`BuiltinParallelizer.parallelize`. A plan A dominating B can
    replace B in any composed pipeline: stages in front of it hold no more micro-batches (A
    has no more stages), A fits wherever B fits (its limit is no smaller), and T does not
    grow. Of equal rows the one with the least ``peak(row)`` (then the first) is kept. Rows are
    taken in increasing key order, so a row can only be dominated by one already kept; that
    check is one vectorized comparison against the kept keys.
    """
    order = np.lexsort(keys.T[::-1])  # by Σ t, then max t, stages, −limit; stable (ties by index)
    rows = keys.tolist()  # equal rows compared as Python lists: cheaper than one numpy call per pair
    kept_keys = np.empty_like(keys)
    kept_rows: list[list[float]] = []  # the same kept keys as Python floats (the same comparisons)
    kept: list[int] = []
    start = 0
    while start < len(order):
        stop = start + 1
        while stop < len(order) and rows[order[stop]] == rows[order[start]]:
            stop += 1
        group = order[start:stop]
        n = int(group[0]) if len(group) == 1 else int(min(group, key=lambda j: (peak(j), j)))
        if len(kept) <= python_rows:  # few kept rows: two numpy calls cost more than the loop
            t, w, g, lim = rows[n]
            dominated = any(a <= t and b <= w and c <= g and d <= lim for a, b, c, d in kept_rows)
        else:
            dominated = bool(np.any(np.all(kept_keys[: len(kept)] <= keys[n], axis=1)))
        if not dominated:
            kept_keys[len(kept)] = keys[n]
            kept_rows.append(rows[n])
            kept.append(n)
        start = stop
    return kept

def is_beaten(floors: tuple[float, float], stages: int, fit_everywhere: dict[tuple | None, list[tuple[float, float, int]]],
            group: tuple | None, targeted: bool) -> bool:
    """Whether a priced row (Σ t, max t, stages) that fits in every position dominates every row
    with these floors of Σ t and max t and ``stages`` stages (:attr:`BuiltinParallelizer.floor_first`).

    Such a row has a key no larger in any component and a smaller Σ t, so the bounded layout is
    on no Pareto front (``pareto_indices``). With a ``target`` the row must be of the layout's
    own job-wide group, whose front is kept too; a layout the runtime cannot run (group None)
    is kept only on the overall front, which any row may close."""
    low_total, low_worst = floors
    if targeted and group is not None:
        candidates: Iterable[list[tuple[float, float, int]]] = (fit_everywhere.get(group, ()),)
    else:
        candidates = fit_everywhere.values()
    return any(t < low_total and w <= low_worst and g <= stages for rows in candidates for t, w, g in rows)

def keep_unbeaten(rows: list[tuple[float, float, int]], row: tuple[float, float, int]) -> None:
    """Add ``row`` (Σ t, max t, stages) to ``rows`` unless one of them is no larger in every
    component; drop those it is no larger than (they can beat nothing it cannot)."""
    if any(t <= row[0] and w <= row[1] and g <= row[2] for t, w, g in rows):
        return
    rows[:] = [r for r in rows if not (row[0] <= r[0] and row[1] <= r[1] and row[2] <= r[2])]
    rows.append(row)

def front_key(total: float, worst: float, stages: int, limit: int | None) -> tuple[float, float, int, float]:
    return (total, worst, stages, -(np.inf if limit is None else limit))


__all__ = ["PARETO_PYTHON_ROWS", "is_beaten", "by_group", "front_key", "keep_unbeaten", "pareto_indices"]
