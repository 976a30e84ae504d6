"""The replicas problem as an OR-Tools CP-SAT model: the MILP's slot model in integer time.

Times are scaled to integers with a quantum q: f̂ = ⌊f/q⌋, p̂ = ⌊p/q⌋, σ̂ = ⌊σ/q⌋, so
f̂ + (n − 1)·p̂ ≤ T(n)/q and q·(CP-SAT's bound) stays a valid lower bound. The plan CP-SAT
proves optimal for the scaled times, re-split exactly, is within q·(N + 1) of the true
optimum (each scaled T loses less than N units, σ̂ less than one). q is 1 ps unless the
instance's largest time needs a coarser one to keep every scaled figure below 2^50
(``quantum``); ``tolerance`` reports q·(N + 1) as the family's absolute agreement slack.
"""

from __future__ import annotations

import math

from ortools.sat.python import cp_model

from hetopt.budget import CLOCK_EVERY
from hetopt.family import Deadline, no_solution
from hetopt.modelmethod import BuiltModel, solve_model, start, threads_alias
from hetopt.replicas.heuristic import greedy_plan
from hetopt.replicas.limits import size_problem
from hetopt.replicas.model import GREEDY_SHARE, TooLarge, known_plan_or_time_limit, model_data, quantum
from hetopt.replicas.problem import ReplicasInstance, build_solution, evaluate, infeasible_reason, usable_candidates
from hetopt.replicas.split import optimal_split
from hetopt.result import Result, Status

#: Seconds kept back from CP-SAT's limit (model copy and presolve before it looks at its
#: clock), plus a share per slot (about 5·10^-5 s per variable measured, doubled).
LOAD_S = 0.1
LOAD_S_PER_SLOT = 1e-4


