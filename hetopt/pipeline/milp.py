"""The pipeline problem as a MILP (PuLP; HiGHS by default, CBC on request), in two formulations.

``formulation="signatures"`` (the default): the *level model* over island signatures
(``levels.py``): option o of signature K at level b (b stages behind it) is y[b,o]; islands of
one signature are counted; the bottleneck is a chain of threshold binaries:

    out_ℓ = Σ_o y[ℓ,o],  in_ℓ = Σ_{b + n_o = ℓ} y[b,o]
    out_0 = 1;  out_ℓ ≤ in_ℓ (ℓ ≥ 1)                        one chain of blocks from the back
    Σ k_o y = L;  Σ_{b, o ∈ K} y ≤ n_K                      tiling; islands of each signature
    first/whole at (b,o): out_{b+n_o} ≤ 1 − y;  middle/last: y ≤ out_{b+n_o}
    Σ_K λ[ℓ,K,K'] = Σ_o∈K' y[ℓ,o];  Σ_K' λ[ℓ,K,K'] ≤ Σ_{o ∈ K, b + n_o = ℓ} y[b,o]   links
    v_t ∈ {0,1}, v_t ≤ v_{t−1};  Σ_{o ∈ K, τ_o ≥ θ_t} Σ_b y[b,o] ≤ n_K v_t;  λ ≤ v_{t(c)}
    minimize Σ T_o y + Σ c λ + (M − 1)·(θ_0 + Σ_t (θ_t − θ_{t−1}) v_t)

The 1F1B memory rule is in the cells (b ≤ b_o). ``formulation="positions"``: the position
model below, one binary per (position, option) with concrete islands.

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
from hetopt.modelmethod import BuiltModel, check_formulation, solve_model, start
from hetopt.pipeline.levelrows import link_ends, needs_by_threshold
from hetopt.pipeline.levels import MAX_LEVEL_CELLS, CellEnds, cell_ends, known_plan, level_floor
from hetopt.pipeline.options import FORMULATIONS, GENERIC_INFEASIBLE, why_infeasible
from hetopt.pipeline.plan import blocks_from_choices, build_solution
from hetopt.pipeline.early import levels_out_of_time, levels_warm_start, positions_early_answer
from hetopt.pipeline.positions import MAX_POSITION_BINARIES, position_data
from hetopt.pipeline.problem import PipelineInstance, PipelineSolution, evaluate, simple_bound
from hetopt.result import Result, Status


def solve_milp(instance: PipelineInstance, *, time_limit: float | None = None, backend: str = DEFAULT_MILP_BACKEND,
               threads: int | None = None, write_model: str | os.PathLike[str] | None = None,
               formulation: str = "signatures", max_position_binaries: int = MAX_POSITION_BINARIES,
               max_level_cells: int = MAX_LEVEL_CELLS) -> Result:
    """Solve one of the MILPs above.

    Both build their rows from (variable, coefficient) lists with aggregates (the level
    model's out_ℓ, in_ℓ and per-signature counts; the position model's a[p,i], u_p and the
    stages behind position p, h_p = h_{p+1} + Σ_o n_o y[p+1,o]) as continuous variables fixed
    by equality rows (an exact reformulation: every row then has few terms, so building the
    model is linear in its size instead of quadratic). The deadline is checked while the
    model is built; the backend gets only the time that is left.

    Parameters
    ----------
    formulation
        ``"signatures"`` (the level model over island signatures; the default, may change) or
        ``"positions"`` (one binary per position and concrete option). Both are exact.
    max_position_binaries
        The position model with more binaries is declined up front (:data:`~hetopt.pipeline.positions.MAX_POSITION_BINARIES`).
    max_level_cells
        The level model with more cells y[b,o] is declined up front (:data:`~hetopt.pipeline.levels.MAX_LEVEL_CELLS`).

    Options as every model method takes them (:func:`hetopt.modelmethod.solve_model`).

    Returns
    -------
    Result
        FEASIBLE with the gap when the time limit stops the solver with a plan (the level
        model's greedy warm start when the solver has none); TIME_LIMIT without one (also when
        the limit runs out while the model is built). ``stats``: formulation, variables,
        constraints, backend, nodes (HiGHS); positions (positions) or cells, thresholds,
        signatures (signatures).

    Examples
    --------
    >>> from hetopt import load
    >>> from hetopt.catalog import instances_dir
    >>> r = solve_milp(load(instances_dir() / "pipeline" / "tiny.toml"))
    >>> r.status.value, round(r.objective, 3), r.stats["formulation"]
    ('OPTIMAL', 1.262, 'signatures')
    """
    check_formulation(formulation, FORMULATIONS)
    deadline, method = start(time_limit, "milp", write_model=write_model, backend=backend)
    # PuLP is imported here, not at the top of the module, so that ``import hetopt`` does not
    # pay for it; after the deadline starts, so that its import counts against the limit
    import pulp

    reason = why_infeasible(instance)
    if reason is not None:
        return no_solution(problem="pipeline", method=method, status=Status.INFEASIBLE, deadline=deadline, reason=reason)
    if formulation == "signatures":
        return _levels(instance, pulp, deadline, method, time_limit, threads, backend, write_model, max_level_cells)
    return _positions(instance, pulp, deadline, method, time_limit, threads, backend, write_model, max_position_binaries)


def _positions(instance, pulp, deadline, method, time_limit, threads, backend, write_model,
               max_position_binaries: int = MAX_POSITION_BINARIES) -> Result:
    """The position model (``formulation="positions"``)."""
    data = position_data(instance)
    if (early := positions_early_answer(instance, data, method=method, deadline=deadline,
                                           max_binaries=max_position_binaries)) is not None:
        return early
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
        stats={"formulation": "positions", "variables": len(y) + len(w) + len(on) + 2 * P + 1,
               "constraints": prob.numConstraints(), "positions": P},
        infeasible_reason=GENERIC_INFEASIBLE.format(layers=instance.layers), deadline=deadline,
    )
    return solve_model(built, time_limit=time_limit, threads=threads, backend=backend, write_model=write_model)


def _levels(instance, pulp, deadline, method, time_limit, threads, backend, write_model,
            max_level_cells: int = MAX_LEVEL_CELLS) -> Result:
    """The level model over island signatures (``formulation="signatures"``)."""
    started = levels_warm_start(instance, method=method, deadline=deadline, max_cells=max_level_cells)
    if isinstance(started, Result):
        return started
    data, hint = started
    floor = level_floor(instance, data)
    stats = {"formulation": "signatures", "cells": len(data.cells), "thresholds": len(data.thresholds),
             "signatures": len(data.sig.kinds)}

    def stopped(reason: str, bound: float | None, stats: dict) -> Result:
        return known_plan(instance, method, hint, deadline, bound, stats, reason)

    def out_of_time() -> Result:
        return levels_out_of_time(instance, method=method, model="the MILP", hint=hint, deadline=deadline, floor=floor,
                                  stats=stats)

    prob = pulp.LpProblem("pipeline", pulp.LpMinimize)
    y = {(b, o): prob.add_variable(f"y_{b}_{o}", lowBound=0, upBound=1, cat=pulp.LpInteger) for b, o in data.cells}
    if deadline.expired():
        return out_of_time()
    thetas = data.thresholds
    v = [None] + [prob.add_variable(f"v_{t}", lowBound=0, upBound=1, cat=pulp.LpInteger) for t in range(1, len(thetas))]
    ends = cell_ends(instance, data, y)
    if 0 not in ends.starts:  # no option may be the last block (its role, or the window of a known plan: none)
        return no_solution(problem="pipeline", method=method, status=Status.INFEASIBLE, deadline=deadline,
                           reason="no usable option may be the last block: every one has role first or middle")
    out = _level_chain(pulp, prob, instance, data, y, ends)
    if deadline.expired():
        return out_of_time()
    _level_roles(pulp, prob, instance, y, out)
    lam, link_cost = _level_links(pulp, prob, data, ends)
    if deadline.expired():
        return out_of_time()
    _level_bottleneck(pulp, prob, data, y, v, lam, link_cost)
    _level_objective(pulp, prob, instance, data, y, v, lam, link_cost)
    if deadline.expired():
        return out_of_time()

    def decode(chosen) -> PipelineSolution:
        return build_solution(instance, blocks_from_choices(instance, data.plan(instance, list(chosen or ()))))

    built = BuiltModel(
        problem="pipeline", method=method, instance=instance, evaluate=evaluate, model=prob, kind="milp", decode=decode,
        read=lambda: [key for key, var in y.items() if (var.value() or 0.0) > 0.5],
        bound=lambda b: floor if b is None else max(floor, b), floor=floor,
        stats=dict(stats, variables=len(prob.variables()), constraints=prob.numConstraints()),
        infeasible_reason=None if hint is not None else GENERIC_INFEASIBLE.format(layers=instance.layers),
        known=None if hint is None else stopped, deadline=deadline,
    )
    return solve_model(built, time_limit=time_limit, threads=threads, backend=backend, write_model=write_model)


def _row(pulp, prob, terms: list, sense: int, rhs: float, name: str) -> None:
    """Σ coef·var (sense) rhs, built from (var, coef) pairs (PuLP's operators are slow)."""
    prob.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms), sense, name, rhs))


