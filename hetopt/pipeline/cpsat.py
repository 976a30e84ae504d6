"""The pipeline problem as an OR-Tools CP-SAT model, in the two formulations of ``milp.py``.

``formulation="signatures"`` (the default): the level model over island signatures
(``levels.py``) with Booleans y[b,o], threshold Booleans v_t for the bottleneck and link
Booleans λ; its rows are the MILP's. ``formulation="positions"``: the position model, with the
1F1B memory rule written with enforcement literals (behind_p ≤ b_o if y[p,o]) instead of the
MILP's aggregated inequality.

Times are scaled to integers: x̂ = floor(x / q) with q = ``TIME_QUANTUM_S`` = 1 ns. For any
plan with B blocks the scaled objective Ô satisfies q·Ô ≤ T < q·Ô + q·(2B − 1 + M − 1)
(each of the B block sums, B − 1 link terms and the (M − 1)-fold bottleneck loses less
than q; in the level model the bottleneck is a threshold value, the plan's own β), so
q·(CP-SAT's bound) is a valid lower bound on T*, and the plan CP-SAT proves optimal has
T < T* + q·(2·islands + M). That is the family's absolute tolerance.
"""

from __future__ import annotations

import math
import os
from typing import NamedTuple

from hetopt.family import Deadline, conclude, no_solution
from hetopt.modelmethod import BuiltModel, check_formulation, solve_model, start, threads_alias
from hetopt.pipeline.heuristic import greedy_plan
from hetopt.pipeline.levelrows import link_ends, needs_by_threshold
from hetopt.pipeline.levels import MAX_LEVEL_CELLS, CellEnds, cell_ends, known_plan, level_floor
from hetopt.pipeline.options import FORMULATIONS, GENERIC_INFEASIBLE, why_infeasible
from hetopt.pipeline.plan import blocks_from_choices, build_solution
from hetopt.pipeline.early import levels_out_of_time, levels_warm_start, positions_early_answer
from hetopt.pipeline.positions import MAX_POSITION_BINARIES, canonical_plan, position_data
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
                      seed: int = 0, write_model: str | os.PathLike[str] | None = None,
                      formulation: str = "signatures", max_position_binaries: int = MAX_POSITION_BINARIES,
                      max_level_cells: int = MAX_LEVEL_CELLS) -> Result:
    """Solve the pipeline problem with CP-SAT, warm-started from the greedy plan.

    Parameters
    ----------
    formulation
        ``"signatures"`` (the level model over island signatures; the default, may change) or
        ``"positions"`` (one Boolean per position and concrete option). Both are exact.
    max_position_binaries
        The position model with more Booleans is declined up front (:data:`~hetopt.pipeline.positions.MAX_POSITION_BINARIES`).
    max_level_cells
        The level model with more cells y[b,o] is declined up front (:data:`~hetopt.pipeline.levels.MAX_LEVEL_CELLS`).

    Options as every model method takes them (:func:`hetopt.modelmethod.solve_model`).

    Returns
    -------
    Result
        OPTIMAL means optimal for the scaled times, within ``error_bound`` of the true
        optimum (bound = objective, as for every OPTIMAL); otherwise ``bound`` is q times
        CP-SAT's bound. ``stats``: formulation, branches, conflicts, hinted; positions
        (positions) or cells, thresholds, signatures (signatures).

    Examples
    --------
    >>> from hetopt import load
    >>> from hetopt.catalog import instances_dir
    >>> r = solve_cpsat_model(load(instances_dir() / "pipeline" / "tiny.toml"))
    >>> r.status.value, round(r.objective, 3), r.stats["formulation"]
    ('OPTIMAL', 1.262, 'signatures')
    """
    check_formulation(formulation, FORMULATIONS)
    deadline, _ = start(time_limit, "cpsat", write_model=write_model)
    # OR-Tools is imported here, not at the top of the module, so that ``import hetopt`` does
    # not pay for it; after the deadline starts, so that its import counts against the limit
    from ortools.sat.python import cp_model

    reason = why_infeasible(instance)
    if reason is not None:
        return no_solution(problem="pipeline", method="cpsat", status=Status.INFEASIBLE, deadline=deadline, reason=reason)
    if formulation == "signatures":
        return _levels(instance, cp_model, deadline, time_limit, threads, seed, write_model, max_level_cells)
    return _positions(instance, cp_model, deadline, time_limit, threads, seed, write_model, max_position_binaries)


