"""Shared helpers for the islands tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from hetopt import catalog
from hetopt.islands.problem import GBPS, GBS, GIB, TFLOPS, IslandsInstance, Node

#: The shipped instances.
INSTANCES = catalog.instances_dir() / "islands"


def make_node(name: str, *, gpus: int = 4, tflops: float = 312.0, memory_gib: float = 80.0, intra_gbs: float = 32.0, machine: str | None = None) -> Node:
    """A node in file units."""
    return Node(name, machine or name, "X", gpus, tflops * TFLOPS, memory_gib * GIB, intra_gbs * GBS)


def make_instance(nodes: list[Node], gbps: list[list[float]], name: str = "t") -> IslandsInstance:
    """An instance from nodes and a Gb/s matrix."""
    return IslandsInstance(name, tuple(nodes), tuple(tuple(x * GBPS for x in row) for row in gbps))


@pytest.fixture
def instances_dir() -> Path:
    return INSTANCES
