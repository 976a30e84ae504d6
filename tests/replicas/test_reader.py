"""Reading replicas files: every error names the file, the key and the fix; the CLI exits 2."""

from __future__ import annotations

import pytest

from hetopt import load, loads
from hetopt.errors import InputError

from .conftest import INSTANCES

GOOD = """
problem = "replicas"
microbatches = 4

[[shape]]
name = "A"
count = 2

[[candidate]]
name = "a"
uses = { A = 1 }
fill_s = 1.0
per_microbatch_s = 0.5
gradient_gib = 1.0
bandwidth_gbps = 100.0
"""


def test_reads_units():
    inst = loads(GOOD, source="x.toml")
    c = inst.candidates[0]
    assert c.gradient_bytes == 2**30 and c.bandwidth == 100e9 / 8
    assert c.uses == (1,) and inst.shapes[0].count == 2
    assert inst.hop_latency_s == 14e-6  # NCCL's network step (hetopt.costmodel.HOP_LATENCY_S)


@pytest.mark.parametrize(("edit", "key", "words"), [
    (("microbatches = 4", "microbatches = 0"), "microbatches", "from 1"),
    (("microbatches = 4", "microbatches = 4.5"), "microbatches", "whole number"),
    (("microbatches = 4", "microbatch = 4"), "microbatch", "did you mean"),
    (("count = 2", "count = -2"), "shape[0].count", "from 0"),
    (("uses = { A = 1 }", "uses = { B = 1 }"), "candidate[0].uses.B", "unknown shape 'B'"),
    (("uses = { A = 1 }", "uses = { A = 0 }"), "candidate[0].uses", "uses no island"),
    (("uses = { A = 1 }", "uses = 1"), "candidate[0].uses", "must be a table"),
    (("uses = { A = 1 }", "uses = { A = 1.5 }"), "candidate[0].uses.A", "whole number"),
    (("fill_s = 1.0", "fill_s = 0.0"), "candidate[0].fill_s", ">= 1e-09"),
    (("fill_s = 1.0", "fill_s = nan"), "candidate[0].fill_s", "finite"),
    (("per_microbatch_s = 0.5", "per_microbatch_s = 2.0"), "candidate[0].per_microbatch_s", "exceeds fill_s"),
    (("gradient_gib = 1.0", "gradient_gib = -1.0"), "candidate[0].gradient_gib", ">= 0"),
    (("bandwidth_gbps = 100.0", "bandwidth_gbps = 0.0"), "candidate[0].bandwidth_gbps", "> 0"),
    (("bandwidth_gbps = 100.0", "bandwidth_gbps = 1e9"), "candidate[0].bandwidth_gbps", "<= 1e+06"),
    (("fill_s = 1.0\n", ""), "candidate[0].fill_s", "missing"),
    (("name = \"a\"", "name = \"a\"\nspeed = 3"), "candidate[0].speed", "unknown key"),
])
def test_errors_name_file_and_key(reader_refuses, edit, key, words):
    assert words in reader_refuses(GOOD, edit, key)


def test_duplicate_shape_names():
    text = GOOD.replace('[[candidate]]', '[[shape]]\nname = "A"\ncount = 1\n\n[[candidate]]')
    with pytest.raises(InputError, match=r"bad.toml: shape\[1\].name: shape 'A' is defined twice"):
        loads(text, source="bad.toml")


def test_cli_bad_file_exits_2_with_one_line(solve_refuses):
    solve_refuses(GOOD.replace("fill_s = 1.0", "fill_s = -1.0"), "candidate[0].fill_s")


def test_shipped_instances_load():
    for path in sorted(INSTANCES.glob("*.toml")):
        assert load(path).problem == "replicas"
