"""The replicas problem as a MILP (PuLP; HiGHS by default, CBC on request), in two formulations.

``formulation="counts"`` (the default): copies counted per candidate, the slowest time as
threshold binaries over the levels V of ``levels.py``:

    v[t] ∈ {0,1} (t ≥ 1), v[t] ≤ v[t−1]        the slowest time is at least V[t]
    z = V[0] + Σ_t (V[t] − V[t−1])·v[t]
    x[c] ∈ {0..K_c};  x[c] ≤ K_c·v[first_c]     a used candidate's copies reach their fill time
    g[c,t] ≤ x[c],  g[c,t] ≤ K_c·v[t]           g = x·v: c's copies may use the step at V[t]
    Σ_c (cap_c(V[0])·x[c] + Σ_t Δcap_c(t)·g[c,t]) ≥ N     the copies run every micro-batch
    Σ_c u[c,s]·x[c] ≤ a_s  ∀ s
    Σ w = 1;  Σ x ≤ Σ R·w[k,R];  x[c] ≤ K_c·Σ_{k ≥ k(c), R} w[k,R]
    minimize z + Σ σ(k,R)·w[k,R]

``formulation="slots"``: one (y, n) pair per possible copy (the per-copy model the count
model is tested against):

    y[c,j] ∈ {0,1}, n[c,j] ∈ {0..N};  Σ n = N;  y ≤ n ≤ N·y;  Σ u[c,s]·y ≤ a_s
    z ≥ f_c·y[c,j] + p_c·(n[c,j] − y[c,j]);  y[c,j] ≥ y[c,j+1], n[c,j] ≥ n[c,j+1]
    the same pair rows with y for x; minimize z + Σ σ(k,R)·w[k,R]

The solution's multiset is re-split exactly (``optimal_split``) and checked by ``evaluate``.
See ``formulations/replicas.md``.
"""

from __future__ import annotations

import pulp

from hetopt.backends import DEFAULT_MILP_BACKEND
from hetopt.budget import CLOCK_EVERY
from hetopt.family import Deadline
from hetopt.modelmethod import BuiltModel, check_formulation, solve_model, start
from hetopt.replicas.levels import time_levels
from hetopt.replicas.model import FORMULATIONS, ModelData, known_plan_or_time_limit
from hetopt.replicas.modelbuild import build_model
from hetopt.replicas.problem import ReplicasInstance, build_solution, evaluate
from hetopt.replicas.split import optimal_split
from hetopt.result import Result

#: Seconds kept back from the backend's limit for loading the model and reading it back
#: (HiGHS's set-up, CBC's process start), plus a share per column (about 2·10^-5 s measured
#: per variable, doubled for a loaded machine; a slot is two variables, a level two).
LOAD_S = 0.1
LOAD_S_PER_SLOT = 1e-4


def solve_milp(instance: ReplicasInstance, *, time_limit: float | None = None, backend: str = DEFAULT_MILP_BACKEND,
               threads: int | None = None, formulation: str = "counts") -> Result:
    """Solve the replicas MILP above.

    Parameters
    ----------
    formulation
        ``"counts"`` (the default) or ``"slots"``; both exact (module docstring).

    Returns
    -------
    Result
        FEASIBLE with the proven bound when stopped with a plan, TIME_LIMIT without one.
        ``stats``: formulation, variables, constraints, pairs, backend, nodes (HiGHS);
        levels and candidates (counts) or slots (slots).

    Examples
    --------
    >>> from hetopt.replicas.problem import Candidate, IslandShape
    >>> inst = ReplicasInstance("x", 4, (IslandShape("A", 2),), (Candidate("a", (1,), 1.0, 0.5, 1e9, 1e10),),
    ...                         hop_latency_s=0.0)
    >>> r = solve_milp(inst)
    >>> r.status.value, round(r.objective, 6)  # two replicas of 2: 1.5 + 0.1 + 8.4 µs
    ('OPTIMAL', 1.600008)
    """
    check_formulation(formulation, FORMULATIONS)
    deadline, method = start(time_limit, "milp", backend=backend)
    build = _counts_model if formulation == "counts" else _slots_model
    opened = build_model(instance, method=method, label="the MILP", formulation=formulation, deadline=deadline,
                         build=lambda data, plan, lower: build(instance, data, deadline))
    if isinstance(opened, Result):
        return opened
    (prob, read, stats, columns), plan, lower = opened
    if deadline.expired():
        return known_plan_or_time_limit(instance, plan, method, deadline, lower, "time limit reached while building the MILP")

    def decode(chosen):
        pairs, _ = optimal_split(instance, chosen)
        return build_solution(instance, pairs)

    # infeasible_reason ruled infeasibility out (one usable candidate is a plan)
    stats = dict(stats, variables=len(prob.variables()), constraints=prob.numConstraints())
    model = BuiltModel(
        problem="replicas", method=method, instance=instance, evaluate=evaluate, model=prob, kind="milp", decode=decode,
        read=read, bound=lambda b: lower if b is None else max(lower, b), floor=lower, stats=stats,
        load_s=LOAD_S + LOAD_S_PER_SLOT * columns, deadline=deadline,
        known=None if plan is None else (
            lambda reason, bound, stats: known_plan_or_time_limit(instance, plan, method, deadline, bound, reason)),
    )
    return solve_model(model, time_limit=time_limit, threads=threads, backend=backend)


