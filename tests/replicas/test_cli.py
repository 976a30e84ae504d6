"""hetopt solve / crosscheck / bench on the shipped replicas instances."""

from __future__ import annotations

import json

from hetopt.cli import main

from .conftest import INSTANCES

TINY = str(INSTANCES / "tiny.toml")


def test_solve_json(capsys):
    assert main(["solve", TINY, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["problem"] == "replicas" and doc["status"] == "OPTIMAL"
    replicas = doc["solution"]["replicas"]
    assert sum(r["microbatches"] for r in replicas) == 8
    assert doc["objective"] >= max(r["time_s"] for r in replicas)


def test_solve_table(capsys):
    assert main(["solve", TINY, "--method", "milp"]) == 0
    out = capsys.readouterr().out
    assert "OPTIMAL" in out and "replicas;" in out


def test_crosscheck_agrees(capsys):
    assert main(["crosscheck", TINY, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["agree"] is True
    assert {r["method"] for r in doc["results"]} >= {"dp", "milp", "cpsat", "bruteforce", "greedy"}


def test_infeasible_exits_1(capsys):
    assert main(["solve", str(INSTANCES / "tiny-infeasible.toml")]) == 1


def test_bench_suite(capsys):
    suite = INSTANCES.parent / "suites" / "replicas.toml"
    assert main(["bench", str(suite), "--json", "--methods", "dp,greedy"]) == 0
    rows = json.loads(capsys.readouterr().out)
    names = {r["instance"] for r in rows}
    assert {"tiny", "tiny-infeasible", "datacenter-512-gpt3-175b-b1536"} <= names
    assert all(r["status"] in ("OPTIMAL", "FEASIBLE", "INFEASIBLE") for r in rows)
    assert all(r["status"] == "OPTIMAL" for r in rows if r["method"] == "dp" and r["instance"] != "tiny-infeasible")


def test_methods_lists_the_family(capsys):
    assert main(["methods"]) == 0
    assert "replicas: auto (= dp)" in capsys.readouterr().out
