"""``evaluate`` rejects each broken rule, one test per constraint, and recomputes T."""

from __future__ import annotations

import math

from hetopt.pipeline.problem import GIB, Block, PipelineIsland, PipelineInstance, PipelineOption, PipelineSolution, StagePlan, evaluate


def _stage(ell=1, t=0.01, static=1.0, act=1.0):
    return StagePlan(ell, t, 2 * t, static * GIB, act * GIB, 1)


def instance(**kw) -> PipelineInstance:
    """Three islands; options: 0 a(2 layers, any), 1 b(1, any), 2 c(1, any), 3 b(1, first),
    4 c(1, last), 5 a(2 layers, 2 stages, any, memory-hungry), 6 b(1, middle), 7 c(1, whole)."""
    islands = (PipelineIsland("a", 2, 10 * GIB), PipelineIsland("b", 1, 10 * GIB), PipelineIsland("c", 1, 10 * GIB))
    options = (
        PipelineOption(0, 2, (_stage(2),)),
        PipelineOption(1, 1, (_stage(),)),
        PipelineOption(2, 1, (_stage(),)),
        PipelineOption(1, 1, (_stage(),), "first"),
        PipelineOption(2, 1, (_stage(),), "last"),
        # each stage: 4 GiB static + 2 GiB per micro-batch: fits 3 in flight, not 4
        PipelineOption(0, 2, (_stage(1, static=4.0, act=2.0), _stage(1, static=4.0, act=2.0))),
        PipelineOption(1, 1, (_stage(),), "middle"),
        PipelineOption(2, 1, (_stage(),), "whole"),
    )
    link = ((0.0, 0.005, 0.001), (0.005, 0.0, 0.002), (0.001, 0.002, 0.0))
    defaults = dict(name="t", layers=4, microbatches=8, islands=islands, options=options, link_s=link)
    defaults.update(kw)
    return PipelineInstance(**defaults)


def plan(*blocks):
    return PipelineSolution(tuple(Block(*b) for b in blocks))


def test_a_valid_plan_and_its_time():
    inst = instance()
    ev = evaluate(inst, plan((1, 3, 0, 1), (0, 0, 1, 2), (2, 4, 3, 1)))
    assert ev.feasible, ev.violations
    # stages 0.03 each, links b-a 0.005 and a-c 0.001; bottleneck 0.03
    assert math.isclose(ev.objective, 3 * 0.03 + 0.006 + 7 * 0.03)
    assert ev.details["in_flight"] == [3, 2, 1]


def test_link_as_bottleneck():
    inst = instance(link_s=((0.0, 0.5, 0.0), (0.5, 0.0, 0.0), (0.0, 0.0, 0.0)))
    ev = evaluate(inst, plan((1, 3, 0, 1), (0, 0, 1, 2), (2, 4, 3, 1)))
    assert math.isclose(ev.objective, 0.09 + 0.5 + 7 * 0.5)


def test_rejects_an_island_used_twice():
    ev = evaluate(instance(layers=4), plan((0, 0, 0, 2), (0, 5, 2, 2)))
    assert not ev.feasible and any("already hosts" in v for v in ev.violations)


def test_rejects_a_gap_in_the_layers():
    ev = evaluate(instance(), plan((1, 3, 0, 1), (0, 0, 2, 2)))
    assert not ev.feasible and any("gap" in v for v in ev.violations)


def test_rejects_an_overlap_in_the_layers():
    ev = evaluate(instance(), plan((0, 0, 0, 2), (1, 1, 1, 1), (2, 4, 2, 1)))
    assert not ev.feasible and any("overlap" in v for v in ev.violations)


def test_rejects_layers_left_uncovered_at_the_end():
    ev = evaluate(instance(), plan((1, 3, 0, 1), (0, 0, 1, 2)))
    assert not ev.feasible and any("the model has 4 layers" in v for v in ev.violations)


