"""A greedy plan: the DP's first incumbent, the models' warm start, and the ``greedy`` method.

Start from the best single replica (the candidate with the least T_c(N)); then, until no
candidate fits, add the one that gives the least iteration time (each set re-split
optimally with ``optimal_split``), and keep the best set seen. It proves nothing.
"""

from __future__ import annotations

import math

from hetopt.family import Deadline, conclude, no_solution
from hetopt.replicas.problem import ReplicasInstance, build_solution, evaluate
from hetopt.replicas.split import optimal_split
from hetopt.result import Result, Status


def _objective(instance: ReplicasInstance, chosen: list[int]) -> tuple[float, list[tuple[int, int]]]:
    pairs, slowest = optimal_split(instance, chosen)
    return slowest + instance.sync_s(chosen), pairs


def greedy_plan(instance: ReplicasInstance, deadline: Deadline | None = None) -> list[tuple[int, int]] | None:
    """(candidate, micro-batches) per replica, or None when no candidate fits.

    ``deadline``: once it expires the plan built so far is returned (None before the first
    replica).

    Examples
    --------
    >>> from hetopt.replicas.problem import Candidate, IslandShape
    >>> inst = ReplicasInstance("x", 8, (IslandShape("A", 2),),
    ...                         (Candidate("a", (1,), 1.0, 0.5, 1e9, 1e11),), hop_latency_s=0.0)
    >>> greedy_plan(inst)
    [(0, 4), (0, 4)]
    """
    usable = [c for c in range(len(instance.candidates)) if instance.copies(c) >= 1]
    if not usable:
        return None
    best_c = min(usable, key=lambda c: (instance.candidates[c].time(instance.microbatches), c))
    chosen = [best_c]
    best_value, best_pairs = _objective(instance, chosen)
    value = best_value
    left = [a - u for a, u in zip(instance.counts, instance.candidates[best_c].uses)]
    # keep adding the candidate that helps most (or hurts least) until nothing fits, and
    # return the best set seen: one more replica often raises the sync more than it saves,
    # while a few more would pay off
    while len(chosen) < instance.microbatches:
        step_value, step_c, step_pairs = math.inf, None, None
        for c in usable:
            if deadline is not None and deadline.expired():
                return best_pairs
            uses = instance.candidates[c].uses
            if any(u > a for u, a in zip(uses, left)):
                continue
            value, pairs = _objective(instance, chosen + [c])
            if value < step_value:
                step_value, step_c, step_pairs = value, c, pairs
        if step_c is None:
            break
        chosen.append(step_c)
        left = [a - u for a, u in zip(left, instance.candidates[step_c].uses)]
        if step_value < best_value:
            best_value, best_pairs = step_value, step_pairs
    return best_pairs


def solve_greedy(instance: ReplicasInstance, *, time_limit: float | None = None) -> Result:
    """The greedy plan as a Result (FEASIBLE, no bound: it proves nothing)."""
    deadline = Deadline(time_limit)
    plan = greedy_plan(instance, deadline)
    if plan is None:
        if deadline.expired():
            return no_solution(problem="replicas", method="greedy", status=Status.TIME_LIMIT, deadline=deadline,
                               reason="time limit reached before the greedy found a plan")
        return no_solution(problem="replicas", method="greedy", status=Status.INFEASIBLE, deadline=deadline,
                           reason="no candidate pipeline fits the islands available")
    return conclude(problem="replicas", method="greedy", instance=instance, solution=build_solution(instance, plan),
                    evaluate=evaluate, deadline=deadline, proven_optimal=False, bound=None)
