"""DeepSpeed's 2021 pipeline hand-over (``handover=deepspeed``, issue 25).

DeepSpeed v0.3.13's pipeline engine (``deepspeed/runtime/pipe/engine.py``, as AMP ships it)
partitions a stage's output over its TP group and sends each rank's share together with the
GPT pipe's (1, 1, s, s) attention mask cast to fp16; the receiver all-gathers the share before
its forward and the sender all-gathers its own output again before its backward; the gradients
go back whole from every TP rank. Hand computations against the split hand-over, which every
other runtime uses.
"""

from __future__ import annotations

import dataclasses

import pytest

from hetopt import costmodel as cm
from hetopt.catalog import instances_dir
from hetopt.costmodel.stage import Layout
from hetopt.hardware import load_gpus
from hetopt.planner import validate as v
from hetopt.planner.builtin import BuiltinParallelizer
from hetopt.planner.layout import parse_layout
from hetopt.planner.parallelizer import IslandSpec, Slice, slice_model
from hetopt.planner.runtime import parse_runtime
from hetopt.workload import load_model
from hetopt.costmodel.running import Running
from tests.planner.test_exact_pruning import MODELS

GPUS = load_gpus()
SEQ = 1024


def _stages(handover: str, *, tp: int, nodes: int, gpus_per_node: int, m: int = 1):
    """Two inner stages of 4 GPT-3 1.3B layers (h 2048) on T4s: stage 0 on the first node(s),
    stage 1 on the next (``stage_nodes``), one replica each, no embedding or head."""
    cfg = dataclasses.replace(load_model(MODELS / "gpt3-1.3b.toml"), layers=10)
    sl = Slice(slice_model(cfg, seq=SEQ)[1:9])
    isl = IslandSpec("t4", GPUS["T4"], nodes=nodes, gpus_per_node=gpus_per_node, inter_bandwidth=50e9 / 8)
    lay = Layout(tp=tp, pp=2, dp=1, split=(4, 4), recompute="none", zero_stage=0)
    par = BuiltinParallelizer(running=Running(overlap=False, sequence_parallel=False, handover=handover))
    return par.plan(sl, isl, lay, microbatch_size=m, microbatches=8).stages, isl


def test_the_keys_read_and_write_back():
    lay = parse_layout("tp=2 pp=2 dp=1 handover=deepspeed")
    assert lay.running.handover == "deepspeed" and lay.text().endswith("handover=deepspeed")
    assert parse_layout("tp=2 pp=2 dp=1").running.handover == "split"
    rt = parse_runtime("zero=0 handover=deepspeed")
    assert rt.text() == "zero=0 handover=deepspeed" and rt.layout(parse_layout("tp=1 pp=2")).running.handover == "deepspeed"
    with pytest.raises(Exception, match="handover=ring: must be split or deepspeed"):
        parse_layout("tp=1 pp=2 handover=ring")
    with pytest.raises(ValueError, match="handover must be one of"):
        BuiltinParallelizer(running=Running(handover="ring"))


def test_the_mask_by_hand():
    assert cm.pipe_mask_bytes(1024) == 2 * 1024 * 1024  # 2 MiB: as much as 2·s·b·h at b = 1, h = 1024


def test_across_nodes_every_tp_rank_sends_and_both_sides_gather():
    """TP 4 on two nodes of 4 T4s: each stage is one node, every hand-over crosses the 50 Gb/s
    network (TCP: 0.6 of it). The split hand-over sends the micro-batch's activations once
    (2·s·b·h = 4 MiB at h 2048, b 1) each way; DeepSpeed's sends, per TP rank, a quarter of them
    and the 2 MiB mask forward and all of them back, four ranks through one node's network, and
    gathers the quarters over the node's PCIe (peer-to-peer off: 0.248 of 16 GB/s)."""
    split, isl = _stages("split", tp=4, nodes=2, gpus_per_node=4)
    deep, _ = _stages("deepspeed", tp=4, nodes=2, gpus_per_node=4)
    act, mask = 2.0 * SEQ * 1 * 2048, 2.0 * SEQ * SEQ
    net = isl.inter_achieved
    assert net == pytest.approx(0.6 * 50e9 / 8)
    intra = isl.intra_achieved
    assert intra == pytest.approx(16e9 * 3.9 / 15.75)
    gather = 3 / 4 * act / intra + cm.RING_BASE_LATENCY_S + 3 * cm.HOP_LATENCY_S["pcie"]
    # stage 0 sends forward: 4 × (act/4 + mask) instead of act; gathers its output before backward
    assert deep[0].forward_s - split[0].forward_s == pytest.approx(4 * mask / net, rel=1e-9)
    assert deep[0].backward_s - split[0].backward_s == pytest.approx(gather, rel=1e-9)
    # stage 1 gathers its input before forward; sends the gradient back from every rank: 4 × act
    assert deep[1].forward_s - split[1].forward_s == pytest.approx(gather, rel=1e-9)
    assert deep[1].backward_s - split[1].backward_s == pytest.approx(3 * act / net, rel=1e-9)


def test_inside_one_node_each_rank_uses_its_own_link():
    """TP 2, both stages on one node of 4 GPUs: every GPU sends over its own PCIe link, so the
    split hand-over takes act/2 over it; DeepSpeed's act/2 + mask forward and act back."""
    split, isl = _stages("split", tp=2, nodes=1, gpus_per_node=4)
    deep, _ = _stages("deepspeed", tp=2, nodes=1, gpus_per_node=4)
    act, mask, w = 2.0 * SEQ * 2048, 2.0 * SEQ * SEQ, isl.intra_achieved
    gather = 1 / 2 * act / w + cm.RING_BASE_LATENCY_S + cm.HOP_LATENCY_S["pcie"]
    assert deep[0].forward_s - split[0].forward_s == pytest.approx(mask / w, rel=1e-9)
    assert deep[1].backward_s - split[1].backward_s == pytest.approx((act - act / 2) / w, rel=1e-9)
    assert deep[1].forward_s - split[1].forward_s == pytest.approx(gather, rel=1e-9)


def test_without_tp_only_the_mask_is_added():
    split, isl = _stages("split", tp=1, nodes=2, gpus_per_node=1, m=2)
    deep, _ = _stages("deepspeed", tp=1, nodes=2, gpus_per_node=1, m=2)
    assert deep[0].forward_s - split[0].forward_s == pytest.approx(2.0 * SEQ * SEQ / isl.inter_achieved, rel=1e-9)
    assert deep[1].backward_s == split[1].backward_s and deep[1].forward_s == split[1].forward_s


def test_amps_rows_are_priced_with_it():
    """Every AMP row ran DeepSpeed's engine; a TP 4 × PP 4 row is slower with it, a PP 1 row is
    not touched (no hand-over)."""
    rows = {r.id: r for r in v.load_published(instances_dir() / "published" / "amp-t4-g4dn.toml")}
    assert all(r.layout.running.handover == "deepspeed" for r in rows.values())

    def both(m):
        deep, _, _ = v.price_published(m)
        split, _, _ = v.price_published(dataclasses.replace(m, layout=m.layout.with_running(handover="split"),
                                                            runtime=m.runtime.with_running(handover="split")))
        return deep.iteration_time_s, split.iteration_time_s

    deep, split = both(rows["amp-t4-t33-tp4pp4dp1b1"])
    assert deep > split * 1.05
    deep, split = both(rows["amp-t4-t25-tp4pp1dp4b1"])
    assert deep == split
