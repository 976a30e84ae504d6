"""Malformed allocation files: exit 2, one line naming the file, the key path and the fix."""

from __future__ import annotations

import json

import pytest

from hetopt.cli import main

GOOD = """
problem = "allocation"
name = "x"
global_batch = 8
activation_gib_per_sample = 0.5
state_gib = 10.0

[[gpu]]
type = "A6000"
count = 1
memory_gib = 48.0
memory_base_gib = 2.0
forward_s = [0.010, 0.018, 0.026]
backward_s = [0.020, 0.036, 0.052]
"""


def run(tmp_path, capsys, text, *args):
    path = tmp_path / "x.toml"
    path.write_text(text)
    code = main(["solve", str(path), *args])
    out, err = capsys.readouterr()
    return code, out, err, str(path)


def test_good_file_solves(tmp_path, capsys):
    code, out, err, _ = run(tmp_path, capsys, GOOD, "--json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert doc["status"] == "OPTIMAL"
    gpus = doc["solution"]["gpus"]
    assert sum(g["batch"] for g in gpus) == 8
    assert {"type", "microbatch_size", "microbatches", "batch", "state_share", "time_s"} <= set(gpus[0])


@pytest.mark.parametrize(
    ("edit", "key", "words"),
    [
        (lambda t: t.replace("global_batch = 8", "global_batch = 0"), "global_batch", "must be between 1 and 1048576 (got 0)"),
        (lambda t: t.replace("global_batch = 8", "global_batch = 1000000000"), "global_batch", "must be between 1 and 1048576"),
        (lambda t: t.replace("global_batch = 8", 'global_batch = "8"'), "global_batch", "whole number"),
        (lambda t: t.replace("memory_gib = 48.0", "memory_gib = -4.0"), "gpu[0].memory_gib", "must be in (0, 1048576] GiB (got -4)"),
        (lambda t: t.replace("count = 1", "count = 0"), "gpu[0].count", "must be between 1 and 100000 (got 0)"),
        (lambda t: t.replace("state_gib = 10.0\n", ""), "state_gib", "missing"),
        (lambda t: t.replace("forward_s = [0.010, 0.018, 0.026]", "forward_s = [0.010]"), "gpu[0].forward_s", "two points"),
        (lambda t: t.replace("forward_s = [0.010, 0.018, 0.026]", "forward_s = [0.010, -0.018]"), "gpu[0].forward_s[1]", "must be in [1e-06, 2000] s (got -0.018)"),
        (lambda t: t.replace("forward_s = [0.010, 0.018, 0.026]", "forward_s = [0.03, 0.02]"), "gpu[0].forward_s", "gives -0.04 s at micro-batch 8, which memory allows"),
        (lambda t: t + "forward_slope_s = 0.01\n", "gpu[0].forward_intercept_s", "give both"),
        (lambda t: t.replace("memory_base_gib", "memory_bas_gib"), "gpu[0].memory_bas_gib", "did you mean 'memory_base_gib'"),
        (lambda t: t + "max_microbatch = 500\n", "gpu[0].max_microbatch", "exceeds"),
        (lambda t: t.replace('problem = "allocation"', 'problem = "alocation"'), "problem", "unknown problem"),
        (lambda t: t.replace("[[gpu]]", "[gpux]"), "gpux", "did you mean 'gpu'"),
        (lambda t: t.split("[[gpu]]")[0], "gpu", "missing: give at least one [[gpu]]"),
        (lambda t: t.replace("global_batch = 8", "global_batch = 8\nmemory_fraction = 1.5"), "memory_fraction", "must be in (0, 1] (got 1.5)"),
        (lambda t: t.replace("name = \"x\"", "name = \"x"), None, "not valid TOML"),
    ],
)
def test_malformed_files_exit_2_with_the_key(tmp_path, capsys, edit, key, words):
    code, out, err, path = run(tmp_path, capsys, edit(GOOD))
    assert code == 2, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert path in lines[0] and words in lines[0]
    if key is not None:
        assert f": {key}:" in lines[0]


def test_missing_file_and_folder(tmp_path, capsys):
    assert main(["solve", str(tmp_path / "nope.toml")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["solve", str(tmp_path)]) == 2
    assert "folder" in capsys.readouterr().err


def test_unknown_method_lists_the_valid_ones(tmp_path, capsys):
    code, _, err, _ = run(tmp_path, capsys, GOOD, "--method", "simplex")
    assert code == 2 and "unknown method 'simplex'" in err and "dp-faithful" in err


def test_infeasible_exits_1_with_the_reason(capsys):
    from hetopt.catalog import instances_dir

    path = instances_dir() / "allocation" / "tiny-infeasible.toml"
    for method in ("dp", "dp-faithful", "milp", "cpsat", "bruteforce"):
        assert main(["solve", str(path), "--method", method, "--json"]) == 1
        doc = json.loads(capsys.readouterr().out)
        assert doc["status"] == "INFEASIBLE"
        assert doc["reason"].startswith("(III) training state 41.3 GiB plus the smallest activations need")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (GOOD.replace("global_batch = 8", "global_batch = 1").replace("count = 1", "count = 2"), "smaller than the 2 GPUs"),
        (GOOD.replace("memory_gib = 48.0", "memory_gib = 2.0"), "(II) a A6000 cannot hold one sample"),
    ],
)
def test_other_infeasibility_reasons(tmp_path, capsys, text, reason):
    code, out, _, _ = run(tmp_path, capsys, text, "--json")
    assert code == 1
    assert reason in json.loads(out)["reason"]
