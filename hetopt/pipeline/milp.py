"""The pipeline problem as a position-indexed MILP (PuLP; HiGHS by default, CBC on request).

    y[p,o] ∈ {0,1}   option o is the block at position p (front = 0)
    w[p,i,j] ∈ [0,1] islands i at p and j at p + 1 (the link between them is used)
    z ≥ 0            the bottleneck max(max_s t_s, max_links c)

    u_p = Σ_o y[p,o] ≤ 1,  u_{p+1} ≤ u_p,  u_0 = 1          one block per position, a prefix
    Σ_{p,o} k_o y[p,o] = L                                  the slices tile the layers
    Σ_p Σ_{o on i} y[p,o] ≤ 1                               each island at most once
    roles: first/whole only at p = 0 (first needs u_1 = 1, whole u_1 = 0);
           middle/last only at p ≥ 1 (middle needs u_{p+1} = 1, last u_{p+1} = 0)
    Σ_{p'>p} Σ_o n_o y[p',o] ≤ Σ_o b_o y[p,o]               1F1B memory: stages behind ≤ limit
    w[p,i,j] ≥ a[p,i] + a[p+1,j] − 1,  a[p,i] = Σ_{o on i} y[p,o]
    z ≥ Σ_o tmax_o y[p,o],  z ≥ c(i,j) w[p,i,j]
    minimize Σ T_o y + Σ c(i,j) w + (M − 1) z

b_o is the most stages that may follow option o (capped at S_max); it makes the memory
rule exact for every in-flight count min(S − s, M). See ``formulations/pipeline.md``.
"""

from __future__ import annotations

import pulp

from hetopt.backends import DEFAULT_MILP_BACKEND, solve_pulp
from hetopt.family import Deadline, conclude, no_solution
from hetopt.pipeline.options import GENERIC_INFEASIBLE, why_infeasible
from hetopt.pipeline.plan import blocks_from_choices, build_solution
from hetopt.pipeline.positions import position_data
from hetopt.pipeline.problem import PipelineInstance, evaluate
from hetopt.result import Result, Status


def solve_milp(
    instance: PipelineInstance,
    *,
    time_limit: float | None = None,
    backend: str = DEFAULT_MILP_BACKEND,
    threads: int | None = None,
) -> Result:
    """Solve the position MILP above.

    Returns
    -------
    Result
        FEASIBLE with the gap when the time limit stops the solver with a plan; TIME_LIMIT
        without one. ``stats``: variables, constraints, positions, backend, nodes (HiGHS).
    """
    deadline = Deadline(time_limit)
    method = "milp" if backend == DEFAULT_MILP_BACKEND else f"milp-{backend}"
    reason = why_infeasible(instance)
    if reason is not None:
        return no_solution(problem="pipeline", method=method, status=Status.INFEASIBLE, deadline=deadline, reason=reason)
    data = position_data(instance)
    if not data.at[0]:
        return no_solution(problem="pipeline", method=method, status=Status.INFEASIBLE, deadline=deadline,
                           reason="no usable option may be the first block: every one has role middle or last")
    P, M, opts = data.positions, instance.microbatches, instance.options

    prob = pulp.LpProblem("pipeline", pulp.LpMinimize)
    y = {(p, o): prob.add_variable(f"y_{p}_{o}", lowBound=0, upBound=1, cat=pulp.LpInteger) for p in range(P) for o in data.at[p]}
    z = prob.add_variable("z", lowBound=0)
    used = [pulp.lpSum(y[p, o] for o in data.at[p]) for p in range(P)]
    on = {(p, i): pulp.lpSum(y[p, o] for o in data.at[p] if opts[o].island == i) for p in range(P) for i in data.hosts}
    w = {
        (p, i, j): prob.add_variable(f"w_{p}_{i}_{j}", lowBound=0, upBound=1)
        for p in range(P - 1) for (i, j, _c) in data.links
    }
    cost = {(i, j): c for (i, j, c) in data.links}
    prob += (
        pulp.lpSum(opts[o].total_time_s * v for (p, o), v in y.items())
        + pulp.lpSum(cost[i, j] * v for (p, i, j), v in w.items())
        + (M - 1) * z
    )
    # one block per position; the used positions are a prefix, and there is a first block
    prob += used[0] == 1, "first_used"
    for p in range(P):
        prob += used[p] <= 1, f"one_{p}"
        if p + 1 < P:
            prob += used[p + 1] <= used[p], f"prefix_{p}"
    # the slices tile layers 0..L-1 (they are laid out from the front, so the sum suffices)
    prob += pulp.lpSum(opts[o].layers * v for (p, o), v in y.items()) == instance.layers, "tiling"
    # each island hosts at most one block
    for i in data.hosts:
        prob += pulp.lpSum(on[p, i] for p in range(P)) <= 1, f"island_{i}"
    # roles: a first block has a block after it, a whole block none; likewise middle and last
    for p in range(P):
        nxt = used[p + 1] if p + 1 < P else 0
        by_role = {r: pulp.lpSum(y[p, o] for o in data.at[p] if opts[o].role == r) for r in ("first", "whole", "middle", "last")}
        prob += by_role["first"] + by_role["middle"] <= nxt, f"has_next_{p}"
        prob += by_role["whole"] + by_role["last"] <= 1 - nxt, f"is_end_{p}"
    # 1F1B memory: the stages behind the block at p are at most its option's limit b_o
    stages_at = [pulp.lpSum(len(opts[o].stages) * y[p, o] for o in data.at[p]) for p in range(P)]
    for p in range(P - 1):
        if any(data.limit[o] < data.max_stages for o in data.at[p]):
            behind = pulp.lpSum(stages_at[q] for q in range(p + 1, P))
            prob += behind <= pulp.lpSum(data.limit[o] * y[p, o] for o in data.at[p]), f"memory_{p}"
    # links used between consecutive positions, and the bottleneck
    for (p, i, j), v in w.items():
        prob += v >= on[p, i] + on[p + 1, j] - 1, f"link_{p}_{i}_{j}"
        prob += z >= cost[i, j] * v, f"link_bottleneck_{p}_{i}_{j}"
    for p in range(P):
        prob += z >= pulp.lpSum(opts[o].max_time_s * y[p, o] for o in data.at[p]), f"stage_bottleneck_{p}"
    # symmetry: of two identical islands, the second is used only if the first is
    for a, b in data.twins:
        prob += pulp.lpSum(on[p, b] for p in range(P)) <= pulp.lpSum(on[p, a] for p in range(P)), f"twins_{a}_{b}"

    outcome = solve_pulp(prob, backend=backend, time_limit=None if time_limit is None else deadline.remaining(), threads=threads)
    stats = dict(outcome.stats, variables=len(prob.variables()), constraints=prob.numConstraints(), positions=P)
    if not outcome.status.has_solution:
        if outcome.status is Status.INFEASIBLE:
            return no_solution(problem="pipeline", method=method, status=Status.INFEASIBLE, deadline=deadline, stats=stats,
                               reason=GENERIC_INFEASIBLE.format(layers=instance.layers))
        return no_solution(problem="pipeline", method=method, status=outcome.status, deadline=deadline, bound=outcome.bound,
                           reason="time limit reached before the MILP found a pipeline", stats=stats)
    plan = [o for p in range(P) for o in data.at[p] if (y[p, o].value() or 0.0) > 0.5]
    return conclude(
        problem="pipeline", method=method, instance=instance,
        solution=build_solution(instance, blocks_from_choices(instance, plan)),
        evaluate=evaluate, deadline=deadline, proven_optimal=outcome.status is Status.OPTIMAL,
        bound=outcome.bound, stats=stats,
    )
