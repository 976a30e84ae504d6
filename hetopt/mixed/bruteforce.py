"""Exhaustive search for tiny mixed instances: every cut, every layout, every split.

It shares nothing with the DP and the MILP but ``evaluate``: no best split, no dominance,
no labels. Every plan is built and handed to ``evaluate``, which decides feasibility and time.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

from hetopt.budget import CLOCK_EVERY
from hetopt.family import Deadline, conclude, no_solution
from hetopt.mixed.limits import dp_limit_hit
from hetopt.mixed.problem import MixedInstance, MixedSolution, Stage, evaluate
from hetopt.mixed.stages import member_set_bound, stage_members
from hetopt.result import Result, Status

#: Most plans bruteforce tries; beyond it, it declines.
MAX_PLANS = 500_000


def cuts(layers: int) -> Iterator[tuple[tuple[int, int], ...]]:
    """Every cut of 0..layers−1 into contiguous non-empty ranges."""
    for k in range(layers):
        for inner in itertools.combinations(range(1, layers), k):
            bounds = (0, *inner, layers)
            yield tuple(zip(bounds[:-1], bounds[1:]))


def plan_count(instance: MixedInstance) -> int:
    """Σ over cuts of (member sets)^S, the plans :func:`plans` yields; ``MAX_PLANS + 1`` when
    listing the member sets alone would pass the limit (decided from the per-type choice
    counts, before any listing: bruteforce then declines, conservatively)."""
    if member_set_bound(instance) > MAX_PLANS:
        return MAX_PLANS + 1
    per = len(stage_members(instance))
    L = instance.layers
    return sum(math.comb(L - 1, s - 1) * per ** s for s in range(1, L + 1))


def plans(instance: MixedInstance) -> Iterator[MixedSolution]:
    """Every plan (feasible or not: ``evaluate`` decides)."""
    sets = stage_members(instance)
    names = tuple(g.name for g in instance.gpus)
    for cut in cuts(instance.layers):
        for pick in itertools.product(sets, repeat=len(cut)):
            yield MixedSolution(tuple(Stage(a, e, ms) for (a, e), ms in zip(cut, pick)), names)


def solve_bruteforce(instance: MixedInstance, *, time_limit: float | None = None) -> Result:
    """Evaluate every plan; keep the fastest feasible one. Declines above ``MAX_PLANS`` plans."""
    deadline = Deadline(time_limit)
    count = plan_count(instance)
    if count > MAX_PLANS:
        dp = dp_limit_hit(instance)  # advice that holds (CONVENTIONS §9)
        advice = "use dp" if dp is None else f"dp declines it too ({dp})"
        return no_solution(problem="mixed", method="bruteforce", status=Status.DECLINED, deadline=deadline,
                           reason=f"more than {MAX_PLANS} plans (cuts × member sets), bruteforce's limit; {advice}")
    best, best_plan, tried, timed_out = math.inf, None, 0, False
    for plan in plans(instance):
        tried += 1
        if tried % CLOCK_EVERY == 0 and deadline.expired():
            timed_out = True
            break
        ev = evaluate(instance, plan)
        if ev.feasible and ev.objective < best:
            best, best_plan = ev.objective, plan
    if best_plan is None:
        if timed_out:
            return no_solution(problem="mixed", method="bruteforce", status=Status.TIME_LIMIT, deadline=deadline,
                               reason="time limit reached before a feasible plan was found", stats={"plans": tried})
        return no_solution(problem="mixed", method="bruteforce", status=Status.INFEASIBLE, deadline=deadline,
                           reason="no plan fits the GPUs' count and memory", stats={"plans": tried})
    return conclude(problem="mixed", method="bruteforce", instance=instance, solution=best_plan, evaluate=evaluate,
                    deadline=deadline, proven_optimal=not timed_out, stats={"plans": tried})


def _share_multisets(replicas: int, samples: int, most: int) -> Iterator[tuple[int, ...]]:
    """Every non-decreasing tuple of ``replicas`` shares in 1..most adding up to ``samples``."""
    if replicas == 0:
        if samples == 0:
            yield ()
        return
    for y in range(1, min(most, samples) + 1):
        for rest in _share_multisets(replicas - 1, samples - y, most):
            if not rest or rest[0] >= y:
                yield (y, *rest)


def per_replica_optimum(instance: MixedInstance) -> float:
    """The least iteration time when every replica may hold its own share (no even spreading):
    the model the typed counts of the family stand for. math.inf when no plan fits.

    For the tests of ``formulations/mixed.md``'s claim that spreading a type's samples evenly
    over its replicas loses no optimum (the tables do not decrease with the share): it lists
    every cut, every per-type (t, r) and every multiset of r shares, and prices the plan by the
    closed form with the same sync and memory rules as ``evaluate``, which it does not call (a
    per-replica plan is not a :class:`MixedSolution`). Tiny instances only (no limit checked).
    """
    from hetopt.mixed.problem import in_flight, iteration_time_s, member_fits, member_time_s, stage_time_s
    from hetopt.mixed.stages import type_choices

    b, M = instance.microbatch_size, instance.microbatches
    layouts = [m for m in itertools.product(*(type_choices(instance, g) for g in range(instance.num_types)))
               if any(c is not None for c in m)]
    best = math.inf
    for cut in cuts(instance.layers):
        S = len(cut)
        per_stage = []
        for s, (a, e) in enumerate(cut):
            flight = in_flight(S - s - 1, M)
            options = []  # (GPUs per type, stage time)
            for pick in layouts:
                members = [(g, *c) for g, c in enumerate(pick) if c is not None]
                # every assignment of shares to the replicas: per type a multiset of r shares
                per_type = []
                for g, k, t, r in members:
                    tab = instance.gpus[g].tp[k]
                    per_type.append([(sum(ys), max(member_time_s(instance, a, e, g, k, y) for y in ys))
                                     for n in range(r, b + 1) for ys in _share_multisets(r, n, tab.shares)
                                     if all(member_fits(instance, a, e, g, k, y, flight) for y in ys)])
                ring = [(g, t, r) for g, _k, t, r in members]
                use = [0] * instance.num_types
                for g, _k, t, r in members:
                    use[g] = r * t
                fastest = min((max(c for _n, c in combo) for combo in itertools.product(*per_type)
                               if sum(n for n, _c in combo) == b), default=math.inf)
                if fastest < math.inf:
                    options.append((tuple(use), stage_time_s(instance, a, e, ring, fastest)))
            per_stage.append(options)
        for combo in itertools.product(*per_stage):
            if all(sum(o[0][g] for o in combo) <= instance.gpus[g].count for g in range(instance.num_types)):
                best = min(best, iteration_time_s(instance, [o[1] for o in combo]))
    return best
