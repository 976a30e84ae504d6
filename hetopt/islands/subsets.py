"""The subset DP for small clusters: a table of valid islands, then the fewest-parts cover.

valid[S] for every node set S (a bit mask) is computed with numpy, one pass per node per
quantity: a running min or max over the masks built bit by bit. Then, with low(S) the
lowest node of S (it must be in some island of S's partition),

    F(∅) = 0,   F(S) = 1 + min { F(S \\ T) : T valid, low(S) ∈ T ⊆ S },

processed by falling low(S), so F(S \\ T) is final when F(S) reads it; for each valid T
all S ⊇ T with low(S) = low(T) are updated at once (a numpy scatter over submasks).
"""

from __future__ import annotations

import numpy as np

from hetopt.family import Deadline
from hetopt.islands.problem import RATIO_RTOL, IslandsInstance

#: Largest cluster for the subset DP: 2^18 masks × ~20 float arrays stays under 50 MB.
SUBSET_MAX_NODES = 18

#: Largest DP work (mask updates, Σ over valid T of 2^(free bits)) accepted: about 5 s of
#: numpy on one core. Above it the DP declines rather than run for minutes.
SUBSET_WORK_LIMIT = 3e8


class TooLarge(Exception):
    """The subset DP does not fit its limits (the message says which)."""


class OutOfTime(Exception):
    """The deadline passed during the DP."""


class NoPartition(Exception):
    """No partition into valid islands exists: not even every single node is a valid island.

    A validated instance never gets here (a single node is always a valid island when the
    tolerances are >= 0); the message says which node is not.
    """


def _running(values: np.ndarray, op, empty: float) -> np.ndarray:
    """out[S] = op over values[j] for j in S (``empty`` for S = ∅), for every mask S."""
    n = len(values)
    out = np.empty(1 << n)
    out[0] = empty
    for j in range(n):
        out[1 << j: 1 << (j + 1)] = op(out[: 1 << j], values[j])
    return out


def valid_masks(instance: IslandsInstance, deadline: Deadline | None = None) -> np.ndarray:
    """valid[S] for every bit mask S of nodes (bit i = node i); valid[0] is False."""
    n = instance.num_nodes
    if n > SUBSET_MAX_NODES:
        raise TooLarge(f"{n} nodes exceed the subset DP's limit of {SUBSET_MAX_NODES}")
    size = 1 << n
    tol = instance.tolerance
    ok = np.ones(size, dtype=bool)
    g = instance.attribute("gpus")
    ok &= _running(g, np.maximum, -np.inf) == _running(g, np.minimum, np.inf)
    for attr, eps in (("flops", tol.compute), ("memory_bytes", tol.memory), ("intra_bytes_s", tol.intra)):
        v = instance.attribute(attr)
        ok &= _running(v, np.maximum, -np.inf) <= _running(v, np.minimum, np.inf) * (1.0 + eps) * (1.0 + RATIO_RTOL)
    masks = np.arange(size)
    e = instance.inter
    for v in range(n):
        if deadline is not None and deadline.expired():
            raise OutOfTime
        row_min = e[v].copy()
        row_min[v] = np.inf
        row_max = e[v].copy()
        row_max[v] = -np.inf
        slowest_inside = _running(row_min, np.minimum, np.inf)
        fastest_outside = _running(row_max, np.maximum, -np.inf)[::-1]  # complement of S = (size-1) - S
        has_v = ((masks >> v) & 1).astype(bool)
        ok &= ~has_v | (slowest_inside >= fastest_outside)
    ok[0] = False
    return ok


def _submasks(free: int) -> np.ndarray:
    """Every submask of ``free`` as an array."""
    bits = [b for b in range(free.bit_length()) if free >> b & 1]
    idx = np.arange(1 << len(bits), dtype=np.int64)
    out = np.zeros(len(idx), dtype=np.int64)
    for j, b in enumerate(bits):
        out |= ((idx >> j) & 1) << b
    return out


def fewest_parts(instance: IslandsInstance, deadline: Deadline) -> tuple[list[list[int]], dict]:
    """The optimal partition by the subset DP, as lists of node indices, and counters.

    Raises
    ------
    TooLarge
        Beyond ``SUBSET_MAX_NODES`` or ``SUBSET_WORK_LIMIT``.
    OutOfTime
        When the deadline passes (checked before every valid island's scatter).
    NoPartition
        When some node is not a valid island by itself (then no partition exists; the
        recurrence would have nothing to build it from).
    """
    n = instance.num_nodes
    valid = valid_masks(instance, deadline)
    size = 1 << n
    lonely = [v for v in range(n) if not valid[1 << v]]
    if lonely:
        raise NoPartition(
            f"node {instance.nodes[lonely[0]].name!r} is not a valid island by itself (are the tolerances >= 0?), "
            "so no partition into valid islands exists"
        )
    cands = np.flatnonzero(valid)
    low = np.log2(cands & -cands).astype(np.int64)  # index of the lowest set bit (exact: powers of 2)
    pop = np.array([int(t).bit_count() for t in cands])
    work = float(np.sum(2.0 ** (n - low - pop)))
    if work > SUBSET_WORK_LIMIT:
        raise TooLarge(f"the subset DP would make {work:.3g} updates, above its limit of {SUBSET_WORK_LIMIT:.3g}")
    best = np.full(size, n + 1, dtype=np.int32)
    best[0] = 0
    choice = np.zeros(size, dtype=np.int64)
    for i in range(n - 1, -1, -1):
        if deadline.expired():
            raise OutOfTime
        above = (size - 1) & ~((1 << (i + 1)) - 1)
        for t in cands[low == i].tolist():
            if deadline.expired():  # one scatter is at most 2^17 updates: milliseconds
                raise OutOfTime
            x = _submasks(above & ~t)
            s = x | t
            value = best[x] + 1
            better = value < best[s]
            best[s[better]] = value[better]
            choice[s[better]] = t
    if best[size - 1] > n:  # pragma: no cover - singletons are valid, so the full set has a partition
        raise NoPartition("the subset DP found no partition of the nodes into valid islands")
    groups, s = [], size - 1
    while s:
        t = int(choice[s])
        groups.append([b for b in range(n) if t >> b & 1])
        s ^= t
    return groups, {"valid_sets": int(len(cands)), "updates": int(work)}
