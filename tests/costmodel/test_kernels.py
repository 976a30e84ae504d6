"""The GPU's side of a layer's kernels (issue 41): GEMM tiles in waves on the GPU's SMs."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest

from hetopt import costmodel as cm
from hetopt.costmodel import stage as st
from hetopt.costmodel.running import Running
from hetopt.hardware import load_gpus
from hetopt.planner.parallelizer.builtin import BuiltinParallelizer, Layout
from hetopt.planner.parallelizer.protocol import IslandSpec, Slice, slice_model
from hetopt.workload import ModelConfig

GPUS = load_gpus()
A100 = GPUS["A100-SXM4-80GB"]
GPT350 = ModelConfig("gpt-350m", "gpt", 24, 1024, 16, 4096, 51200, 1024)


def _simulated_waves(sms: int, m: int, n: int) -> float:
    """A second reading: deal the tiles of every shape to SMs one at a time and time the busiest SM."""
    best = math.inf
    for bm, bn in cm.GEMM_TILES:
        busy = [0] * sms
        for tile in range(math.ceil(m / bm) * math.ceil(n / bn)):
            busy[tile % sms] += bm * bn
        best = min(best, max(busy))
    return best * sms / (m * n)


def test_waves_by_hand():
    # 96 tiles of 64×64 on 108 SMs: one wave, 96/108 of it busy
    assert cm.gemm_waves(108, 1024, 384) == pytest.approx(108 / 96)
    # 109 tiles of 256×128 would take two waves; 64×64 tiles fill them better
    assert cm.gemm_waves(108, 128 * 109, 256) == pytest.approx(
        min(math.ceil(math.ceil(128 * 109 / bm) * math.ceil(256 / bn) / 108) * bm * bn for bm, bn in cm.GEMM_TILES)
        * 108 / (128 * 109 * 256))
    assert cm.gemm_waves(0, 100, 100) == 1.0  # no SM count: nothing charged


def test_waves_against_dealing_the_tiles_on_random_shapes():
    rng = random.Random(7)
    for _ in range(200):
        sms, m, n = rng.choice((40, 80, 108, 132)), rng.randint(1, 9000), rng.randint(1, 9000)
        q = cm.gemm_waves(sms, m, n)
        assert q == pytest.approx(_simulated_waves(sms, m, n), rel=1e-12)
        assert q >= 1.0


def test_big_gemms_lose_almost_nothing_small_ones_more():
    assert cm.gemm_waves(108, 16384, 16384) < 1.005
    assert cm.gemm_waves(132, 8192, 12288) < 1.01
    assert cm.gemm_waves(108, 1024, 128) > 1.5


def test_layer_shapes_and_quantization_flops_by_hand():
    shapes = cm.dense_gemm_shapes(GPT350, 0, 1024, tp=8)
    assert shapes == ((1024, 384, 1024), (1024, 1024, 128), (1024, 512, 1024), (1024, 1024, 512))
    fwd, bwd = cm.quantization_flops(108, shapes)
    expect_f = sum(2 * m * n * k * (cm.gemm_waves(108, m, n) - 1) for m, n, k in shapes)
    expect_b = sum(2 * m * n * k * (cm.gemm_waves(108, m, k) - 1 + cm.gemm_waves(108, k, n) - 1) for m, n, k in shapes)
    assert (fwd, bwd) == (pytest.approx(expect_f), pytest.approx(expect_b))
    assert fwd > 0 and bwd > 0
    # SwiGLU: gate and up fused into one 2f-wide GEMM
    llama = ModelConfig("l", "llama", 2, 1024, 8, 2816, 32000, 1024)
    assert cm.dense_gemm_shapes(llama, 0, 512)[2] == (512, 2 * 2816, 1024)


#: The layers replayed as CUDA graphs: no host floor, so a small stage's kernel terms show
#: (``cm.HOST_STACKS["cudagraph"]``).
GRAPHED = Running(flash=False, overlap=False, host="cudagraph")


def _stage(gpu, tp=8, m=1):
    sl = Slice(slice_model(GPT350)[1:3])  # two middle layers
    isl = IslandSpec("a", gpu, 1, 8)
    par = BuiltinParallelizer(running=GRAPHED)
    lay = Layout(tp=tp, pp=1, dp=1, split=(2,), recompute="none", zero_stage=0)
    return par.plan(sl, isl, lay, microbatch_size=m, microbatches=4).stages[0]


def test_the_stage_pays_the_lost_flops_at_the_gemm_efficiency():
    """Two GPT-350M layers at TP 8 and micro-batch 1 on an A100: the stage with the catalog's 108 SMs
    is slower than with none by exactly the layers' lost FLOPs at e_g."""
    without = _stage(dataclasses.replace(A100, sms=0))
    with_waves = _stage(A100)
    fwd, bwd = cm.quantization_flops(108, cm.dense_gemm_shapes(GPT350, 1, 1024, tp=8))
    rate = A100.training_flops * A100.gemm_efficiency
    assert with_waves.forward_s - without.forward_s == pytest.approx(2 * fwd / rate, rel=1e-9)
    assert with_waves.backward_s - without.backward_s == pytest.approx(2 * bwd / rate, rel=1e-9)
    # the floor the search prunes with reads the same kernels: still a lower bound of the price
    sl = Slice(slice_model(GPT350)[1:3])
    lay = Layout(tp=8, pp=1, dp=1, split=(2,), recompute="none", zero_stage=0)
    running = GRAPHED.on(A100)
    tab = st.layer_table(sl, element_bytes=cm.element_bytes(running.precision))
    floor = st.path_floor_s(sl, IslandSpec("a", A100, 1, 8), tab, lay, 0, microbatch_size=1, running=running)
    assert floor <= with_waves.time_s * (1 + 1e-12)


