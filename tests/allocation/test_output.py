"""The human table groups identical GPUs; the JSON keeps one entry per GPU."""

from __future__ import annotations

import json
from pathlib import Path

import hetopt
from hetopt.cli import main

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_B = ROOT / "instances" / "allocation" / "cephalo-b-gpt3-6.7b-b1024-measured.toml"


def test_rows_group_identical_gpus_and_account_for_every_gpu():
    r = hetopt.solve(hetopt.load(CLUSTER_B), "dp")
    rows = r.solution.rows()
    assert len(rows) < 10  # 64 GPUs of 3 types
    assert sum(row["count"] for row in rows) == len(r.solution.gpus) == 64
    assert sum(row["count"] * row["batch"] for row in rows) == 1024
    seen = []
    for row in rows:
        members = [p for i, p in enumerate(r.solution.gpus) if i in _indices(row["gpus"])]
        assert len(members) == row["count"]
        assert {(p.type, p.microbatch_size, p.microbatches, 100.0 * p.state_share) for p in members} == {
            (row["type"], row["mb_size"], row["mb_count"], row["state %"])
        }
        seen += _indices(row["gpus"])
    assert sorted(seen) == list(range(64))


def _indices(text):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def test_different_gpus_keep_their_own_rows():
    r = hetopt.solve(hetopt.load(ROOT / "instances" / "allocation" / "tiny-2gpu.toml"), "dp")
    assert [row["gpus"] for row in r.solution.rows()] == ["0", "1"]
    assert r.solution.summary()[0].endswith("2 GPUs, global batch 8 (identical GPUs share a row)")


def test_cli_prints_grouped_rows_and_json_keeps_every_gpu(capsys):
    assert main(["solve", str(CLUSTER_B)]) == 0
    out = capsys.readouterr().out
    assert out.count("V100-SXM2-16GB") == 1 and "0-15" in out
    assert main(["solve", str(CLUSTER_B), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["solution"]["gpus"]) == 64
