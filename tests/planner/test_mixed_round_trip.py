"""The mixed-stages plan read back (issue 45 item 2): ``plan --mixed-stages --json`` gives the plan as
data and as ``--layout`` text; ``plan --layout TEXT`` prices it to the same time."""

from __future__ import annotations

import json
import math

import pytest

from hetopt.cli import main
from hetopt.errors import InputError
from hetopt.planner.alternatives.mixedplan import is_mixed_text, parse_mixed_layout

#: A small two-type cluster (L4 + A6000) where the mixed row plans in seconds.
SMALL = ["plan", "--cluster", "cephalo-a", "--model", "gpt3-2.7b", "--seq", "512", "--workers", "1", "--global-batch", "32"]
#: Sailor's a4v4 at one micro-batch size: its mixed plan holds A100 and V100 replicas in one stage.
SAILOR = ["plan", "--cluster", "sailor-a4v4", "--model", "opt-350m", "--workers", "1", "--global-batch", "1024",
          "--microbatch", "128"]


def _json(capsys, args: list[str]) -> dict:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _mixed(doc: dict) -> dict:
    row = next(a for a in doc["alternatives"] if a["name"] == "mixed-stages")
    assert row["status"] == "FEASIBLE", row
    return row


def _check_plan_data(doc: dict, row: dict) -> None:
    """The row's plan says what its detail and time say: the stages tile the model, each stage's
    members hold one micro-batch, its GPUs by type are the row's, its time is the closed form."""
    plan = row["plan"]
    assert plan["kind"] == "mixed-stages" and plan["iteration_time_s"] == row["iteration_time_s"]
    b, M = plan["microbatch_size"], plan["microbatches"]
    assert b * M == doc["global_batch"] and f"b={b}" in row["detail"]
    first, used = 0, {}
    for st in plan["stages"]:
        assert st["first_layer"] == first and st["layers"] >= 1
        first += st["layers"]
        assert sum(m["samples"] for m in st["members"]) == b
        for m in st["members"]:
            low = m["samples"] // m["replicas"]
            assert m["shares"] == ([low] if m["samples"] % m["replicas"] == 0 else [low, low + 1])
            assert m["gpus"] == m["replicas"] * m["tp"] and 0 < m["memory_gib"] <= m["capacity_gib"] * (1 + 1e-9)
            assert m["time_s"] <= st["compute_s"] * (1 + 1e-12)
            used[m["gpu"]] = used.get(m["gpu"], 0) + m["gpus"]
        assert st["time_s"] >= st["compute_s"] and st["gpus"] == sum(m["gpus"] for m in st["members"])
    assert first == doc["model_shape"]["layers"] and used == row["gpus_by_type"]
    times, S = [st["time_s"] for st in plan["stages"]], len(plan["stages"])
    closed = sum(times) + (S - 1) * plan["link_s"] + (M - 1) * max(max(times), plan["link_s"])
    assert math.isclose(closed, plan["iteration_time_s"], rel_tol=1e-12)


@pytest.mark.parametrize("runtime", [None, "precision=fp32 tf32=auto"])
def test_the_mixed_plan_round_trips_through_layout(capsys, runtime):
    """``plan --mixed-stages --json`` → its ``layout`` text → ``plan --layout TEXT`` prices the same plan
    to 1e-9 (the running settings ride in the text, so the second run needs no --runtime)."""
    extra = [] if runtime is None else ["--runtime", runtime]
    doc = _json(capsys, [*SMALL, "--microbatch", "2", "--mixed-stages", *extra])
    row = _mixed(doc)
    _check_plan_data(doc, row)
    text = row["plan"]["layout"]
    assert is_mixed_text(text)
    if runtime is not None:
        assert "precision=fp32" in text and "tf32=auto" in text
    again = _json(capsys, [*SMALL, "--layout", text])
    given = again["given_layout"]
    assert given["fits"] and given["layout"] == text
    assert math.isclose(given["iteration_time_s"], row["iteration_time_s"], rel_tol=1e-9)
    assert given["plan"]["stages"] == row["plan"]["stages"]
    assert again["running"] == doc["running"]  # the plan beside it runs as the layout says


