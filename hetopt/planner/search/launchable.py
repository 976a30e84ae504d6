"""The planner's ``target`` search: the fastest plan a stock runtime runs as one job.

A runtime (``hetopt.runtimes``) takes some layouts on an island and not others, and takes some
settings once for the whole job. So the launchable optimum is found exactly by:

1. keeping, on every island, only the partial plans the runtime takes (:meth:`Runtime.takes`);
2. grouping them by their job-wide values (:meth:`Runtime.key`: TP, DP, ZeRO, ...);
3. composing every group apart with the pipeline family's exact ``dp``, and keeping the best.

Every launchable plan uses one group's values on all its islands, so it is a composition of
one group; and every composition of a group is launchable. The minimum over the groups is
therefore the optimum over launchable plans, proven when every group's composition is.
The unrestricted composition runs beside it on the same enumeration (``planner/search/sizes.py``).

Examples
--------
>>> from hetopt.planner.parallelizer.protocol import PartialPlan
>>> p = PartialPlan("a", "sig", 0, 24, "whole", 2, 4, 2, 8, 4, "none", 1, True, (), 1.0, None)
>>> shape_of(p, 24, True).whole_model, shape_of(p, 24, True).stage_layers
(True, ())
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace

from hetopt import solvers
from hetopt.budget import Deadline
from hetopt.family import no_solution
from hetopt.planner.answer import HeteroPlan, comparable
from hetopt.pipeline.problem import PipelineInstance, PipelineOption
from hetopt.planner.parallelizer.protocol import IslandSpec, PartialPlan
from hetopt.planner.search.schedule import rescore
from hetopt.result import Result, Status
from hetopt.runtimes import Job, Runtime, Shape, plan_breaks


def shape_of(plan: PartialPlan, layers: int, bf16: bool) -> Shape:
    """The runtime's view of one partial plan of a model of ``layers`` layers."""
    return Shape(tp=plan.tp, pp=plan.pp, dp=plan.dp, vpp=plan.vpp, recompute=plan.recompute, zero=plan.zero_stage,
                 sequence_parallel=plan.sequence_parallel, stage_layers=tuple(s.layers for s in plan.stages),
                 whole_model=plan.first_layer == 0 and plan.layers == layers, bf16=bf16, ep=plan.ep, fsep=plan.fsep,
                 cp=plan.cp, offload=plan.offload)


def groups(runtime: Runtime, job: Job, behind: Sequence[PartialPlan], islands: Sequence[int],
           specs: Sequence[IslandSpec], layers: int) -> list[list[int]]:
    """The options the runtime takes (indices into ``behind``, the plans behind a composition's
    options, on islands ``islands[o]``), one list per combination of job-wide values, leaving
    out a group that cannot cover the model (no plan starts at its first layer or none ends at
    its last)."""
    keyed: dict[tuple, list[int]] = {}
    for o, p in enumerate(behind):
        key = p.launch_group  # the built-in parallelizer's, when it searched for this target
        if isinstance(key, str):
            shape = shape_of(p, layers, specs[islands[o]].gpu.bf16)
            key = runtime.key(shape) if runtime.takes(shape, job) else None
        if key is not None:
            keyed.setdefault(key, []).append(o)
    return [g for g in keyed.values() if any(behind[o].first_layer == 0 for o in g)
            and any(behind[o].first_layer + behind[o].layers == layers for o in g)]


def group_bound(plans: Sequence[PartialPlan], layers: int, microbatches: int) -> float:
    """A lower bound on the 1F1B time T = Σ t + (M − 1)·max t of every composition of ``plans``.

    Every pipeline holds one plan that starts at the first layer and one that ends at the last;
    its slowest stage is at least that plan's slowest, and Σ t ≥ max t, so T ≥ M · the larger of
    the least such maxima over the plans that could be first and last.
    """
    first = min(p.max_time_s for p in plans if p.first_layer == 0)
    last = min(p.max_time_s for p in plans if p.first_layer + p.layers == layers)
    return microbatches * max(first, last)


