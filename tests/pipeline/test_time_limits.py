"""Time limits bound the whole method call, model building included (issue 9).

Each method must return within ``time_limit + TIME_LIMIT_SLACK_S`` of wall time, with
``Result.wall_s`` that wall time, and never a false OPTIMAL or a false INFEASIBLE. Before
the fix the MILP spent 12.5 s building its PuLP model at ``--time-limit 1`` on scale-16x128
and HiGHS ran 5-14 s past its own limit (presolve probing, MIP set-up).
"""

from __future__ import annotations

import math
import time

import pytest

import hetopt
from hetopt.commands.common import exit_code as _exit_code
from hetopt.family import TIME_LIMIT_SLACK_S
from hetopt.result import Status

from .conftest import INSTANCES
from .test_solvers import SCALE_8X96_OPTIMUM

#: Long enough to mean something on a loaded 2-core machine, short enough for a test.
LIMIT_S = 2.0


def _timed(path, method):
    inst = hetopt.load(INSTANCES / path)
    start = time.perf_counter()
    r = hetopt.solve(inst, method, time_limit=LIMIT_S)
    return r, time.perf_counter() - start


def _check_limits(r, outer):
    assert outer <= LIMIT_S + TIME_LIMIT_SLACK_S, (r.status, outer, r.reason)
    # wall_s is the call's wall time: nothing of the call is left out of it
    assert r.wall_s <= outer and outer - r.wall_s < 0.1 * TIME_LIMIT_SLACK_S, (r.wall_s, outer)
    assert r.status is not Status.INFEASIBLE
    if r.status is Status.FEASIBLE and r.bound is not None:
        assert r.bound <= r.objective
    if r.status is Status.TIME_LIMIT:
        assert r.solution is None and _exit_code(r) == 3


@pytest.mark.parametrize("method", ["dp", "milp", "milp-cbc", "cpsat", "greedy"])
def test_scale_8x96_within_the_limit(method):
    r, outer = _timed("scale-8x96.toml", method)
    _check_limits(r, outer)
    if r.status is Status.OPTIMAL:
        assert math.isclose(r.objective, SCALE_8X96_OPTIMUM, rel_tol=1e-9)
    if r.status.has_solution:
        assert r.objective >= SCALE_8X96_OPTIMUM * (1 - 1e-9)
        if r.bound is not None:
            assert r.bound <= SCALE_8X96_OPTIMUM * (1 + 1e-9)


@pytest.mark.parametrize("method", ["milp", "milp-cbc", "cpsat"])
def test_scale_16x128_model_building_within_the_limit(method):
    """The largest shipped model: 60,640 binaries; PuLP building alone took 12.5 s."""
    r, outer = _timed("scale-16x128.toml", method)
    _check_limits(r, outer)
    assert r.status is not Status.OPTIMAL  # not provable in 2 s on this machine class


@pytest.mark.parametrize("method", ["dp", "milp", "cpsat"])
def test_infeasible_instance_wall_time_is_the_call(method):
    r, outer = _timed("infeasible-gpt3-13b-t4x4.toml", method)
    assert r.status is Status.INFEASIBLE
    assert r.wall_s <= outer < LIMIT_S


def test_dp_declines_64_distinct_islands_at_once():
    """2^64 usage states: dp used to list them all before its size check (it never returned)."""
    from hetopt.pipeline.problem import GIB, PipelineIsland, PipelineInstance, PipelineOption, StagePlan

    n = 64
    islands = tuple(PipelineIsland(f"i{k}", 1, (8 + k) * GIB) for k in range(n))
    options = tuple(PipelineOption(k, 1, (StagePlan(1, 0.01 * (1 + k), 0.02, GIB, 0.1 * GIB),)) for k in range(n))
    inst = PipelineInstance("wide", n, 8, islands, options, tuple(tuple(0.0 for _ in range(n)) for _ in range(n)))
    start = time.perf_counter()
    r = hetopt.solve(inst, "dp", time_limit=LIMIT_S)
    assert r.status is Status.DECLINED and "cells" in r.reason
    assert time.perf_counter() - start <= LIMIT_S + TIME_LIMIT_SLACK_S


