"""Shared helpers of the mixed tests."""

from __future__ import annotations

from pathlib import Path

from hetopt.mixed.problem import GIB, GpuGroup, MixedInstance, TpTables

INSTANCES = Path(__file__).resolve().parents[2] / "instances" / "mixed"


def one_layer_type(name: str, count: int, times, *, memory_gib: float = 10.0, degree: int = 1,
                   gbs: float = 1.0) -> GpuGroup:
    """A type with one TP degree on a one-layer model: ``times[y − 1]`` seconds for share y,
    1 GiB static, 1 GiB of activations per sample, ``gbs`` GiB/s of ring bandwidth."""
    return GpuGroup(name, count, memory_gib * GIB, gbs * GIB,
                    (TpTables(degree, tuple((t,) for t in times), (GIB,), tuple((y * GIB,) for y in range(1, len(times) + 1))),))


def one_layer(gpus, *, b: int, m: int = 1, grad_gib: float = 0.0, cross_gbs: float = 1.0, link_s: float = 0.0):
    """A one-layer instance (one stage, so the split alone decides)."""
    return MixedInstance("one-layer", m, b, 1, (grad_gib * GIB,), link_s, cross_gbs * GIB, tuple(gpus))
