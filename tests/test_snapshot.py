"""The numbers the shipped instances and the README's commands give, recorded once and held.

A structural change (issue 24) must not move an answer. This test runs the command line in
process on every shipped instance (`solve`, the default method), every shipped published set
(`validate`) and the README's quick `plan` commands, keeps the numbers that a user reads
(status, objective, per-stage layout and time, alternatives, predicted throughput), and compares
them with ``tests/golden/snapshot.json`` to 1e-9 relative.

A change that is meant to move a number (a cost-model fix) re-records the file and says why in
its commit::

    python tests/test_snapshot.py --write

The two instances that take longer than a few seconds (``scale-16x128``) are left out.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "snapshot.json"
SLOW_INSTANCES = {"scale-16x128.toml"}
FAMILIES = ("allocation", "pipeline", "islands", "replicas")
PUBLISHED = sorted(p.stem for p in (ROOT / "instances" / "published").glob("*.toml"))
PLANS = {  # the README's plan commands that answer in seconds
    "tangram-c3-gpt3-13b": ["--cluster", "tangram-c3", "--model", "gpt3-13b", "--global-batch", "128"],
    "cephalo-a-gpt3-2.7b": ["--cluster", "cephalo-a", "--model", "gpt3-2.7b", "--global-batch", "128",
                            "--seq", "512"],
    "tangram-c2-gpt3-1.3b-m4": ["--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "128",
                                "--microbatch", "4"],
    "tangram-c1-gpt3-6.7b-layout": ["--cluster", "tangram-c1", "--model", "gpt3-6.7b", "--global-batch", "128",
                                    "--layout", "t4-0+3: layers=8 tp=4 pp=2 dp=2 mbs=1 recompute=full; "
                                    "v100-0+3: layers=24 tp=4 pp=2 dp=2 mbs=1 recompute=full"],
}


def _run(argv: list[str]) -> dict:
    """The command's ``--json`` document, run in this process."""
    from hetopt.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*argv, "--json"])
    assert code in (0, 1, 3), (argv, code)  # 1: INFEASIBLE, 3: limit
    return json.loads(out.getvalue())


def solve_numbers(path: Path) -> dict:
    doc = _run(["solve", str(path)])
    return {"status": doc.get("status"), "objective": doc.get("objective"), "method": doc.get("method")}


def validate_numbers(name: str) -> dict:
    doc = _run(["validate", "--file", name])
    return {row["id"]: {"predicted": row["predicted"], "layout": row["layout"], "reason": row["reason"]}
            for row in doc["rows"]}


def plan_numbers(flags: list[str]) -> dict:
    doc = _run(["plan", *flags])
    given = doc.get("given_layout") or {}
    return {
        "status": doc["status"],
        "iteration_time_s": doc["iteration_time_s"],
        "bound_s": doc["bound_s"],
        "microbatch_size": doc["microbatch_size"],
        "best": doc["best"],
        "stages": [[s["island"], s["first_layer"], s["layers"], s["layout"], s["gpus"], s["time_s"]]
                   for s in doc["stages"]],
        "alternatives": {a["name"]: [a["status"], a["iteration_time_s"]] for a in doc["alternatives"]},
        "given_layout": given.get("iteration_time_s"),
    }


def cases() -> dict[str, tuple]:
    out = {}
    for family in FAMILIES:
        for path in sorted((ROOT / "instances" / family).glob("*.toml")):
            if path.name not in SLOW_INSTANCES:
                out[f"solve/{family}/{path.stem}"] = (solve_numbers, path)
    for name in PUBLISHED:
        out[f"validate/{name}"] = (validate_numbers, name)
    for name, flags in PLANS.items():
        out[f"plan/{name}"] = (plan_numbers, flags)
    return out


CASES = cases()


def _same(got, want, where: str) -> list[str]:
    """Every place where ``got`` differs from ``want`` (numbers to 1e-9 relative)."""
    if isinstance(want, dict) and isinstance(got, dict):
        diffs = [f"{where}: keys {sorted(set(got) ^ set(want))}"] if set(got) != set(want) else []
        return diffs + [d for k in want if k in got for d in _same(got[k], want[k], f"{where}.{k}")]
    if isinstance(want, list) and isinstance(got, list) and len(got) == len(want):
        return [d for i, (g, w) in enumerate(zip(got, want)) for d in _same(g, w, f"{where}[{i}]")]
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        return [] if math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12) else [f"{where}: {got!r} != {want!r}"]
    return [] if got == want else [f"{where}: {got!r} != {want!r}"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_recorded_numbers_hold(case):
    recorded = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert case in recorded, f"{case} is not recorded: python tests/test_snapshot.py --write"
    fn, arg = CASES[case]
    assert _same(fn(arg), recorded[case], case) == []


def test_every_recorded_case_still_runs():
    recorded = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert sorted(recorded) == sorted(CASES)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_snapshot.py --write")
    numbers = {name: fn(arg) for name, (fn, arg) in sorted(CASES.items())}
    GOLDEN.write_text(json.dumps(numbers, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(numbers)} cases to {GOLDEN.relative_to(ROOT)}")