# ------------------------------------------------------- kernel launches: the GPU's and the host's


def test_layer_kernels_by_hand():
    assert cm.layer_kernels(GPT350) == 2 + 4 + 2 + 1 + 4 + 1  # norms, GEMMs, residuals, GELU, attention, its dropout
    assert cm.layer_kernels(GPT350, flash=True) == 2 + 4 + 2 + 1 + 1
    llama = ModelConfig("l", "llama", 2, 1024, 8, 2816, 32000, 1024)
    assert cm.layer_kernels(llama) == 13  # no dropout on the scores


def test_the_host_pays_a_launch_per_kernel_on_a_stack_measured_without_a_gpu():
    fwd, bwd = cm.host_floor_s(3, launches=(40, 80))
    assert fwd == pytest.approx(3 * cm.HOST_LAYER_FORWARD_S + 40 * cm.HOST_LAUNCH_S)
    assert bwd == pytest.approx(3 * cm.HOST_LAYER_BACKWARD_S + 80 * cm.HOST_LAUNCH_S)
    assert cm.HOST_LAUNCH_S == pytest.approx(6e-6)
    # torch1 was measured on GPU hosts, its launches inside its per-layer time
    assert cm.host_floor_s(3, stack="torch1", launches=(40, 80)) == cm.host_floor_s(3, stack="torch1")


def _gpt_stage(par_running, lay, m=1, M=4, gpu=A100, layers=2):
    sl = Slice(slice_model(GPT350)[1:1 + layers])
    isl = IslandSpec("a", gpu, 1, 8)
    return BuiltinParallelizer(running=par_running).plan(sl, isl, lay, microbatch_size=m, microbatches=M).stages[0]


def test_the_gpu_pays_its_fixed_time_for_every_kernel(monkeypatch):
    running = GRAPHED
    lay = Layout(tp=1, pp=1, dp=1, split=(2,), recompute="none", zero_stage=0)
    with_gpu = _gpt_stage(running, lay)
    monkeypatch.setattr(cm.kernels, "GPU_KERNEL_S", 0.0)
    without = _gpt_stage(running, lay)
    assert with_gpu.forward_s - without.forward_s == pytest.approx(2 * 14 * 70e-6 / 80, rel=1e-9)
    assert with_gpu.backward_s - without.backward_s == pytest.approx(2 * 2 * 14 * 70e-6 / 80, rel=1e-9)


def test_a_small_tp8_layer_is_set_by_the_host_and_its_launches():
    """GPT-350M at TP 8, micro-batch 1: two layers' kernels take less than the host needs to issue
    them and their TP all-reduces (2 a pass a layer without sequence parallelism)."""
    running = Running(flash=False, overlap=False, sequence_parallel=False)
    lay = Layout(tp=8, pp=1, dp=1, split=(2,), recompute="none", zero_stage=0)
    st8 = _gpt_stage(running, lay)
    assert st8.host_bound
    launches = 2 * (14 + 2)
    assert st8.forward_s == pytest.approx(2 * cm.HOST_LAYER_FORWARD_S + launches * cm.HOST_LAUNCH_S, rel=1e-12)
    assert st8.backward_s >= 2 * cm.HOST_LAYER_BACKWARD_S + (2 * 2 * 14 + 2 * 2) * cm.HOST_LAUNCH_S - 1e-12


def test_zero3_list_collectives_pay_a_copy_launch_a_rank_piece(monkeypatch):
    """DeepSpeed's 2021 ZeRO-3 tensor by tensor: each collective copies its d rank pieces one at a
    time (PyTorch's list collectives), d launches the host issues on the path (outside the layers'
    CUDA graphs)."""
    running = dataclasses.replace(GRAPHED, zero3_per_tensor=True)
    lay = Layout(tp=1, pp=1, dp=8, split=(2,), recompute="none", zero_stage=3)
    priced = _gpt_stage(running, lay, m=8)
    monkeypatch.setattr(cm.optimizer, "HOST_LAUNCH_S", 0.0)
    monkeypatch.setattr(cm.optimizer, "GPU_KERNEL_S", 0.0)
    without = _gpt_stage(running, lay, m=8)
    tensors = 2 * cm.parameter_tensors(GPT350)  # two layers, 12 tensors each
    pieces = tensors * 8
    assert priced.forward_s - without.forward_s == pytest.approx(pieces * cm.HOST_LAUNCH_S, rel=1e-9)  # one gather
    # gather + scatter; and the optimizer step's five fused kernels' fixed GPU time, amortized over M = 4
    assert priced.backward_s - without.backward_s == pytest.approx(2 * pieces * cm.HOST_LAUNCH_S + 5 * cm.GPU_KERNEL_S / 4,
                                                                   rel=1e-9)


def test_a_small_optimizer_shard_is_stepped_at_the_hosts_launch_rate():
    # 10^5 parameters: 5.2 MB at 2 TB/s is 2.6 µs, five fused kernels' launches 30 µs
    assert cm.optimizer_step_s(1e5, A100) == pytest.approx(5 * cm.HOST_LAUNCH_S)
    # a big shard: its bytes plus the GPU's fixed time of its kernels
    big = 2e9
    kernels = 5 * math.ceil(big / cm.MULTI_TENSOR_ELEMENTS)
    assert cm.optimizer_step_s(big, A100) == pytest.approx(52 * big / A100.memory_bandwidth + kernels * cm.GPU_KERNEL_S)
