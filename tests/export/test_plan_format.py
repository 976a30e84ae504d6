"""Issue 40, part 2: self-contained, versioned plans.

The plan document carries ``format`` and ``version``, the model's whole shape and the cluster's
nodes, and keeps to the published schema (``docs/plan.schema.json``, checked with the
``jsonschema`` package of the test extra). ``hetopt export`` and ``hetopt draw`` read the plan
alone and refuse another version, a number that is not finite and an edited shape with one
line, exit 2. From Python, ``hetopt.export(plan, to=..., out=...)`` takes a ``HeteroPlan``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hetopt
from hetopt import cli
from hetopt.errors import InputError
from hetopt.planfile import PLAN_FORMAT, PLAN_VERSION, model_shape

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "docs" / "plan.schema.json").read_text())
INPUTS = ROOT / "tests" / "golden" / "export" / "inputs"
PLAN = INPUTS / "plan-tangram-c2-gpt3-1.3b-target-megatron.json"


@pytest.fixture(scope="module")
def fresh() -> dict:
    """A plan document as `hetopt plan --json` prints it today."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["plan", "--cluster", "tangram-c1", "--model", "gpt3-1.3b", "--global-batch", "16", "--workers", "1",
                         "--json"]) == 0
    return json.loads(out.getvalue())


def test_the_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_a_fresh_plan_keeps_to_the_schema_and_carries_its_model_and_nodes(fresh: dict) -> None:
    jsonschema.validate(fresh, SCHEMA)
    assert list(fresh)[:2] == ["format", "version"] and (fresh["format"], fresh["version"]) == (PLAN_FORMAT, PLAN_VERSION)
    assert fresh["model_shape"] == model_shape(hetopt.planner.request.as_model("gpt3-1.3b"))
    assert [n["name"] for n in fresh["nodes"]] == [f"{t}-{k}" for t in ("t4", "v100") for k in range(4)]
    members = {m for island in fresh["islands"] for m in island["members"]}
    assert members <= {n["name"] for n in fresh["nodes"]}


@pytest.mark.parametrize("path", sorted(INPUTS.glob("plan-*.json")) + [ROOT / "tests" / "fixtures" / "draw" / "plan.json"],
                         ids=lambda p: p.stem)
def test_every_committed_plan_keeps_to_the_schema(path: Path) -> None:
    jsonschema.validate(json.loads(path.read_text()), SCHEMA)


def test_a_plan_without_its_model_shape_breaks_the_schema(fresh: dict) -> None:
    doc = {k: v for k, v in fresh.items() if k != "model_shape"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMA)


def _edited(tmp_path: Path, edit) -> Path:
    doc = json.loads(PLAN.read_text())
    edit(doc)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))  # json writes NaN as NaN, as an edited file would hold it
    return path


def _set(key: str, value):
    return lambda doc: doc.__setitem__(key, value)


def _shape(key: str, value):
    return lambda doc: doc["model_shape"].__setitem__(key, value)


REFUSED = [
    ("version 2", _set("version", 2), "version: plan format version 2, this hetopt reads version 1"),
    ("no version", lambda doc: doc.pop("version"), "version: plan format version None, this hetopt reads version 1"),
    ("old plan", lambda doc: doc.pop("format"), "format: missing: a plan written before plans carried their format"),
    ("other format", _set("format", "tangram"), "format: 'tangram' is not 'hetopt-plan'"),
    ("NaN time", _set("iteration_time_s", float("nan")), "iteration_time_s: not a finite number"),
    ("inf stage", lambda doc: doc["stages"][2].__setitem__("memory_gib", float("inf")),
     "stages[2].memory_gib: not a finite number"),
    ("edited hidden", _shape("hidden", 4096), "model_shape: edited (parameters"),
    ("edited vocab", _shape("vocab", 32000), "model_shape: edited (parameters"),
    ("edited sequence", _shape("sequence", 4096), "model_shape: edited (parameters"),
    ("edited digest only", _shape("source", "elsewhere"), "model_shape: edited (its digest is not the shape's)"),
    ("bad shape", _shape("heads", 0), "model_shape.heads: must be >= 1"),
    ("no shape", lambda doc: doc.pop("model_shape"), "model_shape: missing or not an object"),
    ("renamed", _set("model", "GPT-3 2.7B"), "model: 'GPT-3 2.7B' is not model_shape.name 'GPT-3 1.3B'"),
]


@pytest.mark.parametrize("edit, says", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_export_refuses_with_one_line(edit, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _edited(tmp_path, edit)
    code = cli.main(["export", str(path), "--to", "megatron", "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"{path}: {says}" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("edit, says", [r[1:] for r in REFUSED if r[0] in ("version 2", "old plan", "NaN time",
                                                                            "edited hidden")],
                         ids=["version 2", "old plan", "NaN time", "edited hidden"])
def test_draw_refuses_with_one_line(edit, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    path = _edited(tmp_path, edit)
    code = cli.main(["draw", str(path), "-o", str(tmp_path / "plan.svg")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and says in err, err


def test_draw_reads_the_plan_alone(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    assert cli.main(["draw", str(PLAN), "-o", str(tmp_path / "plan.svg")]) == 0


def test_the_python_api_exports_a_heteroplan(tmp_path: Path) -> None:
    plan = hetopt.plan("tangram-c2", "gpt3-1.3b", global_batch=16, target="megatron", alternatives=False)
    out = hetopt.export(plan, to="megatron", out=tmp_path / "run")
    assert out.one_job and (tmp_path / "run" / "launch.sh").exists() and (tmp_path / "run" / "megatron.args").exists()
    assert "--hidden-size 2048" in out.files["megatron.args"]
    # the same from its JSON document, and through the module's own function
    from hetopt.jsonout import plain

    assert hetopt.export.export(plain(plan), "megatron").files == out.files


def test_the_python_api_exports_an_allocation_result() -> None:
    result = hetopt.solve(hetopt.load(ROOT / "instances" / "allocation" / "tiny-uneven.toml"), method="dp")
    assert set(hetopt.export(result, to="cephalo").files) == {"cephalo_config.json", "ranks.txt"}


def test_the_python_api_refuses_what_is_not_a_plan() -> None:
    with pytest.raises(InputError, match="a list, not a plan"):
        hetopt.export([1, 2], to="megatron")


def test_the_schema_states_every_running_setting_by_its_file_key():
    """The plan document keeps how the layout runs whole (issue 39): the schema's ``running`` is
    the running record's table, key for key."""
    from hetopt.costmodel.running import KEYS

    running = SCHEMA["properties"]["running"]
    assert set(running["properties"]) == set(running["required"]) == {k.file for k in KEYS}
    assert "running" in SCHEMA["required"]
