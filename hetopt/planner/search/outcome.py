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
from dataclasses import dataclass, field

from hetopt.interrupt import STOPPED_BY_USER
from hetopt.planner.search.enumerate import EnumerationStats
from hetopt.planner.parallelizer.protocol import IslandSpec, PartialPlan
from hetopt.result import Result, Status, bound_within_gap, relative_gap


#: How a plan stopped by Ctrl-C begins its reason (:func:`stopped_by_user`).
STOPPED = "stopped by Ctrl-C"
#: A plan's texts after a Ctrl-C, in order: a first Ctrl-C makes every deadline read as
#: expired, so each step stops and words it as its time limit; the plan had none.
_STOP_WORDS = (
    (STOPPED_BY_USER, ""),  # a solver's own prefix (``solvers.solve``), which goes on to speak of the limit
    ("time limit reached", STOPPED),
    ("the time limit was spent", STOPPED),
    ("cut by the time limit", STOPPED),
    ("within the time limit", "before Ctrl-C"),
    ("the time limit came", "Ctrl-C came"),
    ("time limit", "Ctrl-C"),
)

@dataclass(frozen=True)
class ChosenIslands:
    """The islands composed: their specs, member nodes (indices), names of those left out."""

    specs: list[IslandSpec]
    members: list[list[int]]
    names: list[list[str]]
    left_out: list[str]
    note: str  # why islands were left out, for the reason
    #: islands the ``target`` runtime cannot run (no BF16 where it trains in bf16 only): outside
    #: the launchable space by definition, so leaving them out narrows nothing
    excluded: tuple[str, ...] = ()


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
    #: that no plan of this size is faster): the cost model's, before any enumeration, or the
    #: composition's own over the enumerated pairs (``sizes._ruled_out``), before composing.
    pruned_bound: float | None = None
    #: Set when the size was not planned for a reason other than time (e.g. more micro-batches
    #: than the pipeline family composes): no proof either way, so the plan is not OPTIMAL.
    not_planned: str = ""
    #: With a ``target``: the unrestricted composition of the same enumeration and the plans
    #: behind it (``result`` and ``plans`` are then the launchable ones, ``planner/search/launchable.py``).
    free: Result | None = None
    free_plans: list[PartialPlan] = field(default_factory=list)


@dataclass(frozen=True)
class PlanOutcome:
    """The composed plan's status, proven bound, gap and reason, and the attempt whose plan is
    the answer (None: no plan). Named as in :class:`~hetopt.planner.answer.HeteroPlan`."""

    status: Status
    reason: str = ""
    bound_s: float | None = None
    gap: float | None = None
    best: Attempt | None = None


def stopped_by_user(text: str, *, lead: bool = True) -> str:
    """``text`` (a reason, an alternative's detail) of a plan stopped by Ctrl-C, which speaks of
    the time limit because every step stops at a Ctrl-C as at its limit: the limit's words
    become Ctrl-C's, and with ``lead`` the text begins with :data:`STOPPED`.

    Examples
    --------
    >>> stopped_by_user("time limit reached before a pipeline was found: micro-batch 1: time limit during the enumeration")
    'stopped by Ctrl-C before a pipeline was found: micro-batch 1: Ctrl-C during the enumeration'
    >>> stopped_by_user("composed over 4 of 30 islands: not proven optimal")
    'stopped by Ctrl-C: composed over 4 of 30 islands: not proven optimal'
    >>> stopped_by_user("not planned: the time limit was spent", lead=False)
    'not planned: stopped by Ctrl-C'
    """
    for old, new in _STOP_WORDS:
        text = text.replace(old, new)
    return f"{STOPPED}: {text}" if lead and not text.startswith(STOPPED) else text


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
                narrowed: Sequence[str] = (), plan_s: float | None = None, gap_limit: float = 0.0) -> list[str]:
    """Why the composition is not a proof for the whole cluster (empty: it is).

    ``plan_s``: the plan's time, if any; with a ``gap_limit``, the sizes proven only to within it
    of that time (bound at least ``bound_within_gap(plan_s, gap_limit)``) make one entry.
    """
    why = []
    within = bound_within_gap(plan_s, gap_limit) if plan_s is not None and gap_limit > 0.0 else math.inf
    close = []  # sizes proven within the gap limit only
    if islands.status is not Status.OPTIMAL:
        why.append(f"islands {islands.status.value} (not proven fewest)")
    if chosen is not None and chosen.left_out:
        why.append(chosen.note)
    why.extend(narrowed)
    if planned > len(attempts):
        why.append(f"time limit: {planned - len(attempts)} of {planned} micro-batch sizes not planned")
    for a in attempts:
        if a.pruned_bound is not None and (plan_s is None or a.pruned_bound >= plan_s):
            continue  # proven not to beat the plan found
        if a.complete and a.result is not None and a.result.status is Status.OPTIMAL:
            continue  # composed and proven
        if a.complete and (bound := _attempt_bound(a)) is not None and within <= bound < math.inf:
            close.append(str(a.microbatch_size))
            continue
        if a.pruned_bound is not None:  # below the plan: only within the gap limit of an earlier one
            why.append(f"micro-batch {a.microbatch_size}: none faster than {a.pruned_bound:.4g} s")
            continue
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
    if close:
        why.append(f"micro-batch {'size' if len(close) == 1 else 'sizes'} {', '.join(close)}: proven only "
                   f"within the gap limit {gap_limit:g} (none faster than {within:.4g} s)")
    return why


