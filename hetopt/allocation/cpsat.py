"""The allocation problem as an OR-Tools CP-SAT model.

The same counting model as the MILP (see ``milp.py``), with times scaled to integers:
T̂ = floor(T / q) with q = ``TIME_QUANTUM_S`` = 1 ns. Flooring keeps q·(bound of the scaled
model) a valid lower bound on the true optimum T*, and the plan CP-SAT proves optimal for
the scaled times has a true iteration time below T* + q (see ``formulations/allocation.md``).
"""

from __future__ import annotations

import math
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
from hetopt.family import no_solution, presolve
from hetopt.modelmethod import BuiltModel, solve_model, start, threads_alias
from hetopt.result import Result, Status

#: Seconds per integer time unit in the CP-SAT model (1 ns). Iteration times here are
#: milliseconds to minutes, so the scaled values stay far below 2^62, and the error
#: bound q is at most 1e-9 relative for any iteration time of a second or more.
TIME_QUANTUM_S = 1e-9


#: Largest |coefficient × bound| sum CP-SAT accepts in one linear row (it rejects a model
#: whose rows could overflow int64); the optional mean row is left out beyond it.
INT64_ROOM = 2**62


#: Most options (after pruning) the CP-SAT model takes: about 2·10^5 variables, which
#: CP-SAT loads and presolves in seconds. Above it the model declines.
MAX_CPSAT_OPTIONS = 50_000
#: Seconds per option kept back from CP-SAT's time limit: copying the model into the
#: solver and its first presolve steps run before CP-SAT looks at its clock (about
#: 2·10^-5 s per option measured, doubled for a loaded machine), plus a fixed part.
LOAD_S_PER_OPTION = 5e-5
LOAD_S = 0.1


def scaled(seconds: float) -> int:
    """floor(seconds / q) (never above the true value, so bounds stay valid)."""
    return math.floor(seconds / TIME_QUANTUM_S)


@threads_alias
def solve_cpsat_model(instance: AllocationInstance, *, time_limit: float | None = None, threads: int | None = None,
                      seed: int = 0, write_model: str | os.PathLike[str] | None = None) -> Result:
    """Solve the counting model with CP-SAT, warm-started from the greedy plan.

    Options as every model method takes them (:func:`hetopt.modelmethod.solve_model`).

    Returns
    -------
    Result
        OPTIMAL means optimal for the scaled times, i.e. within q = 1 ns of the true
        optimum (bound = objective, as for every OPTIMAL); otherwise ``bound`` is q times
        CP-SAT's bound. ``stats``: options, branches, conflicts, hinted.
    """
    deadline, _ = start(time_limit, "cpsat", write_model=write_model)
    # OR-Tools is imported here, not at the top of the module, so that ``import hetopt`` does
    # not pay for it; after the deadline starts, so that its import counts against the limit
    from ortools.sat.python import cp_model

    refused = presolve(problem="allocation", method="cpsat", deadline=deadline, infeasible=why_infeasible(instance),
                       declined=lambda: too_many_options(instance, "cpsat"))
    if refused is not None:
        return refused
    options, lower, greedy = _options(instance, deadline)
    count = sum(len(o) for o in options)
    if count > MAX_CPSAT_OPTIONS:
        return no_solution(
            problem="allocation", method="cpsat", status=Status.DECLINED, deadline=deadline,
            reason=f"{count} options after pruning exceed the CP-SAT model's limit of {MAX_CPSAT_OPTIONS}; use dp",
        )

    def out_of_time() -> Result:
        return no_solution(
            problem="allocation", method="cpsat", status=Status.TIME_LIMIT, deadline=deadline, bound=lower,
            reason="time limit reached while building the CP-SAT model",
        )

    model = cp_model.CpModel()
    built = _counting_model(cp_model, model, instance, options, lower, deadline)
    if built is None:
        return out_of_time()
    x, y, z, mean_rows_dropped = built
    hinted = False
    if greedy is not None:
        hinted = _hint(model, instance, options, greedy, x, y, z, deadline)
        if hinted is None:
            return out_of_time()

    def decode(solver):
        per_group = [[] for _ in instance.groups]
        for (g, o), var in x.items():
            count = solver.value(var)
            if count:
                per_group[g].append((count, int(options[g].microbatch_size[o]), int(options[g].microbatches[o])))
        return build_solution(instance, expand_counts(instance, per_group))

    # the presolve (why_infeasible) proved a plan exists: an infeasible outcome is a bug
    built = BuiltModel(
        problem="allocation", method="cpsat", instance=instance, evaluate=evaluate, model=model, kind="cpsat",
        decode=decode, bound=lambda b: lower if b is None else max(lower, b * TIME_QUANTUM_S), floor=lower,
        stats={"options": len(x), "hinted": hinted, "mean_rows_dropped": mean_rows_dropped},
        load_s=LOAD_S + LOAD_S_PER_OPTION * count, deadline=deadline,
    )
    return solve_model(built, time_limit=time_limit, threads=threads, seed=seed, write_model=write_model)


