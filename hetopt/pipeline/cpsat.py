"""The pipeline problem as an OR-Tools CP-SAT model: the position model of ``milp.py``, in integers.

Times are scaled to integers: x̂ = floor(x / q) with q = ``TIME_QUANTUM_S`` = 1 ns. For any
plan with B blocks the scaled objective Ô satisfies q·Ô ≤ T < q·Ô + q·(2B − 1 + M − 1)
(each of the B block sums, B − 1 link terms and the (M − 1)-fold bottleneck loses less
than q), so q·(CP-SAT's bound) is a valid lower bound on T*, and the plan CP-SAT proves
optimal has T < T* + q·(2·islands + M). That is the family's absolute tolerance.

The 1F1B memory rule is written with enforcement literals here (behind_p ≤ b_o if y[p,o])
instead of the MILP's aggregated inequality.
"""

from __future__ import annotations

import math
import os

from hetopt.family import Deadline, conclude, no_solution
from hetopt.modelmethod import BuiltModel, solve_model, start, threads_alias
from hetopt.pipeline.heuristic import greedy_plan
from hetopt.pipeline.options import GENERIC_INFEASIBLE, why_infeasible
from hetopt.pipeline.plan import blocks_from_choices, build_solution
from hetopt.pipeline.advice import after_model_declines
from hetopt.pipeline.positions import canonical_plan, position_data, too_large
from hetopt.pipeline.problem import PipelineInstance, PipelineSolution, evaluate, simple_bound
from hetopt.result import Result, Status

#: Seconds per integer time unit (1 ns). Iteration times are usually milliseconds to
#: minutes, so scaled values stay below 1e12, far from CP-SAT's 2^62 (the few accepted
#: instances that could exceed it are declined: ``CPSAT_MAX_INT``), and the error bound
#: q·(2·islands + M) is under a microsecond for M ≤ 512.
TIME_QUANTUM_S = 1e-9

#: Largest magnitude a CP-SAT linear expression may reach: its model checker rejects any
#: expression whose Σ |coefficient| · |variable bound| may overflow int64, and variable
#: domains must stay within ±2^62. The objective (Σ_{p,o} T̂_o y + Σ ĉ w + (M − 1) z) is
#: the largest expression of this model; ``solve_cpsat_model`` declines when it could
#: exceed this (times near ``MAX_TIME_S`` with many micro-batches), rather than crash.
CPSAT_MAX_INT = 2**62


def scaled(seconds: float) -> int:
    """floor(seconds / q): never above the true value, so bounds stay valid."""
    return math.floor(seconds / TIME_QUANTUM_S)


def error_bound(instance: PipelineInstance) -> float:
    """Seconds by which the CP-SAT optimum may exceed the true optimum: q·(2·islands + M)."""
    return TIME_QUANTUM_S * (2 * len(instance.islands) + instance.microbatches)


