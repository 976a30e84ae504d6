"""The mixed family as a MILP (PuLP; HiGHS by default, CBC on request): a path of stages.

Nodes (i, k): layers i..L−1 are placed and k stages follow (capped at max(M − 1, 1)). An edge
e from (j, k) to (i, min(k + 1, cap)) is one stage on layers i..j−1 with an explicit member
set (per type: t, r, n with Σ n = b, n spread evenly over the r replicas) that fits its memory
at flight min(k + 1, M); of the member sets with the same units per type only the fastest is kept. With x_e ∈ {0, 1}, z ≥ 0:

    Σ_{e out of (L, 0)} x_e = 1                                the last stage is placed once
    Σ_{e into v} x_e = Σ_{e out of v} x_e      ∀ v, 0 < i < L   a path back to layer 0
    Σ_e v_{e,g}·x_e ≤ N_g / unit_g             ∀ g              units per type
    Σ_{e ∋ l} x_e = 1;  z ≥ Σ_{e ∋ l} t_e·x_e   ∀ layers l       one stage per layer; the bottleneck
    z ≥ λ·(1 − Σ_{e = [0, L)} x_e)                              λ counts once S > 1
    minimize Σ_e (t_e + [k_e ≥ 1]·λ)·x_e + (M − 1)·z

which is T of the chosen path (``formulations/mixed.md``). The graph is acyclic (i falls on
every edge), so the flow is one path. The MILP prices member sets directly; it shares
neither the DP's best split nor its labels.
"""

from __future__ import annotations

import pulp

from hetopt.backends import DEFAULT_MILP_BACKEND
from hetopt.budget import CLOCK_EVERY
from hetopt.family import no_solution, presolve
from hetopt.mixed.limits import after_cap, milp_limit_hit
from hetopt.mixed.problem import (
    MixedInstance,
    build_solution,
    evaluate,
    in_flight,
    infeasible_reason,
    member_fits,
    member_time_s,
    stage_time_s,
)
from hetopt.mixed.stages import stage_members
from hetopt.modelmethod import BuiltModel, solve_model, start
from hetopt.result import Result, Status

#: Seconds kept back from the backend's limit for loading and reading the model, plus a share
#: per edge (a binary and about three matrix entries; 10^-4 s each is generous).
LOAD_S = 0.1
LOAD_S_PER_EDGE = 1e-4


def _choices(instance: MixedInstance, first: int, end: int, flight: int, sets) -> dict[tuple[int, ...], tuple]:
    """Units per type -> (t_s, members) of the fastest member set that fits at ``flight``."""
    best: dict[tuple[int, ...], tuple] = {}
    for members in sets:
        compute = 0.0
        fits = True
        for m in members:
            k = instance.gpus[m.gpu].degree_index(m.degree)
            for y in m.shares:  # ⌊n/r⌋ and ⌈n/r⌉: every replica fits, the slowest sets the time
                if not member_fits(instance, first, end, m.gpu, k, y, flight):
                    fits = False
                    break
                compute = max(compute, member_time_s(instance, first, end, m.gpu, k, y))
            if not fits:
                break
        use = [0] * instance.num_types
        for m in members:
            use[m.gpu] += m.replicas * m.degree // instance.gpus[m.gpu].unit
        if not fits or any(u > g.units for u, g in zip(use, instance.gpus)):
            continue
        t = stage_time_s(instance, first, end, [(m.gpu, m.degree, m.replicas) for m in members], compute)
        key = tuple(use)
        if key not in best or t < best[key][0]:
            best[key] = (t, members)
    return best


