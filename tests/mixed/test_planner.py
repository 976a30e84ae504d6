"""The planner's mixed-stages alternative: its instance and its row."""

from __future__ import annotations

import json

from hetopt.cli import main

BASE = ["plan", "--cluster", "cephalo-a", "--model", "gpt3-2.7b", "--seq", "512", "--workers", "1"]


def test_plan_has_a_mixed_stages_row(capsys):
    assert main([*BASE, "--global-batch", "32", "--microbatch", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    row = next(a for a in doc["alternatives"] if a["name"] == "mixed-stages")
    assert row["status"] in ("FEASIBLE", "TIME_LIMIT", "DECLINED", "INFEASIBLE"), row
    if row["status"] == "FEASIBLE":  # a plan: its stages named, and never OPTIMAL (the tables approximate)
        assert row["iteration_time_s"] > 0 and "S0[" in row["detail"] and "b=2" in row["detail"]  # the fixed micro-batch
    else:
        assert row["iteration_time_s"] is None and row["detail"]


def test_more_gpu_types_than_the_family_takes_is_a_declined_row(monkeypatch, capsys):
    """A cluster of more types than ``MAX_TYPES`` gives a DECLINED row, not a crash."""
    import hetopt.mixed.problem as problem

    monkeypatch.setattr(problem, "MAX_TYPES", 1)
    assert main([*BASE, "--global-batch", "32", "--microbatch", "2", "--json"]) == 0
    row = next(a for a in json.loads(capsys.readouterr().out)["alternatives"] if a["name"] == "mixed-stages")
    assert row["status"] == "DECLINED" and "gpu" in row["detail"]
