"""The cheapest plan, or the fastest within a budget: the planner over the sets of islands it rents.

A plan holds every GPU of the islands it runs on (``answer.plan_cost``). For a set S of the
cluster's islands let rate(S) = Σ_{i ∈ S} GPUs_i · price_i (US dollars per hour) and T*(S) the
fastest plan on S's nodes (the planner's own exact search, held to them). Then

    cheapest cost per iteration = min over S of rate(S) · T*(S) / 3600,

exactly: the cheapest plan p* runs on some set S*, and T*(S*) ≤ T(p*), so rate(S*) · T*(S*) is
at most its cost; and the plan found on S, which may hold only some of S's islands, costs at most
rate(S) · T*(S). So the least cost of the plans found is the optimum. A budget B keeps the sets with rate(S) ≤ B; the time objective then
takes min T*(S) over them. Every set S is bounded below by the ideal time of its GPUs
(``answer.ideal_time``: the iteration's FLOPs at their modeled speed, no traffic), so a set whose
rate(S) · ideal(S) (time objective: ideal(S)) reaches the best found is skipped, exactly; the
sets are tried in the order of that bound (a plan holding fewer islands than S is its own
set's, which is planned or bounded in turn). With the cost objective and no budget, the set of
every island is planned whatever its bound: it is the fastest plan, shown beside the cheapest.

The formulation and the proof are in ``formulations/pipeline.md`` ("The cheapest plan").
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace

from hetopt.budget import Deadline
from hetopt.errors import InputError
from hetopt.planner.answer import HeteroPlan, dollars, ideal_time
from hetopt.planner.setup.cluster import Cluster
from hetopt.planner.setup.configure import choose_islands
from hetopt.planner.parallelizer.protocol import held_gpus
from hetopt.planner.setup.request import PlanRequest
from hetopt.result import Result, Status, relative_gap
from hetopt.workload import ModelConfig

#: Most islands whose subsets are planned: 2^n − 1 sets, each a planner search (6: 63 sets).
MAX_PRICED_ISLANDS = 6
#: Seconds a set's search needs at least under a time limit; with less left it is not started.
MIN_SET_SECONDS = 0.05


@dataclass(frozen=True)
class IslandSet:
    """A set of islands: their indices and names, the GPUs they hold by type, their rate."""

    members: tuple[int, ...]
    names: tuple[str, ...]
    nodes: tuple[str, ...]  # the names of their nodes
    gpus: dict[str, int]
    usd_per_hour: float
    ideal_s: float  # the ideal time of their GPUs: a lower bound on every plan on them


def island_sets(cluster: Cluster, cfg: ModelConfig, islands: Result, r: PlanRequest, seq: int, *,
                max_islands: int = MAX_PRICED_ISLANDS) -> list[IslandSet]:
    """Every non-empty set of the cluster's islands, with its price (the budget is not applied).

    Raises
    ------
    InputError
        A GPU type without a price (``objective``), or more than ``max_islands`` islands
        (:data:`MAX_PRICED_ISLANDS`).
    """
    field = "objective" if r.objective == "cost" else "budget"
    unpriced = sorted({g.name for g in cluster.gpu_types} - set(cluster.prices))
    if unpriced:
        raise InputError(f"{field}: no price for {', '.join(unpriced)}: give [price] usd_per_gpu_hour = "
                         f"{{ \"{unpriced[0]}\" = ... }} in the cluster file", field=field)
    chosen = choose_islands(cluster, islands, None)
    n = len(chosen.specs)
    if n > max_islands:
        raise InputError(f"{field}: plans every set of the cluster's islands, {2 ** n - 1:,} sets for its {n} islands; "
                         f"at most {2 ** max_islands - 1} ({max_islands} islands): plan a subset of "
                         "the nodes", field=field)
    sets = []
    for k in range(1, n + 1):
        for members in itertools.combinations(range(n), k):
            gpus = held_gpus(chosen.specs, members)
            rate = sum(count * cluster.prices[name] for name, count in gpus.items())
            nodes = tuple(name for i in members for name in chosen.names[i])
            sets.append(IslandSet(members, tuple(chosen.specs[i].name for i in members), nodes, gpus, rate,
                                  ideal_time(cluster.subset(list(nodes)), cfg, r.global_batch, seq)))
    return sets


def _measure(r: PlanRequest, s: IslandSet, time_s: float) -> float:
    """What the objective reads of a plan on ``s`` taking ``time_s``: seconds, or dollars."""
    return dollars(s.usd_per_hour, time_s) if r.objective == "cost" else time_s


def plan_priced(r: PlanRequest, cluster: Cluster, cfg: ModelConfig, seq: int, islands: Result, deadline: Deadline,
                run: Callable[[PlanRequest], HeteroPlan], *, max_islands: int = MAX_PRICED_ISLANDS,
                min_set_seconds: float = MIN_SET_SECONDS) -> HeteroPlan:
    """The request's plan over the island sets within its budget, by its objective.

    ``run`` plans one request on the time objective (the planner's own steps); each set's request
    is ``r`` held to the set's nodes, without alternatives or replicas, with what is left of
    ``deadline``; a set is not started with less than ``min_set_seconds`` left. More than
    ``max_islands`` islands are refused (:func:`island_sets`).
    """
    every = island_sets(cluster, cfg, islands, r, seq, max_islands=max_islands)
    whole = len(islands.solution.islands)
    sets = [s for s in every if r.budget is None or s.usd_per_hour <= r.budget]
    if not sets:
        least = min(every, key=lambda s: s.usd_per_hour)
        return HeteroPlan(cluster=cluster.name, model=cfg.name, global_batch=r.global_batch, microbatch_size=0,
                          microbatches=0, seq=seq, status=Status.INFEASIBLE,
                          reason=f"no island within the budget of ${r.budget:g} per hour (the cheapest, "
                                 f"{' + '.join(least.names)}, costs ${least.usd_per_hour:.4g})",
                          cost_search=_summary(r, [], None, None, max_islands))
    sets.sort(key=lambda s: (_measure(r, s, s.ideal_s), -len(s.members)))
    rows: list[dict] = []
    best: tuple[float, HeteroPlan, IslandSet] | None = None
    open_bounds: list[float] = []  # lower bounds of the sets not settled (cut by the time limit)
    for s in sets:
        bound = _measure(r, s, s.ideal_s)
        everything = r.objective == "cost" and r.budget is None and len(s.members) == whole
        row = {"islands": list(s.names), "gpus": s.gpus, "usd_per_hour": s.usd_per_hour}
        if best is not None and bound >= best[0] and not everything:
            rows.append(row | {"skipped_bound": bound})
            continue
        left = deadline.seconds_left()
        if left is not None and left < min_set_seconds:
            rows.append(row | {"status": Status.TIME_LIMIT.value})
            open_bounds.append(bound)
            continue
        sub = cluster.subset(list(s.nodes), name=cluster.name)
        p = run(replace(r, cluster=sub, objective="time", budget=None, alternatives=False, replicas=False,
                        time_limit=left))
        time_s = p.iteration_time_s
        # the plan found may leave some of the set's islands out: it pays for those it holds
        usd = None if p.cost is None else p.cost["usd_per_iteration"]
        value = usd if r.objective == "cost" else time_s
        rows.append(row | {"status": p.status.value, "iteration_time_s": time_s, "usd_per_iteration": usd,
                           "holds": None if p.cost is None else p.cost["gpus"]})
        if p.status is not Status.INFEASIBLE and p.status is not Status.OPTIMAL:
            own = p.bound_s if p.bound_s is not None else s.ideal_s
            open_bounds.append(_measure(r, s, own))
        if value is not None and (best is None or value < best[0]):
            best = (value, p, s)
    return _conclude(r, cluster, cfg, seq, rows, best, open_bounds, max_islands)


def _conclude(r: PlanRequest, cluster: Cluster, cfg: ModelConfig, seq: int, rows: list[dict],
              best: tuple[float, HeteroPlan, IslandSet] | None, open_bounds: list[float], max_islands: int) -> HeteroPlan:
    """The best set's plan, its status on the objective: OPTIMAL only when every set was settled."""
    fastest = min((row for row in rows if row.get("iteration_time_s") is not None),
                  key=lambda row: row["iteration_time_s"], default=None)
    if best is None:
        status = Status.TIME_LIMIT if open_bounds else Status.INFEASIBLE
        reason = "time limit reached before any set of islands was planned" if open_bounds else (
            "no plan fits any set of islands" + ("" if r.budget is None else f" within ${r.budget:g} per hour"))
        return HeteroPlan(cluster=cluster.name, model=cfg.name, global_batch=r.global_batch, microbatch_size=0,
                          microbatches=0, seq=seq, status=status, reason=reason,
                          cost_search=_summary(r, rows, None, fastest, max_islands))
    value, p, s = best
    lower = min([value, *open_bounds])
    status = Status.OPTIMAL if not open_bounds else Status.FEASIBLE
    reason = "" if not open_bounds else "time limit reached: some sets of islands were not settled"
    summary = _summary(r, rows, {"islands": list(s.names), "objective_value": value, "bound": lower,
                                 "gap": relative_gap(value, lower)}, fastest, max_islands)
    # status, bound and gap refer to the objective: dollars per iteration (the bound in
    # ``cost_search``; ``bound_s`` stays the plan's own time bound), or seconds
    bound_s = p.bound_s if r.objective == "cost" else lower
    return replace(p, status=status, reason=reason or p.reason, gap=relative_gap(value, lower), bound_s=bound_s,
                   cost_search=summary)


def _summary(r: PlanRequest, rows: list[dict], chosen: dict | None, fastest: dict | None,
             max_islands: int) -> dict:
    """``HeteroPlan.cost_search``: the objective, the budget, every set and how it was settled."""
    return {"objective": r.objective, "budget_usd_per_hour": r.budget, "sets": rows, "chosen": chosen,
            "fastest": fastest, "max_islands": max_islands}


__all__ = ["MAX_PRICED_ISLANDS", "MIN_SET_SECONDS", "IslandSet", "island_sets", "plan_priced"]
