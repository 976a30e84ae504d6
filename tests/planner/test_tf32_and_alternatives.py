"""Heterogeneous plans priced whole (issue 45): the alternatives under the plan's running
settings, and ``tf32=auto`` (TF32 on the GPUs that have it, FP32 on the others)."""

from __future__ import annotations

import pytest

from hetopt import costmodel as cm
from hetopt.costmodel.running import Running
from hetopt.costmodel.stage import layer_table, price_stage, stage_nodes
from hetopt.hardware import load_gpus
from hetopt.planner import plan
from hetopt.planner.request import as_cluster as resolve
from hetopt.planner.fsdp import fsdp_instance
from hetopt.planner.parallelizer import IslandSpec, Slice, slice_model
from hetopt.planner.answer import PRICED_BY_PIPELINE
from hetopt.costmodel.stage import Layout
from hetopt.planner.request import as_model as load_model

GPUS = load_gpus()


def test_the_fsdp_alternative_is_priced_in_the_plans_precision():
    """fp32 moves every GPU's peak to its FP32 rate, the gathered parameters to 4 bytes and the
    reduced gradients too; ``gradreduce=fp32`` moves only the reduction of a 16-bit run."""
    cluster, cfg = resolve("sailor-a4v4"), load_model("opt-350m")
    half = fsdp_instance(cluster, cfg, 1024, 2048, Running(precision="fp16"))
    full = fsdp_instance(cluster, cfg, 1024, 2048, Running(precision="fp32"))
    fp32_reduce = fsdp_instance(cluster, cfg, 1024, 2048, Running(precision="fp16", grad_fp32=True))
    for h, f in zip(half.groups, full.groups):
        gpu = GPUS[h.type]
        assert f.forward.slope == pytest.approx(h.forward.slope * gpu.training_flops / gpu.fp32_flops, rel=1e-12)
    assert full.allgather_s == pytest.approx(2 * half.allgather_s, rel=1e-12)
    assert full.reducescatter_s == pytest.approx(2 * half.reducescatter_s, rel=1e-12)
    assert fp32_reduce.allgather_s == half.allgather_s and fp32_reduce.reducescatter_s == pytest.approx(2 * half.reducescatter_s)
    # the default (the hardware's 16 bits) is the instance built without a running record
    assert fsdp_instance(cluster, cfg, 1024, 2048) == fsdp_instance(cluster, cfg, 1024, 2048, Running())


def test_every_alternative_records_the_running_settings_it_was_priced_under():
    p = plan("sailor-a4v4", "opt-350m", global_batch=1024, runtime="precision=fp32 overlap=no", microbatch_size=32)
    assert p.running.precision == "fp32" and not p.running.overlap
    assert p.alternatives and all(a.running is not None and a.running.precision == "fp32" and not a.running.overlap
                                  for a in p.alternatives)
    fsdp = next(a for a in p.alternatives if a.name == "cephalo-fsdp")
    # the allocation model always overlaps its collectives: it says so, and is not ranked as best
    assert fsdp.ignores == ("overlap",) and "priced without overlap=no" in fsdp.detail
    assert all(a.ignores == () for a in p.alternatives if a.priced_by == PRICED_BY_PIPELINE)
    assert p.best != "cephalo-fsdp"


def test_the_fsdp_row_moves_with_the_precision_as_the_cost_model_says():
    fp16 = plan("sailor-a4v4", "opt-350m", global_batch=1024, microbatch_size=32)
    fp32 = plan("sailor-a4v4", "opt-350m", global_batch=1024, runtime="precision=fp32", microbatch_size=32)
    t16, t32 = (next(a.iteration_time_s for a in p.alternatives if a.name == "cephalo-fsdp") for p in (fp16, fp32))
    assert t32 > 3 * t16  # FP32 CUDA cores: 19.5 against 312 (A100) and 15.7 against 125 (V100) TFLOP/s


def _stage(gpu: str, running: Running):
    isl = IslandSpec("i", GPUS[gpu], 1, 4)
    sl = Slice(tuple(slice_model(load_model("opt-350m"), seq=2048)))
    lay = Layout(1, 1, 4, (sl.layers,), "none", 0)
    r = running.on(isl.gpu)
    tab = layer_table(sl, flash=r.flash, element_bytes=cm.element_bytes(r.precision))
    return r, price_stage(sl, isl, tab, lay, 0, stage_nodes(isl, 1, 4, 1), microbatch_size=4, microbatches=8, running=r,
                          reserved_bytes=0.0)


def test_tf32_auto_runs_tf32_where_the_gpu_has_it_and_fp32_elsewhere():
    auto = Running(precision="fp32", tf32="auto")
    r_a100, a100 = _stage("A100-SXM4-40GB", auto)
    r_v100, v100 = _stage("V100-SXM2-16GB", auto)
    assert (r_a100.precision, r_v100.precision) == ("tf32", "fp32")
    # the same stage as an explicit tf32 run on the A100 and an fp32 run on the V100
    assert a100 == _stage("A100-SXM4-40GB", Running(precision="tf32"))[1]
    assert v100 == _stage("V100-SXM2-16GB", Running(precision="fp32"))[1]
    # the A100's matmuls at its TF32 peak (156 TFLOP/s dense), 8x its FP32 rate; the V100 keeps 15.7
    assert cm.matmul_flops(GPUS["A100-SXM4-40GB"], r_a100.precision) == pytest.approx(156e12)
    assert cm.matmul_flops(GPUS["V100-SXM2-16GB"], r_v100.precision) == pytest.approx(15.7e12)
    off = _stage("A100-SXM4-40GB", Running(precision="fp32"))[1]
    assert a100.time_s < off.time_s and a100.static_bytes == off.static_bytes  # 4-byte elements either way


def test_tf32_auto_plans_an_a100_v100_cluster_with_tf32_on_the_a100s():
    fp32 = plan("sailor-a4v4", "opt-350m", global_batch=1024, runtime="precision=fp32", alternatives=False)
    auto = plan("sailor-a4v4", "opt-350m", global_batch=1024, runtime="precision=fp32 tf32=auto", alternatives=False)
    assert auto.running.tf32 == "auto" and auto.iteration_time_s < fp32.iteration_time_s
    a100_layers = lambda p: sum(st.layers for st in p.stages if st.gpu.startswith("A100"))  # noqa: E731
    assert a100_layers(auto) >= a100_layers(fp32)  # TF32 makes the A100s worth more layers


def test_tf32_on_refuses_a_gpu_without_tf32():
    from hetopt.errors import InputError

    with pytest.raises(InputError, match="tf32=on: the V100-SXM2-16GB has no TF32 tensor cores"):
        plan("sailor-a4v4", "opt-350m", global_batch=1024, runtime="precision=fp32 tf32=on", alternatives=False)