def _pairs(prob: pulp.LpProblem, data: ModelData, admitted: dict, replicas: list) -> dict:
    """The (class, R) pair rows shared by both formulations. ``admitted[c]`` is (a variable
    that is positive when c is used, its upper bound); ``replicas`` the copy variables, whose
    sum is R. Returns w."""
    w = {(k, r): prob.add_variable(f"w_{k}_{r}", lowBound=0, upBound=1, cat=pulp.LpInteger) for k, r in data.pairs}
    # allowed[k] = Σ_{k' ≥ k} Σ_R w[k',R]: the chosen pair admits class k (built as a
    # suffix sum so that each candidate's row has one term, not one per pair)
    allowed = [prob.add_variable(f"allowed_{k}", lowBound=0, upBound=1) for k in range(data.num_classes)]
    for k in range(data.num_classes):
        tail = allowed[k + 1] if k + 1 < data.num_classes else 0
        prob += allowed[k] == tail + pulp.lpSum(w[kk, r] for kk, r in data.pairs if kk == k), f"allowed_{k}"
    for c, (var, most) in admitted.items():
        # the chosen pair admits the candidate's class
        prob += var <= most * allowed[data.class_of[c]], f"class_{c}"
    # one (class, R) pair, and no more replicas than its R
    prob += pulp.lpSum(w.values()) == 1, "one_pair"
    prob += pulp.lpSum(replicas) <= pulp.lpSum(r * w[k, r] for k, r in data.pairs), "replicas"
    return w


def _islands(prob: pulp.LpProblem, instance: ReplicasInstance, chosen: dict) -> None:
    """Σ u[c,s]·(copies of c) ≤ a_s for every shape."""
    cands = instance.candidates
    for s, shape in enumerate(instance.shapes):
        terms = [cands[c].uses[s] * v for c, variables in chosen.items() if cands[c].uses[s] for v in variables]
        if terms:
            prob += pulp.lpSum(terms) <= shape.count, f"islands_{s}"


