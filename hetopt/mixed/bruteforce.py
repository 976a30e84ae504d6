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
