"""The fewest islands as a MILP (PuLP; HiGHS by default, CBC on request).

The CP-SAT model of ``cpsat.py`` (data in ``hetopt.islands.model``), linearized:

    Σ_k x[v,k] = 1                                       every node in one island
    w[v,k] ≥ w[v-1,k],  w[v,k] ≥ x[v,k],  w[v,k] ≤ w[v-1,k] + x[v,k]    prefix OR
    x[v,k] ≤ w[v-1,k-1]                                  symmetry: islands by lowest node
    x[v,k] ≤ z[p(v),k],  z[p,k] + z[q,k] ≤ 1             conditions 1-2
    full[B,k] ≤ x[u,k]   for u ∈ B                       full ⇒ B ⊆ slot k (per member: a
                                                         tighter LP than |B|·full ≤ Σ x)
    Σ_{u∉B} x[u,k] ≤ (n - |B|)·spill[B,k]                a node outside B ⇒ spill
    full[B,k] ≥ x[v,k] + spill[B,k] - 1   (B a ball of v)  condition 3 (proximity)
    minimize Σ_k w[n-1,k]
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

from hetopt.backends import DEFAULT_MILP_BACKEND
from hetopt.family import Deadline, no_solution
from hetopt.modelmethod import BuiltModel, solve_model, start
from hetopt.islands.model import ModelData, ModelTooLarge, greedy_answer, model_data, ticker
from hetopt.islands.problem import IslandsInstance, build_solution, evaluate
from hetopt.islands.subsets import OutOfTime
from hetopt.result import Result, Status

if TYPE_CHECKING:
    import pulp

#: Slack when reading binaries from the LP solution and rounding bounds to whole islands.
INTEGRALITY_SLACK = 1e-6

#: PuLP hands the model to the solver in one call that cannot be interrupted (row by row to
#: HiGHS, through an MPS file to CBC); measured, it takes about as long as building the
#: model did (4.3 s after a 5.2 s build at 1e5 rows). With a time limit, the solver is
#: called only when at least this multiple of the build time remains; otherwise the
#: greedy's islands are the answer.
HANDOVER_PER_BUILD = 1.5


def solve_milp(instance: IslandsInstance, *, time_limit: float | None = None, backend: str = DEFAULT_MILP_BACKEND,
               threads: int | None = None, write_model: str | os.PathLike[str] | None = None) -> Result:
    """Solve the assignment MILP above.

    The time limit covers the greedy, the model building and PuLP's hand-over to the
    solver: when too little time is left for them, the greedy's islands are the answer
    (FEASIBLE, bound = the distinct GPU counts, or the solver's bound when it ran); when
    the greedy itself does not finish, TIME_LIMIT.

    Options as every model method takes them (:func:`hetopt.modelmethod.solve_model`).

    Returns
    -------
    Result
        OPTIMAL, FEASIBLE with the best proven bound at the time limit, TIME_LIMIT, or
        DECLINED beyond ``MODEL_MAX_TERMS``; ``stats``: slots, balls, variables,
        constraints, backend, nodes (HiGHS).
    """
    deadline, method = start(time_limit, "milp", write_model=write_model, backend=backend)
    try:
        data = model_data(instance, deadline)
    except ModelTooLarge as exc:
        return no_solution(problem="islands", method=method, status=Status.DECLINED, deadline=deadline, reason=str(exc))
    except OutOfTime:
        return no_solution(
            problem="islands", method=method, status=Status.TIME_LIMIT, deadline=deadline,
            reason="time limit reached before the greedy (whose islands set the model's slots) finished",
        )
    stats: dict = dict(slots=data.slots, balls=len(data.balls), backend=backend)
    building = deadline.elapsed()
    try:
        prob, x = _build(data, instance.num_nodes, deadline)
    except OutOfTime:
        return greedy_answer(instance, data, method, deadline, stats, "time limit reached while building the MILP")
    building = deadline.elapsed() - building
    stats.update(variables=len(prob.variables()), constraints=prob.numConstraints())
    if time_limit is not None and deadline.remaining() < HANDOVER_PER_BUILD * building:
        return greedy_answer(instance, data, method, deadline, stats, "too little time left to pass the MILP to the solver")
    def decode(chosen):
        islands = [[v for v in range(instance.num_nodes) if (v, k) in chosen] for k in range(data.slots)]
        return build_solution(instance, [i for i in islands if i])

    # Warm start is not passed: PuLP's HiGHS interface ignores it; the greedy's count is
    # already in the model as the number of slots. infeasible_reason=None: the greedy's islands
    # are a solution of the model, and its answer when the MILP finds none in time
    built = BuiltModel(
        problem="islands", method=method, instance=instance, evaluate=evaluate, model=prob, kind="milp", decode=decode,
        read=lambda: {key for key, var in x.items() if (var.value() or 0.0) > 0.5},
        bound=lambda b: None if b is None else float(math.ceil(b - INTEGRALITY_SLACK)), stats=stats, deadline=deadline,
        known=lambda reason, bound, stats: greedy_answer(instance, data, method, deadline, stats, reason, bound),
    )
    return solve_model(built, time_limit=time_limit, threads=threads, backend=backend, write_model=write_model)


def _build(data: ModelData, n: int, deadline: Deadline) -> tuple[pulp.LpProblem, dict]:
    """The MILP above and its x variables by (v, k). Raises OutOfTime once the deadline has
    passed (:func:`~hetopt.islands.model.ticker`)."""
    import pulp  # here, not at the top of the module: ``import hetopt`` must not pay for PuLP

    tick = ticker(deadline)
    slots = data.slots
    prob = pulp.LpProblem("islands", pulp.LpMinimize)
    binary = pulp.LpInteger  # with bounds [0, 1]
    x = {(v, k): prob.add_variable(f"x_{v}_{k}", lowBound=0, upBound=1, cat=binary) for v in range(n) for k in data.allowed(v)}
    w = {(v, k): prob.add_variable(f"w_{v}_{k}", lowBound=0, upBound=1) for v in range(n) for k in range(slots)}
    conflicted = sorted({p for pair in data.conflicts for p in pair})
    z = {(p, k): prob.add_variable(f"z_{p}_{k}", lowBound=0, upBound=1, cat=binary) for p in conflicted for k in range(slots)}
    full = {(b, k): prob.add_variable(f"full_{b}_{k}", lowBound=0, upBound=1, cat=binary) for b in range(len(data.balls)) for k in range(slots)}
    spill = {(b, k): prob.add_variable(f"spill_{b}_{k}", lowBound=0, upBound=1, cat=binary) for b in range(len(data.balls)) for k in range(slots)}
    tick()

    used = pulp.lpSum(w[n - 1, k] for k in range(slots))
    prob += used
    prob += used >= data.lower_bound, "distinct_gpu_counts"
    for v in range(n):  # every node in one island
        prob += pulp.lpSum(x[v, k] for k in data.allowed(v)) == 1, f"assign_{v}"
    for k in range(slots):  # w[v,k] = w[v-1,k] ∨ x[v,k]
        tick()
        for v in range(n):
            here = x.get((v, k), 0)
            if v > 0:
                prob += w[v, k] >= w[v - 1, k], f"w_up_{v}_{k}"
                prob += w[v, k] <= w[v - 1, k] + here, f"w_or_{v}_{k}"
            else:
                prob += w[v, k] <= here, f"w_or_{v}_{k}"
            if (v, k) in x:
                prob += w[v, k] >= x[v, k], f"w_x_{v}_{k}"
    for (v, k), var in x.items():  # symmetry breaking: slot k's lowest node above slot k-1's
        if k > 0:
            prob += var <= w[v - 1, k - 1], f"order_{v}_{k}"
        if (data.profile[v], k) in z:  # conditions 1-2 through profiles
            prob += var <= z[data.profile[v], k], f"profile_{v}_{k}"
    tick()
    for p, q in data.conflicts:
        tick()
        for k in range(slots):
            prob += z[p, k] + z[q, k] <= 1, f"conflict_{p}_{q}_{k}"
    for b, ball in enumerate(data.balls):  # condition 3 through balls
        tick()
        inside = set(ball)
        for k in range(slots):
            for u in ball:  # one row per member: tighter than |B|·full ≤ Σ x
                prob += full[b, k] <= x.get((u, k), 0), f"full_{b}_{u}_{k}"
            outside = [x[u, k] for u in range(n) if u not in inside and (u, k) in x]
            prob += pulp.lpSum(outside) <= (n - len(ball)) * spill[b, k], f"spill_{b}_{k}"
    for v in range(n):
        tick()
        for k in data.allowed(v):
            for b in data.node_balls[v]:
                prob += full[b, k] >= x[v, k] + spill[b, k] - 1, f"near_{v}_{b}_{k}"
    tick()
    return prob, x