@threads_alias
def solve_cpsat_model(instance: PipelineInstance, *, time_limit: float | None = None, threads: int | None = None,
                      seed: int = 0, write_model: str | os.PathLike[str] | None = None) -> Result:
    """Solve the position model with CP-SAT, warm-started from the greedy plan.

    Options as every model method takes them (:func:`hetopt.modelmethod.solve_model`).

    Returns
    -------
    Result
        OPTIMAL means optimal for the scaled times, within ``error_bound`` of the true
        optimum (bound = objective, as for every OPTIMAL); otherwise ``bound`` is q times CP-SAT's bound. ``stats``: positions, branches,
        conflicts, hinted.
    """
    deadline, _ = start(time_limit, "cpsat", write_model=write_model)
    # OR-Tools is imported here, not at the top of the module, so that ``import hetopt`` does
    # not pay for it; after the deadline starts, so that its import counts against the limit
    from ortools.sat.python import cp_model

    reason = why_infeasible(instance)
    if reason is not None:
        return no_solution(problem="pipeline", method="cpsat", status=Status.INFEASIBLE, deadline=deadline, reason=reason)
    data = position_data(instance)
    if not data.at[0]:
        return no_solution(problem="pipeline", method="cpsat", status=Status.INFEASIBLE, deadline=deadline,
                           reason="no usable option may be the first block: every one has role middle or last")
    declined = too_large(data)
    if declined is not None:
        return no_solution(problem="pipeline", method="cpsat", status=Status.DECLINED, deadline=deadline,
                           reason=f"{declined}; {after_model_declines(instance)}")
    P, M, opts = data.positions, instance.microbatches, instance.options
    top = max(scaled(opts[o].max_time_s) for p in range(P) for o in data.at[p])
    top = max([top] + [scaled(c) for (_i, _j, c) in data.links])
    reach = (sum(scaled(opts[o].total_time_s) for p in range(P) for o in data.at[p])
             + (P - 1) * sum(scaled(c) for (_i, _j, c) in data.links) + (M - 1) * top)
    if reach > CPSAT_MAX_INT:
        return no_solution(
            problem="pipeline", method="cpsat", status=Status.DECLINED, deadline=deadline,
            reason=f"the objective in {TIME_QUANTUM_S:g} s units could reach {reach:.3g}, above CP-SAT's integer "
            f"range {CPSAT_MAX_INT:.3g} (times this long with M = {M}); use milp (the same model in floating point) or dp",
        )

    hint: list[int] | None = None

    floor = simple_bound(instance)  # a bound before any search, for an answer stopped early

    def out_of_time() -> Result:
        if hint is not None:  # the greedy's plan is a solution; only the simple bound is proven
            return _feasible(instance, hint, deadline, floor, {"positions": P, "hinted": True},
                             "time limit reached while building the CP-SAT model; the greedy warm start's plan")
        return no_solution(problem="pipeline", method="cpsat", status=Status.TIME_LIMIT, deadline=deadline, bound=floor,
                           reason="time limit reached while building the CP-SAT model", stats={"positions": P})

    model = cp_model.CpModel()
    Sum, Weighted = cp_model.LinearExpr.sum, cp_model.LinearExpr.weighted_sum  # far faster than Python's sum
    y: dict[tuple[int, int], cp_model.IntVar] = {}
    for p in range(P):
        for o in data.at[p]:
            y[p, o] = model.new_bool_var(f"y_{p}_{o}")
        if deadline.expired():
            return out_of_time()
    z = model.new_int_var(0, top, "z")
    used = [Sum([y[p, o] for o in data.at[p]]) for p in range(P)]
    on = {}
    for p in range(P):
        by_island: dict[int, list] = {i: [] for i in data.hosts}
        for o in data.at[p]:
            by_island[opts[o].island].append(y[p, o])
        for i in data.hosts:
            on[p, i] = Sum(by_island[i])
    link = {(p, i, j): model.new_bool_var(f"l_{p}_{i}_{j}") for p in range(P - 1) for (i, j, _c) in data.links}
    cost = {(i, j): c for (i, j, c) in data.links}
    # stages behind position p (one variable each, so the memory rules below stay short)
    stages_at = [Weighted([y[p, o] for o in data.at[p]], [len(opts[o].stages) for o in data.at[p]]) for p in range(P)]
    behind = [model.new_int_var(0, data.max_stages, f"behind_{p}") for p in range(P)]
    for p in range(P):
        model.add(behind[p] == (behind[p + 1] + stages_at[p + 1] if p + 1 < P else 0))
    if deadline.expired():
        return out_of_time()

    # one block per position, the used positions a prefix, and a first block
    model.add(used[0] == 1)
    for p in range(P):
        model.add(used[p] <= 1)
        if p + 1 < P:
            model.add(used[p + 1] <= used[p])
    # the slices tile the layers
    model.add(Weighted(list(y.values()), [opts[o].layers for (p, o) in y]) == instance.layers)
    # each island hosts at most one block
    for i in data.hosts:
        model.add(Sum([on[p, i] for p in range(P)]) <= 1)
    if deadline.expired():
        return out_of_time()
    for n_done, ((p, o), v) in enumerate(y.items()):
        if n_done % 4096 == 0 and deadline.expired():
            return out_of_time()
        role = opts[o].role
        # first and middle blocks have a block behind them; whole and last blocks do not
        # (position data never puts a first or middle option at the last position)
        if p + 1 < P and role in ("first", "middle"):
            model.add(used[p + 1] == 1).only_enforce_if(v)
        elif p + 1 < P and role in ("whole", "last"):
            model.add(used[p + 1] == 0).only_enforce_if(v)
        # 1F1B memory: the option fits with at most b_o stages behind it
        if data.limit[o] < data.max_stages and p + 1 < P:
            model.add(behind[p] <= data.limit[o]).only_enforce_if(v)
        # a chosen option bounds the bottleneck from below
        model.add(z >= scaled(opts[o].max_time_s)).only_enforce_if(v)
    # a link is used when its two islands sit at consecutive positions; it bounds the bottleneck
    for n_done, ((p, i, j), v) in enumerate(link.items()):
        if n_done % 256 == 0 and deadline.expired():
            return out_of_time()
        model.add(v >= on[p, i] + on[p + 1, j] - 1)
        model.add(z >= scaled(cost[i, j])).only_enforce_if(v)
    # symmetry: of two identical islands, the second is used only if the first is, and when
    # both are, the first sits in front: position(a) − position(b) + P·used(b) ≤ P
    for a, b in data.twins:
        model.add(Sum([on[p, b] for p in range(P)]) <= Sum([on[p, a] for p in range(P)]))
        on_a = [(v, p) for (p, o), v in y.items() if opts[o].island == a]
        on_b = [(v, P - p) for (p, o), v in y.items() if opts[o].island == b]
        model.add(Weighted([v for v, _ in on_a + on_b], [c for _, c in on_a + on_b]) <= P)
    model.minimize(Weighted(
        list(y.values()) + list(link.values()) + [z],
        [scaled(opts[o].total_time_s) for (p, o) in y] + [scaled(cost[i, j]) for (p, i, j) in link] + [M - 1],
    ))

    if deadline.expired():
        return out_of_time()
    hint = greedy_plan(instance, deadline)
    if hint is not None:
        hint = canonical_plan(instance, data, hint)  # the same T, and it meets the symmetry rows
        chosen = {(p, o) for p, o in enumerate(hint)}
        for key, v in y.items():
            model.add_hint(v, key in chosen)
        islands = [opts[o].island for o in hint]
        for (p, i, j), v in link.items():
            model.add_hint(v, p + 1 < len(islands) and islands[p] == i and islands[p + 1] == j)
        worst = max([scaled(opts[o].max_time_s) for o in hint] + [scaled(instance.link_s[a][b]) for a, b in zip(islands, islands[1:])])
        model.add_hint(z, worst)

    if deadline.expired():
        return out_of_time()
    def decode(solver) -> PipelineSolution:
        plan = [o for p in range(P) for o in data.at[p] if solver.value(y[p, o])]
        return build_solution(instance, blocks_from_choices(instance, plan))

    # a greedy plan proves a pipeline exists: then an infeasible outcome is a bug
    built = BuiltModel(
        problem="pipeline", method="cpsat", instance=instance, evaluate=evaluate, model=model, kind="cpsat", decode=decode,
        bound=lambda b: floor if b is None else max(floor, b * TIME_QUANTUM_S), floor=floor,
        stats={"positions": P, "hinted": hint is not None},
        infeasible_reason=None if hint is not None else GENERIC_INFEASIBLE.format(layers=instance.layers),
        known=None if hint is None else (lambda reason, bound, stats: _feasible(
            instance, hint, deadline, bound, stats, f"{reason}; the greedy warm start's plan")),
        deadline=deadline,
    )
    return solve_model(built, time_limit=time_limit, threads=threads, seed=seed, write_model=write_model)


def _feasible(instance: PipelineInstance, plan: list[int], deadline: Deadline, bound: float | None, stats: dict,
              reason: str) -> Result:
    """FEASIBLE with the greedy's plan (the warm start), when the time ran out before CP-SAT had a better one."""
    return conclude(
        problem="pipeline", method="cpsat", instance=instance,
        solution=build_solution(instance, blocks_from_choices(instance, plan)), evaluate=evaluate, deadline=deadline,
        proven_optimal=False, bound=bound, stats=dict(stats, from_hint=True), reason=reason
    )
