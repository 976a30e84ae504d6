"""A solver contradicting the presolve raises SolverBug, never AssertionError or a false answer."""

from __future__ import annotations

from pathlib import Path

import pytest

import hetopt
from hetopt.backends import Outcome
from hetopt.errors import SolverBug
from hetopt.result import Status

ROOT = Path(__file__).resolve().parents[2]
INFEASIBLE = ROOT / "instances" / "allocation" / "tiny-infeasible.toml"
TINY = ROOT / "instances" / "allocation" / "tiny-2gpu.toml"


@pytest.mark.parametrize(("module", "method"), [("bruteforce", "bruteforce"), ("dp_faithful", "dp-faithful")])
def test_no_plan_after_a_presolve_that_says_one_exists_is_a_solver_bug(monkeypatch, module, method):
    import importlib

    mod = importlib.import_module(f"hetopt.allocation.{module}")
    monkeypatch.setattr(mod, "why_infeasible", lambda instance: None)  # a presolve that lies
    with pytest.raises(SolverBug, match=f"allocation/{method}"):
        hetopt.solve(hetopt.load(INFEASIBLE), method)


def test_cpsat_proving_infeasible_where_a_plan_exists_is_a_solver_bug(monkeypatch):
    from hetopt import modelmethod  # every CP-SAT method solves through the template

    real = modelmethod.solve_cpsat

    def infeasible(model, **kwargs):
        solver, outcome = real(model, **kwargs)
        return solver, Outcome(status=Status.INFEASIBLE, objective=None, bound=None, stats=outcome.stats)

    monkeypatch.setattr(modelmethod, "solve_cpsat", infeasible)
    with pytest.raises(SolverBug, match="CP-SAT reports infeasible"):
        hetopt.solve(hetopt.load(TINY), "cpsat")


def test_cbc_stopped_by_its_limit_is_a_time_limit_not_infeasible(monkeypatch):
    # PuLP reads CBC stopped before any solution as "infeasible": backends.solve_pulp turns
    # an "infeasible" that used the whole limit into TIME_LIMIT, for every family's MILP
    import time

    import pulp

    from hetopt import backends

    def stopped(prob, solver=None, **kw):
        time.sleep(solver.timeLimit or 0.0)  # as if CBC ran until its limit
        return pulp.LpStatusInfeasible

    monkeypatch.setattr(pulp.LpProblem, "solve", stopped)
    monkeypatch.setattr(backends, "_cbc_outcome", lambda prob: Outcome(Status.INFEASIBLE, None, None, {"backend": "cbc"}))
    r = hetopt.solve(hetopt.load(TINY), "milp-cbc", time_limit=1.5)
    assert r.status is Status.TIME_LIMIT and r.solution is None
    with pytest.raises(SolverBug, match="the MILP reports infeasible"):
        hetopt.solve(hetopt.load(TINY), "milp-cbc")  # without a limit it contradicts the presolve
