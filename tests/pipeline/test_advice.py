"""Decline advice that holds (issue 29): on a 200,000-option pipeline dp said "use milp or
cpsat" while milp and cpsat said "use dp". Each decline now names a method only when that
method's own up-front limit holds on the instance (``hetopt.pipeline.advice``)."""

from __future__ import annotations

import pytest

from hetopt import solve
from hetopt.pipeline.advice import after_dp_declines, after_model_declines
from hetopt.pipeline.problem import PipelineInstance, PipelineIsland, PipelineOption, StagePlan
from hetopt.result import Status
from hetopt.units import GIB


def many_options(islands=16, layers=96, variants=130) -> PipelineInstance:
    """About 200,000 options: 16 islands × 96 slice lengths × 130 layouts each."""
    isl = tuple(PipelineIsland(f"i{i}", 8, (16 + i) * GIB) for i in range(islands))
    opts = []
    for i in range(islands):
        for k in range(1, layers + 1):
            for v in range(variants):
                t = 0.001 * k * (1 + 0.01 * v) * (1 + 0.05 * i)
                opts.append(PipelineOption(i, k, (StagePlan(k, t, 2 * t, 0.1 * GIB * k / (1 + v % 8), 0.01 * GIB * k,
                                                            1 + v % 8),)))
    link = tuple(tuple(0.0 if a == b else 0.001 for b in range(islands)) for a in range(islands))
    return PipelineInstance("many-options", layers, 64, isl, tuple(opts), link)


@pytest.mark.slow
def test_the_position_models_decline_and_send_the_user_to_dp_which_takes_it():
    inst = many_options()
    assert len(inst.options) == 199_680
    for method in ("milp", "cpsat"):
        r = solve(inst, method, time_limit=30, formulation="positions")
        assert r.status is Status.DECLINED and r.reason.endswith(after_model_declines(inst))
        assert "use dp" in r.reason
    # and dp does take it (it is stopped by the limit, not declined)
    assert solve(inst, "dp", time_limit=3).status in (Status.FEASIBLE, Status.OPTIMAL, Status.TIME_LIMIT)


@pytest.mark.slow
def test_the_level_model_takes_what_the_position_model_declines_and_dp_says_so():
    """Since issue 43 the models' default is the level model over island signatures: it takes
    the 200,000 options once the greedy's plan bounds its window, so a DP decline must send the
    user to milp or cpsat first, not to greedy (it did, reading the position model's limit alone)."""
    inst = many_options()
    r = solve(inst, "milp", time_limit=60)
    assert r.status in (Status.FEASIBLE, Status.OPTIMAL), r.reason
    advice = after_dp_declines(inst)
    assert advice.startswith("try milp or cpsat") and advice.endswith("should they decline too, use greedy"), advice
