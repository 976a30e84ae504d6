"""Reading islands files: the three network forms, host links, and malformed files (exit 2)."""

from __future__ import annotations

import json

import pytest

from hetopt import loads
from hetopt.cli import main
from hetopt.islands.problem import GBPS

#: One A100 node of 4 GPUs (``machine``: its line, or none), then ``extra`` lines.
NODE = """[[node]]
name = "{name}"
{machine}gpu = "A100"
gpus = 4
tflops = 312.0
memory_gib = 80.0
intra_gbs = 32.0
{extra}
"""


def text(network: str, a_extra: str = "", b_extra: str = "", c_extra: str = "") -> str:
    """Nodes a and b on machine m1, c alone, with their ``extra`` lines, then ``network``."""
    nodes = [("a", 'machine = "m1"\n', a_extra), ("b", 'machine = "m1"\n', b_extra), ("c", "", c_extra)]
    return '\nproblem = "islands"\nname = "t"\n' + "".join(
        NODE.format(name=name, machine=machine, extra=extra) for name, machine, extra in nodes) + network


PAIRS = """
[network]
default_gbps = 100.0
host_gbps = 64.0
[[network.link]]
a = "a"
b = "c"
gbps = 400.0
"""

TREE = """
[[network.switch]]
name = "root"
[[network.switch]]
name = "leaf"
parent = "root"
gbps = 50.0
"""

ON_LEAF = 'switch = "leaf"\nswitch_gbps = 200.0'
ON_ROOT = 'switch = "root"\nswitch_gbps = 200.0'


def gbps(inst, i, j):
    return inst.inter[i, j] / GBPS


def test_pairs_links_and_host_link():
    inst = loads(text(PAIRS))
    assert gbps(inst, 0, 2) == 400.0 and gbps(inst, 1, 2) == 100.0
    assert gbps(inst, 0, 1) == 64.0  # same machine: the host link
    assert inst.network == "pairs"


def test_groups_take_the_largest_shared_group():
    net = """
[network]
default_gbps = 10.0
[[network.group]]
nodes = ["a", "b", "c"]
gbps = 100.0
[[network.group]]
nodes = ["b", "c"]
gbps = 400.0
[[network.machine]]
name = "m1"
host_gbps = 256.0
"""
    inst = loads(text(net))
    assert gbps(inst, 1, 2) == 400.0 and gbps(inst, 0, 2) == 100.0 and gbps(inst, 0, 1) == 256.0


def test_switch_tree_widest_path():
    inst = loads(text(TREE, ON_LEAF, ON_LEAF, ON_ROOT))
    assert gbps(inst, 0, 2) == 50.0 and gbps(inst, 1, 2) == 50.0  # through the 50 Gb/s uplink
    assert inst.network == "switch tree"