def _counts_model(instance: ReplicasInstance, data: ModelData, deadline: Deadline):
    """The count formulation; None when the deadline passes while it is built."""
    levels = time_levels(instance, data, deadline)
    values = levels.values
    prob = pulp.LpProblem("replicas", pulp.LpMinimize)
    # v[t]: the slowest replica takes at least V[t] (v[0] = 1: no plan ends below the floor)
    v = [None] + [prob.add_variable(f"v_{t}", lowBound=0, upBound=1, cat=pulp.LpInteger) for t in range(1, len(values))]
    for t in range(2, len(values)):
        prob += v[t] <= v[t - 1], f"order_{t}"
    z = pulp.lpSum((values[t] - values[t - 1]) * v[t] for t in range(1, len(values))) + values[0]
    x, capacity = {}, []
    for i, c in enumerate(sorted(levels.caps)):
        if i % CLOCK_EVERY == 0 and deadline.expired():
            return None
        first, most, table = levels.first(c), levels.copies[c], levels.caps[c]
        if first is None or most == 0:
            continue  # a copy of c would not end by U: no plan worth finding uses it
        x[c] = prob.add_variable(f"x_{c}", lowBound=0, upBound=most, cat=pulp.LpInteger)
        if first > 0:  # a used candidate's copies each run one micro-batch: the time reaches f_c
            prob += x[c] <= most * v[first], f"fill_{c}"
        capacity.append(table[0] * x[c])
        for t in range(max(first, 1), len(values)):
            step = table[t] - table[t - 1]
            if step:  # g = x·v[t] (exact for binary v): each copy gains `step` micro-batches at V[t]
                g = prob.add_variable(f"g_{c}_{t}", lowBound=0, upBound=most)
                prob += g <= x[c], f"g_x_{c}_{t}"
                prob += g <= most * v[t], f"g_v_{c}_{t}"
                capacity.append(step * g)
    # the copies run every micro-batch by the slowest time
    prob += pulp.lpSum(capacity) >= instance.microbatches, "microbatches"
    _islands(prob, instance, {c: [var] for c, var in x.items()})
    w = _pairs(prob, data, {c: (var, levels.copies[c]) for c, var in x.items()}, list(x.values()))
    prob += z + pulp.lpSum(data.sync[p] * w[p] for p in data.pairs)

    def read():
        return [c for c, var in x.items() for _ in range(round(var.value() or 0.0))]

    stats = {"formulation": "counts", "levels": len(values), "candidates": len(x), "pairs": len(data.pairs)}
    return prob, read, stats, len(capacity) + len(values)


def _slots_model(instance: ReplicasInstance, data: ModelData, deadline: Deadline):
    """The slot formulation; None when the deadline passes while it is built."""
    cands = instance.candidates
    prob = pulp.LpProblem("replicas", pulp.LpMinimize)
    z = prob.add_variable("z", lowBound=min(cands[c].fill_s for c, _ in data.slots))
    y, n = {}, {}
    for i, (c, j) in enumerate(data.slots):
        if i % CLOCK_EVERY == 0 and deadline.expired():
            return None
        y[c, j] = prob.add_variable(f"y_{c}_{j}", lowBound=0, upBound=1, cat=pulp.LpInteger)
        n[c, j] = prob.add_variable(f"n_{c}_{j}", lowBound=0, upBound=data.most[c], cat=pulp.LpInteger)
        # a used slot runs at least one micro-batch, an unused one none
        prob += n[c, j] >= y[c, j], f"some_{c}_{j}"
        prob += n[c, j] <= data.most[c] * y[c, j], f"none_{c}_{j}"
        # z is at least the slot's T_c(n) when used
        prob += z >= cands[c].fill_s * y[c, j] + cands[c].per_microbatch_s * (n[c, j] - y[c, j]), f"time_{c}_{j}"
        if j > 0:  # copies of one candidate are interchangeable: use them in order
            prob += y[c, j] <= y[c, j - 1], f"order_y_{c}_{j}"
            prob += n[c, j] <= n[c, j - 1], f"order_n_{c}_{j}"
    # no plan worth finding runs a replica past the known plan's time (or every T_c(N))
    prob += z <= data.z_top, "no_worse_than_known"
    # every micro-batch runs on exactly one replica
    prob += pulp.lpSum(n.values()) == instance.microbatches, "microbatches"
    chosen: dict[int, list] = {}
    for (c, _), var in y.items():
        chosen.setdefault(c, []).append(var)
    _islands(prob, instance, chosen)
    # copies are used in order (y[c,j] ≤ y[c,0]), so admitting the first copy admits them all
    w = _pairs(prob, data, {c: (y[c, 0], 1) for c in chosen}, list(y.values()))
    prob += z + pulp.lpSum(data.sync[p] * w[p] for p in data.pairs)

    def read():
        return [c for (c, _), var in y.items() if (var.value() or 0.0) > 0.5]

    stats = {"formulation": "slots", "slots": len(data.slots), "pairs": len(data.pairs)}
    return prob, read, stats, len(data.slots)