def _declined_reach(deadline: Deadline, reach: int, M: int) -> Result | None:
    """DECLINED when the scaled objective could leave CP-SAT's integer range, else None."""
    if reach > CPSAT_MAX_INT:
        return no_solution(
            problem="pipeline", method="cpsat", status=Status.DECLINED, deadline=deadline,
            reason=f"the objective in {TIME_QUANTUM_S:g} s units could reach {reach:.3g}, above CP-SAT's integer "
            f"range {CPSAT_MAX_INT:.3g} (times this long with M = {M}); use milp (the same model in floating point) or dp",
        )
    return None


def _positions_declined(instance: PipelineInstance, data, deadline: Deadline,
                        max_position_binaries: int = MAX_POSITION_BINARIES) -> tuple[Result | None, int]:
    """The position model's early answer (no first block, too large, out of range) if any, and z's top."""
    if (early := positions_early_answer(instance, data, method="cpsat", deadline=deadline,
                                           max_binaries=max_position_binaries)) is not None:
        return early, 0
    P, M, opts = data.positions, instance.microbatches, instance.options
    top = max(scaled(opts[o].max_time_s) for p in range(P) for o in data.at[p])
    top = max([top] + [scaled(c) for (_i, _j, c) in data.links])
    reach = (sum(scaled(opts[o].total_time_s) for p in range(P) for o in data.at[p])
             + (P - 1) * sum(scaled(c) for (_i, _j, c) in data.links) + (M - 1) * top)
    return _declined_reach(deadline, reach, M), top


def _positions_out_of_time(instance: PipelineInstance, data, deadline: Deadline, floor: float,
                           hint: list[int] | None) -> Result:
    """The position model's answer when the time ran out while building it."""
    P = data.positions
    if hint is not None:  # the greedy's plan is a solution; only the simple bound is proven
        return _feasible(instance, hint, deadline, floor, {"positions": P, "hinted": True},
                         "time limit reached while building the CP-SAT model; the greedy warm start's plan")
    return no_solution(problem="pipeline", method="cpsat", status=Status.TIME_LIMIT, deadline=deadline, bound=floor,
                       reason="time limit reached while building the CP-SAT model", stats={"positions": P})


class _PositionVars(NamedTuple):
    """The position model's variables and the expressions its rows share."""

    y: dict
    z: object
    used: list
    on: dict
    link: dict
    cost: dict
    behind: list
    stages_at: list


def _position_vars(cp_model, model, instance: PipelineInstance, data, top: int,
                   deadline: Deadline) -> _PositionVars | None:
    """Create the position model's variables (None when the time runs out)."""
    P, opts = data.positions, instance.options
    Sum, Weighted = cp_model.LinearExpr.sum, cp_model.LinearExpr.weighted_sum  # far faster than Python's sum
    y: dict = {}
    for p in range(P):
        for o in data.at[p]:
            y[p, o] = model.new_bool_var(f"y_{p}_{o}")
        if deadline.expired():
            return None
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
    return _PositionVars(y, z, used, on, link, cost, behind, stages_at)


def _position_structure(cp_model, model, instance: PipelineInstance, data, var: _PositionVars) -> None:
    """Add the rows on the blocks as a whole: prefix of used positions, tiling, one block per island."""
    P, opts = data.positions, instance.options
    Sum, Weighted = cp_model.LinearExpr.sum, cp_model.LinearExpr.weighted_sum
    # one block per position, the used positions a prefix, and a first block
    model.add(var.used[0] == 1)
    for p in range(P):
        model.add(var.used[p] <= 1)
        if p + 1 < P:
            model.add(var.used[p + 1] <= var.used[p])
    # the slices tile the layers
    model.add(Weighted(list(var.y.values()), [opts[o].layers for (p, o) in var.y]) == instance.layers)
    # each island hosts at most one block
    for i in data.hosts:
        model.add(Sum([var.on[p, i] for p in range(P)]) <= 1)


def _position_choices(model, instance: PipelineInstance, data, var: _PositionVars, deadline: Deadline) -> bool:
    """Add each choice's role, memory, bottleneck and link rows (False when the time runs out)."""
    P, opts, used = data.positions, instance.options, var.used
    for n_done, ((p, o), v) in enumerate(var.y.items()):
        if n_done % 4096 == 0 and deadline.expired():
            return False
        role = opts[o].role
        # first and middle blocks have a block behind them; whole and last blocks do not
        # (position data never puts a first or middle option at the last position)
        if p + 1 < P and role in ("first", "middle"):
            model.add(used[p + 1] == 1).only_enforce_if(v)
        elif p + 1 < P and role in ("whole", "last"):
            model.add(used[p + 1] == 0).only_enforce_if(v)
        # 1F1B memory: the option fits with at most b_o stages behind it
        if data.limit[o] < data.max_stages and p + 1 < P:
            model.add(var.behind[p] <= data.limit[o]).only_enforce_if(v)
        # a chosen option bounds the bottleneck from below
        model.add(var.z >= scaled(opts[o].max_time_s)).only_enforce_if(v)
    # a link is used when its two islands sit at consecutive positions; it bounds the bottleneck
    for n_done, ((p, i, j), v) in enumerate(var.link.items()):
        if n_done % 256 == 0 and deadline.expired():
            return False
        model.add(v >= var.on[p, i] + var.on[p + 1, j] - 1)
        model.add(var.z >= scaled(var.cost[i, j])).only_enforce_if(v)
    return True


