"""A greedy plan: the DP's first incumbent, the models' warm start, and the ``greedy`` method.

Start from the best single replica (the candidate with the least T_c(N)); then, until no
candidate fits, add the one that gives the least iteration time (each set re-split
optimally with ``optimal_split``), and keep the best set seen. A second pass adds instead
the candidate with the greatest gain per island it uses (small pipelines first); the better
pass wins. It proves nothing.
"""

from __future__ import annotations

import math

from hetopt.family import Deadline, greedy_answer
from hetopt.replicas.problem import ReplicasInstance, build_solution, evaluate, infeasible_reason
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
    best: tuple[float, list[tuple[int, int]]] | None = None
    for per_island in (False, True):
        found = _grow(instance, usable, per_island, deadline)
        if best is None or found[0] < best[0]:
            best = found
    return best[1]


def _grow(instance: ReplicasInstance, usable: list[int], per_island: bool,
          deadline: Deadline | None) -> tuple[float, list[tuple[int, int]]]:
    """One greedy pass: the best single replica, then one candidate at a time until none fits.

    Each step adds the candidate with the least iteration time after it, or (``per_island``)
    the greatest gain per island it uses, which favours small pipelines; the best set seen
    is returned (one more replica often raises the sync more than it saves, while a few more
    would pay off).
    """
    cands = instance.candidates
    first = min(usable, key=lambda c: (cands[c].time(instance.microbatches), c))
    chosen = [first]
    current, pairs = _objective(instance, chosen)
    best_value, best_pairs = current, pairs
    left = [a - u for a, u in zip(instance.counts, cands[first].uses)]
    while len(chosen) < instance.microbatches:
        step_key, step_c, step_value, step_pairs = math.inf, None, math.inf, None
        for c in usable:
            if deadline is not None and deadline.expired():
                return best_value, best_pairs
            if any(u > a for u, a in zip(cands[c].uses, left)):
                continue
            value, pairs = _objective(instance, chosen + [c])
            key = (value - current) / sum(cands[c].uses) if per_island else value
            if key < step_key:
                step_key, step_c, step_value, step_pairs = key, c, value, pairs
        if step_c is None:
            break
        chosen.append(step_c)
        current = step_value
        left = [a - u for a, u in zip(left, cands[step_c].uses)]
        if step_value < best_value:
            best_value, best_pairs = step_value, step_pairs
    return best_value, best_pairs


def solve_greedy(instance: ReplicasInstance, *, time_limit: float | None = None) -> Result:
    """The greedy plan as a Result (FEASIBLE, no bound: it proves nothing)."""
    deadline = Deadline(time_limit)
    plan = greedy_plan(instance, deadline)
    return greedy_answer(
        problem="replicas", instance=instance, evaluate=evaluate, deadline=deadline,
        solution=None if plan is None else build_solution(instance, plan),
        stopped="time limit reached before the greedy found a plan",
        missed=(Status.INFEASIBLE, infeasible_reason(instance) or "no candidate pipeline fits the islands available"))