def path_bound(options: Sequence[PipelineOption], layers: int, microbatches: int) -> float:
    """A lower bound on the closed form T = Σ t + Σ c + (M − 1)·max(t, c) of every composition of ``options``.

    A composition is a path from layer 0 to the last layer whose steps are options, each placed
    where its role allows (first, middle, last, whole, any). Leaving out the links (c ≥ 0) and
    that an island hosts one block, its Σ t is at least the shortest such path by Σ t, and its
    largest t at least the least bottleneck of such a path; both are a small DP over the layer
    positions (math: ``formulations/pipeline.md``, "Launchable plans").
    """
    # per (role, length): the least Σ t and the least max t among the options (the DP needs no more)
    total: dict[tuple[str, int], float] = {}
    worst: dict[tuple[str, int], float] = {}
    for o in options:
        key = (o.role, o.layers)
        total[key] = min(total.get(key, math.inf), o.total_time_s)
        worst[key] = min(worst.get(key, math.inf), max(s.time_s for s in o.stages))
    inf = math.inf
    by_sum, by_max = [inf] * (layers + 1), [inf] * (layers + 1)
    by_sum[0] = by_max[0] = 0.0
    for a in range(layers):
        if by_sum[a] == inf:
            continue
        for (role, k), t in total.items():
            b = a + k
            if b > layers or not _role_fits(role, a, b, layers):
                continue
            by_sum[b] = min(by_sum[b], by_sum[a] + t)
            by_max[b] = min(by_max[b], max(by_max[a], worst[role, k]))
    return by_sum[layers] + (microbatches - 1) * by_max[layers]


def _role_fits(role: str, start: int, end: int, layers: int) -> bool:
    """Whether a block of ``role`` may cover layers [start, end) (``pipeline.problem.allowed_roles``)."""
    if role == "any":
        return True
    first, last = start == 0, end == layers
    return {"whole": first and last, "first": first and not last, "last": last and not first,
            "middle": not first and not last}[role]


def compose_launchable(runtime: Runtime, job: Job, instance: PipelineInstance, behind: list[PartialPlan],
                       specs: Sequence[IslandSpec], deadline: Deadline, time_model: str) -> tuple[Result, list[PartialPlan]]:
    """The best launchable composition of ``instance``'s options and, per option index of the
    result, the partial plans behind it.

    OPTIMAL when every group's composition is proven (or INFEASIBLE when none fits); FEASIBLE,
    with the least bound of the groups, when the deadline cut one; TIME_LIMIT without a plan.
    Groups are composed in the order of :func:`group_bound`, and stop when the bound reaches the
    best plan found: no group left can beat it.
    """
    t0 = time.perf_counter()
    layers, M = instance.layers, instance.microbatches
    found = groups(runtime, job, behind, [o.island for o in instance.options], specs, layers)
    def bound(g: list[int]) -> float:
        b = group_bound([behind[o] for o in g], layers, M)
        if time_model == "closed-form":  # Σ t + (M − 1)·max t bounds the closed form, not a simulated schedule
            b = max(b, path_bound([instance.options[o] for o in g], layers, M))
        return b
    found = sorted(((bound(g), k, g) for k, g in enumerate(found)), key=lambda x: x[:2])
    best: Result | None = None
    behind_best: list[PartialPlan] = []
    proven, bounds, tried, skipped = True, [], 0, 0
    for bound, _, group in found:
        if best is not None and bound >= best.objective:
            skipped = len(found) - tried  # in bound order: no group left can beat the best (exact)
            break
        if deadline.expired():
            proven = False
            break
        tried += 1
        sub = instance.subset(group, f"{instance.name}-{runtime.name}")
        sub_behind = [behind[o] for o in group]
        result = solvers.solve(sub, "dp", time_limit=deadline.seconds_left())
        if time_model == "simulated":
            interleaved = frozenset(o for o, pp in enumerate(sub_behind) if getattr(pp, "vpp", 1) > 1)
            result = rescore(sub, result, deadline, interleaved)
        if result.status is Status.INFEASIBLE:
            continue
        if result.status is not Status.OPTIMAL:
            proven = False
            if result.bound is not None:
                bounds.append(result.bound)
        if result.solution is not None and (best is None or result.objective < best.objective):
            best, behind_best = result, sub_behind
    stats = {"groups": len(found), "groups_composed": tried, "groups_skipped_bound": skipped, "runtime": runtime.name}
    wall = time.perf_counter() - t0
    if best is None:
        status = Status.INFEASIBLE if proven else Status.TIME_LIMIT
        reason = (f"no layout {runtime.title} runs as one job fits" if proven else
                  f"the time limit came before every {runtime.title} job setting was composed")
        result = no_solution(problem="pipeline", method="dp", status=status, deadline=Deadline(None), reason=reason)
        return replace(result, wall_s=wall, stats={**result.stats, **stats}), []
    if proven:
        return replace(best, wall_s=wall, stats={**best.stats, **stats}), behind_best
    # a group never composed (the deadline came first) has no bound: nor has the whole
    bound = min([best.objective, *bounds]) if tried + skipped == len(found) else None
    gap = None if bound is None or best.objective <= 0 else (best.objective - bound) / best.objective
    return replace(best, status=Status.FEASIBLE, bound=bound, gap=gap, wall_s=wall, stats={**best.stats, **stats},
                   reason=f"the time limit came before every {runtime.title} job setting was composed"), behind_best