def _position_symmetry_objective(cp_model, model, instance: PipelineInstance, data, var: _PositionVars) -> None:
    """Add the twin islands' symmetry rows and the objective."""
    P, M, opts, y, link = data.positions, instance.microbatches, instance.options, var.y, var.link
    Sum, Weighted = cp_model.LinearExpr.sum, cp_model.LinearExpr.weighted_sum
    # symmetry: of two identical islands, the second is used only if the first is, and when
    # both are, the first sits in front: position(a) − position(b) + P·used(b) ≤ P
    for a, b in data.twins:
        model.add(Sum([var.on[p, b] for p in range(P)]) <= Sum([var.on[p, a] for p in range(P)]))
        on_a = [(v, p) for (p, o), v in y.items() if opts[o].island == a]
        on_b = [(v, P - p) for (p, o), v in y.items() if opts[o].island == b]
        model.add(Weighted([v for v, _ in on_a + on_b], [c for _, c in on_a + on_b]) <= P)
    model.minimize(Weighted(
        list(y.values()) + list(link.values()) + [var.z],
        [scaled(opts[o].total_time_s) for (p, o) in y] + [scaled(var.cost[i, j]) for (p, i, j) in link] + [M - 1],
    ))


def _position_hint(model, instance: PipelineInstance, data, var: _PositionVars, deadline: Deadline) -> list[int] | None:
    """Hint the greedy's plan, in canonical order, to the model; return it (None if the greedy has none)."""
    opts = instance.options
    hint = greedy_plan(instance, deadline)
    if hint is not None:
        hint = canonical_plan(instance, data, hint)  # the same T, and it meets the symmetry rows
        chosen = {(p, o) for p, o in enumerate(hint)}
        for key, v in var.y.items():
            model.add_hint(v, key in chosen)
        islands = [opts[o].island for o in hint]
        for (p, i, j), v in var.link.items():
            model.add_hint(v, p + 1 < len(islands) and islands[p] == i and islands[p + 1] == j)
        worst = max([scaled(opts[o].max_time_s) for o in hint] + [scaled(instance.link_s[a][b]) for a, b in zip(islands, islands[1:])])
        model.add_hint(var.z, worst)
    return hint


