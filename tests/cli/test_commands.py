"""The command line: solve, crosscheck, bench and generate, as a user runs them."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hetopt.cli import main

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "instances" / "allocation" / "tiny-2gpu.toml"
UNEVEN = ROOT / "instances" / "allocation" / "tiny-uneven.toml"


def test_solve_prints_the_plan(capsys):
    assert main(["solve", str(TINY)]) == 0
    out = capsys.readouterr().out
    assert "OPTIMAL" in out and "A6000" in out and "T4" in out and "iteration time" in out


def test_solve_json_is_one_document_with_the_result_fields(capsys, tmp_path):
    target = tmp_path / "r.json"
    assert main(["solve", str(UNEVEN), "--json", "--method", "milp", "--out", str(target)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"problem", "method", "status", "objective", "bound", "gap", "solution", "wall_s", "stats", "reason"}
    assert json.loads(target.read_text()) == doc
    assert len(doc["solution"]["gpus"]) == 3


def test_python_m_hetopt_prints_json_only(tmp_path):
    # HiGHS prints a banner on its first use in a process: it must not reach stdout
    proc = subprocess.run(
        [sys.executable, "-m", "hetopt", "solve", str(TINY), "--method", "milp", "--json"],
        capture_output=True, text=True, check=True,
    )
    assert json.loads(proc.stdout)["status"] == "OPTIMAL"


def test_crosscheck_agrees_and_lists_every_method(capsys):
    assert main(["crosscheck", str(UNEVEN), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["agree"] is True
    assert [r["method"] for r in doc["results"]] == ["dp", "milp", "cpsat", "dp-faithful", "bruteforce"]
    assert len({round(r["objective"], 9) for r in doc["results"]}) == 1


def test_crosscheck_reports_a_disagreement(capsys, monkeypatch):
    # a method that claims a worse optimum must be caught: exit 1 and the two names
    import dataclasses

    import hetopt.solvers as solvers

    real = solvers.solve

    def lying(instance, method="auto", **options):
        r = real(instance, method, **options)
        return dataclasses.replace(r, objective=r.objective * 1.01) if method == "cpsat" else r

    monkeypatch.setattr(solvers, "solve", lying)
    assert main(["crosscheck", str(TINY), "--methods", "dp,cpsat"]) == 1
    out = capsys.readouterr().out
    assert "agree: NO" in out and "cpsat" in out


def test_bench_csv_and_json(capsys):
    assert main(["bench", str(TINY), str(UNEVEN), "--methods", "dp,milp", "--csv", "--repeat", "2"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["instance"], r["method"]) for r in rows] == [
        ("tiny-2gpu", "dp"), ("tiny-2gpu", "milp"), ("tiny-uneven", "dp"), ("tiny-uneven", "milp")
    ]
    assert all(r["status"] == "OPTIMAL" and r["agree"] == "True" for r in rows)
    assert main(["bench", str(TINY), "--methods", "dp", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc[0]["method"] == "dp" and len(doc[0]["wall_runs"]) == 1


def test_bench_suite_and_bad_suite(capsys, tmp_path):
    suite = tmp_path / "s.toml"
    suite.write_text(f'suite = "x"\nmethods = ["dp"]\n[[instance]]\npath = "{TINY}"\n')
    assert main(["bench", str(suite), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["instance"] == "tiny-2gpu"
    suite.write_text('suite = "x"\n[[instance]]\npath = "nope.toml"\n')
    assert main(["bench", str(suite)]) == 2
    err = capsys.readouterr().err
    assert "instance[0].path" in err and "no such file" in err


def test_generate_writes_the_shipped_instances(tmp_path, capsys):
    assert main(["generate", "allocation", "--out", str(tmp_path)]) == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert len(written) == 20
    for name in written:
        assert (tmp_path / name).read_text() == (ROOT / "instances" / "allocation" / name).read_text()


def test_usage_errors_exit_2(capsys):
    import pytest

    with pytest.raises(SystemExit) as exc:
        main(["solve"])
    assert exc.value.code == 2
    assert main(["solve", str(TINY), "--method", "dp", "--backend", "cbc"]) == 0  # ignored by dp


@pytest.mark.parametrize("argv", [["validate", "--file", "megatron-lm-readme-a100"],
                                  ["scaling", "--islands", "1", "--layers", "8"]])
def test_one_table_style_and_markdown_on_request(capsys, argv):
    """Issue 28: validate printed fixed-width columns and scaling Markdown; both now print the
    rich table every command prints, and Markdown only with --markdown."""
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "━╇━" in text and "|---|" not in text
    assert main([*argv, "--markdown"]) == 0
    text = capsys.readouterr().out
    assert "|---|" in text or "|--:|" in text
    assert "━╇━" not in text