def test_timed_milp_after_an_untimed_one_in_the_same_process():
    """The timed MILP runs HiGHS in a forked child; after HiGHS ran in the parent (its worker
    threads are not copied by fork) the child used to wait forever and report TIME_LIMIT."""
    inst = hetopt.load(INSTANCES / "tiny-t4-v100.toml")
    untimed = hetopt.solve(inst, "milp")
    timed = hetopt.solve(inst, "milp", time_limit=LIMIT_S)
    assert untimed.status is Status.OPTIMAL and timed.status is Status.OPTIMAL
    assert timed.objective == untimed.objective


@pytest.mark.parametrize("method", ["milp", "cpsat"])
def test_position_models_beyond_their_size_decline_up_front(method):
    """Accepted sizes are solved within memory or declined with the limit (here: a lowered limit)."""
    r = hetopt.solve(hetopt.load(INSTANCES / "scale-8x96.toml"), method, time_limit=LIMIT_S, formulation="positions",
                     max_position_binaries=1_000)
    assert r.status is Status.DECLINED and "1,000" in r.reason and "use dp" in r.reason
    assert r.wall_s <= LIMIT_S + TIME_LIMIT_SLACK_S


@pytest.mark.parametrize("method", ["milp", "cpsat"])
def test_level_models_beyond_their_size_decline_up_front(method):
    """The level model (the default formulation) counts its cells before listing them."""
    r = hetopt.solve(hetopt.load(INSTANCES / "scale-8x96.toml"), method, time_limit=LIMIT_S, max_level_cells=1_000)
    assert r.status is Status.DECLINED and "1,000" in r.reason and "use dp" in r.reason
    assert r.wall_s <= LIMIT_S + TIME_LIMIT_SLACK_S


#: scale-16x128's optimum as dp proves it (issue 12: 41 s wall, 25 s CPU at load 4 on the
#: 2-core box; `hetopt solve instances/pipeline/scale-16x128.toml --method dp`). The test below
#: only checks consistency with it; the level models prove it too (issue 43,
#: tests/pipeline/test_signatures.py, marked slow).
SCALE_16X128_DP_OPTIMUM = 70.23452231880599


def test_dp_on_scale_16x128_within_the_limit():
    """Issue 12: dp no longer declines 16 islands x 128 layers; stopped early it reports a bound."""
    r, outer = _timed("scale-16x128.toml", "dp")
    _check_limits(r, outer)
    if r.status.has_solution:
        assert r.objective >= SCALE_16X128_DP_OPTIMUM * (1 - 1e-9)
        assert r.bound is not None and r.bound <= SCALE_16X128_DP_OPTIMUM * (1 + 1e-9)


def test_dp_on_sixteen_distinct_islands_within_the_limit():
    """Issue 12: 16 pairwise different islands (2^16 usage states) used to be DECLINED; now dp
    runs, stops at the limit, and reports its greedy plan with a bound below it."""
    from hetopt.pipeline.scaling import scaling_instance

    inst = scaling_instance(16, 64)
    start = time.perf_counter()
    r = hetopt.solve(inst, "dp", time_limit=LIMIT_S)
    outer = time.perf_counter() - start
    _check_limits(r, outer)
    assert r.stats["usage_states"] == 2**16
    if r.status is Status.FEASIBLE:
        assert r.bound is not None and 0 < r.bound <= r.objective


def test_no_highs_worker_outlives_a_solve_in_this_process():
    """HiGHS keeps worker threads after a solve; a later timed MILP forks this process, and a
    lock a worker held at the fork could leave the child waiting forever (a full test run once
    reported TIME_LIMIT on a tiny instance). ``solve_pulp`` ends the workers after each solve."""
    import os

    if not os.path.isdir("/proc/self/task"):
        pytest.skip("counts threads through Linux's /proc")
    inst = hetopt.load(INSTANCES / "tiny-t4-v100.toml")
    before = len(os.listdir("/proc/self/task"))
    assert hetopt.solve(inst, "milp").status is Status.OPTIMAL
    assert len(os.listdir("/proc/self/task")) <= before
