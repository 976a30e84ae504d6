"""fp32 and tf32 (issue 25): one element size, 4 bytes, for weights, gradients and activations;
matmuls at the GPU's FP32 peak (fp32, CUDA cores) or its TF32 tensor peak (tf32, Ampere and
later). Every 16-bit figure stays as it was. Hand-computed small cases, the arithmetic written out."""

from __future__ import annotations

import math

from pathlib import Path

import pytest

from hetopt import cli
from hetopt import costmodel as cm
from hetopt.costmodel.stage import Layout, layer_table, price_stage, stage_nodes
from hetopt.errors import InputError
from hetopt.hardware import load_gpus
from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
from hetopt.planner.setup.layout import parse_layout
from hetopt.planner.parallelizer.protocol import IslandSpec, Slice, slice_model
from hetopt.planner.setup.framework import parse_runtime
from hetopt.workload import ModelConfig
from hetopt.costmodel.running import Running

#: this checkout's catalog (its TF32 peaks), whatever data folder the installed package maps
GPUS = load_gpus(Path(__file__).resolve().parents[2] / "instances" / "gpus.toml")
GPT = ModelConfig("g", "gpt", 2, 1024, 16, 4096, 0, 1024)  # dropout: 1-byte masks
LLAMA = ModelConfig("l", "llama", 2, 1024, 16, 4096, 0, 1024)  # no dropout masks


# ---- training state ------------------------------------------------------------------------------

def test_fp32_state_is_16_bytes_a_parameter_sharded_by_zero():
    # fp32 parameters and gradients 4 + 4 replicated, Adam's m and v 4 + 4 sharded
    for p in ("fp32", "tf32"):
        assert cm.state_bytes_per_parameter(0, 1, p) == 16.0
        assert cm.state_bytes_per_parameter(1, 4, p) == 8 + 8 / 4  # 10
        assert cm.state_bytes_per_parameter(2, 4, p) == 4 + (16 - 4) / 4  # 7: the fp32 weights stay whole
        assert cm.state_bytes_per_parameter(3, 4, p) == 16 / 4


def test_16_bit_state_is_unchanged():
    assert [cm.state_bytes_per_parameter(z, 4) for z in (0, 1, 2, 3)] == [18.0, 6 + 12 / 4, 2 + 16 / 4, 18 / 4]
    assert [cm.state_bytes_per_parameter(z, 4, "fp16") for z in (0, 1, 2, 3)] == [20.0, 4 + 16 / 4, 2 + 18 / 4, 20 / 4]


# ---- activations and their traffic ---------------------------------------------------------------

def test_activations_double_in_fp32_but_the_dropout_masks():
    s, b, h, a, t = 1024, 2, 1024, 16, 2
    # Llama keeps no masks: every byte doubles
    for kw in ({}, {"tp": t}, {"tp": t, "sequence_parallel": True}, {"recompute": "full"}, {"flash": True}):
        assert cm.layer_activation_bytes(LLAMA, s, b, element_bytes=4, **kw) == 2 * cm.layer_activation_bytes(LLAMA, s, b, **kw)
    # GPT, TP t: 16-bit s·b·h·(10 + 24/t + 5·a·s/(h·t)); fp32 the replicated 8 + 2 masks -> 16 + 2,
    # the sharded 24 -> 48, the scores' 2 + 1 + 2 -> 4 + 1 + 4
    assert cm.layer_activation_bytes(GPT, s, b, tp=t) == s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    assert cm.layer_activation_bytes(GPT, s, b, tp=t, element_bytes=4) == s * b * h * (18 + 48 / t + 9 * a * s / (h * t))


def test_tp_allreduce_and_handover_bytes_double():
    s, b, h, w = 1024, 2, 1024, 1e9
    # a ring all-reduce of 4·s·b·h bytes over 2 GPUs moves 2·(1/2)·that, twice per pass
    assert cm.tp_layer_comm_s(GPT, s, b, 2, w, element_bytes=4) == 2 * (2 * (1 / 2) * 4 * s * b * h / w)
    assert cm.tp_layer_comm_s(GPT, s, b, 2, w, element_bytes=4) == 2 * cm.tp_layer_comm_s(GPT, s, b, 2, w)
    assert cm.pipeline_link_s(GPT, s, b, w, element_bytes=4) == 2 * 4 * s * b * h / w


def test_memory_bound_and_gemm_traffic_double_but_the_masks():
    s, h, f, a = 1024, 1024, 4096, 16
    wide, sharded = cm.elementwise_widths(GPT, s, element_bytes=4)
    # norms 2·(4 + 4)h, residuals 2·(12 + 1 mask)h; GELU 8f, scores a·s·(16 + 4 + 1 + 4)
    assert wide == 2 * 8 * h + 2 * 13 * h
    assert sharded == 8 * f + a * s * (16 + 9)
    assert cm.gemm_traffic_bytes(100, (10.0, 20.0), 1000, tp=2, element_bytes=4) == 4 * 100 * (10 + 20 / 2) + 4 * 1000


