"""Bytes a GPU holds: activations per layer (by recomputation mode and TP), logits, and the training state by ZeRO stage.

Part of the cost model (:mod:`hetopt.costmodel`); every formula, constant and source is in
``formulations/costmodel.md``. SI units: FLOPs, bytes, seconds, bytes/s.
"""

from __future__ import annotations

from hetopt.workload import ACTIVATION_BYTES, ModelConfig, ffn_matrices
from hetopt.costmodel.precision import DEFAULT_PRECISION, ELEMENT_BYTES, elements_of, element_bytes
from hetopt.costmodel.flops import check_recompute


#: ZeRO stages: 0 plain data parallelism, 1 shard optimizer state, 2 + gradients, 3 + weights.
ZERO_STAGES = (0, 1, 2, 3)

#: Bytes per logit the loss keeps while it runs: fp32 logits and their gradient (4 + 4).
LOGIT_BYTES = 8

#: Bytes per attention-score element kept without recomputation (Korthikanti et al.):
#: softmax output (2), dropout mask (1), dropout output (2).
ATTENTION_SCORE_BYTES = 5

#: Bytes per token, in units of h, that tensor parallelism without sequence parallelism
#: leaves replicated on every GPU (Korthikanti et al.): the two LayerNorm inputs (2 + 2),
#: the QKV and the MLP input (2 + 2) and the two 1-byte dropout masks (1 + 1). Layers
#: without dropout (Llama) keep no masks: 8 (:func:`replicated_activation_widths`).
REPLICATED_ACTIVATION_WIDTHS = 10

#: Of those, the two dropout masks after attention and after the FFN (1 + 1).
REPLICATED_DROPOUT_WIDTHS = 2

#: Bytes per attention-score element a layer without dropout keeps: the softmax output (2).
SOFTMAX_OUTPUT_BYTES = 2

#: Bytes per token, in units of h, of the layer input that full recomputation keeps.
CHECKPOINT_WIDTHS = ACTIVATION_BYTES

#: fp16/bf16 tensors of the FFN width f a two-matrix (GELU) FFN keeps per token: the
#: activation's input and output. A gated (SwiGLU) FFN keeps three: the gate and up outputs,
#: which a fused SwiGLU saves as its one 2f-wide input (Megatron-Core's SwiGLUFunction in
#: megatron/core/fusions/fused_bias_swiglu.py, flash-attn's and torch.compile'd versions
#: alike), and its output (the down projection's input). Eager PyTorch keeps the SiLU's
#: output too (four): not modelled.
FFN_TENSORS = {2: 2, 3: 3}

#: Per-parameter training-state bytes of Megatron's mixed precision, (replicated on every
#: data-parallel replica, sharded by its distributed optimizer), from Megatron-LM's
#: docs/user-guide/features/dist_optimizer.md: fp16 parameters and gradients 2 + 2, sharded
#: fp32 main parameters, main gradients, Adam's m and v 16 (20 in all); bf16 parameters with
#: fp32 main gradients 2 + 4, sharded fp32 main parameters, m and v 12 (18); fp32 8 + 8.
#: Megatron keeps the fp32 main gradients that the ZeRO paper's 2 + 2 + 12 = 16 leaves out.
#: fp32 training (and tf32, which stores fp32) keeps no 16-bit copy: fp32 parameters and
#: gradients 4 + 4 on every replica, Adam's m and v 4 + 4 sharded (16 in all, the ZeRO paper's
#: "fp32 training" count, Rajbhandari et al. 2020 §3.1, without its 16-bit copies).
DISTRIBUTED_OPTIMIZER_BYTES = {"fp16": (4.0, 16.0), "bf16": (6.0, 12.0), "fp32": (8.0, 8.0), "tf32": (8.0, 8.0)}

# ------------------------------------------------------------------------ activations


def ffn_activation_widths(cfg: ModelConfig, index: int = 0, *, element_bytes: int = ACTIVATION_BYTES) -> float:
    """Bytes per token of the FFN's inner tensors, the part tensor parallelism shards.

    ``element_bytes`` (2, or 4 in fp32) × tensors kept × FFN width, times top-k for an MoE layer
    (a token visits k experts). GPT: 2 × 2 × 4h = 16h, Korthikanti's 16 of the 24.
    """
    if cfg.is_moe_layer(index):
        width = cfg.top_k * (cfg.expert_ffn or cfg.ffn)
    else:
        width = cfg.ffn
    return element_bytes * FFN_TENSORS[ffn_matrices(cfg)] * width