def test_rejects_a_broken_role():
    inst = instance()
    # 'last' option at the front, 'first' option at the back
    ev = evaluate(inst, plan((2, 4, 0, 1), (0, 0, 1, 2), (1, 3, 3, 1)))
    assert not ev.feasible and sum("role" in v for v in ev.violations) == 2
    # 'middle' option alone is no whole pipeline; 'whole' in a longer pipeline neither
    # (a one-layer model admits no 2-layer option: those become 1-layer ones, indices kept)
    one = instance(layers=1, options=tuple(o if o.layers == 1 else PipelineOption(0, 1, (_stage(),)) for o in instance().options))
    assert not evaluate(one, plan((1, 6, 0, 1))).feasible
    assert evaluate(one, plan((2, 7, 0, 1))).feasible
    assert not evaluate(instance(layers=2), plan((1, 1, 0, 1), (2, 7, 1, 1))).feasible


def test_rejects_option_island_and_length_mismatch():
    ev = evaluate(instance(), plan((1, 0, 0, 2), (2, 2, 2, 1), (1, 1, 3, 1)))
    assert not ev.feasible and any("belongs to island a" in v for v in ev.violations)
    ev = evaluate(instance(), plan((0, 0, 0, 3), (2, 2, 3, 1)))
    assert not ev.feasible and any("covers 2 layers" in v for v in ev.violations)


def test_rejects_memory_exceeded_at_its_1f1b_position():
    inst = instance()
    # option 5's stages fit with 3 micro-batches in flight: at the back (1 and 2 in flight) it fits,
    back = plan((1, 3, 0, 1), (2, 2, 1, 1), (0, 5, 2, 2))
    assert evaluate(inst, back).feasible
    # at the front of a 4-stage pipeline its first stage holds 4 (S - s = 4) and does not
    front = plan((0, 5, 0, 2), (1, 1, 2, 1), (2, 4, 3, 1))
    ev = evaluate(inst, front)
    assert not ev.feasible and any("stage 0" in v and "4 micro-batches in flight" in v for v in ev.violations)
    # with M = 3 in-flight counts cap at 3, and the same plan fits
    assert evaluate(instance(microbatches=3), front).feasible


def test_memory_fraction_applies():
    inst = instance(memory_fraction=0.5)  # 5 GiB usable: option 5 (4 + 2) never fits
    assert inst.behind_limit(5) == -1
    assert not evaluate(inst, plan((1, 3, 0, 1), (2, 2, 1, 1), (0, 5, 2, 2))).feasible


def test_behind_limits_match_the_rule():
    inst = instance()
    assert inst.behind_limit(0) is None  # 1 + 1·8 ≤ 10: fits anywhere
    assert inst.behind_limit(5) == 1  # stage 0 holds b + 2 ≤ 3


def test_rejects_an_empty_plan_and_bad_indices():
    assert not evaluate(instance(), plan()).feasible
    assert not evaluate(instance(), plan((7, 0, 0, 4))).feasible
    assert not evaluate(instance(), plan((0, 99, 0, 4))).feasible


def test_the_planner_uses_the_pipeline_memory_rule():
    """One rule in one place: the parallelizers' in-flight fit is the family's, tolerance included."""
    import numpy as np

    from hetopt.pipeline.problem import MEMORY_RTOL, most_in_flight, stage_fits
    from hetopt.planner.parallelizer.protocol import StageCost, in_flight_fit

    rng = np.random.default_rng(3)
    for _ in range(300):
        static, act, M = float(rng.uniform(0, 8)), float(rng.uniform(0.01, 2)), int(rng.integers(1, 40))
        f = int(rng.integers(0, M + 1))
        # capacities exactly at, just inside and just outside the rule's boundary for f in flight
        edge = (static + act * f) / (1.0 + MEMORY_RTOL)
        for cap in (edge, edge * (1 + 1e-12), edge * (1 - 1e-12), float(rng.uniform(0.5, 60))):
            st = StageCost(1, 0.1, 0.2, static_bytes=static, activation_bytes=act, gpus=1)
            family = most_in_flight(static, act, cap, M)
            planner = in_flight_fit(st, cap, M)
            assert (M if planner is None else planner) == family
            assert family == -1 or stage_fits(static, act, family, cap)