@threads_alias
def solve_cpsat_model(instance: ReplicasInstance, *, time_limit: float | None = None, threads: int | None = None,
                      seed: int = 0) -> Result:
    """Solve the slot model with CP-SAT, warm-started from the greedy plan.

    Returns
    -------
    Result
        OPTIMAL means optimal for the scaled times (within q·(N + 1) of the true optimum);
        otherwise ``bound`` is q times CP-SAT's bound. ``stats``: slots, pairs, quantum_s,
        branches, conflicts, hinted.
    """
    deadline, _ = start(time_limit, "cpsat")
    reason = infeasible_reason(instance)
    if reason is not None:
        return no_solution(problem="replicas", method="cpsat", status=Status.INFEASIBLE, deadline=deadline, reason=reason)
    declined = size_problem(instance, "the CP-SAT model")
    if declined is not None:
        return no_solution(problem="replicas", method="cpsat", status=Status.DECLINED, deadline=deadline, reason=declined)
    cands = instance.candidates
    lower = min(cands[c].fill_s for c in usable_candidates(instance))  # no plan beats the fastest single pass
    plan = greedy_plan(instance, Deadline(deadline.share(GREEDY_SHARE)))
    upper = None if plan is None else evaluate(instance, build_solution(instance, plan)).objective
    q = quantum(instance)

    def scaled(seconds: float) -> int:
        return math.floor(seconds / q)

    def out_of_time(why: str = "time limit reached while building the CP-SAT model") -> Result:
        return known_plan_or_time_limit(instance, plan, "cpsat", deadline, lower, why)

    try:
        data = model_data(instance, upper, "the CP-SAT model", deadline)
    except TooLarge as exc:
        return no_solution(problem="replicas", method="cpsat", status=Status.DECLINED, deadline=deadline, reason=str(exc))
    except TimeoutError:
        return out_of_time()
    n_total = instance.microbatches
    # The caps on z are sums of the same integers the constraints use (f̂ + p̂·(n − 1)), never
    # ⌊T(n)/q⌋ of a float sum: T(n) = f + (n − 1)·p rounded in floating point can fall below
    # the exact value by an ulp, and one unit under f̂ + p̂·(n − 1) cuts off every plan.
    top = max(scaled(cands[c].fill_s) + scaled(cands[c].per_microbatch_s) * (data.most[c] - 1)
              for c, _ in data.slots)
    model = cp_model.CpModel()
    z = model.new_int_var(0, top, "z")
    w = {p: model.new_bool_var(f"w_{p[0]}_{p[1]}") for p in data.pairs}
    # one (class, R) pair
    model.add_exactly_one(w.values())
    # allowed[k] = Σ_{k' ≥ k} Σ_R w[k',R]: the chosen pair admits class k (a suffix sum, so
    # each slot's row has one term, not one per pair)
    allowed = [model.new_int_var(0, 1, f"allowed_{k}") for k in range(data.num_classes)]
    for k in range(data.num_classes):
        tail = allowed[k + 1] if k + 1 < data.num_classes else 0
        model.add(allowed[k] == tail + sum(w[kk, r] for kk, r in data.pairs if kk == k))
    y, n = {}, {}
    for i, (c, j) in enumerate(data.slots):
        if i % CLOCK_EVERY == 0 and deadline.expired():
            return out_of_time()
        y[c, j] = model.new_bool_var(f"y_{c}_{j}")
        n[c, j] = model.new_int_var(0, data.most[c], f"n_{c}_{j}")
        # a used slot runs at least one micro-batch, an unused one none
        model.add(n[c, j] >= 1).only_enforce_if(y[c, j])
        model.add(n[c, j] == 0).only_enforce_if(~y[c, j])
        # z is at least the slot's scaled T_c(n) when used
        f_hat, p_hat = scaled(cands[c].fill_s), scaled(cands[c].per_microbatch_s)
        model.add(z >= f_hat + p_hat * (n[c, j] - 1)).only_enforce_if(y[c, j])
        # the chosen pair admits the slot's class
        model.add(y[c, j] <= allowed[data.class_of[c]])
        if j > 0:  # copies of one candidate are interchangeable: use them in order
            model.add_implication(y[c, j], y[c, j - 1])
            model.add(n[c, j] <= n[c, j - 1])
    # no plan worth finding runs a replica past the known plan's time: z_top is U with a
    # relative margin (UPPER_RTOL) far above a float sum's rounding, so ⌊z_top/q⌋ keeps it; without
    # a known plan the domain's integer top is the cap
    if upper is not None:
        model.add(z <= scaled(data.z_top))
    # every micro-batch runs on exactly one replica
    model.add(sum(n.values()) == n_total)
    # the islands of each shape
    for s, shape in enumerate(instance.shapes):
        terms = [cands[c].uses[s] * y[c, j] for c, j in data.slots if cands[c].uses[s]]
        if terms:
            model.add(sum(terms) <= shape.count)
    # no more replicas than the chosen pair's R
    model.add(sum(y.values()) <= sum(r * w[k, r] for k, r in data.pairs))
    model.minimize(z + sum(scaled(data.sync[p]) * w[p] for p in data.pairs))

    hinted = False
    if plan is not None:
        chosen = sorted(c for c, _ in plan)
        replicas = len(chosen)
        k_top = max(data.class_of[c] for c in chosen)
        pair = (k_top, replicas) if replicas >= 2 else (data.num_classes - 1, 1)
        if pair in w:
            hinted = True
            copy = {}
            shares = {}
            for c, m in sorted(plan, key=lambda x: (x[0], -x[1])):
                j = copy.get(c, 0)
                copy[c] = j + 1
                shares[c, j] = m
            for key in y:
                model.add_hint(y[key], key in shares)
                model.add_hint(n[key], shares.get(key, 0))
            for p in w:
                model.add_hint(w[p], p == pair)
            model.add_hint(z, max(scaled(cands[c].fill_s) + scaled(cands[c].per_microbatch_s) * (m - 1) for c, m in plan))

    def decode(solver):
        used = [c for (c, _), var in y.items() if solver.value(var)]
        pairs, _ = optimal_split(instance, used)
        return build_solution(instance, pairs)

    # infeasible_reason ruled infeasibility out (one usable candidate is a plan)
    built = BuiltModel(
        problem="replicas", method="cpsat", instance=instance, evaluate=evaluate, model=model, kind="cpsat", decode=decode,
        bound=lambda b: lower if b is None else max(lower, b * q), floor=lower,
        stats={"slots": len(data.slots), "pairs": len(data.pairs), "quantum_s": q, "hinted": hinted},
        load_s=LOAD_S + LOAD_S_PER_SLOT * len(data.slots), deadline=deadline,
        known=None if plan is None else (
            lambda reason, bound, stats: known_plan_or_time_limit(instance, plan, "cpsat", deadline, bound, reason)),
    )
    return solve_model(built, time_limit=time_limit, threads=threads, seed=seed)
