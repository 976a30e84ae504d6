"""Data-parallel gradients reduced in fp32 (issue 25): ``gradreduce=fp32`` in a layout or a
runtime, ``grad_reduce = "fp32"`` in a published row (AMP's DeepSpeed config sets
``"fp32_allreduce": true``). The bytes of the reduction double; nothing else changes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetopt import costmodel as cm
from hetopt.catalog import instances_dir
from hetopt.planner import validate as v
from hetopt.planner.layout import parse_layout
from hetopt.planner.runtime import parse_runtime
from hetopt.workload import parameters


def test_the_key_reads_and_writes_back():
    lay = parse_layout("tp=1 pp=1 dp=4 gradreduce=fp32")
    assert lay.running.grad_fp32 and lay.text().endswith("gradreduce=fp32")
    assert not parse_layout("tp=1 pp=1 dp=4 gradreduce=half").running.grad_fp32
    rt = parse_runtime("zero=0 gradreduce=fp32")
    assert rt.running.grad_fp32 and rt.text() == "zero=0 gradreduce=fp32"
    assert rt.layout(parse_layout("tp=1 pp=1 dp=4")).running.grad_fp32


def test_a_fp32_reduction_costs_exactly_the_extra_two_bytes_a_parameter_on_the_ring():
    """AMP's tp1 pp1 dp16 row: one stage, no overlap (DeepSpeed 2021 reduces after the backward
    pass), so the iteration grows by the ring time of 2 more bytes per parameter over 16 GPUs
    across the nodes' 50 Gb/s (the hop latency is paid either way)."""
    rows = v.load_published(instances_dir() / "published" / "amp-t4-g4dn.toml")
    m = next(r for r in rows if r.id == "amp-t4-t00-tp1pp1dp16b1")
    assert m.layout.running.grad_fp32 and not m.layout.running.overlap
    fp32, _, _ = v.price_published(m)
    half, _, _ = v.price_published(replace(m, layout=m.layout.with_running(grad_fp32=False),
                                           runtime=m.runtime.with_running(grad_fp32=False)))
    params = parameters(m.model)
    extra = cm.ring_allreduce_s(2.0 * params, 16, m.island.inter_achieved)
    assert fp32.iteration_time_s - half.iteration_time_s == pytest.approx(extra, rel=1e-6)