def launch_summary(runtime: Runtime, job: Job | None, launch_s: float | None, launch_status: Status, launch_name: str,
                   free: HeteroPlan | None, excluded: Sequence[str] = ()) -> dict:
    """The launchable plan beside the unrestricted one: both times and statuses, the rules the
    unrestricted plan breaks, the price of launchability when the two compare honestly
    (``answer.comparable``), and that as one sentence (``summary``) for the command line.

    Examples
    --------
    >>> from hetopt.runtimes import MEGATRON
    >>> launch_summary(MEGATRON, Job("bf16", 2048), 2.0, Status.OPTIMAL, "this plan", None)["summary"]
    'launchable on Megatron-LM (core_v0.15.3 (offloading: core 0.16)): this plan, 2 s per iteration; the unrestricted plan was not planned'
    """
    from hetopt.export.source import plan_view, shapes
    from hetopt.jsonout import plain

    free_s = None if free is None else free.iteration_time_s
    free_status = None if free is None else free.status
    breaks = []
    if free is not None and free.status.has_solution and job is not None:
        breaks = plan_breaks(runtime, shapes(plan_view(plain(free), "the unrestricted plan")), job)
    speedup = None
    if launch_s and free_s and comparable(launch_status, free_status):
        speedup = launch_s / free_s
    head = f"launchable on {runtime.title} ({runtime.version}): "
    head += f"{launch_name}, {launch_s:.4g} s per iteration" if launch_s else f"no plan ({launch_status.value})"
    if free is None or not free.status.has_solution:
        tail = "the unrestricted plan was not planned" if free is None else f"no unrestricted plan ({free.status.value})"
    elif not breaks:
        tail = "the unrestricted plan is launchable as is"
    else:
        faster = (f"the unrestricted plan is {speedup:.3f}× faster ({free_s:.4g} s)" if speedup is not None else
                  f"the unrestricted plan takes {free_s:.4g} s (no ratio: it is {free_status.value}, the launchable "
                  f"plan {launch_status.value})")
        tail = f"{faster}; it needs what {runtime.title} cannot run: {breaks[0]}" + (
            f" (and {len(breaks) - 1} more)" if len(breaks) > 1 else "")
    if excluded:
        tail += f"; left out: {', '.join(excluded)} (no BF16; {runtime.title} trains in bf16)"
    return {
        "target": runtime.name, "runtime": f"{runtime.title} {runtime.version}",
        "launchable": {"plan": launch_name, "iteration_time_s": launch_s, "status": launch_status.value},
        "unrestricted": None if free is None else {
            "iteration_time_s": free_s, "status": free.status.value,
            "layouts": _island_layouts(free)},
        "price_of_launchability": speedup, "breaks": breaks, "excluded": list(excluded),
        "summary": head + "; " + tail,
    }


def _island_layouts(plan: HeteroPlan) -> list[str]:
    """``island: layers a-b, layout`` per island of a plan, front first."""
    out: list[list] = []
    for s in plan.stages:
        if out and out[-1][0] == s.island and out[-1][3] == s.layout:
            out[-1][2] = s.first_layer + s.layers - 1
        else:
            out.append([s.island, s.first_layer, s.first_layer + s.layers - 1, s.layout])
    return [f"{island}: layers {a}-{b}, {layout}" for island, a, b, layout in out]


__all__ = ["compose_launchable", "group_bound", "groups", "launch_summary", "path_bound", "shape_of"]
