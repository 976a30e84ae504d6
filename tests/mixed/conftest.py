"""Shared helpers of the mixed tests."""

from __future__ import annotations

from pathlib import Path

from hetopt.generate.toml import dumps
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


def one_type_file(*, microbatches: int, microbatch_size: int, link_s: float, cross_bandwidth_gbps: float,
                  gradient_gib: list[float], gpu: dict, tp: dict) -> str:
    """A mixed file's text with one GPU type (``gpu``: name, count, memory_gib, bandwidth_gbps)
    of one TP degree (``tp``: degree, time_s, static_gib, activation_gib), as the reader takes it."""
    return dumps({"problem": "mixed", "microbatches": microbatches, "microbatch_size": microbatch_size,
                  "layers": len(gradient_gib), "link_s": link_s, "cross_bandwidth_gbps": cross_bandwidth_gbps,
                  "gradient_gib": gradient_gib, "gpu": [{**gpu, "tp": [tp]}]})
