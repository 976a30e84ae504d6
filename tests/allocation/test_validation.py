"""The instance constructor checks every field: API-built instances and files get the same error."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re

import pytest

import hetopt
from hetopt.allocation.limits import MAX_GLOBAL_BATCH, MIN_LATENCY_S
from hetopt.allocation.problem import GIB, AllocationInstance, GpuGroup, Latency
from hetopt.cli import main
from hetopt.errors import InputError
from hetopt.result import Status

from .test_io import GOOD

F = Latency((0.01, 0.018, 0.026))
B = Latency((0.02, 0.036, 0.052))
NAN = math.nan


def build(**changes):
    group = changes.pop("group", {})
    grp = dataclasses.replace(GpuGroup("A", 2, 16 * GIB, GIB, F, B), **group)
    fields = {"name": "x", "global_batch": 8, "groups": (grp,), "activation_bytes_per_sample": GIB, "state_bytes": 4 * GIB}
    fields.update(changes)
    return AllocationInstance(**fields)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"group": {"forward": Latency((0.01, NAN, 0.026))}}, "gpu[0].forward_s[1]: must be a number in [1e-06, 2000] s (got nan)"),
        ({"group": {"backward": Latency((0.02, math.inf))}}, "gpu[0].backward_s[1]: must be in"),
        ({"group": {"forward": Latency((-0.01, 0.02))}}, "gpu[0].forward_s[0]: must be in [1e-06, 1000] s (got -0.01)"),
        ({"group": {"forward": Latency((1e308, 1e308, 1e308))}}, "gpu[0].forward_s[0]: must be in [1e-06, 1000] s"),
        ({"group": {"forward": Latency((1e12, 2e12))}}, "gpu[0].forward_s[0]: must be in"),
        ({"group": {"forward": Latency(())}}, "gpu[0].forward_s: has 0 point(s) and no line"),
        ({"group": {"forward": Latency((), 0.01)}}, "gpu[0].forward_intercept_s: missing"),
        ({"group": {"forward": Latency((), 0.01, NAN)}}, "gpu[0].forward_intercept_s: must be a number"),
        ({"group": {"forward": Latency((), 0.0, 0.0)}}, "gpu[0].forward_slope_s: the line beyond the table (slope 0 s, intercept 0 s) gives 0 s at micro-batch 1"),
        ({"group": {"memory_bytes": 1e308 * GIB}}, "gpu[0].memory_gib: must be in (0, 1048576] GiB (got inf)"),
        ({"group": {"memory_bytes": 1e300}}, "gpu[0].memory_gib: must be in (0, 1048576] GiB"),
        ({"group": {"memory_bytes": NAN}}, "gpu[0].memory_gib: must be a number"),
        ({"group": {"memory_base_bytes": -1.0}}, "gpu[0].memory_base_gib: must be in [0, 1048576] GiB"),
        ({"group": {"count": 0}}, "gpu[0].count: must be between 1 and 100000 (got 0)"),
        ({"group": {"count": 2.0}}, "gpu[0].count: must be a whole number"),
        ({"group": {"max_microbatch": 500}}, "gpu[0].max_microbatch: 500 exceeds the 11"),
        ({"activation_bytes_per_sample": 0.0}, "activation_gib_per_sample: must be in [9.31322574615e-10, 1048576] GiB (got 0)"),
        ({"activation_bytes_per_sample": NAN}, "activation_gib_per_sample: must be a number"),
        ({"activation_bytes_per_sample": 1e-300 * GIB}, "activation_gib_per_sample: must be in"),
        ({"memory_fraction": 2.0}, "memory_fraction: must be in (0, 1] (got 2)"),
        ({"memory_fraction": 0.0}, "memory_fraction: must be in (0, 1] (got 0)"),
        ({"global_batch": 0}, "global_batch: must be between 1 and 1048576 (got 0)"),
        ({"global_batch": -3}, "global_batch: must be between 1 and 1048576"),
        ({"global_batch": MAX_GLOBAL_BATCH + 1}, "global_batch: must be between 1 and 1048576"),
        ({"allgather_s": 1e308}, "allgather_s: must be in [0, 1000] s (got 1e+308)"),
        ({"reducescatter_s": -1.0}, "reducescatter_s: must be in [0, 1000] s"),
        ({"accumulation_overhead_s": NAN}, "accumulation_overhead_s: must be a number"),
        ({"uneven_shard_overhead": 11.0}, "uneven_shard_overhead: must be in [0, 10]"),
        ({"state_bytes": -GIB}, "state_gib: must be in [0,"),
        ({"groups": ()}, "gpu: missing"),
        ({"groups": ("A100",)}, "gpu[0]: must be a GpuGroup (got str)"),
        ({"group": {"forward": [0.01, 0.02]}}, "gpu[0].forward_s: must be a Latency (got list)"),
        ({"layers": 0}, "layers: must be between 1 and 100000"),
        ({"max_microbatch": 0}, "max_microbatch: must be >= 1"),
    ],
)
def test_the_constructor_rejects_out_of_range_fields(changes, message):
    with pytest.raises(InputError) as info:
        build(**changes)
    text = str(info.value)
    assert message in text and "\n" not in text, text
    assert text.startswith(message.split(":")[0] + ":")


def test_lists_from_code_are_accepted():
    inst = build(group={"forward": Latency([0.01, 0.018, 0.026])})
    assert inst.groups[0].forward.table == (0.01, 0.018, 0.026)
    assert isinstance(build(groups=[build().groups[0]]).groups, tuple)


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (("memory_gib = 48.0", "memory_gib = 1e7"), "gpu[0].memory_gib: must be in (0, 1048576] GiB"),
        (("forward_s = [0.010,", "forward_s = [1e308,"), "gpu[0].forward_s[0]: must be in [1e-06, 1000] s"),
        (("forward_s = [0.010,", "forward_s = [1e12,"), "gpu[0].forward_s[0]: must be in"),
        (("activation_gib_per_sample = 0.5", "activation_gib_per_sample = 1e-300"), "activation_gib_per_sample: must be in"),
        (("state_gib = 10.0", "state_gib = 10.0\nallgather_s = 1e308"), "allgather_s: must be in [0, 1000] s"),
        (("state_gib = 10.0", "state_gib = 10.0\nmemory_fraction = 2"), "memory_fraction: must be in (0, 1]"),
    ],
)
def test_files_get_the_constructors_message_with_the_file(tmp_path, capsys, edit, words):
    path = tmp_path / "x.toml"
    assert edit[0] in GOOD
    path.write_text(GOOD.replace(*edit))
    for command in (["solve", str(path)], ["crosscheck", str(path)], ["bench", str(path)]):
        code = main(command)
        out, err = capsys.readouterr()
        assert code == 2, (command, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err
        assert f"{path}: {words}" in lines[0]


def test_a_nan_latency_built_in_code_no_longer_gives_a_false_optimum():
    # the issue: NaN made dp answer OPTIMAL 0.116 where bruteforce said 0.058
    with pytest.raises(InputError, match="forward_s"):
        build(group={"forward": Latency((0.01, NAN, 0.026))})


@pytest.mark.parametrize("method", ["dp", "dp-faithful", "milp", "cpsat", "bruteforce"])
def test_extremes_inside_the_ranges_solve_with_a_finite_objective(method):
    # the largest latencies, AllGather and memory the ranges accept, and the smallest activation
    slow = Latency((1000.0, 2000.0, 3000.0))
    inst = build(
        group={"forward": slow, "backward": slow, "memory_bytes": float(1 << 50)},
        activation_bytes_per_sample=1.0, allgather_s=1000.0, reducescatter_s=1000.0, uneven_shard_overhead=10.0,
        accumulation_overhead_s=1000.0,
    )
    r = hetopt.solve(inst, method)
    assert r.status is Status.OPTIMAL
    assert math.isfinite(r.objective) and r.objective > 0
    json.dumps(r.solution.to_dict(), allow_nan=False)


@pytest.mark.parametrize("method", ["dp", "dp-faithful", "milp", "cpsat", "bruteforce"])
def test_the_shortest_latency_accepted_solves(method):
    fast = Latency((MIN_LATENCY_S, 2 * MIN_LATENCY_S))
    r = hetopt.solve(build(group={"forward": fast, "backward": fast}), method)
    assert r.status is Status.OPTIMAL and r.objective > 0


def test_the_budget_stays_an_integer_solvers_can_hold():
    inst = build(activation_bytes_per_sample=1.0, group={"memory_bytes": float(1 << 50)})
    assert inst.microbatch_budget == 2 * inst.max_microbatch_per_group[0] <= 2 * 8


def test_falling_table_is_accepted_with_a_warning(caplog):
    # the noise: backward_s = [0.060, 0.158, 0.157]
    with caplog.at_level(logging.WARNING, logger="hetopt.allocation"):
        inst = build(group={"backward": Latency((0.060, 0.158, 0.157))}, global_batch=20)
    assert inst.groups[0].backward.at(11) == pytest.approx(0.149)
    [record] = caplog.records
    assert "gpu[0].backward_s: the latency line beyond the table falls" in record.getMessage()
    assert "0.158 -> 0.157" in record.getMessage()


def test_falling_table_reaching_zero_where_memory_allows_is_rejected():
    # u = 11: the line 0.157 - 0.02 (m - 3) reaches 0 at m = 10.85
    with pytest.raises(InputError, match=r"gpu\[0\]\.backward_s: the line beyond the table .* gives -0.003 s at micro-batch 11"):
        build(group={"backward": Latency((0.060, 0.177, 0.157))}, global_batch=20)
    # the same table is fine when memory stops the micro-batch before the line reaches zero
    assert build(group={"backward": Latency((0.060, 0.177, 0.157)), "max_microbatch": 10}, global_batch=20)


def test_falling_table_in_a_file_warns_one_line_and_solves(tmp_path):
    # a subprocess: pytest's own logging handlers would swallow what the CLI prints
    import subprocess
    import sys

    path = tmp_path / "x.toml"
    path.write_text(GOOD.replace("backward_s = [0.020, 0.036, 0.052]", "backward_s = [0.060, 0.158, 0.157]"))
    run = subprocess.run([sys.executable, "-m", "hetopt", "solve", str(path), "--json"], capture_output=True, text=True, check=False)
    out, err = run.stdout, run.stderr
    assert run.returncode == 0, err
    assert json.loads(out)["status"] == "OPTIMAL"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith(f"{path}: gpu[0].backward_s: the latency line beyond the table falls")


@pytest.mark.parametrize(("edit", "key"), [
    (lambda t: t.replace("memory_gib = 48.0", "memory_gib = 1e300"), "gpu[0].memory_gib"),
    (lambda t: t.replace("activation_gib_per_sample = 0.5", "activation_gib_per_sample = 1e300"), "activation_gib_per_sample"),
    (lambda t: t.replace("state_gib = 10.0", "state_gib = 1e300"), "state_gib"),
    (lambda t: t.replace("memory_base_gib = 2.0", "memory_base_gib = -1e300"), "gpu[0].memory_base_gib"),
])
def test_a_value_too_large_for_bytes_is_shown_as_written(edit, key):
    """Issue 44, item 4: a GiB figure whose bytes overflow said "(got inf)"."""
    text = edit(GOOD)
    assert text != GOOD
    with pytest.raises(InputError) as info:
        hetopt.loads(text, source="x.toml")
    message = str(info.value)
    assert message.startswith(f"x.toml: {key}: must be ") and " GiB" in message, message
    assert re.search(r"\(got -?1e\+300\)$", message) and "\n" not in message, message
