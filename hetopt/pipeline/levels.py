"""The data of the level model shared by ``milp.py`` and ``cpsat.py`` (``formulation="signatures"``).

A block is placed by the number b of stages behind it (its *level*) instead of its position:
option o of signature K at level b covers stages b..b + n_o − 1 counted from the back, and the
block in front of it sits at level b + n_o. The 1F1B memory rule is then a bound on b
(b ≤ b_o) and costs no row; a plan is a chain of levels from 0 upward. Islands of one
signature are counted, not named. Only options and links within the bottleneck window
[floor, ceiling] of ``signatures.py`` are modelled. See ``formulations/pipeline.md``.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from typing import NamedTuple

from hetopt.family import conclude
from hetopt.pipeline.options import bottleneck_candidates
from hetopt.pipeline.plan import blocks_from_choices, build_solution
from hetopt.pipeline.problem import PipelineInstance, evaluate, simple_bound
from hetopt.result import Result
from hetopt.pipeline.signatures import Signatures, bottleneck_ceiling, option_key, signatures, slot_floor

#: Most cells y[b,o] (level × signature option) the level model is built with: PuLP's objects
#: take about 6 KB each, so this keeps a model near 1.5 GB, as ``positions.MAX_POSITION_BINARIES``
#: does for the position model (scale-16x128 has 12,123 after its window). Beyond it both
#: methods decline up front.
MAX_LEVEL_CELLS = 250_000


class NoPlan(Exception):
    """The slot relaxation covers fewer than L layers even with every option: no plan exists."""


class LevelsTooLarge(Exception):
    """The level model would pass ``MAX_LEVEL_CELLS``; the message is :func:`too_large`'s."""


@dataclass(frozen=True)
class LevelData:
    """The level model's index sets.

    Attributes
    ----------
    sig
        The signatures (kinds, their options, links between them).
    thresholds
        Θ: the bottleneck values within [floor, ceiling], ascending; thresholds[0] is the floor.
    cells
        (b, o): signature option o with b stages behind it, each allowed by memory and role.
    kind
        Signature of each modelled option.
    first
        Index in ``thresholds`` of the least value ≥ τ_o, per modelled option (0 below the floor).
    junctions
        (ℓ, K, K', c): a block of signature K ending at level ℓ and one of K' starting there,
        with the link time c between them (pairs whose link exceeds the ceiling are absent).
    """

    sig: Signatures
    thresholds: tuple[float, ...]
    cells: tuple[tuple[int, int], ...]
    kind: dict[int, int]
    first: dict[int, int]
    junctions: tuple[tuple[int, int, int, float], ...]

    def threshold_index(self, seconds: float) -> int:
        """Index of the least threshold ≥ ``seconds`` (0 at or below the floor)."""
        return bisect.bisect_left(self.thresholds, seconds)

    def plan(self, instance: PipelineInstance, chosen: list[tuple[int, int]]) -> list[int]:
        """Concrete option indices, front to back, for chosen cells (b, o): the blocks in order of
        falling level, each signature's islands taken in turn (they are interchangeable)."""
        taken: dict[int, int] = defaultdict(int)
        out = []
        for _, o in sorted(chosen, reverse=True):
            K = self.kind[o]
            island = self.sig.kinds[K][taken[K]]
            taken[K] += 1
            out.append(self.sig.twin[(island, option_key(instance, o))])
        return out

    def cells_of(self, instance: PipelineInstance, plan: list[int]) -> set[tuple[int, int]]:
        """The cells of a concrete plan (option indices front to back), for a warm start."""
        island_kind = {i: K for K, members in enumerate(self.sig.kinds) for i in members}
        out, level = set(), 0
        for o in reversed(plan):
            K = island_kind[instance.options[o].island]
            rep = self.sig.twin[(self.sig.kinds[K][0], option_key(instance, o))]
            out.add((level, rep))
            level += len(instance.options[o].stages)
        return out


def too_large(count: int, max_cells: int = MAX_LEVEL_CELLS) -> str | None:
    """The reason the level model is declined for its size (past ``max_cells``), or None."""
    if count <= max_cells:
        return None
    return f"the level model would have {count:,} cells y[b,o] (levels x signature options), above the limit of {max_cells:,}"


