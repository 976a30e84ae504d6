"""The fewest islands as an OR-Tools CP-SAT assignment model (data in ``hetopt.islands.model``).

    x[v,k]     node v is in island slot k            (k ≤ v)
    w[v,k]     slot k holds some node u ≤ v          (prefix OR, for symmetry breaking)
    z[p,k]     slot k holds a node of profile p      (only for profiles with a conflict)
    full[B,k]  ball B lies wholly in slot k
    spill[B,k] slot k holds a node outside ball B

    Σ_k x[v,k] = 1                                   every node in one island
    z[p,k] + z[q,k] ≤ 1   for conflicting p, q        conditions 1-2
    x[v,k] ∧ spill[B,k] ⇒ full[B,k]  for B a ball of v   condition 3 (proximity)
    x[v,k] ⇒ w[v-1,k-1]                              slot k's lowest node is above slot k-1's
    minimize Σ_k w[n-1,k]                            used slots
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

from hetopt.family import Deadline, no_solution
from hetopt.modelmethod import BuiltModel, solve_model, start, threads_alias
from hetopt.islands.model import ModelData, ModelTooLarge, greedy_answer, hint_values, model_data, ticker
from hetopt.islands.problem import IslandsInstance, build_solution, evaluate
from hetopt.islands.subsets import OutOfTime
from hetopt.result import Result, Status

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

#: Slack when rounding CP-SAT's objective bound up to a whole island count.
BOUND_SLACK = 1e-6


@threads_alias
def solve_cpsat_model(instance: IslandsInstance, *, time_limit: float | None = None, threads: int | None = None,
                      seed: int = 0, write_model: str | os.PathLike[str] | None = None) -> Result:
    """Solve the assignment model with CP-SAT, warm-started from the greedy's islands.

    The time limit covers the greedy and the model building: when it passes before CP-SAT
    finds islands, the greedy's islands are the answer (FEASIBLE, bound = the better of
    CP-SAT's bound and the distinct GPU counts); when it passes before the greedy finishes,
    TIME_LIMIT.

    Options as every model method takes them (:func:`hetopt.modelmethod.solve_model`).

    Returns
    -------
    Result
        OPTIMAL; FEASIBLE with the proven bound; TIME_LIMIT; DECLINED beyond
        ``MODEL_MAX_TERMS``. ``stats``: slots, balls, profile_conflicts, variables,
        branches, conflicts (``incumbent = "greedy"`` and ``stopped`` when the greedy answered).
    """
    deadline, _ = start(time_limit, "cpsat", write_model=write_model)
    # the model's size is decided first (model_data declines before OR-Tools loads), so that
    # loading it does not turn a decline into a time limit
    try:
        data = model_data(instance, deadline)
    except ModelTooLarge as exc:
        return no_solution(problem="islands", method="cpsat", status=Status.DECLINED, deadline=deadline, reason=str(exc))
    except OutOfTime:
        return no_solution(
            problem="islands", method="cpsat", status=Status.TIME_LIMIT, deadline=deadline,
            reason="time limit reached before the greedy (whose islands set the model's slots, and so whether the "
                   "model fits its size limit) finished",
        )
    # OR-Tools is imported here, not at the top of the module, so that ``import hetopt`` does
    # not pay for it; after the deadline starts, so that its import counts against the limit
    from ortools.sat.python import cp_model
    stats = dict(slots=data.slots, balls=len(data.balls), profile_conflicts=len(data.conflicts))
    model = cp_model.CpModel()
    try:
        x = _build(model, data, instance.num_nodes, deadline)
    except OutOfTime:
        return greedy_answer(instance, data, "cpsat", deadline, stats, "time limit reached while building the CP-SAT model")
    stats["variables"] = len(model.proto.variables)

    def decode(solver):
        islands = [[v for v in range(instance.num_nodes) if (v, k) in x and solver.boolean_value(x[v, k])]
                   for k in range(data.slots)]
        return build_solution(instance, [i for i in islands if i])

    # infeasible_reason=None: the greedy's islands are a solution of the model, and its answer
    # when CP-SAT finds none in time
    built = BuiltModel(
        problem="islands", method="cpsat", instance=instance, evaluate=evaluate, model=model, kind="cpsat", decode=decode,
        bound=lambda b: None if b is None else float(math.ceil(b - BOUND_SLACK)), stats=stats, deadline=deadline,
        known=lambda reason, bound, stats: greedy_answer(instance, data, "cpsat", deadline, stats, reason, bound),
    )
    return solve_model(built, time_limit=time_limit, threads=threads, seed=seed, write_model=write_model)


def _build(model: cp_model.CpModel, data: ModelData, n: int, deadline: Deadline) -> dict:
    """Add the variables, constraints, objective and hint; the x literals by (v, k). Raises
    OutOfTime once the deadline has passed (:func:`~hetopt.islands.model.ticker`)."""
    tick = ticker(deadline)
    slots = data.slots
    # Variables
    x = {(v, k): model.new_bool_var(f"x_{v}_{k}") for v in range(n) for k in data.allowed(v)}
    w = {(v, k): model.new_bool_var(f"w_{v}_{k}") for v in range(n) for k in range(slots)}
    conflicted = sorted({p for pair in data.conflicts for p in pair})
    z = {(p, k): model.new_bool_var(f"z_{p}_{k}") for p in conflicted for k in range(slots)}
    full = {(b, k): model.new_bool_var(f"full_{b}_{k}") for b in range(len(data.balls)) for k in range(slots)}
    spill = {(b, k): model.new_bool_var(f"spill_{b}_{k}") for b in range(len(data.balls)) for k in range(slots)}
    tick()

    # Every node sits in exactly one island.
    for v in range(n):
        model.add_exactly_one(x[v, k] for k in data.allowed(v))
    # w[v,k] = w[v-1,k] ∨ x[v,k]: the prefix OR that says "slot k is used by a node ≤ v".
    for k in range(slots):
        tick()
        for v in range(n):
            prev = [w[v - 1, k]] if v > 0 else []
            here = [x[v, k]] if (v, k) in x else []
            model.add_bool_or([*prev, *here]).only_enforce_if(w[v, k])
            for lit in (*prev, *here):
                model.add_implication(lit, w[v, k])
    # Symmetry breaking: islands are numbered by their lowest node, so a node in slot k
    # needs slot k-1 to hold a lower node (this also fills the slots from 0 up).
    for (v, k), lit in x.items():
        if k > 0:
            model.add_implication(lit, w[v - 1, k - 1])
    # Conditions 1-2: a slot holding profile p holds no conflicting profile q.
    for (v, k), lit in x.items():
        if (data.profile[v], k) in z:
            model.add_implication(lit, z[data.profile[v], k])
    tick()
    for p, q in data.conflicts:
        tick()
        for k in range(slots):
            model.add_bool_or([~z[p, k], ~z[q, k]])
    # Condition 3 (proximity): full[B,k] ⇒ B ⊆ slot k; ¬spill[B,k] ⇒ nothing of slot k outside B.
    for b, ball in enumerate(data.balls):
        tick()
        inside = set(ball)
        for k in range(slots):
            if all((u, k) in x for u in ball):
                model.add_bool_and([x[u, k] for u in ball]).only_enforce_if(full[b, k])
            else:  # a node of the ball cannot take slot k
                model.add(full[b, k] == 0)
            for u in range(n):
                if u not in inside and (u, k) in x:
                    model.add_implication(x[u, k], spill[b, k])
    # ...and a member v of slot k with a node outside its ball B forces the whole ball in.
    for v in range(n):
        tick()
        for k in data.allowed(v):
            for b in data.node_balls[v]:
                model.add_bool_or([~x[v, k], ~spill[b, k], full[b, k]])
    # Objective: the number of used slots, at least the distinct GPU counts.
    used = [w[n - 1, k] for k in range(slots)]
    model.add(sum(used) >= data.lower_bound)
    model.minimize(sum(used))

    # Hint: the greedy's islands (numbered by lowest node, so they meet the symmetry breaking).
    tick()
    hint = hint_values(data, n)
    for (v, k), lit in x.items():
        model.add_hint(lit, hint["slot"][v] == k)
    first_in_slot = [min(island) for island in data.hint]
    for (v, k), lit in w.items():
        model.add_hint(lit, k < len(first_in_slot) and first_in_slot[k] <= v)
    for (p, k), lit in z.items():
        model.add_hint(lit, any(data.profile[u] == p for u in data.hint[k]) if k < len(data.hint) else False)
    for key, lit in full.items():
        model.add_hint(lit, hint["full"][key])
    for key, lit in spill.items():
        model.add_hint(lit, hint["spill"][key])
    tick()
    return x
