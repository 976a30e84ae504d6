"""Instances built in code are validated by their constructor, with the same one-line errors as files."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from hetopt import loads
from hetopt.errors import InputError
from hetopt.islands.problem import GBPS, IslandsInstance, Tolerance

from .conftest import make_instance, make_node
from .test_reader import PAIRS, text

NAN = math.nan


def two_nodes(**node_b) -> list:
    return [make_node("a"), replace(make_node("b"), **node_b)]


GOOD = [[0, 100.0], [100.0, 0]]

BAD_API = [
    (lambda: make_instance([], []), "node: must list between 1 and 2048 nodes (got 0)"),
    (lambda: make_instance(two_nodes(gpus=0), GOOD), "node[1].gpus: must be between 1 and 128 (got 0)"),
    (lambda: make_instance(two_nodes(gpus=4.0), GOOD), "node[1].gpus: must be a whole number"),
    (lambda: make_instance(two_nodes(gpus=True), GOOD), "node[1].gpus: must be a whole number"),
    (lambda: make_instance(two_nodes(flops=NAN), GOOD), "node[1].tflops (Node.flops): must be between"),
    (lambda: make_instance(two_nodes(memory_bytes=-1.0), GOOD), "node[1].memory_gib (Node.memory_bytes): must be between"),
    (lambda: make_instance(two_nodes(intra_bytes_s=math.inf), GOOD), "node[1].intra_gbs (Node.intra_bytes_s): must be between"),
    (lambda: make_instance(two_nodes(name="a"), GOOD), "node[1].name: duplicate node name 'a' (also node[0].name)"),
    (lambda: make_instance(two_nodes(machine=""), GOOD), "node[1].machine: must be a non-empty string"),
    (lambda: make_instance(two_nodes(), [[0, -100.0], [-100.0, 0]]), "bandwidth[0][1] (a–b): must be between 1e-06 and 1e+06 Gb/s (got -100)"),
    (lambda: make_instance(two_nodes(), [[0, 0.0], [0.0, 0]]), "bandwidth[0][1] (a–b): must be between"),
    (lambda: make_instance(two_nodes(), [[0, NAN], [NAN, 0]]), "bandwidth[0][1] (a–b): must be between"),
    (lambda: make_instance(two_nodes(), [[0, 100.0], [200.0, 0]]), "bandwidth[0][1] (a–b): must be symmetric (got 100 Gb/s one way and 200 Gb/s the other)"),
    (lambda: make_instance(two_nodes(), [[0, 100.0]]), "bandwidth: must be a 2 × 2 matrix"),
    (lambda: make_instance(two_nodes(), [[0, 100.0], [100.0]]), "bandwidth: must be a 2 × 2 matrix"),
    (lambda: Tolerance(compute=-0.1), "tolerance.compute: must be between 0 and 10 (got -0.1)"),
    (lambda: Tolerance(memory=NAN), "tolerance.memory: must be between 0 and 10 (got nan)"),
    (lambda: Tolerance(intra=10.5), "tolerance.intra: must be between 0 and 10 (got 10.5)"),
    (lambda: IslandsInstance("t", (make_node("a"),), ((0.0,),), tolerance=0.1), "tolerance: must be a Tolerance"),
]


@pytest.mark.parametrize(("build", "message"), BAD_API)
def test_api_built_instances_are_validated(build, message):
    with pytest.raises(InputError) as info:
        build()
    assert message in str(info.value) and "\n" not in str(info.value)


def test_the_diagonal_is_ignored():
    inst = make_instance(two_nodes(), [[NAN, 100.0], [100.0, -1.0]])
    assert inst.inter[0, 1] == 100.0 * GBPS and inst.inter[0, 0] == 0.0


def test_file_and_api_give_the_same_message():
    """One rule in one place: the reader's message is the constructor's, prefixed by the file."""
    with pytest.raises(InputError) as from_file:
        loads(text(PAIRS).replace("gpus = 4", "gpus = 0", 1), source="x.toml")
    with pytest.raises(InputError) as from_api:
        make_instance([replace(make_node("a"), gpus=0), make_node("b")], GOOD)
    assert str(from_file.value) == "x.toml: " + str(from_api.value)