def test_a_stage_of_two_gpu_types_round_trips(capsys):
    """On Sailor's a4v4 the mixed plan puts A100 and V100 replicas in one stage, with different TP
    and shares: its text carries both, and prices back to 1e-9."""
    doc = _json(capsys, [*SAILOR, "--mixed-stages"])
    row = _mixed(doc)
    _check_plan_data(doc, row)
    assert any(len(st["members"]) == 2 for st in row["plan"]["stages"])
    text = row["plan"]["layout"]
    assert " + " in text and "A100-SXM4-40GB:" in text and "V100-SXM2-16GB:" in text
    given = _json(capsys, [*SAILOR[:-2], "--layout", text])["given_layout"]
    assert given["fits"] and math.isclose(given["iteration_time_s"], row["iteration_time_s"], rel_tol=1e-9)


def test_a_stage_cut_inside_a_block_is_priced_on_finer_blocks(capsys):
    """A stage boundary the planner's blocks do not have (layer 6, blocks of 4) is priced with the
    blocks also cut there; moving layers from the slower stage to the faster one changes the time."""
    base = "L4: layers={a} tp=2 replicas=1 mbs=2; A6000: layers={b} tp=1 replicas=1 mbs=2"
    times = {}
    for a in (6, 16):
        g = _json(capsys, [*SMALL, "--layout", base.format(a=a, b=32 - a)])["given_layout"]
        assert g["fits"], g
        assert [st["layers"] for st in g["plan"]["stages"]] == [a, 32 - a]
        times[a] = g["iteration_time_s"]
    assert times[6] != times[16]


def test_a_plan_that_does_not_fit_is_reported_not_refused(capsys):
    """Every sample of a large micro-batch on one L4 replica: the layout is priced, and does not fit."""
    g = _json(capsys, [*SMALL, "--layout", "L4: layers=32 tp=1 replicas=1 mbs=32"])["given_layout"]
    assert not g["fits"] and g["iteration_time_s"] is None and "memory" in g["reason"]


@pytest.mark.parametrize("text, words", [
    ("L4: layers=32 tp=2 replicas=1 mbs=2 + A6000: layers=32 tp=1 replicas=1 mbs=2", "layers= is given twice"),
    ("L4: tp=2 replicas=1 mbs=2", "layers=K"),
    ("L4: layers=32 tp=2 replicas=1", "one of mbs"),
    ("L4: layers=32 tp=2 replicas=1 mbs=1 samples=1", "one of mbs"),
    ("L4: layers=32 replicas=2 mbs=1", "give tp"),
    ("L4: layers=32 tp=2 replicas=3 samples=2", "every replica holds one at least"),
    ("L4: layers=16 tp=2 replicas=1 mbs=2 + L4: tp=1 replicas=1 mbs=1; A6000: layers=16 tp=1 replicas=1 mbs=3",
     "given twice in stage 0"),
    ("L4: layers=16 tp=2 replicas=1 mbs=2; A6000: layers=16 tp=1 replicas=1 mbs=3", "the same micro-batch"),
    ("layers=32 tp=2 replicas=1 mbs=2", "give the GPU type first"),
    ("L4: layers=32 tp=2 replicas=1 mbs=2 flash=no + A6000: tp=1 replicas=1 mbs=2 flash=no", "flash=no: given twice"),
    ("L4: layers=32 tp=0 replicas=1 mbs=2", "tp=0: must be a whole number >= 1"),
    ("L4: layers=32 tp=2 replicas=1 mbs=2 pp=2", "unknown key 'pp'"),
])
def test_bad_mixed_layouts_name_the_part(text, words):
    with pytest.raises(InputError) as info:
        parse_mixed_layout(text)
    assert words in str(info.value) and info.value.field == "layout"


@pytest.mark.parametrize("text, words", [
    ("H100: layers=32 tp=1 replicas=1 mbs=2", "not a GPU type of cephalo-a"),
    ("L4: layers=32 tp=3 replicas=1 mbs=2", "tp=3 is not priced"),
    ("L4: layers=30 tp=2 replicas=1 mbs=2", "add up to 30"),
    ("L4: layers=32 tp=2 replicas=1 mbs=3", "does not divide the global batch 32"),
])
def test_a_mixed_layout_the_cluster_cannot_take_exits_2(capsys, text, words):
    assert main([*SMALL, "--layout", text]) == 2
    err = capsys.readouterr().err
    assert words in err and "--layout" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
