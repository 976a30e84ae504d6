"""``hetopt draw`` renders the mixed-stages plan (issue 45 item 2): a panel below the plan picture
with one bar per stage and GPU type, from the plan document alone."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

pytest.importorskip("matplotlib")

from hetopt.cli import main  # noqa: E402
from hetopt.draw import draw  # noqa: E402
from hetopt.errors import InputError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "tests" / "fixtures" / "draw" / "plan.json"
#: A mixed plan as ``plan_data`` writes it: two stages, the first of two GPU types (uneven shares).
MIXED = {"kind": "mixed-stages", "layout": "A: layers=2 tp=1 replicas=2 samples=5 + B: tp=2 replicas=1 mbs=3; "
                                           "B: layers=2 tp=1 replicas=2 mbs=4",
         "microbatch_size": 8, "microbatches": 2, "iteration_time_s": 0.9, "link_s": 0.01, "stages": [
             {"first_layer": 0, "layers": 2, "time_s": 0.3, "compute_s": 0.3, "sync_s": 0.0, "in_flight": 2, "gpus": 4,
              "members": [{"gpu": "A", "tp": 1, "replicas": 2, "samples": 5, "shares": [2, 3], "gpus": 2, "time_s": 0.3,
                           "memory_gib": 1.0, "capacity_gib": 16.0},
                          {"gpu": "B", "tp": 2, "replicas": 1, "samples": 3, "shares": [3], "gpus": 2, "time_s": 0.2,
                           "memory_gib": 1.0, "capacity_gib": 16.0}]},
             {"first_layer": 2, "layers": 2, "time_s": 0.2, "compute_s": 0.2, "sync_s": 0.1, "in_flight": 1, "gpus": 2,
              "members": [{"gpu": "B", "tp": 1, "replicas": 2, "samples": 8, "shares": [4], "gpus": 2, "time_s": 0.2,
                           "memory_gib": 2.0, "capacity_gib": 16.0}]}]}


def ids(path: Path) -> set[str]:
    return {el.get("id") for el in ElementTree.parse(path).getroot().iter() if el.get("id")}


def with_mixed(where: str) -> dict:
    doc = json.loads(PLAN.read_text())
    if where == "alternative":
        doc["alternatives"].append({"name": "mixed-stages", "iteration_time_s": 0.9, "detail": "S0[...]",
                                    "status": "FEASIBLE", "plan": copy.deepcopy(MIXED)})
    else:
        doc["given_layout"] = {"layout": MIXED["layout"], "iteration_time_s": 0.9, "fits": True, "reason": "",
                               "plan": copy.deepcopy(MIXED)}
    return doc


@pytest.mark.parametrize("where", ["alternative", "given_layout"])
def test_the_mixed_plan_has_a_bar_per_stage_and_type(tmp_path, where):
    found = ids(draw(with_mixed(where), tmp_path / "p.svg").path)
    assert {i for i in found if i.startswith("mixed-stage-")} == {"mixed-stage-0-A", "mixed-stage-0-B", "mixed-stage-1-B"}


def test_a_plan_without_a_mixed_plan_has_no_mixed_panel(tmp_path):
    picture = draw(json.loads(PLAN.read_text()), tmp_path / "p.svg")
    assert not any(i.startswith("mixed-stage-") for i in ids(picture.path))
    taller = draw(with_mixed("alternative"), tmp_path / "q.png")
    assert taller.height_px > draw(json.loads(PLAN.read_text()), tmp_path / "r.png").height_px


def test_a_malformed_mixed_plan_names_its_field(tmp_path):
    doc = with_mixed("alternative")
    del doc["alternatives"][-1]["plan"]["stages"][1]["members"][0]["replicas"]
    with pytest.raises(InputError) as info:
        draw(doc, tmp_path / "p.svg", source="p.json")
    assert "stages[1].members[0].replicas" in str(info.value) and "p.json" in str(info.value)


def test_plan_mixed_stages_draw_renders_the_panel(tmp_path, capsys):
    out = tmp_path / "plan.svg"
    assert main(["plan", "--cluster", "cephalo-a", "--model", "gpt3-2.7b", "--seq", "512", "--workers", "1",
                 "--global-batch", "32", "--microbatch", "2", "--mixed-stages", "--draw", str(out)]) == 0
    assert any(i.startswith("mixed-stage-0-") for i in ids(out))