def sharded_activation_widths(cfg: ModelConfig, index: int = 0, *, element_bytes: int = ACTIVATION_BYTES) -> float:
    """Bytes per token that tensor parallelism shards over t (without the attention scores).

    Q and the output projection's input (2 + 2 bytes × attention width), K and V (2 + 2 ×
    KV width), and the FFN's inner tensors. GPT: 8h + 16h = 24h (Korthikanti et al.).
    """
    attention = 2 * element_bytes * cfg.attention_width + 2 * element_bytes * cfg.kv_width
    return attention + ffn_activation_widths(cfg, index, element_bytes=element_bytes)


def replicated_activation_widths(cfg: ModelConfig, element_bytes: int = ACTIVATION_BYTES) -> int:
    """Bytes per token, in units of h, a layer keeps at full width under TP without SP.

    Korthikanti et al.'s 10 with dropout (GPT, ViT); 8 for layers without dropout (Llama),
    which write no dropout masks. In fp32 (``element_bytes`` 4) the 16-bit tensors double and
    the 1-byte masks do not: 18 and 16.

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 1024, 16, 4096, 0, 1024)
    >>> llama = ModelConfig("y", "llama", 1, 1024, 16, 4096, 0, 1024)
    >>> replicated_activation_widths(gpt), replicated_activation_widths(llama), replicated_activation_widths(gpt, 4)
    (10, 8, 18)
    """
    dropout = cfg.architecture in DROPOUT_ARCHITECTURES
    tensors = elements_of(REPLICATED_ACTIVATION_WIDTHS - REPLICATED_DROPOUT_WIDTHS, element_bytes)
    return tensors + (REPLICATED_DROPOUT_WIDTHS if dropout else 0)


def attention_score_bytes(cfg: ModelConfig, element_bytes: int = ACTIVATION_BYTES) -> int:
    """Bytes per attention-score element kept without FlashAttention or recomputation.

    Softmax output, dropout mask and dropout output (2 + 1 + 2) with dropout (GPT, ViT); the
    softmax output alone (2) without (Llama). fp32: 4 + 1 + 4 and 4.

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 1024, 16, 4096, 0, 1024)
    >>> attention_score_bytes(gpt), attention_score_bytes(gpt, 4)
    (5, 9)
    """
    softmax = elements_of(SOFTMAX_OUTPUT_BYTES, element_bytes)
    if cfg.architecture not in DROPOUT_ARCHITECTURES:
        return softmax
    return softmax + DROPOUT_MASK_BYTES + elements_of(ATTENTION_SCORE_BYTES - SOFTMAX_OUTPUT_BYTES - DROPOUT_MASK_BYTES, element_bytes)


def layer_activation_bytes(
    cfg: ModelConfig,
    seq: int,
    samples: float = 1.0,
    *,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
    index: int = 0,
    flash: bool = False,
    element_bytes: int = ACTIVATION_BYTES,
) -> float:
    """Activation bytes one layer keeps per GPU for ``samples`` samples until its backward.

    ``element_bytes``: bytes per activation element (``element_bytes(precision)``: 2, or 4 in
    fp32 and tf32, where every tensor but the 1-byte dropout masks doubles).

    ``flash``: FlashAttention keeps no s×s scores (nor their dropout mask), so the 5·a·s/h
    term is gone as with selective recomputation; its per-row softmax statistics (4 bytes
    per head and token) are left out, < 0.1% of the rest.

    Korthikanti et al. (2022), generalized to GQA, SwiGLU and MoE (``formulations/costmodel.md``).
    For GPT shapes: no parallelism s·b·h·(34 + 5·a·s/h); TP t: s·b·h·(10 + 24/t + 5·a·s/(h·t));
    TP + SP: (s·b·h/t)·(34 + 5·a·s/h); + selective recompute: drop the 5·a·s/h term;
    full recompute: 2·s·b·h (2·s·b·h/t with SP).

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 4096, 32, 16384, 50257, 2048)
    >>> s, b, h, a, t = 2048, 2, 4096, 32, 4
    >>> layer_activation_bytes(gpt, s, b, tp=t) == s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    True
    >>> layer_activation_bytes(gpt, s, b, tp=t, sequence_parallel=True, recompute="selective") == 34 * s * b * h / t
    True
    """
    check_recompute(recompute)
    h = cfg.hidden
    if recompute == "full":
        kept = elements_of(CHECKPOINT_WIDTHS, element_bytes) * h
        return seq * samples * kept / (tp if sequence_parallel else 1)
    replicated = replicated_activation_widths(cfg, element_bytes) * h
    sharded = sharded_activation_widths(cfg, index, element_bytes=element_bytes)
    per_token = (replicated + sharded) / tp if sequence_parallel else replicated + sharded / tp
    scores = 0.0 if recompute == "selective" or flash else attention_score_bytes(cfg, element_bytes) * cfg.heads * seq * seq * samples / tp
    return seq * samples * per_token + scores


