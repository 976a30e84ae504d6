"""Solver behaviour on the shipped instances: infeasibility with a reason, time limits, the CLI."""

from __future__ import annotations

import json
import math

import pytest

import hetopt
from hetopt.cli import main
from hetopt.result import Status

from .conftest import INSTANCES

TANGRAM = sorted(p.name for p in INSTANCES.glob("tangram-*.toml"))
TWO_ISLANDS = [n for n in TANGRAM if "6.7b" in n or n.endswith("v100-32x8.toml")]


@pytest.mark.parametrize("method", ["dp", "milp", "cpsat", "bruteforce"])
def test_infeasible_instance_gives_infeasible_and_a_reason(method):
    inst = hetopt.load(INSTANCES / "infeasible-gpt3-13b-t4x4.toml")
    r = hetopt.solve(inst, method)
    assert r.status is Status.INFEASIBLE and r.solution is None
    assert "layers" in r.reason and len(r.reason) > 40


def test_infeasible_exit_code_and_reason_on_the_command_line(capsys):
    assert main(["solve", str(INSTANCES / "infeasible-gpt3-13b-t4x4.toml")]) == 1
    assert "reason:" in capsys.readouterr().out


def test_memory_that_fits_no_position_is_explained():
    inst = hetopt.load(INSTANCES / "tiny.toml")
    small = type(inst)(**{**inst.__dict__, "memory_fraction": 0.01})
    r = hetopt.solve(small, "dp")
    assert r.status is Status.INFEASIBLE and "memory" in r.reason


#: scale-8x96's optimum: dp (12.6 s) and milp (HiGHS, 164 s) both prove 102.19796530035784
#: (`hetopt solve instances/pipeline/scale-8x96.toml --method milp --time-limit 1800`).
SCALE_8X96_OPTIMUM = 102.19796530035784


@pytest.mark.parametrize("method", ["dp", "milp", "cpsat"])
def test_time_limit_never_gives_a_false_optimal(method):
    inst = hetopt.load(INSTANCES / "scale-8x96.toml")
    r = hetopt.solve(inst, method, time_limit=0.05)
    assert r.status in (Status.FEASIBLE, Status.TIME_LIMIT, Status.OPTIMAL)
    if r.status is Status.OPTIMAL:  # only acceptable if it is truly the optimum
        assert math.isclose(r.objective, SCALE_8X96_OPTIMUM, rel_tol=1e-9)
    if r.status is Status.FEASIBLE:
        assert r.objective >= SCALE_8X96_OPTIMUM * (1 - 1e-9)
        if r.bound is not None:
            assert r.bound <= r.objective
            assert r.bound <= SCALE_8X96_OPTIMUM * (1 + 1e-9)


def test_dp_declines_when_its_table_is_too_large():
    """Issue 12: scale-16x128 is now solved; a lowered cell limit still makes dp stop honestly."""
    from hetopt.pipeline.dp import solve_dp

    r = solve_dp(hetopt.load(INSTANCES / "scale-16x128.toml"), max_cells=1_000)
    assert r.status in (Status.DECLINED, Status.FEASIBLE)
    if r.status is Status.DECLINED:
        assert "cells" in r.reason
    else:
        assert r.bound is not None and r.bound < r.objective


def test_bruteforce_declines_beyond_its_size():
    r = hetopt.solve(hetopt.load(INSTANCES / "tangram-gpt3-13b-a100x4-v100-32x8-v100-16x4-t4x4.toml"), "bruteforce")
    assert r.status is Status.DECLINED and "tiny" in r.reason


def test_dp_stats_and_json_contract(capsys):
    assert main(["solve", str(INSTANCES / "tiny.toml"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "OPTIMAL"
    for key in ("thresholds_tried", "states_memoized", "options_skipped"):
        assert key in doc["stats"]
    assert sum(b["layers"] for b in doc["solution"]["blocks"]) == 8
    # the example: M = 16, equal stage times and a link: simulated equals analytic here
    assert doc["solution"]["simulated_s"] == pytest.approx(doc["solution"]["iteration_time_s"], rel=1e-12)


def test_human_output_shows_analytic_and_simulated_time(capsys):
    assert main(["solve", str(INSTANCES / "tiny-t4-v100.toml")]) == 0
    out = capsys.readouterr().out
    assert "analytic" in out and "1F1B simulation" in out and "simulated - analytic" in out


@pytest.mark.parametrize("name", TWO_ISLANDS)
def test_dp_and_milp_agree_on_two_island_tangram_instances(name):
    inst = hetopt.load(INSTANCES / name)
    check = hetopt.crosscheck(inst, ["dp", "milp"])
    assert check.agree and all(r.status is Status.OPTIMAL for r in check.results), check.disagreement


@pytest.mark.slow
@pytest.mark.parametrize("name", TANGRAM)
def test_crosscheck_agrees_on_every_tangram_instance(name, capsys):
    assert main(["crosscheck", str(INSTANCES / name), "--time-limit", "120"]) == 0