def _proven_over_search(islands: Result, chosen: ChosenIslands | None, attempts: list[Attempt], planned: int,
                        plan_s: float) -> bool:
    """Every island composed and every micro-batch size of the search proven (composed exactly,
    or ruled out by a bound of at least the plan's time ``plan_s``): the plan is the optimum of
    the search as it was narrowed."""
    return (islands.status is Status.OPTIMAL and chosen is not None and not chosen.left_out and planned == len(attempts)
            and not any(a.not_planned for a in attempts)
            and all((a.pruned_bound is not None and a.pruned_bound >= plan_s) or (a.complete and a.result is not None
                                                   and a.result.status in (Status.OPTIMAL, Status.INFEASIBLE)
                                                   and not (a.result.status is Status.INFEASIBLE
                                                            and a.stats.pruned.get("imbalance", 0)))
                    for a in attempts))


def conclude_plan(
    islands: Result, chosen: ChosenIslands | None, attempts: list[Attempt], planned: int,
    narrowed: Sequence[str] = (), *, cluster: str, model: str, ideal_s: float, gap_limit: float = 0.0,
) -> PlanOutcome:
    """The plan's status, bound, gap and reason from the islands and composition results.

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
    cluster, model
        Their names, for the reason.
    ideal_s
        The ideal iteration time (:func:`~hetopt.planner.answer.ideal_time`), a lower bound on
        every plan: the bound when the compositions' bounds do not cover the whole space.
    gap_limit
        The request's (``PlanRequest.gap_limit``): the sizes proven only within it of the plan
        are named in one entry of the reason.

    Returns
    -------
    PlanOutcome
        With ``best`` the attempt whose plan is the answer, or None.

    Rules: no islands → the islands step's status (TIME_LIMIT, INFEASIBLE, ...). A plan →
    OPTIMAL only when the islands are proven, none is left out, every micro-batch size was
    enumerated completely and its composition proven (OPTIMAL or INFEASIBLE); otherwise
    FEASIBLE with the best proven bound (each micro-batch size's bound when all are known,
    never below the ideal, a lower bound of every plan). No plan → INFEASIBLE only when that
    same proof holds; TIME_LIMIT when a time limit stopped a step; else the composition's
    DECLINED or ERROR, or DECLINED when islands were left out.

    Examples
    --------
    >>> stopped = Result(problem="islands", method="exact", status=Status.TIME_LIMIT)
    >>> conclude_plan(stopped, None, [], 1, cluster="c", model="m", ideal_s=1.0).status
    <Status.TIME_LIMIT: 'TIME_LIMIT'>
    """
    if not islands.status.has_solution:
        if islands.status is Status.TIME_LIMIT:
            return PlanOutcome(islands.status,
                               f"time limit reached while forming islands ({islands.reason or 'no partition found'})")
        return PlanOutcome(islands.status, f"islands: {islands.reason or islands.status.value}")
    found = [a for a in attempts if a.result is not None and a.result.status.has_solution]
    best = min(found, key=lambda a: a.result.objective, default=None)
    why = _not_proven(islands, chosen, attempts, planned, narrowed, None if best is None else best.result.objective,
                      gap_limit)
    if best is not None:
        t = best.result.objective
        if not why:
            return PlanOutcome(Status.OPTIMAL, "", t, 0.0, best)
        bounds = [_attempt_bound(a) for a in attempts]
        exact_over_all = (islands.status is Status.OPTIMAL and not chosen.left_out and not narrowed
                          and planned == len(attempts))
        bound = min(bounds) if exact_over_all and None not in bounds else None
        bound = min(ideal_s if bound is None else max(bound, ideal_s), t)
        gap = relative_gap(t, bound)
        within = ""
        if narrowed and _proven_over_search(islands, chosen, attempts, planned, t):
            # only the narrowing keeps it from OPTIMAL: say that the plan is the best of its search
            within = (f"; optimal over every island within that narrowing (each of the {len(attempts)} micro-batch "
                      "sizes composed and proven)")
        reason = (f"{'; '.join(why)}{within}: not proven optimal for {cluster}; gap {100 * gap:.1f}% to the bound "
                  f"{bound:.4g} s" + (" (the ideal, a lower bound for the whole cluster)" if bound == ideal_s else ""))
        return PlanOutcome(Status.FEASIBLE, reason, bound, gap, best)
    failures = "; ".join(f"micro-batch {a.microbatch_size}: {a.result.reason or a.result.status.value}"
                         for a in attempts if a.result is not None)
    statuses = {a.result.status for a in attempts if a.result is not None}
    timed_out = planned > len(attempts) or any((a.result is None and not a.not_planned) or not a.complete for a in attempts) \
        or Status.TIME_LIMIT in statuses
    if timed_out:
        return PlanOutcome(Status.TIME_LIMIT, "time limit reached before a pipeline was found: " + "; ".join(why))
    if statuses & {Status.ERROR, Status.DECLINED}:
        return PlanOutcome(Status.ERROR if Status.ERROR in statuses else Status.DECLINED,
                           f"no pipeline of {model} composed on {cluster}: {failures}")
    if why:  # every composition infeasible, but over a choice of islands, not the cluster
        return PlanOutcome(Status.DECLINED, f"no pipeline of {model} fits the islands composed on {cluster} "
                           f"({'; '.join(why)}); not proven for the whole cluster: {failures}")
    return PlanOutcome(Status.INFEASIBLE, f"no pipeline of {model} fits {cluster}: {failures}")
