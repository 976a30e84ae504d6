"""The command line and the solver API at their edges (issue 29): arguments checked by name,
formats that exclude each other, refusals before work, reading inside the limit, stdout closed
or full."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hetopt
from hetopt.cli import main
from hetopt.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "instances" / "allocation" / "tiny-2gpu.toml")
REPLICAS = str(ROOT / "instances" / "replicas" / "tiny.toml")


def synthetic_toml(groups: int) -> str:
    """An allocation file of ``groups`` one-GPU groups (several MB at 20,000)."""
    head = ('problem = "allocation"\nname = "big"\nglobal_batch = 40000\nmemory_fraction = 0.8\n'
            "activation_gib_per_sample = 0.01\nstate_gib = 10.0\naccumulation_overhead_s = 0.001\n"
            "allgather_s = 0.01\nreducescatter_s = 0.01\nuneven_shard_overhead = 0.25\nlayers = 32\n")
    return head + "".join(f'[[gpu]]\ntype = "G{g}"\ncount = 1\nmemory_gib = {16 + g % 7}\nmemory_base_gib = 2.0\n'
                          "forward_s = [0.001, 0.0019]\nbackward_s = [0.002, 0.0038]\n" for g in range(groups))


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---- the API -----------------------------------------------------------------------------------


def test_a_problem_name_is_not_an_instance():
    with pytest.raises(InputError, match=r"instance: 'allocation' is a name or a path") as err:
        hetopt.solve("allocation")
    assert err.value.field == "instance"
    with pytest.raises(InputError, match="instance: got an object of type int"):
        hetopt.solve(3)


def test_methods_are_names_not_lists_or_strings():
    inst = hetopt.load(TINY)
    with pytest.raises(InputError, match="method: must be a method name") as err:
        hetopt.solve(inst, ["dp"])
    assert err.value.field == "method"
    # a string would be read as its characters, the methods "d" and "p"
    with pytest.raises(InputError, match="methods: must be a list of method names") as err:
        hetopt.crosscheck(inst, "dp")
    assert err.value.field == "methods"


# ---- the command line --------------------------------------------------------------------------


def test_json_and_csv_exclude_each_other(capsys):
    code, out, err = run(capsys, "bench", TINY, "--json", "--csv")
    assert code == 2 and out == "" and "not allowed with argument" in err


def test_a_picture_the_problem_has_not_is_refused_before_solving(capsys, tmp_path):
    code, out, err = run(capsys, "solve", REPLICAS, "--draw", str(tmp_path / "x.svg"))
    assert code == 2 and out == ""  # nothing solved, nothing printed
    assert "no picture for 'replicas'" in err and len(err.strip().splitlines()) == 1


def test_reading_a_large_file_counts_inside_the_time_limit(capsys, tmp_path):
    big = tmp_path / "big.toml"
    big.write_text(synthetic_toml(20000))
    started = time.perf_counter()
    code, out, err = run(capsys, "solve", str(big), "--time-limit", "0.05", "--json")
    wall = time.perf_counter() - started
    assert code == 3, err
    doc = json.loads(out)
    assert doc["status"] == "TIME_LIMIT" and "not fully read" in doc["reason"]
    assert wall < 0.05 + 1.0  # reading 20,000 groups takes seconds


def test_a_time_limit_of_0_answers_at_once(capsys):
    code, out, _ = run(capsys, "solve", REPLICAS, "--time-limit", "0")
    assert code in (0, 3)  # a first plan, or none: at once either way


def _cli(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "hetopt", *args], capture_output=False, text=True,
                          stderr=subprocess.PIPE, **kwargs)


def test_a_closed_stdout_is_one_line_and_exit_2():
    run_ = _cli("solve", TINY, stdout=None, close_fds=True, preexec_fn=lambda: __import__("os").close(1))
    assert run_.returncode == 2, run_.stderr
    assert "stdout is closed" in run_.stderr and "Traceback" not in run_.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_a_full_disk_is_one_line_and_exit_2():
    with open("/dev/full", "w") as full:
        run_ = _cli("solve", TINY, "--json", stdout=full)
    assert run_.returncode == 2, run_.stderr
    assert "No space left on device" in run_.stderr and "Traceback" not in run_.stderr
    assert len(run_.stderr.strip().splitlines()) == 1
