"""The solver layer: option names and values, repeatable CP-SAT runs, crosscheck's agreement rule."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from ortools.sat.python import cp_model

import hetopt
from hetopt.backends import DEFAULT_CPSAT_SEED, milp_available
from hetopt.io import plain
from hetopt.result import Status

ROOT = Path(__file__).resolve().parents[1]
TINY = hetopt.load(ROOT / "instances" / "allocation" / "tiny-2gpu.toml")
UNEVEN = hetopt.load(ROOT / "instances" / "allocation" / "tiny-uneven.toml")
ISLANDS = hetopt.load(ROOT / "instances" / "islands" / "tiny.toml")


def test_unknown_option_names_raise_and_list_the_known_ones():
    # the misspelt names used to be dropped: milp ran HiGHS without a limit and said OPTIMAL
    with pytest.raises(TypeError) as exc:
        hetopt.solve(TINY, "milp", time_limt=0.001, backnd="cbc")
    message = str(exc.value)
    assert "'backnd'" in message and "'time_limt'" in message
    assert all(name in message for name in ("time_limit", "backend", "threads", "seed"))
    with pytest.raises(TypeError, match="time_limt"):
        hetopt.crosscheck(TINY, ["dp", "milp"], time_limt=1)


def test_an_option_of_the_family_that_a_method_does_not_take_is_ignored():
    r = hetopt.solve(TINY, "dp", backend="cbc", threads=1, seed=5, time_limit=30)
    assert r.status is Status.OPTIMAL


@pytest.mark.parametrize(
    "options",
    [
        {"time_limit": -1}, {"time_limit": -1e-9}, {"time_limit": math.nan}, {"time_limit": math.inf},
        {"time_limit": "1"}, {"time_limit": True}, {"backend": "gurobi"}, {"threads": 0},
        {"threads": 1.5}, {"threads": True}, {"threads": 10**6}, {"seed": -1}, {"seed": 0.5}, {"seed": 2**31},
    ],
)
def test_option_values_are_checked_once_in_the_solver_layer(options):
    name = next(iter(options))
    for method in ("dp", "milp", "cpsat"):  # whether the method takes the option or not
        with pytest.raises(ValueError, match=f"^{name}: "):
            hetopt.solve(TINY, method, **options)


def test_workers_is_a_deprecated_alias_of_threads():
    with pytest.warns(DeprecationWarning, match="threads"):
        assert hetopt.solve(TINY, "cpsat", workers=1).status is Status.OPTIMAL
    with pytest.raises(ValueError, match="threads"):
        hetopt.solve(TINY, "cpsat", workers=1, threads=2)


@pytest.fixture
def cpsat_parameters(monkeypatch):
    """The parameters of every CP-SAT solve in the test."""
    seen = []
    real = cp_model.CpSolver.solve

    def recording(self, model, *args, **kwargs):
        seen.append((self.parameters.num_workers, self.parameters.random_seed, self.parameters.interleave_search))
        return real(self, model, *args, **kwargs)

    monkeypatch.setattr(cp_model.CpSolver, "solve", recording)
    return seen


def test_cpsat_runs_one_seeded_worker_unless_threads_are_given(cpsat_parameters):
    # repeatable by default: one worker and a fixed seed (several workers race)
    for inst in (TINY, ISLANDS):
        hetopt.solve(inst, "cpsat")
    assert cpsat_parameters == [(1, DEFAULT_CPSAT_SEED, False)] * 2
    cpsat_parameters.clear()
    hetopt.solve(TINY, "cpsat", threads=2, seed=7)
    assert cpsat_parameters == [(2, 7, False)]


@pytest.mark.parametrize("inst", [UNEVEN, ISLANDS], ids=["allocation", "islands"])
def test_two_cpsat_runs_give_the_same_solution(inst):
    first, second = (hetopt.solve(inst, "cpsat") for _ in range(2))
    assert first.status is Status.OPTIMAL
    assert json.dumps(plain(first.solution), sort_keys=True) == json.dumps(plain(second.solution), sort_keys=True)


@pytest.mark.skipif(not milp_available("cbc"), reason="CBC is not installed")
def test_milp_cbc_keeps_its_backend():
    # the method's name fixes the backend; backend="highs" used to switch milp-cbc to HiGHS
    assert hetopt.solve(TINY, "milp-cbc", backend="highs").stats["backend"] == "cbc"
    assert hetopt.solve(TINY, "milp", backend="cbc").stats["backend"] == "cbc"


@pytest.mark.parametrize("methods", [["dp"], ["dp", "dp"], ["auto", "dp"], []])
def test_a_crosscheck_needs_two_different_methods(methods):
    with pytest.raises(ValueError, match="at least two different methods"):
        hetopt.crosscheck(TINY, methods)


def test_a_crosscheck_with_one_proven_answer_claims_no_agreement():
    # greedy proves nothing: dp's optimum is compared with nothing
    check = hetopt.crosscheck(ISLANDS, ["dp", "greedy"])
    assert check.agree is None and check.compared == 1
    assert "greedy" in check.heuristic_gaps
    both = hetopt.crosscheck(ISLANDS, ["dp", "cpsat", "greedy"])
    assert both.agree is True and both.compared == 2


def test_a_heuristic_plan_beating_a_proven_optimum_is_a_disagreement_even_with_one_proof():
    import dataclasses

    from hetopt.solvers import compare

    dp = hetopt.solve(ISLANDS, "dp")
    greedy = dataclasses.replace(hetopt.solve(ISLANDS, "greedy"), objective=dp.objective - 1)
    check = compare(ISLANDS, [dp, greedy])
    assert check.agree is False and "beats a proven bound" in check.disagreement


def test_an_invalid_cpsat_model_is_a_solver_bug_not_bad_input():
    # a ValueError would reach the user as "bad input" (exit 2); the model is ours, so it is a bug (exit 4)
    from hetopt.backends import solve_cpsat
    from hetopt.errors import SolverBug

    model = cp_model.CpModel()
    x = model.new_int_var(0, 10, "x")
    model.add(x * (2**62) + x * (2**62) >= 1)  # a sum that overflows int64: CP-SAT calls the model invalid
    model.minimize(x)
    with pytest.raises(SolverBug, match="CP-SAT rejected the model"):
        solve_cpsat(model)
