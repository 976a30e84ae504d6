"""The cost model against hand-computed formulas (REFERENCE-FIGURES.md) and its monotonicity."""

from __future__ import annotations

import itertools

import pytest

from hetopt.catalog import instances_dir
from hetopt import costmodel as cm
from hetopt.hardware import load_gpus
from hetopt import workload
from hetopt.workload import ModelConfig, load_model

MODELS = instances_dir() / "models"

GPT_6_7B = ModelConfig("gpt", "gpt", 32, 4096, 32, 16384, 50257, 2048)
SHAPES = [(2048, 4096, 32), (512, 2560, 32), (1024, 12288, 96), (2048, 5120, 40)]  # (s, h, a)


@pytest.fixture(scope="module")
def gpus():
    return load_gpus()


@pytest.mark.parametrize("s,h,a", SHAPES)
def test_gpt_layer_flops_and_parameters(s, h, a):
    cfg = ModelConfig("x", "gpt", 1, h, a, 4 * h, 50257, s)
    f = 24 * s * h * h + 4 * s * s * h
    assert cm.layer_forward_flops(cfg, s) == f
    assert cm.layer_backward_flops(cfg, s) == 2 * f
    assert cm.layer_backward_flops(cfg, s, recompute="full") == 3 * f
    assert cm.layer_backward_flops(cfg, s, recompute="selective") == 2 * f + 4 * s * s * h
    assert cm.layer_parameters(cfg) == 12 * h * h + 13 * h


@pytest.mark.parametrize("name", ["gpt3-6.7b", "gpt3-13b", "gpt3-175b"])
def test_whole_model_flops_match_narayanan(name):
    """Narayanan et al. eq. 3: 72·B·s·l·h²(1 + s/6h + V/12lh), 96·...(1 + s/6h + V/16lh) with recompute."""
    cfg = load_model(MODELS / f"{name}.toml")
    s, h, l, V, B = cfg.sequence, cfg.hidden, cfg.layers, cfg.vocab, 8
    fwd = l * cm.layer_forward_flops(cfg, s) + cm.head_forward_flops(cfg, s)
    bwd = l * cm.layer_backward_flops(cfg, s) + cm.head_backward_flops(cfg, s)
    bwd_full = l * cm.layer_backward_flops(cfg, s, recompute="full") + cm.head_backward_flops(cfg, s)
    assert B * (fwd + bwd) == pytest.approx(72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)), rel=1e-12)
    assert B * (fwd + bwd_full) == pytest.approx(96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)), rel=1e-12)


def test_gqa_swiglu_and_moe_flops():
    llama = load_model(MODELS / "llama-3-8b.toml")  # GQA: 8 KV heads of 128; SwiGLU 14336
    s, h, w, kv, f = 4096, 4096, 4096, 1024, 14336
    assert cm.layer_forward_flops(llama, s) == 2 * s * (2 * h * w + 2 * h * kv + 3 * h * f) + 4 * s * s * w
    mix = load_model(MODELS / "mixtral-8x7b.toml")  # top-2 of 8 experts, router h×8
    assert cm.layer_forward_flops(mix, s) == 2 * s * (2 * h * w + 2 * h * kv + 2 * 3 * h * f + h * 8) + 4 * s * s * w
    gshard = load_model(MODELS / "gshard-moe-2.4b.toml")  # MoE on odd layers only
    assert cm.layer_forward_flops(gshard, 1024, 1) > cm.layer_forward_flops(gshard, 1024, 0)


@pytest.mark.parametrize("s,h,a", SHAPES)
@pytest.mark.parametrize("b", [1, 3])
@pytest.mark.parametrize("t", [1, 2, 4, 8])
def test_korthikanti_activation_variants(s, h, a, b, t):
    cfg = ModelConfig("x", "gpt", 1, h, a, 4 * h, 50257, s)

    def act(**kw):
        return cm.layer_activation_bytes(cfg, s, b, tp=t, **kw)

    assert act() == pytest.approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)), rel=1e-12)
    assert act(sequence_parallel=True) == pytest.approx(s * b * h / t * (34 + 5 * a * s / h), rel=1e-12)
    assert act(sequence_parallel=True, recompute="selective") == pytest.approx(34 * s * b * h / t, rel=1e-12)
    assert act(recompute="selective") == pytest.approx(s * b * h * (10 + 24 / t), rel=1e-12)
    assert act(recompute="full") == 2 * s * b * h
    assert act(recompute="full", sequence_parallel=True) == pytest.approx(2 * s * b * h / t, rel=1e-12)
    if t == 1:
        assert act() == pytest.approx(s * b * h * (34 + 5 * a * s / h), rel=1e-12)
        assert act() == pytest.approx(b * workload.layer_activation_bytes(cfg, s), rel=1e-12)


