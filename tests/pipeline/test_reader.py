"""Malformed pipeline files exit 2 with the file and key path; good files load as written."""

from __future__ import annotations

import json

import pytest

import hetopt
from hetopt.cli import main

#: One of option 0's two equal stages, as an array-of-tables entry (option 1's stage is inline).
HALF = """  [[option.stage]]
  layers = 1
  forward_s = 0.01
  backward_s = 0.02
  static_gib = 2.0
  activation_gib = 0.5
  gpus = 2
"""
GOOD = f"""
problem = "pipeline"
name = "t"
layers = 4
microbatches = 4
default_link_s = 0.01

[[island]]
name = "a"
gpus = 4
memory_gib = 16.0

[[island]]
name = "b"
gpus = 2
memory_gib = 16.0

[[link]]
a = "a"
b = "b"
time_s = 0.002

[[option]]
island = "a"
layers = 2
{HALF}{HALF}
[[option]]
island = "b"
layers = 2
role = "last"
stage = [{{ layers = 2, forward_s = 0.02, backward_s = 0.04, static_gib = 4.0, activation_gib = 1.0, gpus = 2 }}]
"""


def _write(tmp_path, text):
    path = tmp_path / "x.toml"
    path.write_text(text)
    return path


def test_good_file_loads_and_solves(tmp_path, capsys):
    inst = hetopt.load(_write(tmp_path, GOOD))
    assert inst.layers == 4 and inst.link_s[0][1] == 0.002 and inst.options[1].role == "last"
    assert main(["solve", str(tmp_path / "x.toml"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    block = doc["solution"]["blocks"][0]
    assert {"island", "option", "first_layer", "layers"} <= set(block)
    assert [b["island"] for b in doc["solution"]["blocks"]] == ["a", "b"]
    stage = doc["solution"]["stages"][0]
    assert {"island", "layers", "time_s", "memory_gib", "in_flight"} <= set(stage)
    assert doc["solution"]["stages"][0]["in_flight"] == 3  # 3 stages, M = 4
    assert doc["solution"]["simulated_s"] > 0


@pytest.mark.parametrize(
    "old,new,where",
    [
        ('island = "b"\nlayers = 2\nrole', 'island = "c"\nlayers = 2\nrole', "option[1].island"),
        ('a = "a"\nb = "b"', 'a = "a"\nb = "zz"', "link[0].b"),
        ('a = "a"\nb = "b"', 'a = "a"\nb = "a"', "link[0].b"),
        ("stage = [{ layers = 2,", "stage = [{ layers = 1,", "option[1].stage"),
        ("activation_gib = 1.0, gpus = 2 }", "activation_gib = 1.0, gpus = 3 }", "option[1].stage"),
        ("forward_s = 0.02, backward_s", "forward_s = -0.02, backward_s", "option[1].stage[0].forward_s"),
        ('role = "last"', 'role = "tail"', "option[1].role"),
        ("microbatches = 4", "microbatches = 0", "microbatches"),
        ("default_link_s = 0.01", "default_link_s = -1.0", "default_link_s"),
        ("memory_gib = 16.0\n\n[[island]]", "memory_gib = 0.0\n\n[[island]]", "island[0].memory_gib"),
        ('name = "b"', 'name = "a"', "island[1].name"),
        ("layers = 4\n", "layers = 4\nlayer_count = 4\n", "layer_count"),
        ("island = \"a\"\nlayers = 2", "island = \"a\"\nlayers = 9", "option[0].layers"),
        ("static_gib = 4.0", "static_gib = \"big\"", "option[1].stage[0].static_gib"),
    ],
)
def test_malformed_files_exit_2_with_the_key_path(tmp_path, capsys, old, new, where):
    assert old in GOOD
    path = _write(tmp_path, GOOD.replace(old, new, 1))
    assert main(["solve", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and f"{where}:" in err, err


def test_missing_islands_and_options(tmp_path, capsys):
    path = _write(tmp_path, 'problem = "pipeline"\nlayers = 2\nmicrobatches = 2\n')
    assert main(["solve", str(path)]) == 2
    assert "island" in capsys.readouterr().err
