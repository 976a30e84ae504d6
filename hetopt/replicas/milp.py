"""The replicas problem as a MILP (PuLP; HiGHS by default, CBC on request).

    y[c,j] ∈ {0,1}, n[c,j] ∈ {0..N}    slot j of candidate c: used, its micro-batches
    w[k,R] ∈ {0,1}                      the chosen (sync class, replicas) pair
    z ≥ 0                               the slowest replica's time

    Σ_{c,j} n[c,j] = N                                  every micro-batch runs once
    y[c,j] ≤ n[c,j] ≤ N·y[c,j]                          a used slot runs ≥ 1, an unused none
    Σ_{c,j} u[c,s]·y[c,j] ≤ a_s            ∀ s          the islands of each shape
    z ≥ f_c·y[c,j] + p_c·(n[c,j] − y[c,j]) ∀ c,j        T_c(n) of a used slot
    Σ w = 1;  Σ y ≤ Σ R·w[k,R];  y[c,j] ≤ Σ_{k ≥ k(c), R} w[k,R]   one pair admits the slot
    y[c,j] ≥ y[c,j+1], n[c,j] ≥ n[c,j+1]                copies of c in order (symmetry)
    minimize z + Σ σ(k,R)·w[k,R]

The solution's multiset is re-split exactly (``optimal_split``) and checked by ``evaluate``.
"""

from __future__ import annotations

import pulp

from hetopt.budget import CLOCK_EVERY
from hetopt.backends import DEFAULT_MILP_BACKEND
from hetopt.family import Deadline, no_solution
from hetopt.modelmethod import BuiltModel, solve_model, start
from hetopt.replicas.heuristic import greedy_plan
from hetopt.replicas.limits import size_problem
from hetopt.replicas.model import GREEDY_SHARE, TooLarge, known_plan_or_time_limit, model_data
from hetopt.replicas.problem import ReplicasInstance, build_solution, evaluate, infeasible_reason, usable_candidates
from hetopt.replicas.split import optimal_split
from hetopt.result import Result, Status

#: Seconds kept back from the backend's limit for loading the model and reading it back
#: (HiGHS's set-up, CBC's process start), plus a share per slot (about 2·10^-5 s measured
#: per variable, doubled for a loaded machine; a slot is two variables).
LOAD_S = 0.1
LOAD_S_PER_SLOT = 1e-4