def test_activation_generalization_counts_gqa_swiglu_and_top_k():
    llama = load_model(MODELS / "llama-2-7b.toml")  # MHA, SwiGLU f = 11008: gate and up (one fused input) and the output
    assert cm.sharded_activation_widths(llama) == 8 * 4096 + 2 * 3 * 11008
    l3 = load_model(MODELS / "llama-3-8b.toml")  # K and V are 1024 wide
    assert cm.sharded_activation_widths(l3) == 4 * 4096 + 4 * 1024 + 2 * 3 * 14336
    mix = load_model(MODELS / "mixtral-8x7b.toml")
    assert cm.ffn_activation_widths(mix) == 2 * 3 * 2 * 14336  # top-2: a token's FFN activations twice


def test_recompute_working_bytes():
    s, b, a, t = 2048, 2, 32, 4
    full = cm.layer_activation_bytes(GPT_6_7B, s, b, tp=t)
    assert cm.recompute_working_bytes(GPT_6_7B, s, b, tp=t, recompute="none") == 0.0
    assert cm.recompute_working_bytes(GPT_6_7B, s, b, tp=t, recompute="full") == full
    assert cm.recompute_working_bytes(GPT_6_7B, s, b, tp=t, recompute="selective") == pytest.approx(5 * a * s * s * b / t)


@pytest.mark.parametrize("d", [1, 2, 8, 64])
def test_zero_state_bytes(d):
    # Megatron-LM docs/user-guide/features/dist_optimizer.md: bf16 parameters with fp32 main
    # gradients 18 and 6 + 12/d with the distributed optimizer; fp16 20 and 4 + 16/d
    assert cm.state_bytes_per_parameter(0, d) == 18
    assert cm.state_bytes_per_parameter(1, d) == pytest.approx(6 + 12 / d)
    assert cm.state_bytes_per_parameter(2, d) == pytest.approx(2 + 16 / d)
    assert cm.state_bytes_per_parameter(3, d) == pytest.approx(18 / d)
    assert cm.state_bytes_per_parameter(0, d, "fp16") == 20
    assert cm.state_bytes_per_parameter(1, d, "fp16") == pytest.approx(4 + 16 / d)
    assert cm.state_bytes_per_parameter(2, d, "fp16") == pytest.approx(2 + 18 / d)
    assert cm.state_bytes_per_parameter(3, d, "fp16") == pytest.approx(20 / d)
    assert cm.distributed_optimizer_bytes_per_parameter(d, "fp16") == pytest.approx(4 + 16 / d)
    assert cm.distributed_optimizer_bytes_per_parameter(d, "bf16") == pytest.approx(6 + 12 / d)
    assert cm.distributed_optimizer_bytes_per_parameter(d, "fp32") == pytest.approx(8 + 8 / d)


@pytest.mark.parametrize("p", [1, 2, 3, 8, 64])
def test_ring_collectives(p):
    n, w = 3e9, 25e9
    assert cm.ring_allreduce_s(n, p, w) == pytest.approx(2 * (p - 1) / p * n / w)
    assert cm.ring_allgather_s(n, p, w) == pytest.approx((p - 1) / p * n / w)
    assert cm.ring_reduce_scatter_s(n, p, w) == cm.ring_allgather_s(n, p, w)
    assert cm.ring_allgather_s(n, p, w) + cm.ring_reduce_scatter_s(n, p, w) == pytest.approx(cm.ring_allreduce_s(n, p, w))