def recompute_working_bytes(
    cfg: ModelConfig, seq: int, samples: float, *, tp: int = 1, sequence_parallel: bool = False, recompute: str = "none",
    index: int = 0, flash: bool = False, element_bytes: int = ACTIVATION_BYTES,
) -> float:
    """Transient bytes while one layer is recomputed in backward (0 without recomputation).

    Full: that layer's complete activations; selective: its attention scores.
    """
    check_recompute(recompute)
    if recompute == "none":
        return 0.0
    full = layer_activation_bytes(cfg, seq, samples, tp=tp, sequence_parallel=sequence_parallel, index=index, flash=flash,
                                  element_bytes=element_bytes)
    if recompute == "full":
        return full
    kept = layer_activation_bytes(cfg, seq, samples, tp=tp, sequence_parallel=sequence_parallel, recompute="selective",
                                  index=index, flash=flash, element_bytes=element_bytes)
    return full - kept


def logit_bytes(cfg: ModelConfig, seq: int, samples: float, *, tp: int = 1) -> float:
    """Bytes of the loss's fp32 logits and their gradient, vocabulary-sharded over t."""
    return LOGIT_BYTES * seq * samples * cfg.vocab / tp


def state_bytes_per_parameter(zero_stage: int = 0, dp: int = 1, precision: str = DEFAULT_PRECISION) -> float:
    """Training-state bytes per parameter per GPU under ZeRO stage 0-3 over d replicas.

    Megatron's mixed precision (``DISTRIBUTED_OPTIMIZER_BYTES``: the 16-bit parameters and
    the main gradients it keeps on every replica, the fp32 state the distributed optimizer
    shards). Stage 0 keeps all of it; 1 shards the fp32 state (Megatron's distributed
    optimizer); 2 also the main gradients; 3 everything. bf16 (fp32 main gradients):
    18; 6 + 12/d; 2 + 16/d; 18/d. fp16 (fp16 gradients, fp32 copies in the optimizer): 20;
    4 + 16/d; 2 + 18/d; 20/d. fp32 and tf32 (fp32 parameters and gradients, Adam's m and v):
    16; 8 + 8/d; 4 + 12/d; 16/d.

    Examples
    --------
    >>> [state_bytes_per_parameter(z, 4) for z in (0, 1, 2, 3)]
    [18.0, 9.0, 6.0, 4.5]
    >>> state_bytes_per_parameter(0, 1, "fp16"), state_bytes_per_parameter(1, 8, "fp16")
    (20.0, 6.0)
    >>> [state_bytes_per_parameter(z, 4, "fp32") for z in (0, 1, 2, 3)]
    [16.0, 10.0, 7.0, 4.0]
    """
    if zero_stage not in ZERO_STAGES:
        raise ValueError(f"unknown ZeRO stage {zero_stage!r} (valid: 0, 1, 2, 3)")
    if dp < 1:
        raise ValueError(f"data-parallel degree must be >= 1 (got {dp})")
    if precision not in DISTRIBUTED_OPTIMIZER_BYTES:
        raise ValueError(f"unknown precision {precision!r} (valid: {', '.join(DISTRIBUTED_OPTIMIZER_BYTES)})")
    replicated, sharded = DISTRIBUTED_OPTIMIZER_BYTES[precision]
    # ZeRO-2 keeps the working weights: 16-bit, or fp32 where the run keeps no 16-bit copy
    kept = {0: replicated + sharded, 1: replicated, 2: ELEMENT_BYTES[precision], 3: 0.0}[zero_stage]
    return kept + (replicated + sharded - kept) / dp


def distributed_optimizer_bytes_per_parameter(dp: int, precision: str = DEFAULT_PRECISION) -> float:
    """Megatron's distributed optimizer over d replicas: ZeRO stage 1 of :func:`state_bytes_per_parameter`.

    Examples
    --------
    >>> distributed_optimizer_bytes_per_parameter(1, "fp16"), distributed_optimizer_bytes_per_parameter(8, "bf16")
    (20.0, 7.5)
    """
    return state_bytes_per_parameter(1, dp, precision)


#: The 1-byte dropout mask written per element by each fused bias-dropout-add (GPT, ViT).
DROPOUT_MASK_BYTES = 1

#: Architectures whose layers apply dropout (Llama-style layers have none).
DROPOUT_ARCHITECTURES = ("gpt", "vit")
