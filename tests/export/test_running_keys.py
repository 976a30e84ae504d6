"""Every running setting a plan was priced under reaches every export (issue 39): as the
runtime's own argument or key where it has one, else as a line of the export's README.

One test per setting and runtime: the plan document's ``running`` is set to a value other than
the default, the plan is exported as one job, and the setting's line is in the README; where
the table of :mod:`hetopt.export.running` names a flag, the flag is in the runtime's files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetopt.costmodel import running as run
from hetopt.costmodel.running import Running
from hetopt.export import export

INPUTS = Path(__file__).resolve().parents[1] / "golden" / "export" / "inputs"
#: One-job plans (searched with --target) per runtime, TP > 1 and DP > 1 where they have it.
PLANS = {"megatron": "plan-tangram-c2-gpt3-1.3b-target-megatron.json",
         "torchtitan": "plan-tangram-c2-llama-3-8b-target-torchtitan.json",
         "deepspeed": "plan-tangram-c3-gpt3-13b-target-deepspeed.json"}
#: A value of each setting other than the default (tf32: in an fp32 job, where it has an effect).
CHANGED = {"overlap": {"overlap": False}, "flash": {"flash": False}, "sp": {"sequence_parallel": False},
           "tpoverlap": {"tp_overlap": True}, "zero3gather": {"zero3_per_tensor": True},
           "precision": {"precision": "fp16"}, "tf32": {"precision": "fp32", "tf32": "auto"},
           "gradreduce": {"grad_fp32": True}, "handover": {"handover": "deepspeed"}, "host": {"host": "torch1"}}
#: The other values a runtime carries differently: each host stack but the default.
MORE = [("host", {"host": host}) for host in run.HOST_STACKS if host not in (run.DEFAULT_HOST, CHANGED["host"]["host"])]
CASES = [*CHANGED.items(), *MORE]


def test_every_setting_is_in_the_table():
    assert set(CHANGED) == set(run.TEXT_KEYS)
    assert {c["host"] for k, c in CASES if k == "host"} == set(run.HOST_STACKS) - {run.DEFAULT_HOST}


def _export(runtime: str, changes: dict, name: str | None = None):
    doc = json.loads((INPUTS / (name or PLANS[runtime])).read_text())
    for old in ("precision", "overlap", "grad_reduce_fp32", "handover", "host"):  # the documents' flat keys (one release)
        doc.pop(old, None)
    doc["running"] = Running(**{"precision": "bf16", **changes}).to_file()
    return export(doc, runtime, source=name or PLANS[runtime], allow_gaps=True)


@pytest.mark.parametrize("runtime", sorted(PLANS))
@pytest.mark.parametrize("key, changes", sorted(CASES, key=str),
                         ids=lambda v: v if isinstance(v, str) else ",".join(f"{k}={x}" for k, x in v.items()))
def test_a_setting_reaches_the_export_as_a_flag_or_a_readme_line(runtime, key, changes):
    from hetopt.export.running import carried
    from hetopt.export.source import plan_view

    out = _export(runtime, changes)
    doc = json.loads((INPUTS / PLANS[runtime]).read_text())
    doc.pop("precision", None)
    doc["running"] = Running(**{"precision": "bf16", **changes}).to_file()
    line = next(c for c in carried(plan_view(doc, "plan"), runtime) if c.key == key)
    text = out.files.get("README.md", "") + "\n".join(out.running)
    assert line.line() in text
    value = run.BY_TEXT[key].word(getattr(Running(**{"precision": "bf16", **changes}), run.BY_TEXT[key].field))
    assert f"`{key}={value}`" in text
    if line.flag is not None and (out.one_job or not line.flag.startswith("TORCH_")):  # an environment: launch.sh's
        assert any(line.flag.split("=")[0].strip() in body for name, body in out.files.items() if name != "README.md"), \
            (key, line.flag)


def test_tpoverlap_exports_to_megatron_with_its_argument():
    """The defect that started it: a plan priced with ``--runtime tpoverlap=yes`` exported to
    Megatron-LM without ``--tp-comm-overlap``."""
    tp2 = "plan-one-island-gshard-moe-2.4b-fsep-offload.json"  # tp2 with sequence parallelism
    (args,) = _export("megatron", {"tp_overlap": True}, tp2).files.values()
    assert "\n--tp-comm-overlap\n" in args
    (args,) = _export("megatron", {}, tp2).files.values()
    assert "--tp-comm-overlap" not in args
    # TP 1: Megatron-LM would refuse the argument; the README says the setting has no effect
    out = _export("megatron", {"tp_overlap": True})
    assert "--tp-comm-overlap" not in out.files["megatron.args"] and "`tpoverlap=yes`: no effect here" in out.files["README.md"]


def test_tf32_reaches_launch_sh_and_fp32_without_it_says_so():
    assert "export TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1" in _export("megatron", {"precision": "fp32", "tf32": "auto"}).files["launch.sh"]
    assert "export TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=0" in _export("megatron", {"precision": "fp32"}).files["launch.sh"]
    assert "TORCH_ALLOW_TF32" not in _export("megatron", {}).files["launch.sh"]


def test_a_plan_document_keeps_every_setting_it_was_priced_under():
    from hetopt import plan

    p = plan("tangram-c2", "gpt3-1.3b", global_batch=32, alternatives=False, runtime="tpoverlap=yes gradreduce=fp32")
    from hetopt.jsonout import plain

    doc = plain(p)
    assert doc["running"] == p.running.to_file() and doc["running"]["tp_comm_overlap"] is True
    assert Running.from_file(doc["running"], where="plan") == p.running