def test_tp_p2p_and_dp_communication():
    s, b, h = 2048, 4, 4096
    w = 150e9
    assert cm.tp_layer_comm_s(GPT_6_7B, s, b, 4, w) == pytest.approx(2 * (2 * 3 / 4 * 2 * s * b * h / w))
    assert cm.tp_layer_comm_s(GPT_6_7B, s, b, 1, w) == 0.0
    assert cm.p2p_transfer_s(GPT_6_7B, s, b, 12.5e9) == pytest.approx(s * b * h * 2 / 12.5e9)
    P, d, M = 1e9, 8, 16
    plain = cm.data_parallel_comm(P, d, w, zero_stage=0, microbatches=M)
    assert plain.per_iteration_s == pytest.approx(2 * (d - 1) / d * 2 * P / w)
    assert (plain.forward_s, plain.backward_s) == (0.0, pytest.approx(plain.per_iteration_s / M))
    assert cm.data_parallel_comm(P, d, w, zero_stage=1, microbatches=M) == plain
    z2 = cm.data_parallel_comm(P, d, w, zero_stage=2, microbatches=M)
    assert z2.backward_s == pytest.approx((d - 1) / d * 2 * P / w * (1 + 1 / M))
    z3 = cm.data_parallel_comm(P, d, w, zero_stage=3, microbatches=M)
    assert z3.forward_s == pytest.approx((d - 1) / d * 2 * P / w)
    assert z3.backward_s == pytest.approx(2 * (d - 1) / d * 2 * P / w)
    assert cm.data_parallel_comm(P, 1, w, zero_stage=3, microbatches=M) == cm.DataParallelComm(0.0, 0.0, 0.0)


def test_compute_time_uses_the_catalog_calibration(gpus):
    for g in gpus.values():
        for tokens in (128.0, 2048.0, 65536.0):
            eff = g.efficiency * tokens / (tokens + g.half_efficiency_tokens)
            assert cm.efficiency(g, tokens) == pytest.approx(eff)
            assert cm.compute_time_s(1e15, g, tokens) == pytest.approx(1e15 / (g.training_flops * eff))
        # more tokens per GPU never lowers the efficiency
        assert cm.efficiency(g, 512.0) <= cm.efficiency(g, 4096.0)
    with pytest.raises(ValueError):
        cm.efficiency(gpus["T4"], 0.0)


def test_more_tp_less_activation_memory_and_recompute_ordering():
    s = 2048
    for sp, b in itertools.product((False, True), (1, 4)):
        for rc in cm.RECOMPUTE_MODES:
            by_t = [cm.layer_activation_bytes(GPT_6_7B, s, b, tp=t, sequence_parallel=sp, recompute=rc) for t in (1, 2, 4, 8)]
            assert all(x >= y for x, y in zip(by_t, by_t[1:]))
            if rc != "full" or sp:
                assert by_t[0] > by_t[-1]
        for t in (1, 2, 8):
            none, sel, full = (cm.layer_activation_bytes(GPT_6_7B, s, b, tp=t, sequence_parallel=sp, recompute=rc) for rc in cm.RECOMPUTE_MODES)
            assert full < sel < none
    f = [cm.layer_backward_flops(GPT_6_7B, s, recompute=rc) for rc in cm.RECOMPUTE_MODES]
    assert f[0] < f[1] < f[2]
    for d in (2, 8):
        by_zero = [cm.state_bytes_per_parameter(z, d) for z in cm.ZERO_STAGES]
        assert all(x > y for x, y in zip(by_zero, by_zero[1:]))


def test_parameters_of_embedding_and_head():
    gpt = load_model(MODELS / "gpt3-6.7b.toml")  # tied
    assert cm.input_embedding_parameters(gpt) == (50257 + 2048) * 4096
    assert cm.head_parameters(gpt, with_embedding=True) == 0
    assert cm.head_parameters(gpt) == 50257 * 4096  # a copy on a last stage apart from the embedding
    vit = load_model(MODELS / "vit-g-14.toml")
    assert cm.head_parameters(vit) == 0 and cm.head_forward_flops(vit, 257) == 0.0
    llama = load_model(MODELS / "llama-2-7b.toml")  # untied, no learned positions
    assert cm.input_embedding_parameters(llama) + cm.head_parameters(llama, with_embedding=True) == workload.embedding_parameters(llama)


def test_bad_arguments_name_the_valid_values():
    with pytest.raises(ValueError, match="selective"):
        cm.layer_activation_bytes(GPT_6_7B, 2048, recompute="partial")
    with pytest.raises(ValueError, match="ZeRO"):
        cm.state_bytes_per_parameter(4, 2)
    with pytest.raises(ValueError, match="ZeRO"):
        cm.data_parallel_comm(1.0, 2, 1.0, zero_stage=5, microbatches=1)
    with pytest.raises(ValueError, match="fp16"):
        cm.distributed_optimizer_bytes_per_parameter(2, "int8")