def solve_milp(instance: MixedInstance, *, time_limit: float | None = None, backend: str = DEFAULT_MILP_BACKEND,
               threads: int | None = None) -> Result:
    """Solve the path MILP above.

    Returns
    -------
    Result
        OPTIMAL, INFEASIBLE, DECLINED (``limits.milp_limit_hit``), or TIME_LIMIT.
        ``stats``: edges, variables, constraints.
    """
    deadline, method = start(time_limit, "milp", backend=backend)
    refused = presolve(problem="mixed", method=method, deadline=deadline, infeasible=infeasible_reason(instance),
                       declined=lambda: milp_limit_hit(instance))
    if refused is not None:
        return refused
    L, M, link = instance.layers, instance.microbatches, instance.link_s
    cap = after_cap(instance)
    sets = stage_members(instance)
    edges = []  # (from node, to node, t_s, use, first, end, members)
    step = 0
    cache: dict[tuple[int, int, int], dict] = {}
    for end in range(L, 0, -1):
        for k in range(0, min(cap, L - end) + 1):
            if end == L and k > 0:
                continue  # only the last stage starts at (L, 0)
            flight = in_flight(k, M)
            for first in range(end - 1, -1, -1):
                step += 1
                if step % CLOCK_EVERY == 0 and deadline.expired():
                    return no_solution(problem="mixed", method=method, status=Status.TIME_LIMIT, deadline=deadline,
                                       reason="time limit reached while building the MILP")
                if (first, end, flight) not in cache:
                    cache[first, end, flight] = _choices(instance, first, end, flight, sets)
                for use, (t, members) in cache[first, end, flight].items():
                    edges.append(((end, k), (first, min(k + 1, cap)), t, use, first, end, members))
    infeasible = ("no plan fits: no path of stages covers the layers within the GPUs' count and memory "
                  "(add GPUs, memory or TP degrees)")
    if not edges:
        return no_solution(problem="mixed", method=method, status=Status.INFEASIBLE, deadline=deadline, reason=infeasible)
    prob = pulp.LpProblem("mixed", pulp.LpMinimize)
    x = [prob.add_variable(f"x_{n}", lowBound=0, upBound=1, cat=pulp.LpInteger) for n in range(len(edges))]
    z = prob.add_variable("z", lowBound=0)
    prob += pulp.lpSum((e[2] + (link if e[0][1] >= 1 else 0.0)) * x[n] for n, e in enumerate(edges)) + (M - 1) * z
    out_of: dict[tuple[int, int], list[int]] = {}
    into: dict[tuple[int, int], list[int]] = {}
    covering: list[list[int]] = [[] for _ in range(L)]
    for n, e in enumerate(edges):
        out_of.setdefault(e[0], []).append(n)
        into.setdefault(e[1], []).append(n)
        for layer in range(e[4], e[5]):
            covering[layer].append(n)
    # the bottleneck is at least the time of the stage holding each layer: one row per layer
    # (the sum has one chosen term), a convex combination in the LP, far tighter than z ≥ t_e·x_e
    for layer, ns in enumerate(covering):
        # every layer is in exactly one stage (implied by the path; it tightens the LP)
        prob += pulp.lpSum(x[n] for n in ns) == 1, f"cover_{layer}"
        prob += z >= pulp.lpSum(edges[n][2] * x[n] for n in ns), f"bottleneck_{layer}"
    # and at least λ unless the plan is one stage (the edges on all layers)
    if link > 0:
        prob += z >= link * (1 - pulp.lpSum(x[n] for n in covering[0] if edges[n][5] == L)), "handover"
    # the last stage is placed exactly once
    prob += pulp.lpSum(x[n] for n in out_of.get((L, 0), [])) == 1, "last_stage"
    # flow conservation: a stage ending at layer i follows every stage that starts there
    for node in set(out_of) | set(into):
        if 0 < node[0] < L:
            prob += (pulp.lpSum(x[n] for n in into.get(node, [])) == pulp.lpSum(x[n] for n in out_of.get(node, [])),
                     f"path_{node[0]}_{node[1]}")
    # units (GPUs in whole units) per type
    for g, grp in enumerate(instance.gpus):
        terms = [e[3][g] * x[n] for n, e in enumerate(edges) if e[3][g]]
        if terms:
            prob += pulp.lpSum(terms) <= grp.units, f"units_{g}"

    def decode(chosen):
        stages = sorted((edges[n][4], edges[n][5], [(m.gpu, m.degree, m.replicas, m.samples) for m in edges[n][6]])
                        for n in chosen)
        return build_solution(instance, stages)

    built = BuiltModel(
        problem="mixed", method=method, instance=instance, evaluate=evaluate, model=prob, kind="milp", decode=decode,
        read=lambda: [n for n, var in enumerate(x) if (var.value() or 0.0) > 0.5],
        stats={"edges": len(edges), "variables": len(prob.variables()), "constraints": prob.numConstraints()},
        load_s=LOAD_S + LOAD_S_PER_EDGE * len(edges), deadline=deadline, infeasible_reason=infeasible,
    )
    return solve_model(built, time_limit=time_limit, threads=threads, backend=backend)


__all__ = ["solve_milp"]