def test_a_fp32_optimizer_step_moves_32_bytes_a_parameter():
    a100 = GPUS["A100-SXM4-80GB"]
    # the gradient norm (4) and Adam (read w, g, m, v; write w, m, v: 28); no 16-bit copies; and
    # the GPU's fixed time of those two fused passes' kernels (one a 320 · 65,536 elements)
    kernels = 2 * math.ceil(1e9 / (320 * 65536))
    assert cm.optimizer_step_s(1e9, a100, element_bytes=4) == pytest.approx(
        (4 + 28) * 1e9 / a100.memory_bandwidth + kernels * cm.GPU_KERNEL_S, rel=1e-12)


# ---- peaks ---------------------------------------------------------------------------------------

def test_gemms_run_at_the_fp32_or_the_tf32_peak():
    a100 = GPUS["A100-SXM4-80GB"]
    e = a100.gemm_efficiency
    assert cm.matmul_flops(a100, "fp32") == 19.5e12 and cm.matmul_flops(a100, "tf32") == 156e12
    assert cm.matmul_flops(a100, "bf16") == cm.matmul_flops(a100, "fp16") == 312e12
    fp32 = cm.gemm_time_s(1e12, a100, peak_flops=cm.matmul_flops(a100, "fp32"))
    tf32 = cm.gemm_time_s(1e12, a100, peak_flops=cm.matmul_flops(a100, "tf32"))
    assert fp32 == 1e12 / (19.5e12 * e) and tf32 == 1e12 / (156e12 * e)
    assert cm.gemm_time_s(1e12, a100) == 1e12 / (312e12 * e)  # the 16-bit default


def test_every_gpu_with_tensor_cores_for_tf32_has_a_peak_below_its_16_bit_one():
    # TF32 is half the dense FP16/BF16 tensor rate on every NVIDIA part that has it; the lower
    # bounds of the planner (the 16-bit peak) stay bounds
    for g in GPUS.values():
        if g.tf32_flops is not None:
            assert g.fp32_flops <= g.training_flops and g.tf32_flops <= g.training_flops, g.name
    assert all(GPUS[n].tf32_flops is None for n in ("V100-SXM2-16GB", "T4", "P100-SXM2", "RTX-2080-Ti", "Titan-RTX"))


def test_tf32_is_refused_on_a_gpu_without_tf32():
    v100 = GPUS["V100-SXM2-16GB"]
    assert cm.precision_problem("tf32", [v100]) == \
        "precision=tf32: the V100-SXM2-16GB has no TF32 tensor cores (use precision=fp32)"
    assert cm.precision_problem("fp32", [v100]) is None
    assert cm.precision_problem("tf32", [GPUS["A100-SXM4-80GB"]]) is None
    with pytest.raises(ValueError, match="no TF32"):
        cm.matmul_flops(v100, "tf32")


def test_a_published_tf32_row_on_v100_is_refused_with_exit_2(tmp_path, capsys):
    path = tmp_path / "v100-tf32.toml"
    path.write_text('''
[models.m]
catalog = "gpt3-1.3b"

[clusters.c]
gpu = "V100-SXM2-16GB"
nodes = 1
gpus_per_node = 8
inter_gbps = 100.0

[[measurement]]
id = "r"
model = "m"
cluster = "c"
global_batch = 16
metric = "iteration_time_s"
value = 1.0
layout = { tp = 1, pp = 1, dp = 8, b = 1, precision = "tf32" }
''', encoding="utf-8")
    assert cli.main(["validate", "--file", str(path)]) == 2
    err = capsys.readouterr().err
    assert "precision" in err and "no TF32" in err and len(err.strip().splitlines()) == 1


# ---- keys ----------------------------------------------------------------------------------------

def test_the_keys_parse_and_bad_values_are_refused():
    assert parse_layout("tp=2 pp=1 dp=2 precision=fp32").running.precision == "fp32"
    assert parse_layout("tp=2 pp=1 dp=2 precision=TF32").running.precision == "tf32"
    assert "precision=tf32" in parse_layout("tp=2 pp=1 dp=2 precision=tf32").text()
    assert parse_runtime("zero=0 precision=fp32").running.precision == "fp32"
    with pytest.raises(InputError, match="precision=fp64: must be bf16, fp16, fp32 or tf32"):
        parse_layout("tp=2 pp=1 dp=2 precision=fp64")
    with pytest.raises(InputError, match="precision=int8: must be bf16, fp16, fp32 or tf32"):
        parse_runtime("precision=int8")


def test_flash_attention_runs_in_16_bits_only():
    a100 = IslandSpec("a", GPUS["A100-SXM4-80GB"], 1, 8)
    assert BuiltinParallelizer(running=Running(precision="bf16")).running_on(a100).flash
    assert not BuiltinParallelizer(running=Running(precision="fp32")).running_on(a100).flash
    assert not BuiltinParallelizer(running=Running(precision="tf32")).running_on(a100).flash


# ---- one stage -----------------------------------------------------------------------------------