def _aggregate(pulp, prob, name: str, variables: list):
    """A continuous variable equal to the sum of ``variables`` (keeps every row short)."""
    var = prob.add_variable(name, lowBound=0)
    _row(pulp, prob, [(v, 1) for v in variables] + [(var, -1)], pulp.LpConstraintEQ, 0, f"def_{name}")
    return var


def _level_chain(pulp, prob, instance: PipelineInstance, data, y: dict, ends: CellEnds) -> dict:
    """Add the chain, tiling and signature-count rows; return the variables out_ℓ."""
    opts, EQ, LE = instance.options, pulp.LpConstraintEQ, pulp.LpConstraintLE
    out = {b: _aggregate(pulp, prob, f"out_{b}", vs) for b, vs in ends.starts.items()}
    arrive = {e: _aggregate(pulp, prob, f"in_{e}", vs) for e, vs in ends.ends.items() if e in out}
    # one chain of blocks from the back: a last block, and a block at level ℓ only on one ending there
    _row(pulp, prob, [(out[0], 1)], EQ, 1, "back")
    for b in out:
        if b > 0:
            _row(pulp, prob, [(out[b], 1)] + ([(arrive[b], -1)] if b in arrive else []), LE, 0, f"chain_{b}")
    # the slices tile the layers; the islands of each signature
    _row(pulp, prob, [(var, opts[o].layers) for (b, o), var in y.items()], EQ, instance.layers, "tiling")
    for K, count in enumerate(data.sig.counts):
        members = [var for (b, o), var in y.items() if data.kind[o] == K]
        if members:
            _row(pulp, prob, [(var, 1) for var in members], LE, count, f"signature_{K}")
    return out


