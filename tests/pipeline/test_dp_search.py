"""Issue 12: the composition dp's threshold search, its bounds and its symmetry reduction.

The search (``dp.py``) must return what the definition T* = min_τ D_τ + (M − 1)·τ gives when
every candidate τ is tried with an unpruned DP run; its budgets, the cover bounds and the
cost-free feasibility DP must never cut a better plan; its reported bound must never exceed
the optimum; islands of one shape must be counted, not enumerated as subsets.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import hetopt
from hetopt.errors import InputError
from hetopt.family import Deadline
from hetopt.pipeline import dp as dp_search
from hetopt.pipeline import dp_feasible, dp_table
from hetopt.pipeline.bound import composition_bound, front_bound, pipeline_bound, unused_front_bound
from hetopt.pipeline.options import bottleneck_candidates, why_infeasible
from hetopt.pipeline.plan import blocks_from_choices
from hetopt.pipeline.problem import GIB, PipelineInstance, PipelineIsland, PipelineOption, PipelineSolution, StagePlan, evaluate
from hetopt.result import Status

from .conftest import INSTANCES, random_instance

SEEDS = range(60)


def shaped_instance(seed: int, *, shapes: int = 2, copies: int = 3, layers: int = 8) -> PipelineInstance:
    """Islands of a few shapes, each repeated: the case the usage counts are for.

    Links depend on the two shapes only (so copies are interchangeable), memory is tight
    enough that an option fits only with a few stages behind it, M is small or large.
    """
    rng = np.random.default_rng(1000 + seed)
    specs = []
    for s in range(shapes):
        specs.append((int(rng.integers(1, 3)), float(rng.uniform(6, 12)) * GIB, float(rng.uniform(0.5, 2.0)),
                      float(rng.uniform(0.5, 2.0)) * GIB, float(rng.uniform(0.2, 1.0)) * GIB))
    shape_of = [s for s in range(shapes) for _ in range(copies)]
    islands = tuple(PipelineIsland(f"s{s}-{c}", specs[s][0], specs[s][1]) for s in range(shapes) for c in range(copies))
    options = []
    for i, s in enumerate(shape_of):
        gpus, _, speed, static, act = specs[s]
        for k in range(1, layers + 1):
            for n_stages in (1, 2):
                if n_stages > min(k, gpus):
                    continue
                split = [k // n_stages + (1 if q < k % n_stages else 0) for q in range(n_stages)]
                stages = tuple(StagePlan(ell, round(speed * ell * 0.01 * (1 + 0.2 * q), 6), round(speed * ell * 0.02, 6),
                                         static * ell / n_stages, act * ell / n_stages, gpus // n_stages)
                               for q, ell in enumerate(split))
                options.append(PipelineOption(i, k, stages))
    between = rng.uniform(0.0, 0.03, size=(shapes, shapes)).round(4)
    between = np.triu(between) + np.triu(between, 1).T
    n = len(islands)
    link = tuple(tuple(0.0 if a == b else float(between[shape_of[a], shape_of[b]]) for b in range(n)) for a in range(n))
    M = int(rng.choice([2, 4, 32]))
    return PipelineInstance(f"shaped-{seed}", layers, M, islands, tuple(options), link)


def full_scan(instance: PipelineInstance) -> float:
    """T* by the definition: every candidate τ, one unpruned DP run each, the best evaluated plan."""
    if why_infeasible(instance) is not None:
        return math.inf
    prep = dp_table._prepare(instance)
    best = math.inf
    for tau in bottleneck_candidates(instance):
        run = dp_table._run(instance, prep, tau, Deadline(None))
        if run.plan is not None:
            best = min(best, evaluate(instance, PipelineSolution(blocks_from_choices(instance, run.plan))).objective)
    return best


def _cases():
    return [random_instance(s, max_islands=5, max_layers=7) for s in SEEDS] + [shaped_instance(s) for s in range(12)]


@pytest.mark.parametrize("instance", _cases(), ids=lambda inst: inst.name)
def test_search_agrees_with_the_scan_over_every_threshold(instance):
    r = hetopt.solve(instance, "dp")
    expected = full_scan(instance)
    if math.isinf(expected):
        assert r.status is Status.INFEASIBLE, r.reason
    else:
        assert r.status is Status.OPTIMAL
        assert math.isclose(r.objective, expected, rel_tol=1e-9), (r.objective, expected)


@pytest.mark.parametrize("seed", range(8))
def test_dp_agrees_with_bruteforce_milp_and_cpsat_on_identical_islands(seed):
    """The symmetry rules of the position models (twins used in order, and placed in order)
    keep their optimum: they agree with dp and the bruteforce, which have none."""
    inst = shaped_instance(seed, copies=2, layers=6)
    check = hetopt.crosscheck(inst, ["dp", "bruteforce", "milp", "cpsat"])
    assert check.agree, check.disagreement
    assert all(r.status in (Status.OPTIMAL, Status.INFEASIBLE) for r in check.results), [r.status for r in check.results]


@pytest.mark.parametrize("seed", range(8))
def test_canonical_plan_keeps_the_cost_and_meets_the_symmetry_rules(seed):
    from hetopt.pipeline.heuristic import greedy_plan
    from hetopt.pipeline.positions import canonical_plan, position_data

    inst = shaped_instance(seed, copies=3)
    plan = greedy_plan(inst)
    if plan is None:
        return
    data = position_data(inst)
    canon = canonical_plan(inst, data, plan)
    before = evaluate(inst, PipelineSolution(blocks_from_choices(inst, plan)))
    after = evaluate(inst, PipelineSolution(blocks_from_choices(inst, canon)))
    assert after.feasible and math.isclose(after.objective, before.objective, rel_tol=1e-12)
    where = {inst.options[o].island: p for p, o in enumerate(canon)}
    for a, b in data.twins:
        assert b not in where or (a in where and where[a] < where[b])


def test_usage_counts_replace_subsets():
    """Identical islands are counted per kind: far fewer usage states than island subsets."""
    inst = shaped_instance(0, shapes=2, copies=3)
    r = hetopt.solve(inst, "dp")
    assert r.stats["kinds"] == 2 and r.stats["usage_states"] == 4 * 4
    assert r.stats["island_subsets"] == 2**6 > r.stats["usage_states"]
    big = dp_table._prepare(hetopt.load(INSTANCES / "scale-16x128.toml"))
    assert len(big.kinds) == 8 and big.usage_count == 3**8 < 2**16


@pytest.mark.parametrize("instance", _cases()[:30], ids=lambda inst: inst.name)
def test_bounds_are_below_the_optimum_at_every_step(instance):
    """Every step of the search keeps a bound ≤ T* (so a stopped search never overstates it),
    and the pipeline bound R_τ is ≤ D_τ at every threshold."""
    expected = full_scan(instance)
    if math.isinf(expected):
        return
    prep = dp_table._prepare(instance)
    cands = bottleneck_candidates(instance)
    for tau in cands:
        run = dp_table._run(instance, prep, tau, Deadline(None))
        assert pipeline_bound(instance, prep.kinds, prep.options, tau) <= run.value
    stats = {k: 0 for k in ("thresholds_tried", "states_memoized", "states_pruned", "usage_tables", "runs_too_large", "feasibility_runs")}
    search = dp_search._Search(instance, prep, cands, Deadline(None), stats)
    search.start()
    while True:
        bound = search.bound()
        assert bound is not None and bound <= expected * (1 + 1e-12), (bound, expected)
        # a search stopped here reports the refined bound: never below this one, never above T*
        assert bound <= search.bound(16) <= expected * (1 + 1e-12)
        if not search.step():
            break
    assert math.isclose(search.best_t, expected, rel_tol=1e-9)


@pytest.mark.parametrize("instance", _cases()[:40], ids=lambda inst: inst.name)
def test_cost_free_feasibility_matches_the_dp(instance):
    if why_infeasible(instance) is not None:
        return
    prep = dp_table._prepare(instance)
    for tau in bottleneck_candidates(instance):
        run = dp_table._run(instance, prep, tau, Deadline(None))
        assert dp_feasible.feasible(instance, prep, tau, Deadline(None)) == (run.plan is not None), tau


@pytest.mark.parametrize("seed", range(10))
def test_a_budget_keeps_d_exact_below_it_and_reports_the_cut(seed):
    inst = shaped_instance(seed)
    if why_infeasible(inst) is not None:
        return
    prep = dp_table._prepare(inst)
    tau = bottleneck_candidates(inst)[-1]
    exact = dp_table._run(inst, prep, tau, Deadline(None))
    if exact.plan is None:
        return
    h = unused_front_bound(inst, prep.kinds, prep.options, tau, prep.usage)
    above = dp_table._run(inst, prep, tau, Deadline(None), budget=exact.value * 1.001 + 1e-9, remaining=h)
    assert above.value == exact.value and above.plan is not None
    below = dp_table._run(inst, prep, tau, Deadline(None), budget=exact.value * 0.999, remaining=h)
    assert below.plan is None and below.value == math.inf and below.cut


@pytest.mark.parametrize("seed", range(6))
def test_unused_front_bound_with_every_island_free_is_the_front_bound(seed):
    inst = shaped_instance(seed)
    prep = dp_table._prepare(inst)
    tau = bottleneck_candidates(inst)[len(bottleneck_candidates(inst)) // 2]
    h = unused_front_bound(inst, prep.kinds, prep.options, tau, prep.usage)
    zero = prep.usage.index(tuple(0 for _ in prep.kinds))
    np.testing.assert_array_equal(h[zero], front_bound(inst, prep.kinds, prep.options, tau))
    # fewer free islands can only cost more
    full = prep.usage.index(tuple(len(m) for m in prep.kinds))
    assert np.all(h[full][1:] == np.inf)


def test_too_large_a_run_gives_the_bound_or_declines():
    """A run that would exceed its cells (``max_cells``, MAX_DP_CELLS by default) stops the search:
    FEASIBLE with a bound (the greedy's plan is known) or DECLINED naming the cells, never a false OPTIMAL."""
    r = dp_search.solve_dp(hetopt.load(INSTANCES / "scale-8x96.toml"), max_cells=2_000)
    assert r.status in (Status.FEASIBLE, Status.DECLINED)
    if r.status is Status.FEASIBLE:
        assert r.bound is not None and r.bound <= r.objective and r.gap > 0
    else:
        assert "cells" in r.reason


@pytest.mark.parametrize("seed", range(6))
def test_search_with_the_weaker_pruning_bound_agrees(seed):
    """Beyond ``max_bound_cells`` (MAX_BOUND_CELLS) the runs prune with the all-islands cover bound: same answers."""
    inst = shaped_instance(seed)
    r = dp_search.solve_dp(inst, max_bound_cells=0)
    expected = full_scan(inst)
    assert (r.status is Status.INFEASIBLE) if math.isinf(expected) else math.isclose(r.objective, expected, rel_tol=1e-9)


def test_groups_with_more_stages_are_dropped_where_they_are_no_cheaper():
    inf = math.inf
    one = dp_table._Group(3, 1, "any", np.array([1.0, 1.0, inf, inf]), np.array([0, 0, -1, -1]))
    two = dp_table._Group(3, 2, "any", np.array([2.0, 0.5, 2.0, inf]), np.array([1, 2, 1, -1]))
    dearer = dp_table._Group(3, 4, "any", np.array([3.0, 3.0, inf, inf]), np.array([3, 3, -1, -1]))
    other_role = dp_table._Group(3, 4, "middle", np.array([3.0, 3.0, inf, inf]), np.array([4, 4, -1, -1]))
    kept = dp_table._undominated([two, one, dearer, other_role])
    assert one in kept and two in kept and dearer not in kept and other_role in kept
    # n = 2 survives only where n = 1 is dearer or does not fit
    assert two.best.tolist() == [inf, 0.5, 2.0, inf]


def test_pipeline_bound_counts_the_links_and_the_roles():
    """Two islands, 3 layers: every pipeline has two blocks and one link. The bound pays that link
    (the role-free, link-free knapsack stopped at Σ t = 0.9) and needs a front and a back block."""
    from dataclasses import replace

    from hetopt.pipeline.bound import example_instance

    inst = replace(example_instance(), link_s=((0.0, 0.05), (0.05, 0.0)))
    prep = dp_table._prepare(inst)
    assert math.isclose(pipeline_bound(inst, prep.kinds, prep.options, 1.0), 0.95, rel_tol=1e-9)
    # the optimum is that Σ t + c plus (M − 1)·β, β = the 2-layer stage (0.6 s): the bound is tight here
    assert math.isclose(hetopt.solve(inst, "dp").objective, 0.95 + 3 * 0.6, rel_tol=1e-9)
    # a link above τ cannot be used: one island cannot hold 3 layers, so no pipeline
    assert pipeline_bound(inst, prep.kinds, prep.options, 0.04) == math.inf
    # only middle blocks: no front, no back, no pipeline
    middles = replace(inst, options=tuple(replace(o, role="middle") for o in inst.options))
    prep = dp_table._prepare(middles)
    assert pipeline_bound(middles, prep.kinds, prep.options, 1.0) == math.inf


@pytest.mark.parametrize("instance", _cases()[:40], ids=lambda inst: inst.name)
def test_composition_bound_is_below_the_optimum(instance):
    """The bound without a DP run (what the planner skips a micro-batch size by) never exceeds
    T* (it may be finite where memory leaves no pipeline), and a stop value or no time only weakens it."""
    expected = full_scan(instance)
    bound = composition_bound(instance)
    if math.isinf(expected):
        return
    assert bound <= expected * (1 + 1e-12)
    assert composition_bound(instance, stop_at=0.5 * bound) <= bound
    assert composition_bound(instance, deadline=Deadline(0.0)) <= bound


@pytest.mark.parametrize("instance", _cases()[:40], ids=lambda inst: inst.name)
def test_a_cutoff_above_the_optimum_changes_nothing_and_one_below_proves_it(instance):
    """``cutoff`` (Gurobi's Cutoff): above T* the answer is the same optimum; below it the DP
    proves that no plan beats the cutoff, with the cutoff as its bound and no false plan."""
    expected = full_scan(instance)
    if math.isinf(expected):
        return
    above = dp_search.solve_dp(instance, cutoff=expected * 1.01)
    assert above.status is Status.OPTIMAL and math.isclose(above.objective, expected, rel_tol=1e-9)
    below = dp_search.solve_dp(instance, cutoff=expected * 0.99)
    assert below.bound == pytest.approx(expected * 0.99, rel=1e-12)
    if below.status is Status.FEASIBLE:  # the greedy's plan, above the cutoff
        assert below.objective >= expected * (1 - 1e-9)
    else:
        assert below.status is Status.INFEASIBLE and "faster than the cutoff" in below.reason


def test_a_cutoff_must_be_a_number():
    inst = hetopt.load(INSTANCES / "tiny.toml")
    for bad in (float("nan"), 0.0, -1.0, "1", True):
        with pytest.raises(InputError, match="cutoff"):
            hetopt.solve(inst, "dp", cutoff=bad)
    assert hetopt.solve(inst, "dp", cutoff=math.inf).status is Status.OPTIMAL


@pytest.mark.parametrize("instance", _cases()[:40], ids=lambda inst: inst.name)
@pytest.mark.parametrize("gap_limit", [0.05, 0.3])
def test_a_gap_limit_returns_a_plan_within_it_and_a_bound_below_the_optimum(instance, gap_limit):
    """``gap_limit`` (HiGHS's mip_rel_gap): the plan is at most T*/(1 − g), the bound at most
    T*, their gap at most g; the status says FEASIBLE, never OPTIMAL, and infeasible stays so."""
    expected = full_scan(instance)
    r = dp_search.solve_dp(instance, gap_limit=gap_limit)
    if math.isinf(expected):
        assert r.status is Status.INFEASIBLE, r.reason
        return
    assert r.status is Status.FEASIBLE and "gap limit" in r.reason, (r.status, r.reason)
    assert expected * (1 - 1e-9) <= r.objective <= expected / (1 - gap_limit) * (1 + 1e-9)
    assert r.bound <= expected * (1 + 1e-9)
    assert r.gap <= gap_limit


def test_a_gap_limit_must_be_in_zero_to_one():
    inst = hetopt.load(INSTANCES / "tiny.toml")
    for bad in (float("nan"), 1.0, -0.01, "0.1", True):
        with pytest.raises(InputError, match="gap_limit"):
            hetopt.solve(inst, "dp", gap_limit=bad)
    assert hetopt.solve(inst, "dp", gap_limit=0.0).status is Status.OPTIMAL