def _stage(precision: str, tp: int = 2, gpu: str = "A100-SXM4-80GB"):
    island = IslandSpec("a", GPUS[gpu], 1, 8)
    sl = Slice(tuple(slice_model(LLAMA, seq=1024)))
    lay = Layout(tp, 1, 8 // tp, (sl.layers,), "none", 0)
    tab = layer_table(sl, element_bytes=cm.element_bytes(precision))
    return price_stage(sl, island, tab, lay, 0, stage_nodes(island, tp, 8 // tp, 1), microbatch_size=8 // tp,
                       microbatches=4, reserved_bytes=0.0, running=Running(flash=False, sequence_parallel=False, precision=precision))


def test_a_fp32_stage_keeps_twice_the_activations_and_four_fifths_more_state():
    bf16, fp32, tf32 = _stage("bf16"), _stage("fp32"), _stage("tf32")
    assert fp32.activation_bytes == 2 * bf16.activation_bytes  # Llama: no masks
    assert fp32.activation_bytes == tf32.activation_bytes and fp32.static_bytes == tf32.static_bytes
    # ZeRO 0: 16 bytes a parameter against bf16's 18 (the head and embedding are on the stage too)
    assert fp32.static_bytes == pytest.approx(bf16.static_bytes * 16 / 18)
    # the GEMMs at 19.5 TFLOP/s against 156 and 312: slowest in fp32, tf32 between
    assert fp32.time_s > tf32.time_s > bf16.time_s


def test_a_stage_refuses_a_layer_table_of_another_element_size():
    island = IslandSpec("a", GPUS["A100-SXM4-80GB"], 1, 8)
    sl = Slice(tuple(slice_model(LLAMA, seq=1024)))
    lay = Layout(1, 1, 8, (sl.layers,), "none", 0)
    with pytest.raises(ValueError, match="layer table counts 2-byte elements"):
        price_stage(sl, island, layer_table(sl), lay, 0, stage_nodes(island, 1, 8, 1), microbatch_size=8,
                    microbatches=1, reserved_bytes=0.0, running=Running(flash=False, sequence_parallel=False, precision="fp32"))


# ---- exports -------------------------------------------------------------------------------------

def _exported(precision: str, target: str):
    import json

    from hetopt.export import export

    # torchtitan's job file names a model it ships: the same plan as a Llama-3 8B plan (issue 40)
    name = "plan-one-island-gpt3-1.3b-as-llama-3-8b.json" if target == "torchtitan" else "plan-one-island-gpt3-1.3b.json"
    doc = json.loads((Path(__file__).resolve().parents[1] / "golden" / "export" / "inputs"
                      / name).read_text(encoding="utf-8"))
    doc["running"] = doc["running"] | {"precision": precision}
    return export(doc, target, allow_gaps=True)


def test_fp32_and_tf32_export_without_a_16_bit_flag():
    import json
    import tomllib

    for precision in ("fp32", "tf32"):
        args = _exported(precision, "megatron").files["megatron.args"]
        assert "--bf16" not in args and "--fp16" not in args and "--fp32" not in args  # Megatron-LM's fp32 default
        config = json.loads(_exported(precision, "deepspeed").files["ds_config.json"])
        assert not {"bf16", "fp16", "fp32", "tf32"} & set(config)  # DeepSpeed trains in fp32 without a section
        job = tomllib.loads(_exported(precision, "torchtitan").files["torchtitan.toml"])
        assert job["training"]["mixed_precision_param"] == "float32"
    assert "--bf16" in _exported("bf16", "megatron").files["megatron.args"]


def test_tf32_exports_turn_tf32_on_in_the_launch_script():
    out = _exported("tf32", "megatron")
    assert "export TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1" in out.files["launch.sh"]
    assert any(g.startswith("precision tf32:") for g in out.gaps)
    # plain fp32: the variable at 0 (NVIDIA's containers set it to 1, which would run TF32 unpriced)
    assert "export TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=0" in _exported("fp32", "megatron").files["launch.sh"]
    assert not any(g.startswith("precision tf32:") for g in _exported("fp32", "megatron").gaps)


# ---- Sailor's GH200 runs -------------------------------------------------------------------------

def test_sailors_gh200_runs_are_read_in_tf32_and_all_priced(capsys):
    import json

    from hetopt.catalog import instances_dir
    from hetopt.planner.evaluation.published import load_published

    rows = load_published(instances_dir() / "published" / "sailor-gh200.toml")
    assert len(rows) == 27 and {r.layout.running.precision for r in rows} == {"tf32"}
    assert {r.island.gpu.name for r in rows} == {"GH200"} and all(r.layout.tp == 4 for r in rows)
    assert cli.main(["validate", "--file", "sailor-gh200", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert all(not r["reason"] and not r["over_memory"] for r in doc["rows"])  # priced, and fits
    # the two settings of three layouts (OPT-350M on 16 and 32 nodes) are ranked
    assert sorted(s["rows"] for s in doc["settings"].values()) == [3, 3]
