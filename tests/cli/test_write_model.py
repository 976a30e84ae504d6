"""``hetopt solve --write-model``: the model that is solved, read back by another solver.

A MILP written as MPS or LP is re-read by HiGHS (highspy, a core dependency) and solved on
its own; a CP-SAT model written as protobuf text is parsed into a fresh CpModel and solved.
Both must reach the optimum ``solve`` reports, for every family.
"""

from __future__ import annotations

import json
from pathlib import Path

import highspy
import pytest
from ortools.sat import cp_model_pb2
from ortools.sat.python import cp_model

from hetopt import load, solve
from hetopt.cli import main
from hetopt.solvers import family

ROOT = Path(__file__).resolve().parents[2]
INSTANCES = {
    "allocation": ROOT / "instances" / "allocation" / "tiny-2gpu.toml",
    "pipeline": ROOT / "instances" / "pipeline" / "tiny.toml",
    "islands": ROOT / "instances" / "islands" / "tiny.toml",
}

#: Seconds per integer unit of each family's CP-SAT objective: allocation and pipeline scale
#: times to nanoseconds (their cpsat modules' TIME_QUANTUM_S), islands count islands.
CPSAT_UNIT = {"allocation": 1e-9, "pipeline": 1e-9, "islands": 1.0}

#: How closely a re-read MILP's optimum must match: PuLP writes coefficients with 12
#: significant digits, so the two optima differ by rounding only.
MILP_RTOL = 1e-9


def _solve_json(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["solve", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _highs(path: Path) -> highspy.Highs:
    """HiGHS with the model file read and solved to optimality."""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    assert h.readModel(str(path)) == highspy.HighsStatus.kOk
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return h


def _highs_optimum(path: Path) -> float:
    return _highs(path).getInfo().objective_function_value


@pytest.mark.parametrize("problem", sorted(INSTANCES))
@pytest.mark.parametrize("suffix", [".mps", ".lp"])
def test_the_written_milp_read_by_highs_has_the_same_optimum(capsys, tmp_path, problem, suffix):
    target = tmp_path / f"model{suffix}"
    code, doc = _solve_json(capsys, str(INSTANCES[problem]), "--method", "milp", "--write-model", str(target))
    assert code == 0 and doc["status"] == "OPTIMAL"
    assert doc["stats"]["model_file"] == str(target)
    h = _highs(target)
    assert h.getInfo().objective_function_value == pytest.approx(doc["objective"], rel=MILP_RTOL)
    # the model that was solved: the same columns and rows as the solve reports (PuLP's LP
    # writer adds a fixed "__dummy" column and its row where a row has no terms)
    if suffix == ".mps":
        assert (h.getNumCol(), h.getNumRow()) == (doc["stats"]["variables"], doc["stats"]["constraints"])


@pytest.mark.parametrize("problem", sorted(INSTANCES))
def test_the_written_cpsat_model_reloaded_has_the_same_optimum(capsys, tmp_path, problem):
    target = tmp_path / "model.pb.txt"
    code, doc = _solve_json(capsys, str(INSTANCES[problem]), "--method", "cpsat", "--write-model", str(target))
    assert code == 0 and doc["status"] == "OPTIMAL"
    model = cp_model.CpModel()
    model.proto.parse_text_format(target.read_text(encoding="utf-8"))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    assert solver.solve(model) == cp_model.OPTIMAL
    instance = load(INSTANCES[problem])
    rtol, atol = family(instance).tolerance(instance)  # CP-SAT's scaling error, as crosscheck allows
    reloaded = solver.objective_value * CPSAT_UNIT[problem]
    assert abs(reloaded - doc["objective"]) <= atol + rtol * abs(doc["objective"])
    assert model.proto.has_solution_hint()  # the greedy warm start is part of what was written


def test_the_parameters_a_model_is_solved_with_are_named_beside_its_file(capsys, tmp_path):
    # the pipeline's level model is solved with CP-SAT's full linearization (its LP is tight),
    # which the model file cannot hold: the stats say what to set to solve it elsewhere
    target = tmp_path / "model.pb.txt"
    code, doc = _solve_json(capsys, str(INSTANCES["pipeline"]), "--method", "cpsat", "--write-model", str(target))
    assert code == 0 and doc["stats"]["cpsat_parameters"] == {"linearization_level": 2}
    code, doc = _solve_json(capsys, str(INSTANCES["islands"]), "--method", "cpsat", "--write-model", str(target))
    assert code == 0 and "cpsat_parameters" not in doc["stats"]  # a model that asks for none


def test_solve_cpsat_sets_the_parameters_it_is_given():
    from ortools.sat.python import cp_model

    from hetopt.backends import solve_cpsat

    model = cp_model.CpModel()
    x = model.new_int_var(0, 3, "x")
    model.minimize(x)
    seen = []
    _, outcome = solve_cpsat(model, parameters={"linearization_level": 2},
                             on_solver=lambda solver: seen.append(solver.parameters.linearization_level))
    assert seen == [2] and outcome.objective == 0


def test_a_binary_cpsat_model_is_a_cp_model_proto(capsys, tmp_path):
    target = tmp_path / "model.pb"
    code, doc = _solve_json(capsys, str(INSTANCES["allocation"]), "--method", "cpsat", "--write-model", str(target))
    assert code == 0
    proto = cp_model_pb2.CpModelProto()
    proto.ParseFromString(target.read_bytes())
    assert len(proto.variables) > 0 and proto.HasField("objective")


def test_the_library_writes_the_model_through_solve(tmp_path):
    target = tmp_path / "m.lp"
    result = solve(load(INSTANCES["islands"]), "milp-cbc", write_model=target)
    assert result.stats["model_file"] == str(target)
    assert _highs_optimum(target) == result.objective


@pytest.mark.parametrize(("method", "name", "says"), [
    ("milp", "m.pb.txt", "a MILP is written as .mps or .lp"),
    ("milp", "m.txt", "a MILP is written as .mps or .lp"),
    ("cpsat", "m.mps", "a CP-SAT model is written as .pb.txt"),
    ("dp", "m.mps", "method dp builds no model to write (for allocation: milp, milp-cbc, cpsat)"),
    ("auto", "m.mps", "method auto builds no model"),
    ("greedy", "m.mps", "method greedy builds no model"),
])
def test_a_wrong_ending_or_a_method_without_a_model_is_one_line_and_exit_2(capsys, tmp_path, method, name, says):
    instance = INSTANCES["pipeline"] if method == "greedy" else INSTANCES["allocation"]
    target = tmp_path / name
    assert main(["solve", str(instance), "--method", method, "--write-model", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"hetopt: --write-model {target}: ") and says in err
    assert not target.exists()


def test_a_missing_folder_is_refused_before_solving(capsys, tmp_path):
    target = tmp_path / "no-such-folder" / "m.mps"
    assert main(["solve", str(INSTANCES["allocation"]), "--method", "milp", "--write-model", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hetopt: --write-model {target}: no folder") and "create it first" in err
    assert not target.parent.exists()


def test_nothing_written_when_the_method_stops_before_its_model_is_built(capsys, tmp_path):
    # proven infeasible by the presolve: no model is built, and the note says so
    target = tmp_path / "m.mps"
    infeasible = ROOT / "instances" / "allocation" / "tiny-infeasible.toml"
    assert main(["solve", str(infeasible), "--method", "milp", "--write-model", str(target)]) == 1
    err = capsys.readouterr().err
    assert f"hetopt: note: --write-model {target}: nothing written: milp ended INFEASIBLE before its model was written" in err
    assert not target.exists()