def _level_roles(pulp, prob, instance: PipelineInstance, y: dict, out: dict) -> None:
    """Add the role rows: first and whole blocks have none in front, middle and last ones have one."""
    opts, LE = instance.options, pulp.LpConstraintLE
    for (b, o), var in y.items():
        e, role = b + len(opts[o].stages), opts[o].role
        if role in ("first", "whole") and e in out:
            _row(pulp, prob, [(out[e], 1), (var, 1)], LE, 1, f"front_{b}_{o}")
        elif role in ("middle", "last"):
            _row(pulp, prob, [(var, 1)] + ([(out[e], -1)] if e in out else []), LE, 0, f"ahead_{b}_{o}")


def _level_links(pulp, prob, data, ends: CellEnds) -> tuple[dict, dict]:
    """Create the link variables λ and their rows; return them and their costs."""
    EQ, LE = pulp.LpConstraintEQ, pulp.LpConstraintLE
    # links: the block starting at ℓ follows exactly one signature's block ending at ℓ
    lam = {(lv, K, K2): prob.add_variable(f"l_{lv}_{K}_{K2}", lowBound=0, upBound=1) for lv, K, K2, _ in data.junctions}
    link_cost = {(lv, K, K2): c for lv, K, K2, c in data.junctions}
    into, outof = link_ends(lam)
    for (b, K2), members in ends.by_kind_start.items():
        if b > 0:
            _row(pulp, prob, [(var, 1) for var in into.get((b, K2), [])] + [(var, -1) for var in members], EQ, 0,
                 f"follows_{b}_{K2}")
    for (lv, K), members in outof.items():
        _row(pulp, prob, [(var, 1) for var in members] + [(var, -1) for var in ends.by_kind_end.get((lv, K), [])], LE,
             0, f"leads_{lv}_{K}")
    return lam, link_cost


def _level_bottleneck(pulp, prob, data, y: dict, v: list, lam: dict, link_cost: dict) -> None:
    """Add the threshold rows: v_t ⇔ β ≥ θ_t, bounded by the blocks and links that need θ_t."""
    EQ, LE, thetas = pulp.LpConstraintEQ, pulp.LpConstraintLE, data.thresholds
    # the bottleneck: v_t ⇔ β ≥ θ_t; a signature's blocks needing θ_t or more are at most n_K·v_t
    for t in range(2, len(thetas)):
        _row(pulp, prob, [(v[t], 1), (v[t - 1], -1)], LE, 0, f"order_{t}")
    for K, count in enumerate(data.sig.counts):
        need = needs_by_threshold(data, y, K)
        tail = None
        for t in sorted(need, reverse=True):
            terms = [(var, 1) for var in need[t]] + ([(tail, 1)] if tail is not None else [])
            tail = prob.add_variable(f"g_{K}_{t}", lowBound=0)
            _row(pulp, prob, terms + [(tail, -1)], EQ, 0, f"def_g_{K}_{t}")
            _row(pulp, prob, [(tail, 1), (v[t], -count)], LE, 0, f"bottleneck_{K}_{t}")
    for key, var in lam.items():
        c = link_cost[key]
        t = data.threshold_index(c)
        if c > 0 and t >= 1:
            _row(pulp, prob, [(var, 1), (v[t], -1)], LE, 0, f"link_bottleneck_{key[0]}_{key[1]}_{key[2]}")


def _level_objective(pulp, prob, instance: PipelineInstance, data, y: dict, v: list, lam: dict,
                     link_cost: dict) -> None:
    """Set the objective: block times, paid links and (M − 1)·β as threshold steps."""
    opts, M, thetas = instance.options, instance.microbatches, data.thresholds
    prob.setObjective(pulp.LpAffineExpression(
        [(var, opts[o].total_time_s) for (b, o), var in y.items()]
        + [(var, link_cost[key]) for key, var in lam.items() if link_cost[key] > 0]
        + [(v[t], (M - 1) * (thetas[t] - thetas[t - 1])) for t in range(1, len(thetas))]
        # the window's floor as a column fixed at 1, not the expression's constant: PuLP leaves
        # a constant out of the .mps and .lp files --write-model writes (HiGHS read 0.137 for 1.262)
        + [(prob.add_variable("floor_one", lowBound=1, upBound=1), (M - 1) * thetas[0])]))
