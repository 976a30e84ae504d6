"""``hetopt export PLAN --alternative mixed-stages`` (issue 45 item 2): the mixed-stages plan as one
job of a runtime where every member of every stage keeps its job-wide settings, else exit 2 with the
rules it breaks."""

from __future__ import annotations

import copy
import json

import pytest

from hetopt import cli
from hetopt.errors import InputError
from hetopt.export import export

#: One job of Megatron-LM: every replica tp1 holding 1 sample, 2 replicas in each stage.
KEEPS = "L4: layers=12 tp=1 replicas=2 mbs=1; A6000: layers=12 tp=1 replicas=1 mbs=1 + P40: tp=1 replicas=1 mbs=1"


@pytest.fixture(scope="module")
def doc() -> dict:
    """A plan with the mixed-stages row (its own plan: TP and shares differ) and a mixed layout priced beside it."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["plan", "--cluster", "cephalo-a", "--model", "gpt3-1.3b", "--seq", "512", "--workers", "1",
                         "--global-batch", "32", "--microbatch", "2", "--mixed-stages", "--layout", KEEPS, "--json"]) == 0
    return json.loads(out.getvalue())


def row(d: dict) -> dict:
    return next(a for a in d["alternatives"] if a["name"] == "mixed-stages")


def keeping(doc: dict) -> dict:
    """The document with the given layout's plan (as the planner priced it) as the mixed-stages row's."""
    d = copy.deepcopy(doc)
    row(d)["plan"] = d["given_layout"]["plan"]
    return d


def test_a_mixed_plan_that_keeps_the_rules_is_one_megatron_job(doc):
    out = export(keeping(doc), "megatron", alternative="mixed-stages")
    assert out.one_job and {"megatron.args", "launch.sh", "hostfile", "README.md"} <= set(out.files)
    args = out.files["megatron.args"]
    for line in ("--tensor-model-parallel-size 1", "--micro-batch-size 1", "--pipeline-model-parallel-size 2",
                 "--global-batch-size 32", "--num-layers 24"):
        assert line in args.splitlines()
    # stage 0 on the L4 node, stage 1 on the A6000 and a P40 (whole nodes, in the file's order)
    hosts = [line for line in out.files["hostfile"].splitlines() if not line.startswith("#")]
    assert hosts == ["m1-l4 slots=2", "m1-a6000 slots=1", "m1-p40 slots=1"]


@pytest.mark.parametrize("to, words", [
    ("megatron", "data-parallel size differs"),
    ("deepspeed", "micro-batch size per replica differs"),
    ("torchtitan", "bf16 on GPUs with BF16"),
    ("cephalo", "cephalo-fsdp"),
])
def test_a_mixed_plan_a_runtime_cannot_run_is_refused_with_the_rule(doc, to, words):
    """The row's own plan: S0[2×L4 y1] → S1[1×A6000 y2] has 2 and 1 replicas, 1 and 2 samples a replica."""
    assert len({m["replicas"] for st in row(doc)["plan"]["stages"] for m in st["members"]}) > 1
    with pytest.raises(InputError) as info:
        export(doc, to, alternative="mixed-stages", source="p.json")
    assert f"p.json: the mixed-stages plan is not one" in str(info.value) and words in str(info.value)


def test_the_command_line_refuses_in_one_line(tmp_path, doc, capsys):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    assert cli.main(["export", str(path), "--to", "megatron", "--alternative", "mixed-stages"]) == 2
    err = capsys.readouterr().err
    assert "--micro-batch-size" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    path.write_text(json.dumps(keeping(doc)))
    assert cli.main(["export", str(path), "--to", "megatron", "--alternative", "mixed-stages", "-o", str(tmp_path / "x")]) == 0
    assert (tmp_path / "x" / "megatron.args").is_file()


def test_a_plan_without_the_mixed_row_says_how_to_get_it(doc):
    d = copy.deepcopy(doc)
    d["alternatives"] = [a for a in d["alternatives"] if a["name"] != "mixed-stages"]
    with pytest.raises(InputError, match="--mixed-stages"):
        export(d, "megatron", alternative="mixed-stages")
    d = copy.deepcopy(doc)
    row(d)["plan"]["stages"][0]["members"][0]["samples"] += 1  # an edited plan
    with pytest.raises(InputError, match="does not add up"):
        export(d, "megatron", alternative="mixed-stages")


def test_only_the_mixed_stages_alternative_is_exported_so(doc):
    with pytest.raises(InputError, match="only a plan's mixed-stages alternative") as info:
        export(doc, "megatron", alternative="cephalo-fsdp")
    assert info.value.field == "alternative"
