"""The MILP/CP-SAT template (``hetopt.modelmethod``): its steps, and every model method goes through it."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pytest

import hetopt
from hetopt import modelmethod
from hetopt.budget import Deadline
from hetopt.result import Status

ROOT = Path(__file__).resolve().parents[1]
TINY = {
    "allocation": ROOT / "instances" / "allocation" / "tiny-2gpu.toml",
    "pipeline": ROOT / "instances" / "pipeline" / "tiny.toml",
    "islands": ROOT / "instances" / "islands" / "tiny.toml",
    "replicas": ROOT / "instances" / "replicas" / "tiny.toml",
}
MODEL_METHODS = [(family, method) for family in TINY for method in ("milp", "cpsat")]


@pytest.mark.parametrize(("family", "method"), MODEL_METHODS)
def test_every_model_method_solves_through_the_template(monkeypatch, family, method):
    calls = []
    real = modelmethod.solve_model

    def spy(built, **kwargs):
        calls.append((built.problem, built.kind))
        return real(built, **kwargs)

    monkeypatch.setattr(modelmethod, "solve_model", spy)
    for module in ("milp", "cpsat"):  # the families import the name: patch where it is looked up
        monkeypatch.setattr(f"hetopt.{family}.{module}.solve_model", spy)
    result = hetopt.solve(hetopt.load(TINY[family]), method)
    assert result.status is Status.OPTIMAL
    assert calls == [(family, method)]


@pytest.mark.parametrize(("family", "method"), MODEL_METHODS)
def test_a_solver_bug_is_caught_on_every_model_method(monkeypatch, family, method):
    """A backend that says infeasible where the method knows a plan exists (or that returns a
    solution ``evaluate`` rejects) is a SolverBug, through the one template."""
    from hetopt.backends import Outcome
    from hetopt.errors import SolverBug

    infeasible = Outcome(Status.INFEASIBLE, None, None, {})
    monkeypatch.setattr(modelmethod, "solve_cpsat", lambda *_a, **_k: (None, infeasible))
    monkeypatch.setattr(modelmethod, "solve_pulp_by", lambda *_a, **_k: (infeasible, None))
    inst = hetopt.load(TINY[family])
    try:
        result = hetopt.solve(inst, method)
    except SolverBug:
        return
    # the pipeline proves infeasibility itself when its greedy found no plan: then INFEASIBLE is an answer
    assert result.status is Status.INFEASIBLE and result.reason


def _built(kind: str, **kw) -> modelmethod.BuiltModel:
    return modelmethod.BuiltModel(problem="pipeline", method=kind, instance=None, evaluate=None, model=None, kind=kind,
                                  decode=lambda values: None, **kw)


def test_no_time_left_for_the_backend_is_a_time_limit_with_the_bound_known():
    deadline = Deadline(0.05)
    time.sleep(0.06)
    r = modelmethod.solve_model(_built("cpsat", floor=2.5, load_s=0.1, deadline=deadline), time_limit=0.05)
    assert r.status is Status.TIME_LIMIT and r.bound == 2.5 and "while building CP-SAT" in r.reason


def test_no_time_left_gives_the_known_plan_when_the_family_has_one():
    seen = {}

    def known(reason, bound, stats):
        seen.update(reason=reason, bound=bound)
        return "the known plan"

    out = modelmethod.solve_model(_built("milp", floor=1.0, load_s=10.0, known=known, deadline=Deadline(1.0)),
                                  time_limit=1.0)
    assert out == "the known plan" and seen == {"reason": "time limit reached while building the MILP", "bound": 1.0}


def test_the_model_file_is_written_and_named(tmp_path):
    r = hetopt.solve(hetopt.load(TINY["allocation"]), "cpsat", write_model=str(tmp_path / "m.pb.txt"))
    assert r.status is Status.OPTIMAL and Path(r.stats["model_file"]).is_file()
    r = hetopt.solve(hetopt.load(TINY["pipeline"]), "milp", write_model=str(tmp_path / "m.lp"))
    assert r.status is Status.OPTIMAL and Path(r.stats["model_file"]).is_file()


@pytest.mark.parametrize("family", list(TINY))
def test_workers_is_the_deprecated_name_of_threads(family):
    from importlib import import_module

    method = import_module(f"hetopt.{family}.cpsat").solve_cpsat_model
    inst = hetopt.load(TINY[family])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = method(inst, workers=1)
    assert any(w.category is DeprecationWarning for w in caught)
    assert old.objective == method(inst, threads=1).objective
    with pytest.raises(TypeError, match="give only threads"):
        method(inst, workers=1, threads=2)