@pytest.mark.parametrize(("cfg", "tp"), [
    (ModelConfig("gpt", "gpt", 2, 2048, 16, 8192, 50257, 2048), 1),
    (ModelConfig("gpt", "gpt", 2, 6144, 48, 24576, 50257, 2048), 8),
    (ModelConfig("llama", "llama", 2, 4096, 32, 14336, 128256, 8192, kv_heads=8), 4),
])
def test_a_layers_gemm_traffic_is_the_sum_over_its_gemms(cfg, tp):
    """gemm_traffic_bytes from the per-token widths is what the layer's four GEMMs, shape by shape
    (m×k by k×n on one GPU of t), read and write; and their time at ``gemm_efficiency`` adds up to
    ``gemm_time_s`` of the layer's FLOPs with that traffic: one rule, two ways."""
    gpu = load_gpus()["A100-SXM4-80GB"]
    m = 2 * 2048  # tokens of the micro-batch
    h, f = cfg.hidden, cfg.ffn
    up = (cm.ffn_matrices(cfg) - 1) * f  # gate and up, or the first matrix
    shapes = [  # (n, k) per GEMM on one GPU
        ((cfg.attention_width + 2 * cfg.kv_width) / tp, h),  # QKV, column-parallel
        (h, cfg.attention_width / tp),  # output projection, row-parallel
        (up / tp, h),  # first FFN matrix (or gate and up)
        (h, f / tp),  # last FFN matrix, row-parallel
    ]
    by_shape = sum(2 * (m * k + k * n + m * n) for n, k in shapes)
    weights = sum(k * n for n, k in shapes)
    assert cm.gemm_traffic_bytes(m, cm.gemm_operand_widths(cfg), weights, tp=tp) == pytest.approx(by_shape, rel=1e-12)
    flops = sum(2 * m * n * k for n, k in shapes)
    each = sum(2 * m * n * k / (gpu.training_flops * cm.gemm_efficiency(gpu, m, n, k)) for n, k in shapes)
    assert cm.gemm_time_s(flops, gpu, traffic_bytes=by_shape) == pytest.approx(each, rel=1e-12)
    # the FLOPs are the layer's, less the attention scores' (priced apart)
    assert flops == pytest.approx((cm.layer_forward_flops(cfg, 2048) - cm.attention_score_flops(cfg, 2048)) * 2 / tp, rel=1e-12)


def test_gemm_efficiency_falls_with_every_dimension_and_never_reaches_e_g():
    gpu = load_gpus()["H100-SXM5"]
    base = cm.gemm_efficiency(gpu, 4096, 4096, 4096)
    assert base < gpu.gemm_efficiency
    for shape in ((512, 4096, 4096), (4096, 512, 4096), (4096, 4096, 512)):
        assert cm.gemm_efficiency(gpu, *shape) < base
    with pytest.raises(ValueError, match="must be > 0"):
        cm.gemm_efficiency(gpu, 0, 1, 1)


def test_a_catalog_written_for_the_saturating_gemm_model_is_refused_with_the_fix(tmp_path):
    from hetopt.errors import InputError

    text = (instances_dir() / "gpus.toml").read_text(encoding="utf-8")
    old = tmp_path / "gpus.toml"
    old.write_text(text.replace("[gpu.T4]\n", "[gpu.T4]\ngemm_half_tokens = 256\n", 1), encoding="utf-8")
    with pytest.raises(InputError, match=r"gpu\.T4\.gemm_half_tokens: is no longer read: .*delete the key"):
        load_gpus(old)


def test_layers_without_dropout_keep_no_masks():
    """Korthikanti et al.'s 10h replicated bytes a token include two 1-byte dropout masks, and
    each kept attention score a mask and a dropout output: a Llama layer, which has no dropout,
    keeps 8h and the softmax output alone (2 bytes a score)."""
    from hetopt.workload import ModelConfig
    s, b, h, a, t = 2048, 2, 4096, 32, 4
    gpt = ModelConfig("g", "gpt", 1, h, a, 4 * h, 0, s)
    llama = ModelConfig("l", "llama", 1, h, a, 4 * h, 0, s)  # same widths; only dropout differs
    sharded_llama = cm.sharded_activation_widths(llama, 0)
    assert cm.layer_activation_bytes(llama, s, b, tp=t) == s * b * (8 * h + sharded_llama / t) + 2 * a * s * s * b / t
    assert cm.layer_activation_bytes(gpt, s, b, tp=t) == s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    full = cm.layer_activation_bytes(llama, s, b, tp=t, recompute="full")
    assert full == cm.layer_activation_bytes(gpt, s, b, tp=t, recompute="full")  # the layer input only, either way