MALFORMED = [
    (text(PAIRS.replace('a = "a"', 'a = "zz"')), "network.link[0].a: unknown node 'zz'"),
    (text(PAIRS.replace('b = "c"', 'b = "a"')), "network.link[0].b: a link joins two different nodes"),
    (text(PAIRS + '[[network.link]]\na = "c"\nb = "a"\ngbps = 1.0\n'), "network.link[1].a: the pair"),
    (text(PAIRS.replace("gbps = 400.0", "gbps = 0.0")), "network.link[0].gbps: must be >= 1e-06"),
    (text(PAIRS.replace("default_gbps = 100.0", "default_gbps = -5.0")), "network.default_gbps: must be >= 1e-06"),
    (text('[network]\n[[network.group]]\nnodes = ["a", "q"]\ngbps = 5.0\n'), "network.group[0].nodes[1]: unknown node 'q'"),
    (text('[network]\n[[network.link]]\na = "a"\nb = "c"\ngbps = 5.0\n'), "network.default_gbps: missing: 1 node pair(s)"),
    (text(PAIRS).replace('name = "b"', 'name = "a"'), "node[1].name: duplicate node name 'a'"),
    (text(PAIRS).replace("gpus = 4", "gpus = 0", 1), "node[0].gpus: must be between 1 and 128 (got 0)"),
    (text(PAIRS).replace("tflops = 312.0", "tflops = -1.0", 1), "node[0].tflops (Node.flops): must be between 1e-06 and 100000 TFLOP/s (got -1)"),
    (text(PAIRS).replace("intra_gbs = 32.0", "intra_gb = 32.0", 1), "node[0].intra_gb: unknown key"),
    (text(PAIRS + "[tolerance]\ncompute = -0.1\n"), "tolerance.compute: must be between 0 and 10 (got -0.1)"),
    (text(TREE.replace('parent = "root"', 'parent = "nowhere"'), ON_LEAF, ON_LEAF, ON_ROOT), "network.switch[1].parent: unknown switch 'nowhere'"),
    (text(TREE.replace('name = "root"', 'name = "root"\nparent = "leaf"\ngbps = 10.0'), ON_LEAF, ON_LEAF, ON_LEAF), "the switch tree has a cycle: "),
    (text(TREE + '[[network.switch]]\nname = "other"\n', ON_LEAF, ON_LEAF, ON_ROOT), "network.switch: the switch tree needs exactly one root"),
    (text(TREE, ON_LEAF, ON_LEAF, 'switch = "nope"\nswitch_gbps = 1.0'), "node[2].switch: unknown switch 'nope'"),
    (text(TREE, ON_LEAF, ON_LEAF, ""), "node[2].switch: missing"),
    (text(TREE, ON_LEAF, ON_LEAF, 'switch = "leaf"\nswitch_gbps = 0'), "node[2].switch_gbps: must be >= 1e-06"),
    (text(TREE + "default_gbps = 1.0\n", ON_LEAF, ON_LEAF, ON_ROOT), "unknown key"),
    (text("[network]\ndefault_gbps = 1.0\n" + TREE.replace("[[network.switch]]", "[[network.switch]]"), ON_LEAF, ON_LEAF, ON_ROOT), "network.default_gbps: give either a switch tree"),
    (text(TREE.replace('name = "leaf"', 'name = "root"'), ON_LEAF, ON_LEAF, ON_ROOT), "network.switch[1].name: duplicate switch name 'root'"),
    (text(PAIRS + '[[network.machine]]\nname = "m9"\nhost_gbps = 1.0\n'), "network.machine[0].name: unknown machine 'm9'"),
    (text(PAIRS).replace("tflops = 312.0", "tflops = 1e300", 1), "node[0].tflops: must be a number of TFLOP/s within ±1.8e+296, the most a float holds once converted (got 1e+300)"),
    (text(PAIRS).replace("memory_gib = 80.0", "memory_gib = nan", 1), "node[0].memory_gib: must be finite"),
    (text(PAIRS).replace("gpus = 4", "gpus = 129", 1), "node[0].gpus: must be between 1 and 128 (got 129)"),
    (text(PAIRS + "[tolerance]\nintra = 11.0\n"), "tolerance.intra: must be between 0 and 10 (got 11)"),
]


@pytest.mark.parametrize(("content", "message"), MALFORMED)
def test_malformed_files_exit_2_with_the_key_path(tmp_path, capsys, content, message):
    path = tmp_path / "bad.toml"
    path.write_text(content)
    assert main(["solve", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and message in err, err


def test_solve_json_lists_islands(capsys, instances_dir):
    assert main(["solve", str(instances_dir / "tiny.toml"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["problem"] == "islands" and doc["objective"] == 2 and doc["status"] == "OPTIMAL"
    islands = doc["solution"]["islands"]
    assert sorted(sorted(i["nodes"]) for i in islands) == [["a100-0", "a100-1"], ["v100-0", "v100-1"]]
    assert all(i["gpus"] == 8 for i in islands)


def test_declined_exits_2_with_reason(capsys, instances_dir):
    assert main(["solve", str(instances_dir / "ring-24-nontree.toml"), "--method", "dp"]) == 2
    assert "not ultrametric" in capsys.readouterr().out
