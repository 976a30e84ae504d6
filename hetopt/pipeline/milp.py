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

import os

from hetopt.backends import DEFAULT_MILP_BACKEND
from hetopt.family import no_solution
from hetopt.modelmethod import BuiltModel, solve_model, start
from hetopt.pipeline.options import GENERIC_INFEASIBLE, why_infeasible
from hetopt.pipeline.plan import blocks_from_choices, build_solution
from hetopt.pipeline.advice import after_model_declines
from hetopt.pipeline.positions import position_data, too_large
from hetopt.pipeline.problem import PipelineInstance, PipelineSolution, evaluate, simple_bound
from hetopt.result import Result, Status


def solve_milp(instance: PipelineInstance, *, time_limit: float | None = None, backend: str = DEFAULT_MILP_BACKEND,
               threads: int | None = None, write_model: str | os.PathLike[str] | None = None) -> Result:
    """Solve the position MILP above.

    The aggregates a[p,i] = Σ_{o on i} y[p,o], u_p = Σ_o y[p,o] and the stages behind
    position p, h_p = h_{p+1} + Σ_o n_o y[p+1,o], are continuous variables fixed by equality
    rows (an exact reformulation: every row then has few terms, so building the model is
    linear in its size instead of quadratic). The deadline is checked while the model is
    built; the backend gets only the time that is left.

    Options as every model method takes them (:func:`hetopt.modelmethod.solve_model`).

    Returns
    -------
    Result
        FEASIBLE with the gap when the time limit stops the solver with a plan; TIME_LIMIT
        without one (also when the limit runs out while the model is built).
        ``stats``: variables, constraints, positions, backend, nodes (HiGHS).
    """
    deadline, method = start(time_limit, "milp", write_model=write_model, backend=backend)
    # PuLP is imported here, not at the top of the module, so that ``import hetopt`` does not
    # pay for it; after the deadline starts, so that its import counts against the limit
    import pulp

    reason = why_infeasible(instance)
    if reason is not None:
        return no_solution(problem="pipeline", method=method, status=Status.INFEASIBLE, deadline=deadline, reason=reason)
    data = position_data(instance)
    if not data.at[0]:
        return no_solution(problem="pipeline", method=method, status=Status.INFEASIBLE, deadline=deadline,
                           reason="no usable option may be the first block: every one has role middle or last")
    declined = too_large(data)
    if declined is not None:
        return no_solution(problem="pipeline", method=method, status=Status.DECLINED, deadline=deadline,
                           reason=f"{declined}; {after_model_declines(instance)}")
    P, M, opts = data.positions, instance.microbatches, instance.options

    floor = simple_bound(instance)  # a bound before any search, for an answer stopped early

    def out_of_time() -> Result:
        return no_solution(problem="pipeline", method=method, status=Status.TIME_LIMIT, deadline=deadline, bound=floor,
                           reason="time limit reached while building the MILP", stats={"positions": P})

    prob = pulp.LpProblem("pipeline", pulp.LpMinimize)
    y = {(p, o): prob.add_variable(f"y_{p}_{o}", lowBound=0, upBound=1, cat=pulp.LpInteger) for p in range(P) for o in data.at[p]}
    z = prob.add_variable("z", lowBound=0)
    used = [prob.add_variable(f"u_{p}", lowBound=0, upBound=1) for p in range(P)]
    on = {(p, i): prob.add_variable(f"a_{p}_{i}", lowBound=0, upBound=1) for p in range(P) for i in data.hosts}
    behind = [prob.add_variable(f"h_{p}", lowBound=0) for p in range(P)]
    w = {
        (p, i, j): prob.add_variable(f"w_{p}_{i}_{j}", lowBound=0, upBound=1)
        for p in range(P - 1) for (i, j, _c) in data.links
    }
    if deadline.expired():
        return out_of_time()
    cost = {(i, j): c for (i, j, c) in data.links}
    EQ, LE = pulp.LpConstraintEQ, pulp.LpConstraintLE

    def row(terms: list, sense: int, rhs: float, name: str) -> None:
        """Σ coef·var (sense) rhs, built from (var, coef) pairs (PuLP's operators are slow)."""
        prob.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms), sense, name, rhs))

    prob.setObjective(pulp.LpAffineExpression(
        [(v, opts[o].total_time_s) for (p, o), v in y.items()]
        + [(v, cost[i, j]) for (p, i, j), v in w.items()]
        + [(z, M - 1)]
    ))
    # the aggregates: u_p, a[p,i], and the stages behind position p
    for p in range(P):
        row([(y[p, o], 1) for o in data.at[p]] + [(used[p], -1)], EQ, 0, f"used_{p}")
        for i in data.hosts:
            row([(y[p, o], 1) for o in data.at[p] if opts[o].island == i] + [(on[p, i], -1)], EQ, 0, f"on_{p}_{i}")
        nxt = [(y[p + 1, o], -len(opts[o].stages)) for o in data.at[p + 1]] + [(behind[p + 1], -1)] if p + 1 < P else []
        row([(behind[p], 1)] + nxt, EQ, 0, f"behind_{p}")
        if deadline.expired():
            return out_of_time()
    # one block per position (u_p <= 1 by its bound); the used positions are a prefix, and there is a first block
    row([(used[0], 1)], EQ, 1, "first_used")
    for p in range(P - 1):
        row([(used[p + 1], 1), (used[p], -1)], LE, 0, f"prefix_{p}")
    # the slices tile layers 0..L-1 (they are laid out from the front, so the sum suffices)
    row([(v, opts[o].layers) for (p, o), v in y.items()], EQ, instance.layers, "tiling")
    # each island hosts at most one block
    for i in data.hosts:
        row([(on[p, i], 1) for p in range(P)], LE, 1, f"island_{i}")
    # roles: a first block has a block after it, a whole block none; likewise middle and last
    for p in range(P):
        nxt = [(used[p + 1], 1)] if p + 1 < P else []
        ahead = [(y[p, o], 1) for o in data.at[p] if opts[o].role in ("first", "middle")]
        end = [(y[p, o], 1) for o in data.at[p] if opts[o].role in ("whole", "last")]
        row(ahead + [(v, -c) for v, c in nxt], LE, 0, f"has_next_{p}")
        row(end + nxt, LE, 1, f"is_end_{p}")
        # 1F1B memory: the stages behind the block at p are at most its option's limit b_o
        if p + 1 < P and any(data.limit[o] < data.max_stages for o in data.at[p]):
            row([(behind[p], 1)] + [(y[p, o], -data.limit[o]) for o in data.at[p]], LE, 0, f"memory_{p}")
        row([(y[p, o], opts[o].max_time_s) for o in data.at[p]] + [(z, -1)], LE, 0, f"stage_bottleneck_{p}")
        if deadline.expired():
            return out_of_time()
    # links used between consecutive positions, and the bottleneck
    for (p, i, j), v in w.items():
        row([(on[p, i], 1), (on[p + 1, j], 1), (v, -1)], LE, 1, f"link_{p}_{i}_{j}")
        row([(v, cost[i, j]), (z, -1)], LE, 0, f"link_bottleneck_{p}_{i}_{j}")
    # symmetry: of two identical islands, the second is used only if the first is, and when
    # both are, the first sits in front: position(a) − position(b) + P·used(b) ≤ P
    for a, b in data.twins:
        row([(on[p, b], 1) for p in range(P)] + [(on[p, a], -1) for p in range(P)], LE, 0, f"twins_{a}_{b}")
        row([(on[p, a], p) for p in range(1, P)] + [(on[p, b], P - p) for p in range(P)], LE, P, f"twins_order_{a}_{b}")
    if deadline.expired():
        return out_of_time()
    def decode(chosen) -> PipelineSolution:
        plan = [o for p, o in sorted(chosen or ())]
        return build_solution(instance, blocks_from_choices(instance, plan))

    built = BuiltModel(
        problem="pipeline", method=method, instance=instance, evaluate=evaluate, model=prob, kind="milp", decode=decode,
        read=lambda: [key for key, v in y.items() if (v.value() or 0.0) > 0.5],
        bound=lambda b: floor if b is None else max(floor, b), floor=floor,
        stats={"variables": len(y) + len(w) + len(on) + 2 * P + 1, "constraints": prob.numConstraints(), "positions": P},
        infeasible_reason=GENERIC_INFEASIBLE.format(layers=instance.layers), deadline=deadline,
    )
    return solve_model(built, time_limit=time_limit, threads=threads, backend=backend, write_model=write_model)
