"""The time levels of the count models: the values the slowest replica's time can take.

The optimal split of any multiset ends at a value τ* = T_c(n) of one of its members
(``formulations/replicas.md``, "Capacities"), so the count models (``formulation="counts"``
of ``milp.py`` and ``cpsat.py``) choose the slowest time among the values

    V = {T_c(m) : c kept, 1 ≤ m ≤ cap_c(U)} ∩ [τ_low, U]

instead of a continuous z. τ_low is the *capacity floor*: below it even every island of the
cluster cannot run N micro-batches (a knapsack per shape, :func:`capacity_floor`), so no plan
ends there. At a level v the copies of c each run at most cap_c(v) micro-batches, a constant:
the capacity rows are linear in the copy counts once the level is fixed.
"""

from __future__ import annotations

from dataclasses import dataclass

from hetopt.budget import Deadline
from hetopt.replicas.model import ModelData
from hetopt.replicas.problem import ReplicasInstance
from hetopt.replicas.split import Times, cap

#: Most table cells (kept candidates × levels) the count models take: each cell is one entry
#: of a candidate's capacity table (CP-SAT's element constraint, the MILP's level columns).
#: The datacenter instance has 31 × 2,153 = 66,743; 2·10^6 keeps a model well under a
#: second to build. Beyond it the count models decline (the slot models and dp count
#: differently).
MAX_LEVEL_CELLS = 2_000_000


class TooManyLevels(Exception):
    """The count model's tables would pass ``MAX_LEVEL_CELLS``; the message says by how much."""


@dataclass(frozen=True)
class Levels:
    """The levels V (ascending, seconds) and each kept candidate's copies and capacities there.

    ``caps[c][t]`` = cap_c(V[t]), the most micro-batches one copy of c runs by time V[t],
    computed with ``split.cap`` (the formula ``evaluate`` uses).
    """

    values: tuple[float, ...]
    caps: dict[int, tuple[int, ...]]
    copies: dict[int, int]  # K_c, the most copies of c the islands, N and R_max allow
    floor_s: float  # τ_low, the capacity floor

    def first(self, c: int) -> int | None:
        """The first level at which a copy of c runs a micro-batch (its fill time), or None."""
        return next((t for t, k in enumerate(self.caps[c]) if k >= 1), None)


def capacity_floor(instance: ReplicasInstance, candidates: list[int], copies: dict[int, int], tau: float) -> int:
    """An upper bound on the micro-batches any plan finishes by ``tau``.

    Per shape s, the most Σ cap_c(τ) of copies of candidates that use s, within a_s islands
    (a bounded knapsack over the islands of s, each copy weighing u_{c,s}); summed over the
    shapes. A candidate using several shapes is counted in each of them, which only raises
    the sum, so the bound holds for every plan.

    Examples
    --------
    >>> from hetopt.replicas.problem import Candidate, IslandShape
    >>> inst = ReplicasInstance("x", 10, (IslandShape("A", 3),), (Candidate("a", (2,), 1.0, 1.0, 0.0, 1e9),))
    >>> capacity_floor(inst, [0], {0: 1}, 3.0)  # one copy on 2 of the 3 islands: 3 micro-batches by 3 s
    3
    """
    cands = instance.candidates
    total = 0
    for s, shape in enumerate(instance.shapes):
        best = [0] * (shape.count + 1)
        for c in candidates:
            u = cands[c].uses[s]
            if not u:
                continue
            gain = cap(cands[c].fill_s, cands[c].per_microbatch_s, instance.microbatches, tau)
            for _ in range(min(copies[c], shape.count // u)):
                for a in range(shape.count, u - 1, -1):
                    if best[a - u] + gain > best[a]:
                        best[a] = best[a - u] + gain
        total += best[shape.count]
    return total


def time_levels(instance: ReplicasInstance, data: ModelData, deadline: Deadline | None = None) -> Levels:
    """The levels of ``data``'s kept candidates (``data.most`` bounds each one's micro-batches).

    Raises
    ------
    TooManyLevels
        Past ``MAX_LEVEL_CELLS`` (counted before any table is built).
    TimeoutError
        When ``deadline`` passes while the tables are built.
    """
    kept = sorted(data.most)
    copies = {c: 0 for c in kept}
    for c, _ in data.slots:
        copies[c] += 1
    cands = instance.candidates
    n_total = instance.microbatches
    upper = data.z_top
    values = sorted({cands[c].time(m) for c in kept for m in range(1, data.most[c] + 1)})
    values = [v for v in values if v <= upper] or values[:1]
    # the capacity floor, by bisection over the values (the bound grows with τ)
    lo, hi = 0, len(values) - 1
    while lo < hi:
        if deadline is not None and deadline.expired():
            raise TimeoutError("time limit reached while computing the capacity floor")
        mid = (lo + hi) // 2
        if capacity_floor(instance, kept, copies, values[mid]) >= n_total:
            hi = mid
        else:
            lo = mid + 1
    values = values[lo:]
    cells = len(values) * len(kept)
    if cells > MAX_LEVEL_CELLS:
        raise TooManyLevels(f"{len(kept)} candidates × {len(values)} time levels = {cells:,} table cells exceed "
                            f"the count model's limit of {MAX_LEVEL_CELLS:,}")
    times = Times(instance, kept)
    caps: dict[int, list[int]] = {c: [] for c in kept}
    for t, v in enumerate(values):
        if deadline is not None and t % 256 == 0 and deadline.expired():
            raise TimeoutError("time limit reached while building the capacity tables")
        for c, k in zip(kept, times.caps(v).tolist()):
            caps[c].append(k)
    return Levels(tuple(values), {c: tuple(k) for c, k in caps.items()}, copies, values[0])