def level_data(instance: PipelineInstance, upper: float | None, max_cells: int = MAX_LEVEL_CELLS) -> LevelData:
    """Build :class:`LevelData`; ``upper`` is a known plan's T (the greedy's), or None.

    Raises
    ------
    NoPlan
        When the slot relaxation proves that no plan exists.
    LevelsTooLarge
        Past ``max_cells`` (the message is :func:`too_large`'s), counted before any cell
        is listed.
    """
    sig = signatures(instance)
    values = bottleneck_candidates(instance)
    floor = slot_floor(instance, sig, values)
    if floor is None:
        raise NoPlan("the islands' longest options at their 1F1B slots cover fewer layers than the model has")
    ceiling = max(bottleneck_ceiling(instance, upper), floor)
    thresholds = tuple(v for v in values if floor <= v <= ceiling)
    opts = {K: [o for o in members if instance.options[o].max_time_s <= ceiling] for K, members in enumerate(sig.options)}
    # the most stages a plan can hold: each island hosts one block at most
    most = sum(len(sig.kinds[K]) * max((len(instance.options[o].stages) for o in opts[K]), default=0) for K in opts)
    tops = {}
    for K, members in opts.items():
        for o in members:
            limit = instance.behind_limits[o]
            n = len(instance.options[o].stages)
            tops[o] = most - n if limit is None else min(limit, most - n)
    count = sum(top + 1 for top in tops.values() if top >= 0)
    hit = too_large(count, max_cells)
    if hit is not None:
        raise LevelsTooLarge(hit)
    cells = []
    for o, top in tops.items():
        role = instance.options[o].role
        for b in range(max(top, -1) + 1):
            if (b == 0 and role in ("first", "middle")) or (b > 0 and role in ("last", "whole")):
                continue  # the back block (b = 0) is last or whole; every other one is not
            cells.append((b, o))
    kind = {o: K for K, members in opts.items() for o in members}
    data = LevelData(sig, thresholds, tuple(cells), kind, {}, ())
    first = {o: data.threshold_index(instance.options[o].max_time_s) for o in kind}
    ends: dict[int, set[int]] = defaultdict(set)
    starts: dict[int, set[int]] = defaultdict(set)
    for b, o in cells:
        ends[b + len(instance.options[o].stages)].add(kind[o])
        starts[b].add(kind[o])
    junctions = []
    for level in sorted(starts):
        if level == 0:
            continue
        for K in sorted(ends[level]):
            for K2 in sorted(starts[level]):
                c = sig.link[K][K2]
                if c is not None and c <= ceiling:
                    junctions.append((level, K, K2, c))
    return LevelData(sig, thresholds, tuple(cells), kind, first, tuple(junctions))


#: Thresholds just above the bottleneck floor at which the warm start's greedy is tried again
#: (0.25 s on scale-16x128, where it lowers the greedy's 77.6 s to 74.0 s and so the window).
NEAR_FLOOR_THRESHOLDS = 64


def warm_start(instance: PipelineInstance, deadline, max_cells: int = MAX_LEVEL_CELLS) -> tuple[LevelData, list[int] | None]:
    """The level data and a known plan: the greedy's, improved at the thresholds just above
    the floor; the window is narrowed to the better plan's ceiling.

    Raises as :func:`level_data`.
    """
    from hetopt.pipeline.heuristic import greedy_at, greedy_plan
    from hetopt.pipeline.problem import PipelineSolution

    plan = greedy_plan(instance, deadline)
    upper = None if plan is None else evaluate(instance, PipelineSolution(blocks_from_choices(instance, plan))).objective
    data = level_data(instance, upper, max_cells)
    better, value = greedy_at(instance, list(data.thresholds[:NEAR_FLOOR_THRESHOLDS]), deadline,
                              (plan, float("inf") if upper is None else upper))
    if better is not None and (upper is None or value < upper):
        plan, data = better, level_data(instance, value, max_cells)
    return data, plan


def level_floor(instance: PipelineInstance, data: LevelData) -> float:
    """A bound before any search: the simple one, or the slot floor's (M − 1)·θ_0 plus the
    least Σ t of L layers, whichever is larger."""
    least = instance.layers * min(instance.options[o].total_time_s / instance.options[o].layers for o in data.kind)
    return max(simple_bound(instance), least + (instance.microbatches - 1) * data.thresholds[0])


def known_plan(instance: PipelineInstance, method: str, plan: list[int], deadline, bound: float | None, stats: dict,
               reason: str) -> Result:
    """FEASIBLE with the warm start's plan, when the time ran out before the solver had a better one."""
    return conclude(problem="pipeline", method=method, instance=instance,
                    solution=build_solution(instance, blocks_from_choices(instance, plan)), evaluate=evaluate,
                    deadline=deadline, proven_optimal=False, bound=bound, stats=dict(stats, from_hint=True),
                    reason=f"{reason}; the greedy warm start's plan")


class CellEnds(NamedTuple):
    """A model's cell variables grouped by the level where their block starts or ends, alone
    (``starts``, ``ends``) and with their signature (``by_kind_start``, ``by_kind_end``)."""

    starts: dict
    ends: dict
    by_kind_start: dict
    by_kind_end: dict


def cell_ends(instance: PipelineInstance, data: LevelData, y: dict) -> CellEnds:
    """Group the cell variables y[b,o] by start and end level, alone and with their signature."""
    opts = instance.options
    starts, ends, by_kind_start, by_kind_end = {}, {}, {}, {}
    for (b, o), var in y.items():
        e = b + len(opts[o].stages)
        starts.setdefault(b, []).append(var)
        ends.setdefault(e, []).append(var)
        by_kind_start.setdefault((b, data.kind[o]), []).append(var)
        by_kind_end.setdefault((e, data.kind[o]), []).append(var)
    return CellEnds(starts, ends, by_kind_start, by_kind_end)