def solve_milp(instance: ReplicasInstance, *, time_limit: float | None = None, backend: str = DEFAULT_MILP_BACKEND,
               threads: int | None = None) -> Result:
    """Solve the slot MILP above.

    Returns
    -------
    Result
        FEASIBLE with the proven bound when stopped with a plan, TIME_LIMIT without one.
        ``stats``: slots, pairs, variables, constraints, backend, nodes (HiGHS).
    """
    deadline, method = start(time_limit, "milp", backend=backend)
    reason = infeasible_reason(instance)
    if reason is not None:
        return no_solution(problem="replicas", method=method, status=Status.INFEASIBLE, deadline=deadline, reason=reason)
    declined = size_problem(instance, "the MILP")
    if declined is not None:
        return no_solution(problem="replicas", method=method, status=Status.DECLINED, deadline=deadline, reason=declined)
    cands = instance.candidates
    lower = min(cands[c].fill_s for c in usable_candidates(instance))  # no plan beats the fastest single pass
    plan = greedy_plan(instance, Deadline(deadline.share(GREEDY_SHARE)))
    upper = None if plan is None else evaluate(instance, build_solution(instance, plan)).objective
    def out_of_time(why: str = "time limit reached while building the MILP") -> Result:
        return known_plan_or_time_limit(instance, plan, method, deadline, lower, why)

    try:
        data = model_data(instance, upper, "the MILP", deadline)
    except TooLarge as exc:
        return no_solution(problem="replicas", method=method, status=Status.DECLINED, deadline=deadline, reason=str(exc))
    except TimeoutError:
        return out_of_time()

    n_total = instance.microbatches
    prob = pulp.LpProblem("replicas", pulp.LpMinimize)
    z = prob.add_variable("z", lowBound=lower)
    w = {(k, r): prob.add_variable(f"w_{k}_{r}", lowBound=0, upBound=1, cat=pulp.LpInteger) for k, r in data.pairs}
    prob += z + pulp.lpSum(data.sync[p] * w[p] for p in data.pairs)
    # allowed[k] = Σ_{k' ≥ k} Σ_R w[k',R]: the chosen pair admits class k (built as a
    # suffix sum so that each slot's row has one term, not one per pair)
    allowed = [prob.add_variable(f"allowed_{k}", lowBound=0, upBound=1) for k in range(data.num_classes)]
    for k in range(data.num_classes):
        tail = allowed[k + 1] if k + 1 < data.num_classes else 0
        prob += allowed[k] == tail + pulp.lpSum(w[kk, r] for kk, r in data.pairs if kk == k), f"allowed_{k}"
    y, n = {}, {}
    for i, (c, j) in enumerate(data.slots):
        if i % CLOCK_EVERY == 0 and deadline.expired():
            return out_of_time()
        y[c, j] = prob.add_variable(f"y_{c}_{j}", lowBound=0, upBound=1, cat=pulp.LpInteger)
        n[c, j] = prob.add_variable(f"n_{c}_{j}", lowBound=0, upBound=data.most[c], cat=pulp.LpInteger)
        # a used slot runs at least one micro-batch, an unused one none
        prob += n[c, j] >= y[c, j], f"some_{c}_{j}"
        prob += n[c, j] <= data.most[c] * y[c, j], f"none_{c}_{j}"
        # z is at least the slot's T_c(n) when used
        prob += z >= cands[c].fill_s * y[c, j] + cands[c].per_microbatch_s * (n[c, j] - y[c, j]), f"time_{c}_{j}"
        # the slot's class is allowed by the chosen pair
        prob += y[c, j] <= allowed[data.class_of[c]], f"class_{c}_{j}"
        if j > 0:  # copies of one candidate are interchangeable: use them in order
            prob += y[c, j] <= y[c, j - 1], f"order_y_{c}_{j}"
            prob += n[c, j] <= n[c, j - 1], f"order_n_{c}_{j}"
    # no plan worth finding runs a replica past the known plan's time (or every T_c(N))
    prob += z <= data.z_top, "no_worse_than_known"
    # every micro-batch runs on exactly one replica
    prob += pulp.lpSum(n.values()) == n_total, "microbatches"
    # the islands of each shape
    for s, shape in enumerate(instance.shapes):
        terms = [cands[c].uses[s] * y[c, j] for c, j in data.slots if cands[c].uses[s]]
        if terms:
            prob += pulp.lpSum(terms) <= shape.count, f"islands_{s}"
    # one (class, R) pair, and no more replicas than its R
    prob += pulp.lpSum(w.values()) == 1, "one_pair"
    prob += pulp.lpSum(y.values()) <= pulp.lpSum(r * w[k, r] for k, r in data.pairs), "replicas"
    if deadline.expired():
        return out_of_time()

    def decode(used):
        pairs, _ = optimal_split(instance, [c for c, _ in used])
        return build_solution(instance, pairs)

    # infeasible_reason ruled infeasibility out (one usable candidate is a plan)
    built = BuiltModel(
        problem="replicas", method=method, instance=instance, evaluate=evaluate, model=prob, kind="milp", decode=decode,
        read=lambda: [key for key, var in y.items() if (var.value() or 0.0) > 0.5],
        bound=lambda b: lower if b is None else max(lower, b), floor=lower,
        stats={"variables": len(prob.variables()), "constraints": prob.numConstraints(), "slots": len(data.slots),
               "pairs": len(data.pairs)},
        load_s=LOAD_S + LOAD_S_PER_SLOT * len(data.slots), deadline=deadline,
        known=None if plan is None else (
            lambda reason, bound, stats: known_plan_or_time_limit(instance, plan, method, deadline, bound, reason)),
    )
    return solve_model(built, time_limit=time_limit, threads=threads, backend=backend)