def _positions(instance: PipelineInstance, cp_model, deadline: Deadline, time_limit, threads, seed, write_model,
               max_position_binaries: int = MAX_POSITION_BINARIES) -> Result:
    """The position model (``formulation="positions"``): one Boolean per position and concrete option."""
    data = position_data(instance)
    declined, top = _positions_declined(instance, data, deadline, max_position_binaries)
    if declined is not None:
        return declined
    P = data.positions
    floor = simple_bound(instance)  # a bound before any search, for an answer stopped early

    model = cp_model.CpModel()
    var = _position_vars(cp_model, model, instance, data, top, deadline)
    if var is None:
        return _positions_out_of_time(instance, data, deadline, floor, None)
    for p in range(P):
        model.add(var.behind[p] == (var.behind[p + 1] + var.stages_at[p + 1] if p + 1 < P else 0))
    if deadline.expired():
        return _positions_out_of_time(instance, data, deadline, floor, None)
    _position_structure(cp_model, model, instance, data, var)
    if deadline.expired():
        return _positions_out_of_time(instance, data, deadline, floor, None)
    if not _position_choices(model, instance, data, var, deadline):
        return _positions_out_of_time(instance, data, deadline, floor, None)
    _position_symmetry_objective(cp_model, model, instance, data, var)
    if deadline.expired():
        return _positions_out_of_time(instance, data, deadline, floor, None)
    hint = _position_hint(model, instance, data, var, deadline)
    if deadline.expired():
        return _positions_out_of_time(instance, data, deadline, floor, hint)

    def decode(solver) -> PipelineSolution:
        plan = [o for p in range(P) for o in data.at[p] if solver.value(var.y[p, o])]
        return build_solution(instance, blocks_from_choices(instance, plan))

    # a greedy plan proves a pipeline exists: then an infeasible outcome is a bug
    built = BuiltModel(
        problem="pipeline", method="cpsat", instance=instance, evaluate=evaluate, model=model, kind="cpsat", decode=decode,
        bound=lambda b: floor if b is None else max(floor, b * TIME_QUANTUM_S), floor=floor,
        stats={"formulation": "positions", "positions": P, "hinted": hint is not None},
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


def _levels(instance: PipelineInstance, cp_model, deadline: Deadline, time_limit, threads, seed, write_model,
            max_level_cells: int = MAX_LEVEL_CELLS) -> Result:
    """The level model over island signatures (``formulation="signatures"``): the MILP's rows."""
    started = levels_warm_start(instance, method="cpsat", deadline=deadline, max_cells=max_level_cells)
    if isinstance(started, Result):
        return started
    data, hint = started
    opts, M, thetas = instance.options, instance.microbatches, data.thresholds
    reach = (sum(scaled(opts[o].total_time_s) for _, o in data.cells) + sum(scaled(c) for *_, c in data.junctions)
             + (M - 1) * scaled(thetas[-1]))
    declined = _declined_reach(deadline, reach, M)
    if declined is not None:
        return declined
    floor = level_floor(instance, data)
    stats = {"formulation": "signatures", "cells": len(data.cells), "thresholds": len(thetas),
             "signatures": len(data.sig.kinds), "hinted": hint is not None}

    def stopped(reason: str, bound: float | None, stats: dict) -> Result:
        return known_plan(instance, "cpsat", hint, deadline, bound, stats, reason)

    def out_of_time() -> Result:
        return levels_out_of_time(instance, method="cpsat", model="the CP-SAT model", hint=hint, deadline=deadline, floor=floor,
                                  stats=stats)

    model = cp_model.CpModel()
    y = {cell: model.new_bool_var(f"y_{cell[0]}_{cell[1]}") for cell in data.cells}
    v = [None] + [model.new_bool_var(f"v_{t}") for t in range(1, len(thetas))]
    if deadline.expired():
        return out_of_time()
    ends = cell_ends(instance, data, y)
    if 0 not in ends.starts:  # no option may be the last block (its role, or the window of a known plan: none)
        return no_solution(problem="pipeline", method="cpsat", status=Status.INFEASIBLE, deadline=deadline,
                           reason="no usable option may be the last block: every one has role first or middle")
    out = _level_chain(cp_model, model, instance, data, y, ends)
    if not _level_roles(model, instance, y, out, deadline):
        return out_of_time()
    lam, link_cost = _level_links(cp_model, model, data, ends)
    if deadline.expired():
        return out_of_time()
    _level_bottleneck(cp_model, model, data, y, v, lam, link_cost)
    _level_objective(cp_model, model, instance, data, y, v, lam, link_cost)
    _level_hint(model, instance, data, y, v, hint)
    if deadline.expired():
        return out_of_time()

    def decode(solver) -> PipelineSolution:
        chosen = [cell for cell, var in y.items() if solver.value(var)]
        return build_solution(instance, blocks_from_choices(instance, data.plan(instance, chosen)))

    built = BuiltModel(
        problem="pipeline", method="cpsat", instance=instance, evaluate=evaluate, model=model, kind="cpsat", decode=decode,
        bound=lambda b: floor if b is None else max(floor, b * TIME_QUANTUM_S), floor=floor, stats=stats,
        infeasible_reason=None if hint is not None else GENERIC_INFEASIBLE.format(layers=instance.layers),
        known=None if hint is None else stopped, deadline=deadline,
        # the level model's LP relaxation is tight (HiGHS proves the Tangram-shaped instances at
        # the root node), and CP-SAT's default linearization keeps only part of it: with all of it
        # the 4-island Tangram 13B instance takes 5.1 s instead of 48 s and scale-16x128 17 s
        # instead of 36 s (medians, docs/pipeline.md). The replicas' count model, whose LP is weak, did
        # not gain (17.6 s to a 120 s time limit) and keeps the default.
        cpsat_parameters={"linearization_level": 2},
    )
    return solve_model(built, time_limit=time_limit, threads=threads, seed=seed, write_model=write_model)


def _level_chain(cp_model, model, instance: PipelineInstance, data, y: dict, ends: CellEnds) -> dict:
    """Add the chain, tiling and signature-count rows; return the blocks starting at each level."""
    opts, sig = instance.options, data.sig
    Sum, Weighted = cp_model.LinearExpr.sum, cp_model.LinearExpr.weighted_sum  # far faster than Python's sum
    out = {b: Sum(vs) for b, vs in ends.starts.items()}
    # one chain of blocks from the back: a last block, and a block at level ℓ only on one ending there
    model.add(out[0] == 1)
    for b in out:
        if b > 0:
            model.add(out[b] <= Sum(ends.ends.get(b, [])))
    # the slices tile the layers; the islands of each signature
    model.add(Weighted(list(y.values()), [opts[o].layers for (b, o) in y]) == instance.layers)
    for K, count in enumerate(sig.counts):
        members = [var for (b, o), var in y.items() if data.kind[o] == K]
        if members:
            model.add(Sum(members) <= count)
    return out


def _level_roles(model, instance: PipelineInstance, y: dict, out: dict, deadline: Deadline) -> bool:
    """Add the role rows (False when the time runs out)."""
    opts = instance.options
    # roles: first and whole blocks have none in front, middle and last ones have one
    for n_done, ((b, o), var) in enumerate(y.items()):
        if n_done % 4096 == 0 and deadline.expired():
            return False
        e, role = b + len(opts[o].stages), opts[o].role
        if role in ("first", "whole") and e in out:
            model.add(out[e] + var <= 1)
        elif role in ("middle", "last"):
            model.add(var <= (out[e] if e in out else 0))
    return True


def _level_links(cp_model, model, data, ends: CellEnds) -> tuple[dict, dict]:
    """Create the link Booleans λ and their rows; return them and their costs."""
    Sum = cp_model.LinearExpr.sum
    # links: the block starting at ℓ follows exactly one signature's block ending at ℓ
    lam = {(lv, K, K2): model.new_bool_var(f"l_{lv}_{K}_{K2}") for lv, K, K2, _ in data.junctions}
    link_cost = {(lv, K, K2): c for lv, K, K2, c in data.junctions}
    into, outof = link_ends(lam)
    for (b, K2), members in ends.by_kind_start.items():
        if b > 0:
            model.add(Sum(into.get((b, K2), [])) == Sum(members))
    for (lv, K), members in outof.items():
        model.add(Sum(members) <= Sum(ends.by_kind_end.get((lv, K), [])))
    return lam, link_cost


def _level_bottleneck(cp_model, model, data, y: dict, v: list, lam: dict, link_cost: dict) -> None:
    """Add the threshold rows: v_t ⇔ β ≥ θ_t, bounded by the blocks and links that need θ_t."""
    Sum, thetas = cp_model.LinearExpr.sum, data.thresholds
    # the bottleneck: v_t ⇔ β ≥ θ_t; a signature's blocks needing θ_t or more are at most n_K·v_t
    for t in range(2, len(thetas)):
        model.add_implication(v[t], v[t - 1])
    for K, count in enumerate(data.sig.counts):
        need = needs_by_threshold(data, y, K)
        tail = None
        for t in sorted(need, reverse=True):
            acc = model.new_int_var(0, count, f"g_{K}_{t}")
            model.add(acc == Sum(need[t] + ([tail] if tail is not None else [])))
            model.add(acc <= count * v[t])
            tail = acc
    for key, var in lam.items():
        t = data.threshold_index(link_cost[key])
        if link_cost[key] > 0 and t >= 1:
            model.add_implication(var, v[t])


def _level_objective(cp_model, model, instance: PipelineInstance, data, y: dict, v: list, lam: dict,
                     link_cost: dict) -> None:
    """Set the objective: block times, paid links and (M − 1)·β as threshold steps."""
    opts, M, thetas = instance.options, instance.microbatches, data.thresholds
    steps = [scaled(thetas[t]) - scaled(thetas[t - 1]) for t in range(1, len(thetas))]
    model.minimize(cp_model.LinearExpr.weighted_sum(
        list(y.values()) + [var for key, var in lam.items() if link_cost[key] > 0] + v[1:],
        [scaled(opts[o].total_time_s) for (b, o) in y] + [scaled(link_cost[key]) for key in lam if link_cost[key] > 0]
        + [(M - 1) * step for step in steps],
    ) + (M - 1) * scaled(thetas[0]))


def _level_hint(model, instance: PipelineInstance, data, y: dict, v: list, hint: list[int] | None) -> None:
    """Hint the warm start's plan (its cells and its bottleneck's thresholds), if there is one."""
    if hint is not None:
        thetas = data.thresholds
        chosen = data.cells_of(instance, hint)
        for cell, var in y.items():
            model.add_hint(var, cell in chosen)
        beta = evaluate(instance, PipelineSolution(blocks_from_choices(instance, hint))).details["bottleneck"]
        for t in range(1, len(thetas)):
            model.add_hint(v[t], thetas[t] <= beta)
