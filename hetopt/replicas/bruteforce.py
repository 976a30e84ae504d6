"""Exhaustive search for tiny instances: every multiset of candidates, every split.

It shares nothing with the other methods but ``evaluate``'s formulas (``Candidate.time``,
``ReplicasInstance.sync_s``): no capacities, no optimal split, no knapsack.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

from hetopt.budget import CLOCK_EVERY
from hetopt.family import Deadline, conclude, no_solution
from hetopt.replicas.problem import ReplicasInstance, build_solution, evaluate, infeasible_reason
from hetopt.result import Result, Status

#: Most (multiset, split) plans bruteforce tries; beyond it, it declines.
MAX_PLANS = 2_000_000
#: Most multisets listed while counting the plans (the count stops there).
MAX_MULTISETS = 200_000
#: Plans tried between two looks at the clock: a plan is a few microseconds, so more of them
#: than ``hetopt.budget.CLOCK_EVERY`` model rows.
STEPS_PER_CLOCK = 16 * CLOCK_EVERY


def multisets(instance: ReplicasInstance) -> Iterator[tuple[int, ...]]:
    """Every non-empty multiset of candidates (non-decreasing indices) that fits the islands and N."""
    cands = instance.candidates

    def extend(start: int, left: tuple[int, ...], chosen: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
        if chosen:
            yield chosen
        if len(chosen) == instance.microbatches:
            return
        for c in range(start, len(cands)):
            rest = tuple(a - u for a, u in zip(left, cands[c].uses))
            if min(rest) >= 0:
                yield from extend(c, rest, chosen + (c,))

    yield from extend(0, instance.counts, ())


def plan_count(instance: ReplicasInstance) -> int:
    """Plans bruteforce would try: Σ over multisets of size R of C(N − 1, R − 1) splits.

    Stops counting past ``MAX_PLANS`` (or ``MAX_MULTISETS`` multisets) and returns a figure
    above ``MAX_PLANS`` then.
    """
    total = 0
    for k, ms in enumerate(multisets(instance)):
        total += math.comb(instance.microbatches - 1, len(ms) - 1)
        if total > MAX_PLANS or k >= MAX_MULTISETS:
            return MAX_PLANS + 1
    return total


def _splits(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Every way to write ``total`` as ``parts`` positive integers, in order."""
    for cuts in itertools.combinations(range(1, total), parts - 1):
        bounds = (0, *cuts, total)
        yield tuple(bounds[i + 1] - bounds[i] for i in range(parts))


def solve_bruteforce(instance: ReplicasInstance, *, time_limit: float | None = None) -> Result:
    """Try every multiset and every split; keep the least max_r T_r(n_r) + sync.

    Declines (DECLINED) above ``MAX_PLANS`` plans.
    """
    deadline = Deadline(time_limit)
    count = plan_count(instance)
    if count > MAX_PLANS:
        return no_solution(problem="replicas", method="bruteforce", status=Status.DECLINED, deadline=deadline,
                           reason=f"more than {MAX_PLANS} plans (multisets × splits), bruteforce's limit")
    if count == 0:
        return no_solution(problem="replicas", method="bruteforce", status=Status.INFEASIBLE, deadline=deadline,
                           reason=infeasible_reason(instance) or "no candidate pipeline fits the islands available")
    cands = instance.candidates
    best, best_plan, tried, timed_out = math.inf, None, 0, False
    for ms in multisets(instance):
        sync = instance.sync_s(ms)
        for split in _splits(instance.microbatches, len(ms)):
            tried += 1
            if tried % STEPS_PER_CLOCK == 0 and deadline.expired():
                timed_out = True
                break
            value = max(cands[c].time(n) for c, n in zip(ms, split)) + sync
            if value < best:
                best, best_plan = value, list(zip(ms, split))
        if timed_out:
            break
    if best_plan is None:
        return no_solution(problem="replicas", method="bruteforce", status=Status.TIME_LIMIT, deadline=deadline,
                           reason="time limit reached")
    return conclude(problem="replicas", method="bruteforce", instance=instance,
                    solution=build_solution(instance, best_plan), evaluate=evaluate, deadline=deadline,
                    proven_optimal=not timed_out, stats={"plans": tried})
