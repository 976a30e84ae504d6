"""The allocation problem as a MILP (PuLP; HiGHS by default, CBC on request).

GPUs of one group are interchangeable, so the model counts them per option instead of
giving every GPU a binary per option:

    x[g,o] ∈ {0..n_g}   GPUs of group g that run option o = (ℓ, m)
    y[g,o] ∈ {0, 1}     option o is used in group g
    z ≥ 0               the iteration time

    Σ_o x[g,o] = n_g                      every GPU runs one option
    Σ_{g,o} b_o·x[g,o] = B                (I)
    Σ_{g,o} m_o·x[g,o] ≤ K*               (III); (II) holds by the option list
    x[g,o] ≤ n_g·y[g,o]
    z ≥ T_{g,o}·y[g,o]                    the bottleneck
    z ≥ Σ_o T_{g,o}·x[g,o] / n_g          valid (max ≥ mean), tightens the LP relaxation
    minimize z
"""

from __future__ import annotations

import os

from hetopt.budget import CLOCK_EVERY
from hetopt.allocation.heuristic import greedy_choices
from hetopt.allocation.options import (
    enumerate_options,
    pareto_options,
    time_lower_bound,
    too_many_options,
    why_infeasible,
)
from hetopt.allocation.plan import build_solution, expand_counts
from hetopt.allocation.problem import AllocationInstance, evaluate
from hetopt.backends import DEFAULT_MILP_BACKEND
from hetopt.family import no_solution, presolve
from hetopt.modelmethod import BuiltModel, solve_model, start
from hetopt.result import Result, Status

#: Most options (after pruning) the MILP takes: PuLP builds about 10^4 options a second,
#: and HiGHS's presolve of the 2·10^5-variable model that 10^5 options give already runs
#: for tens of seconds without looking at its time limit. Above it the MILP declines.
MAX_MILP_OPTIONS = 50_000
#: Seconds per option kept back from the backend's time limit: loading the model into
#: HiGHS (or writing it for CBC and starting CBC) and reading the solution back are not
#: covered by the backend's own limit; about 2·10^-5 s per option measured, doubled for a
#: loaded machine.
LOAD_S_PER_OPTION = 5e-5
#: Seconds kept back whatever the size (process start of CBC, HiGHS's setup).
LOAD_S = 0.1


def solve_milp(instance: AllocationInstance, *, time_limit: float | None = None, backend: str = DEFAULT_MILP_BACKEND,
               threads: int | None = None, write_model: str | os.PathLike[str] | None = None) -> Result:
    """Solve the counting MILP above.

    Options dominated within their batch (``pareto_options``) and options slower than the
    greedy plan's iteration time are left out: neither can be in a strictly better plan.

    Options as every model method takes them (:func:`hetopt.modelmethod.solve_model`).

    Returns
    -------
    Result
        FEASIBLE with the gap to the best proven bound when the time limit stops the
        solver with a plan; TIME_LIMIT without one. ``stats``: variables, constraints,
        options, backend, nodes (HiGHS).
    """
    deadline, method = start(time_limit, "milp", write_model=write_model, backend=backend)
    # PuLP is imported here, not at the top of the module, so that ``import hetopt`` does not
    # pay for it; after the deadline starts, so that its import counts against the limit
    import pulp

    refused = presolve(problem="allocation", method=method, deadline=deadline, infeasible=why_infeasible(instance),
                       declined=lambda: too_many_options(instance, method))
    if refused is not None:
        return refused
    options = [pareto_options(enumerate_options(instance, g)) for g in range(len(instance.groups))]
    lower = time_lower_bound(instance, options)
    greedy = greedy_choices(instance, options, deadline)
    if greedy is not None:
        upper = max(instance.time(g, ell, m) for g, (m, ell) in zip(instance.group_of_gpu, greedy))
        options = [o.take(o.time <= upper) for o in options]
    count = sum(len(o) for o in options)
    if count > MAX_MILP_OPTIONS:
        return no_solution(
            problem="allocation", method=method, status=Status.DECLINED, deadline=deadline,
            reason=f"{count} options after pruning exceed the MILP's limit of {MAX_MILP_OPTIONS}; use dp",
        )

    def out_of_time() -> Result:
        return no_solution(problem="allocation", method=method, status=Status.TIME_LIMIT, deadline=deadline, bound=lower,
                           reason="time limit reached while building the MILP")

    prob = pulp.LpProblem("allocation", pulp.LpMinimize)
    z = prob.add_variable("z", lowBound=lower)
    prob += z
    x, y = {}, {}
    for g, grp in enumerate(instance.groups):
        opts = options[g]
        for o in range(len(opts)):
            if o % CLOCK_EVERY == 0 and deadline.expired():
                return out_of_time()
            x[g, o] = prob.add_variable(f"x_{g}_{o}", lowBound=0, upBound=grp.count, cat=pulp.LpInteger)
            y[g, o] = prob.add_variable(f"y_{g}_{o}", lowBound=0, upBound=1, cat=pulp.LpInteger)
            prob += x[g, o] <= grp.count * y[g, o], f"use_{g}_{o}"
            prob += z >= float(opts.time[o]) * y[g, o], f"bottleneck_{g}_{o}"
        # every GPU of the group runs one option
        prob += pulp.lpSum(x[g, o] for o in range(len(opts))) == grp.count, f"gpus_{g}"
        # the slowest GPU is no faster than the group's mean
        prob += z >= pulp.lpSum(float(opts.time[o]) / grp.count * x[g, o] for o in range(len(opts))), f"mean_{g}"
    # (I) the local batches make the global batch
    prob += pulp.lpSum(int(options[g].batch[o]) * x[g, o] for (g, o) in x) == instance.global_batch, "global_batch"
    # (III) activations plus the training state fit the cluster
    prob += pulp.lpSum(int(options[g].microbatch_size[o]) * x[g, o] for (g, o) in x) <= instance.microbatch_budget, "cluster_memory"
    if deadline.expired():
        return out_of_time()

    def decode(counts):
        per_group = [[] for _ in instance.groups]
        for (g, o), n in counts.items():
            if n:
                per_group[g].append((n, int(options[g].microbatch_size[o]), int(options[g].microbatches[o])))
        return build_solution(instance, expand_counts(instance, per_group))

    # the presolve (why_infeasible) proved a plan exists: an infeasible outcome is a bug
    built = BuiltModel(
        problem="allocation", method=method, instance=instance, evaluate=evaluate, model=prob, kind="milp",
        decode=decode, read=lambda: {key: round(var.value() or 0.0) for key, var in x.items()},
        bound=lambda b: lower if b is None else max(lower, b), floor=lower,
        stats={"variables": len(prob.variables()), "constraints": prob.numConstraints(), "options": len(x)},
        load_s=LOAD_S + LOAD_S_PER_OPTION * count, deadline=deadline,
    )
    return solve_model(built, time_limit=time_limit, threads=threads, backend=backend, write_model=write_model)
