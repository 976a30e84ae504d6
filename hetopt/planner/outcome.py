"""The planner's one status step: islands and compositions in, the plan's status out.

:func:`conclude_plan` does for the planner what ``hetopt.family.conclude`` does for a
solver: it maps the islands family's result and, per micro-batch size, whether the
enumeration was complete and what the composition proved, to the plan's status, bound, gap
and reason. Never OPTIMAL unless every step proved its part; never INFEASIBLE unless every
micro-batch size was proven not to fit over the whole cluster.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetopt.planner.enumerate import EnumerationStats
from hetopt.planner.parallelizer import IslandSpec, PartialPlan
from hetopt.result import Result, Status, relative_gap

if TYPE_CHECKING:
    from hetopt.planner.plan import HeteroPlan


@dataclass(frozen=True)
class ChosenIslands:
    """The islands composed: their specs, member nodes (indices), names of those left out."""

    specs: list[IslandSpec]
    members: list[list[int]]
    names: list[list[str]]
    left_out: list[str]
    note: str  # why islands were left out, for the reason


@dataclass
class Attempt:
    """One micro-batch size: its composition (None: not run, no time left) and enumeration."""

    microbatch_size: int
    result: Result | None
    complete: bool  # the parallelizer answered every query
    plans: list[PartialPlan]
    stats: EnumerationStats
    enumerate_s: float = 0.0
    compose_s: float = 0.0
    #: Set when the size was skipped: its lower bound, at least the best plan found (a proof
    #: that no plan of this size is faster, so it needs no enumeration).
    pruned_bound: float | None = None
    #: Set when the size was not planned for a reason other than time (e.g. more micro-batches
    #: than the pipeline family composes): no proof either way, so the plan is not OPTIMAL.
    not_planned: str = ""


def _attempt_bound(a: Attempt) -> float | None:
    """A proven lower bound on every plan with this micro-batch size (inf: none fits; None: unknown)."""
    if a.pruned_bound is not None:
        return a.pruned_bound
    if a.result is None or not a.complete:
        return None
    if a.result.status is Status.OPTIMAL:
        return a.result.objective
    if a.result.status is Status.INFEASIBLE:
        return math.inf
    return a.result.bound  # FEASIBLE or TIME_LIMIT: the dp's bound, if it has one


def _not_proven(islands: Result, chosen: ChosenIslands | None, attempts: list[Attempt], planned: int,
                narrowed: Sequence[str] = ()) -> list[str]:
    """Why the composition is not a proof for the whole cluster (empty: it is)."""
    why = []
    if islands.status is not Status.OPTIMAL:
        why.append(f"islands {islands.status.value} (not proven fewest)")
    if chosen is not None and chosen.left_out:
        why.append(chosen.note)
    why.extend(narrowed)
    if planned > len(attempts):
        why.append(f"time limit: {planned - len(attempts)} of {planned} micro-batch sizes not planned")
    for a in attempts:
        if a.pruned_bound is not None:
            continue  # proven not to beat the plan found
        if a.not_planned:
            why.append(f"micro-batch {a.microbatch_size}: {a.not_planned}")
            continue
        if not a.complete:
            why.append(f"micro-batch {a.microbatch_size}: time limit during the enumeration")
        elif a.result is None:
            why.append(f"micro-batch {a.microbatch_size}: time limit before the composition")
        elif a.result.status is Status.INFEASIBLE and a.stats.pruned.get("imbalance", 0):
            # the planner re-runs such a size without the heuristic; one left like this (no time
            # for the re-run) proves nothing
            why.append(f"micro-batch {a.microbatch_size}: imbalance pruning (a heuristic) removed "
                       f"{a.stats.pruned['imbalance']} pairs before the composition found none")
        elif a.result.status not in (Status.OPTIMAL, Status.INFEASIBLE):
            why.append(f"micro-batch {a.microbatch_size}: composition {a.result.status.value}"
                       + (f" ({a.result.reason})" if a.result.reason else ""))
    return why


def conclude_plan(
    out: HeteroPlan, islands: Result, chosen: ChosenIslands | None, attempts: list[Attempt], planned: int,
    narrowed: Sequence[str] = (),
) -> Attempt | None:
    """Set ``out``'s status, bound, gap and reason from the islands and composition results.

    Parameters
    ----------
    islands
        The islands family's result.
    chosen
        The islands composed (None when the islands step found none).
    attempts
        One per micro-batch size planned, in order; ``planned`` of them were to be.
    narrowed
        How the search was narrowed short of the whole space (e.g. atoms of several layers:
        stage boundaries only between atoms). Each keeps the plan from OPTIMAL, and the
        compositions' bounds then bound only the narrowed space, so the bound is the ideal.

    Returns
    -------
    The attempt whose plan is the answer, or None.

    Rules: no islands → the islands step's status (TIME_LIMIT, INFEASIBLE, ...). A plan →
    OPTIMAL only when the islands are proven, none is left out, every micro-batch size was
    enumerated completely and its composition proven (OPTIMAL or INFEASIBLE); otherwise
    FEASIBLE with the best proven bound (each micro-batch size's bound when all are known,
    never below the ideal, a lower bound of every plan). No plan → INFEASIBLE only when that
    same proof holds; TIME_LIMIT when a time limit stopped a step; else the composition's
    DECLINED or ERROR, or DECLINED when islands were left out.
    """
    if not islands.status.has_solution:
        out.status = islands.status
        out.reason = f"islands: {islands.reason or islands.status.value}"
        if islands.status is Status.TIME_LIMIT:
            out.reason = f"time limit reached while forming islands ({islands.reason or 'no partition found'})"
        return None
    why = _not_proven(islands, chosen, attempts, planned, narrowed)
    found = [a for a in attempts if a.result is not None and a.result.status.has_solution]
    best = min(found, key=lambda a: a.result.objective, default=None)
    if best is not None:
        t = best.result.objective
        if not why:
            out.status, out.bound_s, out.gap, out.reason = Status.OPTIMAL, t, 0.0, ""
            return best
        bounds = [_attempt_bound(a) for a in attempts]
        exact_over_all = (islands.status is Status.OPTIMAL and not chosen.left_out and not narrowed
                          and planned == len(attempts))
        bound = min(bounds) if exact_over_all and None not in bounds else None
        bound = out.ideal_time_s if bound is None else max(bound, out.ideal_time_s)
        out.status, out.bound_s = Status.FEASIBLE, min(bound, t)
        out.gap = relative_gap(t, out.bound_s)
        out.reason = (f"{'; '.join(why)}: not proven optimal for {out.cluster}; gap {100 * out.gap:.1f}% to the bound "
                      f"{out.bound_s:.4g} s" + (" (the ideal, a lower bound for the whole cluster)"
                                                  if out.bound_s == out.ideal_time_s else ""))
        return best
    failures = "; ".join(f"micro-batch {a.microbatch_size}: {a.result.reason or a.result.status.value}"
                         for a in attempts if a.result is not None)
    statuses = {a.result.status for a in attempts if a.result is not None}
    timed_out = planned > len(attempts) or any((a.result is None and not a.not_planned) or not a.complete for a in attempts) \
        or Status.TIME_LIMIT in statuses
    if timed_out:
        out.status = Status.TIME_LIMIT
        out.reason = "time limit reached before a pipeline was found: " + "; ".join(why)
    elif statuses & {Status.ERROR, Status.DECLINED}:
        out.status = Status.ERROR if Status.ERROR in statuses else Status.DECLINED
        out.reason = f"no pipeline of {out.model} composed on {out.cluster}: {failures}"
    elif why:  # every composition infeasible, but over a choice of islands, not the cluster
        out.status = Status.DECLINED
        out.reason = (f"no pipeline of {out.model} fits the islands composed on {out.cluster} ({'; '.join(why)}); "
                      f"not proven for the whole cluster: {failures}")
    else:
        out.status = Status.INFEASIBLE
        out.reason = f"no pipeline of {out.model} fits {out.cluster}: {failures}"
    return None