def _options(instance: AllocationInstance, deadline) -> tuple[list, float, list | None]:
    """Each group's Pareto options, pruned above the greedy plan's time; the time bound; the greedy plan."""
    options = [pareto_options(enumerate_options(instance, g)) for g in range(len(instance.groups))]
    lower = time_lower_bound(instance, options)
    greedy = greedy_choices(instance, options, deadline)
    if greedy is not None:  # no option slower than the greedy plan can be in a better plan
        upper = max(instance.time(g, ell, m) for g, (m, ell) in zip(instance.group_of_gpu, greedy))
        options = [o.take(o.time <= upper) for o in options]
    return options, lower, greedy


def _counting_model(cp_model, model, instance: AllocationInstance, options: list, lower: float,
                    deadline) -> tuple[dict, dict, object, int] | None:
    """Add the counting model's variables, rows and objective (None when the time runs out)."""
    # z takes only the values an option can give it: a sparse domain lets CP-SAT rule whole
    # times out at once instead of creeping up nanosecond by nanosecond
    levels = sorted({scaled(float(t)) for o in options for t in o.time if t >= lower})
    z = model.new_int_var_from_domain(cp_model.Domain.from_values(levels), "z")
    x, y = {}, {}
    mean_rows_dropped = 0
    for g, grp in enumerate(instance.groups):
        opts = options[g]
        for o in range(len(opts)):
            if o % CLOCK_EVERY == 0 and deadline.expired():
                return None
            x[g, o] = model.new_int_var(0, grp.count, f"x_{g}_{o}")
            y[g, o] = model.new_bool_var(f"y_{g}_{o}")
            # x counts GPUs only on a used option
            model.add(x[g, o] <= grp.count * y[g, o])
            model.add(x[g, o] == 0).only_enforce_if(~y[g, o])
            # a used option bounds the iteration time from below
            model.add(z >= scaled(float(opts.time[o]))).only_enforce_if(y[g, o])
        # every GPU of the group runs one option
        model.add(sum(x[g, o] for o in range(len(opts))) == grp.count)
        # the slowest GPU is no faster than the group's mean (valid; strengthens the LP
        # relaxation), when its terms fit int64 (always on realistic instances)
        if grp.count * (levels[-1] + sum(scaled(float(t)) for t in opts.time)) < INT64_ROOM:
            model.add(grp.count * z >= sum(scaled(float(opts.time[o])) * x[g, o] for o in range(len(opts))))
        else:
            mean_rows_dropped += 1
    # (I) the local batches make the global batch
    model.add(sum(int(options[g].batch[o]) * x[g, o] for (g, o) in x) == instance.global_batch)
    # (III) activations plus the training state fit the cluster
    model.add(sum(int(options[g].microbatch_size[o]) * x[g, o] for (g, o) in x) <= instance.microbatch_budget)
    model.minimize(z)
    return x, y, z, mean_rows_dropped


def _hint(model, instance: AllocationInstance, options: list, greedy: list, x: dict, y: dict, z,
          deadline) -> bool | None:
    """Hint the greedy plan: True, False when one of its options was Pareto-pruned, None when out of time."""
    used: dict[tuple[int, int], int] = {}
    index = {
        (g, int(options[g].microbatch_size[o]), int(options[g].microbatches[o])): o
        for g in range(len(instance.groups))
        for o in range(len(options[g]))
    }
    for g, (m, ell) in zip(instance.group_of_gpu, greedy):
        o = index.get((g, m, ell))
        if o is None:  # the greedy's option was Pareto-pruned; hint nothing rather than wrong
            return False
        used[g, o] = used.get((g, o), 0) + 1
    for k, key in enumerate(x):
        if k % CLOCK_EVERY == 0 and deadline.expired():
            return None
        model.add_hint(x[key], used.get(key, 0))
        model.add_hint(y[key], key in used)
    model.add_hint(z, max(scaled(float(options[g].time[o])) for (g, o) in used))
    return True
