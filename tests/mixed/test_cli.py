"""hetopt solve / crosscheck on the shipped mixed instances."""

from __future__ import annotations

import json

from hetopt.cli import main

from .conftest import INSTANCES

TINY = str(INSTANCES / "tiny.toml")
MIXED = str(INSTANCES / "a100x6-v100x4-l3.toml")


def test_solve_json(capsys):
    assert main(["solve", TINY, "--method", "dp", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["problem"] == "mixed" and doc["status"] == "OPTIMAL"
    stages = doc["solution"]["stages"]
    assert stages[0]["layers"][0] == 0 and stages[-1]["layers"][1] == 3


def test_solve_table_shows_mixed_stages(capsys):
    assert main(["solve", MIXED, "--method", "dp"]) == 0
    out = capsys.readouterr().out
    assert "OPTIMAL" in out and "A100" in out and "+ 1×V100 tp4 y3" in out


def test_crosscheck_agrees(capsys):
    assert main(["crosscheck", TINY, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["agree"] is True
    assert {r["method"] for r in doc["results"]} == {"dp", "milp", "bruteforce"}


def test_infeasible_exits_1(tmp_path):
    """1 MiB per GPU holds no layer: every method proves it."""
    lines = (INSTANCES / "tiny.toml").read_text(encoding="utf-8").splitlines()
    assert any(line.startswith("memory_gib") for line in lines)
    path = tmp_path / "small-memory.toml"
    path.write_text("\n".join("memory_gib = 0.001" if line.startswith("memory_gib") else line for line in lines) + "\n",
                    encoding="utf-8")
    for method in ("dp", "milp", "bruteforce"):
        assert main(["solve", str(path), "--method", method]) == 1


def test_methods_lists_the_family(capsys):
    assert main(["methods"]) == 0
    assert "mixed: auto (= dp)" in capsys.readouterr().out


def test_bench_suite(capsys):
    suite = INSTANCES.parent / "suites" / "mixed.toml"
    assert main(["bench", str(suite), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["instance"] for r in rows} == {"tiny", "a100x6-v100x8-l3", "a100x6-v100x4-l3", "a100x4-v100x8-l8"}
    assert all(r["status"] == "OPTIMAL" and r["agree"] for r in rows), rows
