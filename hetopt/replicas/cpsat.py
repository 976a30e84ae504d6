"""The replicas problem as an OR-Tools CP-SAT model, in two formulations (``formulation=``).

``"counts"`` (the default): one integer x_c per candidate, its number of copies; the slowest
replica's time is a level index t over the values V of ``levels.py``, and each copy of c
runs at most cap_c(V[t]) micro-batches (an element constraint), so the capacity row
Σ_c x_c · cap_c ≥ N holds products of two small integers. The sync is one table row
(class k, replicas R, σ̂(k, R)). Copies of a candidate are counted, not named: no symmetry.

``"slots"``: the MILP's slot model (``milp.py``) in integers, one (y, n) per copy of a
candidate; kept as the per-copy formulation the count model is tested against.

Times are scaled to integers with a quantum q (``model.quantum``): x̂ = ⌊x/q⌋. In the count
model the level's time and the sync each lose less than q, so q·(CP-SAT's bound) is a
valid lower bound and the plan proven optimal is within 2q of OPT; in the slot model a
scaled T loses less than N units, so within q·(N + 1) (the family's agreement slack,
``replicas.tolerance``). See ``formulations/replicas.md``.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter

from ortools.sat.python import cp_model

from hetopt.budget import CLOCK_EVERY
from hetopt.family import Deadline
from hetopt.modelmethod import BuiltModel, check_formulation, solve_model, start, threads_alias
from hetopt.replicas.levels import time_levels
from hetopt.replicas.model import FORMULATIONS, ModelData, known_plan_or_time_limit, quantum
from hetopt.replicas.modelbuild import build_model
from hetopt.replicas.problem import ReplicasInstance, build_solution, evaluate
from hetopt.replicas.split import optimal_split
from hetopt.result import Result

#: Seconds kept back from CP-SAT's limit (model copy and presolve before it looks at its
#: clock), plus a share per slot (about 5·10^-5 s per variable measured, doubled).
LOAD_S = 0.1
LOAD_S_PER_SLOT = 1e-4


@threads_alias
def solve_cpsat_model(instance: ReplicasInstance, *, time_limit: float | None = None, threads: int | None = None,
                      seed: int = 0, formulation: str = "counts") -> Result:
    """Solve the replicas problem with CP-SAT, warm-started from the greedy plan.

    Parameters
    ----------
    formulation
        ``"counts"`` (copies counted per candidate, the slowest time as a level; the default)
        or ``"slots"`` (one slot per copy). Both are exact; see the module docstring.

    Returns
    -------
    Result
        OPTIMAL means optimal for the scaled times (within the family's tolerance of the true
        optimum); otherwise ``bound`` is q times CP-SAT's bound. ``stats``: formulation,
        quantum_s, hinted, branches, conflicts; levels and candidates (counts) or slots
        (slots); pairs.

    Examples
    --------
    >>> from hetopt.replicas.problem import Candidate, IslandShape
    >>> inst = ReplicasInstance("x", 4, (IslandShape("A", 2),), (Candidate("a", (1,), 1.0, 0.5, 1e9, 1e10),),
    ...                         hop_latency_s=0.0)
    >>> r = solve_cpsat_model(inst)
    >>> r.status.value, [(x.candidate, x.microbatches) for x in r.solution.replicas]
    ('OPTIMAL', [(0, 2), (0, 2)])
    """
    check_formulation(formulation, FORMULATIONS)
    deadline, _ = start(time_limit, "cpsat")
    build = _counts_model if formulation == "counts" else _slots_model
    opened = build_model(instance, method="cpsat", label="the CP-SAT model", formulation=formulation, deadline=deadline,
                         build=lambda data, plan, lower: build(instance, data, plan, deadline, lower))
    if isinstance(opened, Result):
        return opened
    built, _, _ = opened
    return solve_model(built, time_limit=time_limit, threads=threads, seed=seed)


def _built(instance: ReplicasInstance, model: cp_model.CpModel, decode, q: float, lower: float, stats: dict,
           plan, deadline: Deadline, load: int) -> BuiltModel:
    """The BuiltModel both formulations hand to ``solve_model``."""
    # infeasible_reason ruled infeasibility out (one usable candidate is a plan)
    return BuiltModel(
        problem="replicas", method="cpsat", instance=instance, evaluate=evaluate, model=model, kind="cpsat", decode=decode,
        bound=lambda b: lower if b is None else max(lower, b * q), floor=lower, stats=stats,
        load_s=LOAD_S + LOAD_S_PER_SLOT * load, deadline=deadline,
        known=None if plan is None else (
            lambda reason, bound, stats: known_plan_or_time_limit(instance, plan, "cpsat", deadline, bound, reason)),
    )


def _counts_model(instance: ReplicasInstance, data: ModelData, plan, deadline: Deadline, lower: float) -> BuiltModel | None:
    """The count formulation: x_c copies, a level index t, capacities by element, one sync row."""
    cands = instance.candidates
    q = quantum(instance)
    levels = time_levels(instance, data, deadline)
    values = levels.values
    model = cp_model.CpModel()
    # t: the level of the slowest replica; z = ⌊V[t]/q⌋ its scaled time
    level = model.new_int_var(0, len(values) - 1, "level")
    scaled_values = [math.floor(v / q) for v in values]
    z = model.new_int_var(scaled_values[0], scaled_values[-1], "z")
    model.add_element(level, scaled_values, z)
    copies, used, products = {}, {}, []
    for i, c in enumerate(sorted(levels.caps)):
        if i % CLOCK_EVERY == 0 and deadline.expired():
            return None
        first = levels.first(c)
        if first is None or levels.copies[c] == 0:
            continue  # a copy of c would not end by U: no plan worth finding uses it
        table = levels.caps[c]
        copies[c] = model.new_int_var(0, levels.copies[c], f"x_{c}")
        used[c] = model.new_bool_var(f"used_{c}")
        # used ⇔ at least one copy
        model.add(copies[c] >= 1).only_enforce_if(used[c])
        model.add(copies[c] == 0).only_enforce_if(~used[c])
        # a used candidate's copies each run a micro-batch: the level reaches its fill time
        model.add(level >= first).only_enforce_if(used[c])
        # each copy runs at most cap_c(V[t]) micro-batches
        capacity = model.new_int_var(0, max(table), f"cap_{c}")
        model.add_element(level, list(table), capacity)
        runs = model.new_int_var(0, levels.copies[c] * max(table), f"runs_{c}")
        model.add_multiplication_equality(runs, [copies[c], capacity])
        products.append(runs)
    # the copies can run every micro-batch by V[t]
    model.add(sum(products) >= instance.microbatches)
    # the islands of each shape
    for s, shape in enumerate(instance.shapes):
        terms = [cands[c].uses[s] * x for c, x in copies.items() if cands[c].uses[s]]
        if terms:
            model.add(sum(terms) <= shape.count)
    # R replicas of sync class at most k cost σ̂(k, R): one row of the table (R = 1 syncs nothing)
    replicas = model.new_int_var(1, data.r_max, "replicas")
    model.add(replicas == sum(copies.values()))
    top_class = model.new_int_var(0, data.num_classes - 1, "class")
    for c, u in used.items():
        model.add(top_class >= data.class_of[c]).only_enforce_if(u)
    rows = [(k, r, math.floor(data.sync[k, r] / q)) for k, r in data.pairs if r >= 2]
    rows += [(k, 1, 0) for k in range(data.num_classes)]
    sync = model.new_int_var(0, max(row[2] for row in rows), "sync")
    model.add_allowed_assignments([top_class, replicas, sync], rows)
    model.minimize(z + sync)

    hinted = plan is not None
    if hinted:
        counts = Counter(c for c, _ in plan)
        slowest = max(cands[c].time(n) for c, n in plan)
        for c, x in copies.items():
            model.add_hint(x, counts.get(c, 0))
            model.add_hint(used[c], c in counts)
        model.add_hint(level, min(bisect.bisect_left(values, slowest), len(values) - 1))
        model.add_hint(replicas, len(plan))
        model.add_hint(top_class, max(data.class_of[c] for c in counts))

    def decode(solver):
        chosen = [c for c, x in copies.items() for _ in range(solver.value(x))]
        pairs, _ = optimal_split(instance, chosen)
        return build_solution(instance, pairs)

    stats = {"formulation": "counts", "levels": len(values), "candidates": len(copies), "pairs": len(rows),
             "quantum_s": q, "hinted": hinted}
    return _built(instance, model, decode, q, lower, stats, plan, deadline, len(values))


def _slots_model(instance: ReplicasInstance, data: ModelData, plan, deadline: Deadline, lower: float) -> BuiltModel | None:
    """The slot formulation: y/n per copy, z over the scaled sums f̂ + p̂·(n − 1), w per (k, R)."""
    cands = instance.candidates
    q = quantum(instance)

    def scaled(seconds: float) -> int:
        return math.floor(seconds / q)

    n_total = instance.microbatches
    # z takes only the values a slot's scaled time can take (the same integer sums the rows
    # use, never ⌊T(n)/q⌋ of a float sum, which can fall an ulp below them: issue 29); a
    # continuous domain let CP-SAT raise its bound one unit (1 ps) per conflict (issue 44)
    kept = sorted({c for c, _ in data.slots})
    sums = {scaled(cands[c].fill_s) + scaled(cands[c].per_microbatch_s) * (m - 1)
            for c in kept for m in range(1, data.most[c] + 1)}
    if plan is not None:  # nothing above the known plan's time matters (z_top: U with its margin)
        sums = {v for v in sums if v <= scaled(data.z_top)} or {min(sums)}
    model = cp_model.CpModel()
    z = model.new_int_var_from_domain(cp_model.Domain.from_values(sorted(sums)), "z")
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
            return None
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
        k_top = max(data.class_of[c] for c in chosen)
        pair = (k_top, len(chosen)) if len(chosen) >= 2 else (data.num_classes - 1, 1)
        if pair in w:
            hinted = True
            copy: dict[int, int] = {}
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

    stats = {"formulation": "slots", "slots": len(data.slots), "pairs": len(data.pairs), "quantum_s": q,
             "hinted": hinted}
    return _built(instance, model, decode, q, lower, stats, plan, deadline, len(data.slots))
