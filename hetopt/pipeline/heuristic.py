"""A greedy composition: the warm start of the CP-SAT model and a baseline (method ``greedy``).

For a bottleneck τ (tried over a spread of the candidate values), build the pipeline from
its back: at each step take, on an unused island whose link to the block behind is ≤ τ,
the option that fits at its 1F1B position with every stage ≤ τ and covers the most layers
(a block that completes the model first, the cheapest on ties). No backtracking, so it can
miss plans that exist; it proves nothing.
"""

from __future__ import annotations

from hetopt.family import Deadline, greedy_answer
from hetopt.pipeline.options import bottleneck_candidates, usable_options
from hetopt.pipeline.plan import blocks_from_choices, build_solution
from hetopt.pipeline.problem import PipelineInstance, PipelineSolution, evaluate
from hetopt.result import Result, Status

#: Thresholds the greedy tries, spread over the sorted candidates: enough to find a good
#: τ on the shipped instances, few enough to stay well under a second.
GREEDY_THRESHOLDS = 48


def _build(instance: PipelineInstance, usable: list[int], tau: float) -> list[int] | None:
    L = instance.layers
    left, behind, used, back, chosen = L, 0, set(), None, []
    while left > 0:
        best_key, best_o = None, None
        for o in usable:
            opt = instance.options[o]
            if opt.island in used or opt.layers > left or opt.max_time_s > tau:
                continue
            if back is not None and instance.link_s[opt.island][back] > tau:
                continue
            lim = instance.behind_limits[o]
            if lim is not None and behind > lim:
                continue
            completes = opt.layers == left
            if back is None:
                roles = ("whole", "any") if completes else ("last", "any")
            else:
                roles = ("first", "any") if completes else ("middle", "any")
            if opt.role not in roles:
                continue
            key = (completes, opt.layers, -opt.total_time_s)
            if best_key is None or key > best_key:
                best_key, best_o = key, o
        if best_o is None:
            return None
        opt = instance.options[best_o]
        chosen.append(best_o)
        used.add(opt.island)
        left -= opt.layers
        behind += len(opt.stages)
        back = opt.island
    return chosen[::-1]


def greedy_plan(instance: PipelineInstance, deadline: Deadline | None = None) -> list[int] | None:
    """The best greedy plan over the tried thresholds (option indices front to back), or None.

    With a ``deadline``, stops trying thresholds once it has expired (the best so far).
    """
    cands = bottleneck_candidates(instance)
    if not cands:
        return None
    step = max(1, len(cands) // GREEDY_THRESHOLDS)
    return greedy_at(instance, sorted(set(cands[::step]) | {cands[-1]}), deadline)[0]


def greedy_at(instance: PipelineInstance, taus: list[float], deadline: Deadline | None = None,
              best: tuple[list[int] | None, float] = (None, float("inf"))) -> tuple[list[int] | None, float]:
    """The best greedy plan over the thresholds ``taus`` and its T, starting from ``best``.

    The level models call it with the thresholds just above their bottleneck floor, where the
    spread of :func:`greedy_plan` often has none: a better warm start narrows their window.
    """
    usable = usable_options(instance)
    best_plan, best_value = best
    for tau in taus:
        if deadline is not None and deadline.expired():
            break
        plan = _build(instance, usable, tau)
        if plan is None:
            continue
        ev = evaluate(instance, PipelineSolution(blocks_from_choices(instance, plan)))
        if ev.feasible and ev.objective < best_value:
            best_value, best_plan = ev.objective, plan
    return best_plan, best_value


def solve_greedy(instance: PipelineInstance, *, time_limit: float | None = None) -> Result:
    """The greedy above as a method: FEASIBLE (never proven), DECLINED when it finds nothing.

    A greedy that finds no pipeline proves nothing (one may exist: it does not backtrack),
    so that is neither INFEASIBLE nor an error: the method declines and names ``dp``
    (TIME_LIMIT when the time limit stopped it first).
    """
    deadline = Deadline(time_limit)
    plan = greedy_plan(instance, deadline)
    return greedy_answer(
        problem="pipeline", instance=instance, evaluate=evaluate, deadline=deadline,
        solution=None if plan is None else build_solution(instance, blocks_from_choices(instance, plan)),
        stopped="time limit reached before the greedy found a pipeline",
        missed=(Status.DECLINED, "the greedy found no pipeline (it does not backtrack, so one may exist); use dp"))
