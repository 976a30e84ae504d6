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

import pulp

from hetopt.backends import DEFAULT_MILP_BACKEND, solve_pulp
from hetopt.family import Deadline, conclude, no_solution
from hetopt.islands.model import model_data
from hetopt.islands.problem import IslandsInstance, build_solution, evaluate
from hetopt.result import Result, Status

#: Slack when reading binaries from the LP solution and rounding bounds to whole islands.
INTEGRALITY_SLACK = 1e-6


def solve_milp(
    instance: IslandsInstance,
    *,
    time_limit: float | None = None,
    backend: str = DEFAULT_MILP_BACKEND,
    threads: int | None = None,
) -> Result:
    """Solve the assignment MILP above.

    Parameters
    ----------
    backend
        "highs" (default, may change) or "cbc".

    Returns
    -------
    Result
        OPTIMAL, FEASIBLE with the best proven bound at the time limit, or TIME_LIMIT;
        ``stats``: slots, balls, variables, constraints, backend, nodes (HiGHS).
    """
    deadline = Deadline(time_limit)
    method = "milp" if backend == DEFAULT_MILP_BACKEND else f"milp-{backend}"
    data = model_data(instance)
    n, slots = instance.num_nodes, data.slots
    prob = pulp.LpProblem("islands", pulp.LpMinimize)
    binary = pulp.LpInteger  # with bounds [0, 1]
    x = {(v, k): prob.add_variable(f"x_{v}_{k}", lowBound=0, upBound=1, cat=binary) for v in range(n) for k in data.allowed(v)}
    w = {(v, k): prob.add_variable(f"w_{v}_{k}", lowBound=0, upBound=1) for v in range(n) for k in range(slots)}
    conflicted = sorted({p for pair in data.conflicts for p in pair})
    z = {(p, k): prob.add_variable(f"z_{p}_{k}", lowBound=0, upBound=1, cat=binary) for p in conflicted for k in range(slots)}
    full = {(b, k): prob.add_variable(f"full_{b}_{k}", lowBound=0, upBound=1, cat=binary) for b in range(len(data.balls)) for k in range(slots)}
    spill = {(b, k): prob.add_variable(f"spill_{b}_{k}", lowBound=0, upBound=1, cat=binary) for b in range(len(data.balls)) for k in range(slots)}

    used = pulp.lpSum(w[n - 1, k] for k in range(slots))
    prob += used
    prob += used >= data.lower_bound, "distinct_gpu_counts"
    for v in range(n):  # every node in one island
        prob += pulp.lpSum(x[v, k] for k in data.allowed(v)) == 1, f"assign_{v}"
    for k in range(slots):  # w[v,k] = w[v-1,k] ∨ x[v,k]
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
    for p, q in data.conflicts:
        for k in range(slots):
            prob += z[p, k] + z[q, k] <= 1, f"conflict_{p}_{q}_{k}"
    for b, ball in enumerate(data.balls):  # condition 3 through balls
        inside = set(ball)
        for k in range(slots):
            for u in ball:  # one row per member: tighter than |B|·full ≤ Σ x
                prob += full[b, k] <= x.get((u, k), 0), f"full_{b}_{u}_{k}"
            outside = [x[u, k] for u in range(n) if u not in inside and (u, k) in x]
            prob += pulp.lpSum(outside) <= (n - len(ball)) * spill[b, k], f"spill_{b}_{k}"
    for v in range(n):
        for k in data.allowed(v):
            for b in data.node_balls[v]:
                prob += full[b, k] >= x[v, k] + spill[b, k] - 1, f"near_{v}_{b}_{k}"

    # Warm start is not passed: PuLP's HiGHS interface ignores it; the greedy's count is
    # already in the model as the number of slots.
    outcome = solve_pulp(prob, backend=backend, time_limit=None if time_limit is None else deadline.remaining(), threads=threads)
    stats = dict(outcome.stats, slots=slots, balls=len(data.balls), variables=len(prob.variables()), constraints=prob.numConstraints())
    bound = None if outcome.bound is None else float(math.ceil(outcome.bound - INTEGRALITY_SLACK))
    if not outcome.status.has_solution:
        if outcome.status is Status.INFEASIBLE:
            raise AssertionError("the islands MILP reports infeasible, but the greedy's islands fit it")
        return no_solution(
            problem="islands", method=method, status=outcome.status, deadline=deadline, bound=bound,
            reason="time limit reached before the MILP found islands", stats=stats,
        )
    islands = [[v for v in range(n) if (v, k) in x and (x[v, k].value() or 0.0) > 0.5] for k in range(slots)]
    return conclude(
        problem="islands",
        method=method,
        instance=instance,
        solution=build_solution(instance, [i for i in islands if i]),
        evaluate=evaluate,
        deadline=deadline,
        proven_optimal=outcome.status is Status.OPTIMAL,
        bound=bound,
        stats=stats,
    )
