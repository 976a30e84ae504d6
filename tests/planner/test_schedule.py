"""The planner's time by the 1F1B schedule: bounds that hold, and re-ranking that no plan beats."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hetopt import solvers
from hetopt.family import Deadline
from hetopt.pipeline.plan import blocks_from_choices, build_solution
from hetopt.pipeline.problem import (GIB, PipelineInstance, PipelineIsland, PipelineOption, PipelineSolution,
                                     StagePlan, evaluate)
from hetopt.pipeline.simulate import simulate_1f1b
from hetopt.planner.search.schedule import SIMULATED, path_bound, relaxed_instance, relaxed_time, rerank, rescore
from hetopt.result import Status


def _closed_form(f, b, links, M):
    t = [x + y for x, y in zip(f, b)]
    return sum(t) + sum(links) + (M - 1) * max(max(t), max(links, default=0.0))


# ---- the closed form is not a bound; the path bound is ------------------------------------


def test_the_closed_form_is_not_a_lower_bound_of_the_schedule():
    # a slow first stage: the stages behind it run in its shadow, but the closed form adds
    # their first pass to (M − 1)·max t
    f, b, M = [0.6, 0.2, 0.2], [1.2, 0.4, 0.4], 8
    assert simulate_1f1b(f, b, [0.0] * 3, M).makespan_s < _closed_form(f, b, [], M) - 1.0
    # a link slower than every stage: the closed form charges (M − 1)·c, each channel carries c/2
    assert simulate_1f1b([0.1, 0.1], [0.2, 0.2], [2.0, 0.0], 32).makespan_s < _closed_form([0.1] * 2, [0.2] * 2, [2.0], 32)
    # and it is not an upper bound either: a link's round trip adds bubbles in every steady cycle
    assert simulate_1f1b([1.0] * 4, [2.0] * 4, [0.0, 1.0, 0.0, 0.0], 16).makespan_s > _closed_form([1.0] * 4, [2.0] * 4, [1.0], 16)


def test_the_path_bound_never_exceeds_the_simulation_and_is_tight_on_uniform_pipelines():
    rng = np.random.default_rng(10)
    ratios = []
    for _ in range(400):
        S, M = int(rng.integers(1, 9)), int(rng.integers(1, 20))
        f, b = rng.uniform(0.05, 1.0, S).tolist(), rng.uniform(0.05, 2.0, S).tolist()
        links = rng.choice([0.0, 0.1, 0.7, 3.0], S).tolist()
        sim = simulate_1f1b(f, b, links, M).makespan_s
        bound = path_bound(f, b, links, M)
        assert bound <= sim * (1 + 1e-12), (f, b, links, M)
        ratios.append(bound / sim)
    assert np.median(ratios) > 0.9  # a bound worth having, not only a valid one
    for S in (1, 3, 6):
        for M in (1, 2, 5, 16):
            assert path_bound([1.0] * S, [2.0] * S, [0.0] * S, M) == simulate_1f1b([1.0] * S, [2.0] * S, [0.0] * S, M).makespan_s


# ---- tiny random instances, every plan enumerated -------------------------------------------


def _random_instance(rng: np.random.Generator, k: int) -> PipelineInstance:
    islands = int(rng.integers(2, 4))
    layers = int(rng.integers(2, 5))
    M = int(rng.integers(1, 9))
    isl = tuple(PipelineIsland(f"i{i}", 4, float(rng.choice([2.0, 4.0, 64.0])) * GIB) for i in range(islands))
    options = []
    for i in range(islands):
        speed = float(rng.uniform(0.5, 2.0))
        for k_layers in range(1, layers + 1):
            for n in (1, 2):
                if n > k_layers or rng.random() < 0.3:
                    continue
                cut = [k_layers // n + (1 if q < k_layers % n else 0) for q in range(n)]
                stages = tuple(StagePlan(c, c * speed * float(rng.uniform(0.8, 1.2)) * 0.01,
                                         c * speed * float(rng.uniform(1.5, 2.5)) * 0.01,
                                         0.5 * c * GIB, 0.2 * c * GIB, 4 // n) for c in cut)
                options.append(PipelineOption(i, k_layers, stages))
    link = [[0.0] * islands for _ in range(islands)]
    for a in range(islands):
        for c in range(a + 1, islands):
            link[a][c] = link[c][a] = float(rng.choice([0.0, 0.002, 0.02, 0.08]))  # 0.08: a slow link
    return PipelineInstance(f"random-{k}", layers, M, isl, tuple(options), tuple(map(tuple, link)))


def _every_plan(instance: PipelineInstance) -> list[PipelineSolution]:
    """Every feasible plan of ``instance``, simulated (the oracle)."""
    out = []

    def visit(used: frozenset[int], left: int, chosen: list[int]) -> None:
        if left == 0:
            sol = PipelineSolution(blocks_from_choices(instance, chosen))
            if evaluate(instance, sol).feasible:
                out.append(build_solution(instance, sol.blocks))
            return
        for o, opt in enumerate(instance.options):
            if opt.island not in used and opt.layers <= left:
                visit(used | {opt.island}, left - opt.layers, [*chosen, o])

    visit(frozenset(), instance.layers, [])
    return out


@pytest.mark.parametrize("seed", range(12))
def test_re_ranking_is_never_beaten_by_a_plan_left_out(seed):
    rng = np.random.default_rng(100 + seed)
    for k in range(6):
        inst = _random_instance(rng, k)
        plans = _every_plan(inst)
        composed = solvers.solve(inst, "dp")
        if not plans:
            assert composed.status is Status.INFEASIBLE
            continue
        best_sim = min(p.simulated_s for p in plans)
        relaxed = relaxed_instance(inst)
        for p in plans:  # the relaxed closed form lower-bounds every plan's schedule
            assert evaluate(relaxed, p).objective <= p.simulated_s * (1 + 1e-12)
            assert relaxed_time(p, inst.microbatches) == pytest.approx(evaluate(relaxed, p).objective, rel=1e-12)
            assert path_bound([s.forward_s for s in p.stages], [s.backward_s for s in p.stages],
                              _links_after(inst, p), inst.microbatches) <= p.simulated_s * (1 + 1e-12)
        r = rerank(inst, composed, Deadline(None), max_solves=10_000, exhaustive=True)  # no budget: it must close
        assert r.proven, r.note
        assert r.simulated_s == pytest.approx(best_sim, rel=1e-12)
        assert r.bound_s <= best_sim * (1 + 1e-12)
        assert r.solution.simulated_s == r.simulated_s and evaluate(inst, r.solution).feasible
        # with a small budget: the bound still holds, and OPTIMAL only when nothing beats the plan
        small = rescore(inst, composed, Deadline(None)) if len(plans) > 1 else None
        if small is not None:
            assert small.bound is None or small.bound <= best_sim * (1 + 1e-12)
            assert small.objective >= best_sim * (1 - 1e-12)
            if small.status is Status.OPTIMAL:
                assert small.objective == pytest.approx(best_sim, rel=1e-12)
            options = {b.option for b in composed.solution.blocks}
            if any({b.option for b in p.blocks} == options and p.simulated_s == best_sim for p in plans):
                # the best schedule is a block order of the composition's optimum: the planner finds it
                assert small.objective == pytest.approx(best_sim, rel=1e-12)
            assert small.stats["time_model"] == SIMULATED


def _links_after(instance: PipelineInstance, sol: PipelineSolution) -> list[float]:
    after = []
    for b, nxt in zip(sol.blocks, [*sol.blocks[1:], None]):
        n = len(instance.options[b.option].stages)
        after += [0.0] * (n - 1) + [0.0 if nxt is None else instance.link_s[b.island][nxt.island]]
    return after


def test_a_pipeline_too_large_to_simulate_keeps_the_closed_form_and_says_why():
    stage = StagePlan(1, 0.001, 0.002, 0.0, 0.0)
    inst = PipelineInstance("deep", 1024, 65_536, (PipelineIsland("a", 1024, 80 * GIB),),
                            (PipelineOption(0, 1024, (stage,) * 1024),), ((0.0,),))
    composed = solvers.solve(inst, "dp")
    out = rescore(inst, composed, Deadline(None))
    assert out.status is Status.OPTIMAL and out.objective == composed.objective
    assert out.stats["time_model"].startswith("closed form") and "250,000" in out.stats["time_model"]


# ---- the planner -----------------------------------------------------------------------------


def test_the_plan_reports_the_simulated_time_and_keeps_the_closed_form_visible():
    from hetopt.planner import plan

    p = plan("cephalo-a", "gpt3-2.7b", global_batch=32, microbatch_size=2, seq=512, alternatives=False,
             time_model="simulated")
    assert len({s.island for s in p.stages}) > 1  # a heterogeneous pipeline
    assert p.status.has_solution and p.time_model == SIMULATED
    assert p.iteration_time_s == p.simulated_s and p.analytic_s is not None and not math.isnan(p.analytic_s)
    assert p.bound_s <= p.iteration_time_s
    assert p.status is not Status.OPTIMAL or p.bound_s == p.iteration_time_s
    old = plan("cephalo-a", "gpt3-2.7b", global_batch=32, microbatch_size=2, seq=512, alternatives=False,
               time_model="closed-form")
    assert old.time_model == "closed form" and old.iteration_time_s == old.analytic_s
    # re-ranking only adds candidates: the simulated answer is never slower than the closed form's pick
    assert p.iteration_time_s <= old.simulated_s * (1 + 1e-12)
    # an interleaved whole-model plan: its stages are shaped for the closed form, which it keeps
    inter = plan("tangram-c2", "gpt3-1.3b", global_batch=16, microbatch_size=4, alternatives=False, time_model="simulated")
    if any("vpp" in s.layout for s in inter.stages):
        assert inter.time_model.startswith("closed form") and "interleaved" in inter.time_model
        assert inter.iteration_time_s == inter.analytic_s
    from hetopt.errors import InputError

    with pytest.raises(InputError, match=r"time_model: must be one of simulated, closed-form \(got 'exact'\)"):
        plan("tangram-c2", "gpt3-1.3b", global_batch=16, time_model="exact")


def test_the_command_line_shows_both_times_and_takes_the_closed_form(capsys):
    import json

    from hetopt.cli import main

    args = ["plan", "--cluster", "cephalo-a", "--model", "gpt3-2.7b", "--seq", "512", "--workers", "1",
            "--global-batch", "32", "--microbatch", "2", "--no-alternatives"]
    assert main([*args, "--json", "--time-model", "simulated"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["time_model"] == SIMULATED and doc["iteration_time_s"] == doc["simulated_s"]
    assert doc["analytic_s"] > 0 and doc["bound_s"] <= doc["iteration_time_s"]
    assert doc["status"] == "OPTIMAL" or "simulated 1F1B" in doc["reason"]
    assert main([*args, "--time-model", "closed-form"]) == 0
    out = capsys.readouterr().out
    assert "closed form; 1F1B simulation" in out and "status OPTIMAL" in out
    with pytest.raises(SystemExit) as bad:  # argparse: usage line, exit 2
        main([*args, "--time-model", "exact"])
    assert bad.value.code == 2


def test_the_alternatives_are_timed_like_the_plan(monkeypatch):
    import sys

    import hetopt.planner.alternatives.baselines  # noqa: F401
    from hetopt.planner import plan

    alternatives = sys.modules["hetopt.planner.alternatives.baselines"]
    seen = []
    original = alternatives._restricted

    def spy(*args, **kwargs):
        r = original(*args, **kwargs)
        seen.append(r)
        return r

    monkeypatch.setattr(alternatives, "_restricted", spy)
    times = {}
    for model in ("simulated", "closed-form"):
        seen.clear()
        p = plan("cephalo-a", "gpt3-2.7b", global_batch=32, microbatch_size=2, seq=512, time_model=model)
        by_name = {a.name: a for a in p.alternatives}
        assert len(seen) == 2  # one micro-batch size: uniform-layers, then compute-proportional
        for name, r in zip(("uniform-layers", "compute-proportional"), seen):
            if r is None or not r.status.has_solution:
                continue
            want = r.solution.simulated_s if model == "simulated" else r.objective
            assert by_name[name].iteration_time_s == want, (model, name)
            times[model, name] = want
        for name, speedup in p.speedups.items():  # the plan's time over each alternative's, one time model
            assert speedup == pytest.approx(by_name[name].iteration_time_s / p.iteration_time_s, rel=1e-12)
    assert times  # at least one restricted pipeline fits, so the test checks something


def test_a_micro_batch_size_is_skipped_only_by_a_bound_of_the_schedule():
    from hetopt.planner.search.compose import pipeline_lower_bound
    from hetopt.planner.search.schedule import simulated_lower_bound

    # two islands, one stage each at exactly its island's speed: the closed form's bound is
    # above the simulated time, so it cannot skip a size by simulated time
    speed, f, b, M = [2.042, 2.206], [0.128, 0.075], [0.268, 0.152], 2
    work = M * sum((x + y) * s for x, y, s in zip(f, b, speed))
    sim = simulate_1f1b(f, b, [0.0, 0.0], M).makespan_s
    assert pipeline_lower_bound(work, speed, M) > sim
    assert simulated_lower_bound(work, speed, M) <= sim
    rng = np.random.default_rng(7)
    for _ in range(2000):  # islands of one or two stages, each at most as fast as its share of the island
        n, M = int(rng.integers(1, 5)), int(rng.integers(1, 16))
        flops = rng.uniform(0.2, 3.0, n)
        f, b, work = [], [], 0.0
        for i in range(n):
            parts = rng.dirichlet(np.ones(int(rng.integers(1, 3)))) * rng.uniform(0.5, 1.0)
            for share in parts:
                w = rng.uniform(0.1, 2.0)
                t = w / (flops[i] * share) * rng.uniform(1.0, 1.3)
                split = rng.uniform(0.2, 0.5)
                f.append(t * split)
                b.append(t * (1 - split))
                work += M * w
        sim = simulate_1f1b(f, b, rng.choice([0.0, 0.1], len(f)).tolist(), M).makespan_s
        assert simulated_lower_bound(work, flops.tolist(), M) <= sim * (1 + 1e-12)
