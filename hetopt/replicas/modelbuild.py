"""What the MILP and the CP-SAT model of the replicas family do alike before they solve.

Both presolve (INFEASIBLE, DECLINED by the size limits), take one pass of the fastest
candidate as the lower bound, start from the greedy plan (its time bounds the model's data:
``model.model_data``) and build their formulation; :func:`build_model` does these steps in
this order and answers for the method when one of them ends it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hetopt.budget import Deadline
from hetopt.family import no_solution, presolve
from hetopt.replicas.heuristic import greedy_plan
from hetopt.replicas.levels import TooManyLevels
from hetopt.replicas.limits import size_problem
from hetopt.replicas.model import GREEDY_SHARE, ModelData, TooLarge, known_plan_or_time_limit, model_data
from hetopt.replicas.problem import ReplicasInstance, build_solution, evaluate, infeasible_reason, usable_candidates
from hetopt.result import Result, Status


def build_model(instance: ReplicasInstance, *, method: str, label: str, formulation: str, deadline: Deadline,
                build: Callable[[ModelData, list[tuple[int, int]] | None, float], Any]
                ) -> Result | tuple[Any, list[tuple[int, int]] | None, float]:
    """Presolve, warm-start and build one of the family's models.

    Parameters
    ----------
    instance
        The replicas instance.
    method, label
        The method's name (``milp``, ``milp-cbc``, ``cpsat``) and how messages name its model
        (``"the MILP"``, ``"the CP-SAT model"``).
    formulation
        The formulation being built (a DECLINED answer of ``counts`` suggests ``slots``).
    deadline
        The method's deadline; the greedy may take ``GREEDY_SHARE`` of what is left.
    build
        ``build(data, plan, lower)``: the formulation's model from the model data, the greedy
        plan (None: none found) and the lower bound; None when time ran out while building.

    Returns
    -------
    Result or tuple
        The method's answer when it ends here (INFEASIBLE; DECLINED; out of time while
        building: the greedy plan as FEASIBLE, else TIME_LIMIT); otherwise ``(built, plan,
        lower)``.
    """
    refused = presolve(problem="replicas", method=method, deadline=deadline, infeasible=infeasible_reason(instance),
                       declined=lambda: size_problem(instance, label))
    if refused is not None:
        return refused
    lower = min(instance.candidates[c].fill_s for c in usable_candidates(instance))  # no plan beats one pass
    plan = greedy_plan(instance, Deadline(deadline.share(GREEDY_SHARE)))
    upper = None if plan is None else evaluate(instance, build_solution(instance, plan)).objective
    try:
        built = build(model_data(instance, upper, label, deadline), plan, lower)
    except (TooLarge, TooManyLevels) as exc:
        return no_solution(problem="replicas", method=method, status=Status.DECLINED, deadline=deadline,
                           reason=f"{exc}; use dp" + ("" if formulation == "slots" else " or formulation='slots'"))
    except TimeoutError:
        built = None
    if built is None:
        return known_plan_or_time_limit(instance, plan, method, deadline, lower,
                                        f"time limit reached while building {label}")
    return built, plan, lower
