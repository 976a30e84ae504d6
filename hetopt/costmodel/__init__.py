"""The analytic cost model of training one transformer layer: FLOPs, bytes, seconds.

Pure functions of a :class:`~hetopt.workload.ModelConfig`, a
:class:`~hetopt.hardware.GpuType` and a layout (tensor parallel degree t, data parallel
degree d, activation recomputation, ZeRO stage). SI units: FLOPs, bytes, seconds,
bytes/s. Every formula, constant and assumption is in ``formulations/costmodel.md``; the
symbols there (s sequence, b samples per replica per micro-batch, h hidden, a heads,
t, d) are the argument names here.

Examples
--------
>>> from hetopt.workload import ModelConfig
>>> gpt = ModelConfig("x", "gpt", 1, 4096, 32, 16384, 50257, 2048)
>>> layer_activation_bytes(gpt, 2048, 1) == 2048 * 4096 * (34 + 5 * 32 * 2048 / 4096)
True
>>> state_bytes_per_parameter(zero_stage=3, dp=8)
2.25
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hetopt.hardware import GpuType
from hetopt.workload import (
    ACTIVATION_BYTES,
    ModelConfig,
    ffn_matrices,
    head_forward_flops,
    layer_forward_flops,
    layer_parameters,
)

#: Activation recomputation modes: keep everything, recompute the attention scores
#: (Korthikanti et al.'s selective recomputation), recompute the whole layer from its input.
RECOMPUTE_MODES = ("none", "selective", "full")
#: ZeRO stages: 0 plain data parallelism, 1 shard optimizer state, 2 + gradients, 3 + weights.
ZERO_STAGES = (0, 1, 2, 3)

#: fp16/bf16 weight bytes per parameter (mixed precision keeps a 16-bit working copy).
WEIGHT_BYTES = 2
#: 16-bit gradient bytes per parameter; also what the gradient all-reduce moves.
GRADIENT_BYTES = 2
#: Bytes per gradient element of a data-parallel reduction run in fp32 (``gradreduce=fp32``):
#: DeepSpeed's ``"fp32_allreduce": true`` (deepspeed/runtime/engine.py: the 16-bit gradients
#: cast to fp32 before the all-reduce), Megatron-LM's ``--accumulate-allreduce-grads-in-fp32``
#: (fp32 main-gradient buffers reduced as they are), FSDP2's ``reduce_dtype=torch.float32``.
#: Twice the bytes of a 16-bit reduction, the same ring.
FP32_GRADIENT_BYTES = 4
#: Backward FLOPs per forward FLOP: every matmul has an input- and a weight-gradient matmul.
BACKWARD_PER_FORWARD = 2.0
#: Training FLOPs per forward FLOP without recomputation: forward 1 + backward 2.
TRAINING_PER_FORWARD = 1.0 + BACKWARD_PER_FORWARD
#: Megatron tensor parallelism all-reduces the layer's activations twice per pass (after
#: the attention output projection and after the second MLP matmul; in backward the two
#: matching input-gradient all-reduces). Sequence parallelism replaces each by a
#: reduce-scatter + all-gather pair of the same volume.
TP_ALLREDUCES_PER_PASS = 2
#: The vocabulary-parallel embedding all-reduces its output once in forward; the
#: column-parallel output head all-reduces its input gradient once in backward.
EMBEDDING_TP_ALLREDUCES = 1
HEAD_TP_ALLREDUCES = 1
#: Bytes per logit the loss keeps while it runs: fp32 logits and their gradient (4 + 4).
LOGIT_BYTES = 8
#: Bytes per logit the loss's memory-bound kernels move, counted kernel by kernel in
#: Megatron-Core's ``_VocabParallelCrossEntropy`` (megatron/core/tensor_parallel/
#: cross_entropy.py, core r0.8), forward: the 16-bit logits cast to fp32 (read 2, write 4),
#: their max (read 4), minus the max in place (4 + 4), exp in place (4 + 4), its sum (read 4),
#: divided by the sum in place (4 + 4); backward: times the output gradient in place (4 + 4),
#: cast back to 16 bits for the head's matmuls (4 + 2). Forward 38, backward 14.
LOSS_FORWARD_BYTES = (2 + 4) + 4 + (4 + 4) + (4 + 4) + 4 + (4 + 4)
LOSS_BACKWARD_BYTES = (4 + 4) + (4 + 2)
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
#: The formats a plan trains in (``precision`` of the planner, ``--layout``, ``--runtime``):
#: bf16 with fp32 main gradients, Megatron's default for current runs; fp16 with loss scaling
#: (the 2021 runs, and every run on a GPU without BF16); fp32, PyTorch's default dtype with its
#: default ``torch.backends.cuda.matmul.allow_tf32 = False`` (since PyTorch 1.12), matmuls on the
#: CUDA cores; tf32, fp32 tensors whose matmuls run on the tensor cores in TF32
#: (``allow_tf32 = True``, Ampere and later).
PRECISIONS = ("bf16", "fp16", "fp32", "tf32")
#: Bytes per element of the weights, gradients and activations a precision stores and moves:
#: 2 for the 16-bit formats, 4 for fp32 and tf32 (TF32 is a tensor-core arithmetic mode on fp32
#: storage: NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020, "TF32"). Every 16-bit
#: byte count of this module (activations, hand-overs, TP/EP/DP collectives, memory-bound
#: kernels, GEMM operands) is a count of elements times ``ACTIVATION_BYTES``; the functions take
#: the element size as ``element_bytes`` (default: 16 bits). 1-byte dropout masks and the
#: loss's fp32 logits keep their sizes.
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "tf32": 4}
#: The precisions FlashAttention's kernels take: fp16 and bf16 only (Dao-AILab/flash-attention
#: README, "Datatype fp16 and bf16"); a fp32 or tf32 run computes attention unfused.
FLASH_PRECISIONS = ("bf16", "fp16")
#: The precision of GPUs that have BF16 arithmetic; the others train in fp16
#: (:func:`hardware_precision`).
DEFAULT_PRECISION = "bf16"


def _check_recompute(recompute: str) -> None:
    if recompute not in RECOMPUTE_MODES:
        raise ValueError(f"unknown recompute mode {recompute!r} (valid: {', '.join(RECOMPUTE_MODES)})")


# ----------------------------------------------------------------------------- FLOPs


def attention_score_flops(cfg: ModelConfig, seq: int) -> float:
    """Forward FLOPs of the attention scores and their weighted sum per sample: 4·s²·(a·head_dim).

    This is what selective recomputation runs again in backward.

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 2048, 16, 8192, 50257, 2048)
    >>> attention_score_flops(gpt, 1024) == 4 * 1024**2 * 2048
    True
    """
    return 4.0 * seq * seq * cfg.attention_width


def layer_backward_flops(cfg: ModelConfig, seq: int, index: int = 0, *, recompute: str = "none") -> float:
    """Backward FLOPs of layer ``index`` per sample, recomputation included.

    2 × forward; full recomputation adds one forward, selective adds the attention scores.

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 2048, 16, 8192, 50257, 2048)
    >>> f = layer_forward_flops(gpt, 512)
    >>> layer_backward_flops(gpt, 512) == 2 * f, layer_backward_flops(gpt, 512, recompute="full") == 3 * f
    (True, True)
    """
    _check_recompute(recompute)
    forward = layer_forward_flops(cfg, seq, index)
    extra = {"none": 0.0, "selective": attention_score_flops(cfg, seq), "full": forward}[recompute]
    return BACKWARD_PER_FORWARD * forward + extra


def head_backward_flops(cfg: ModelConfig, seq: int) -> float:
    """Backward FLOPs of the output head per sample (2 × forward; never recomputed)."""
    return BACKWARD_PER_FORWARD * head_forward_flops(cfg, seq)


# ------------------------------------------------------------------------ parameters


def input_embedding_parameters(cfg: ModelConfig) -> int:
    """Parameters of the input side: token embedding plus learned positions (GPT, ViT).

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 2048, 16, 8192, 50257, 2048)
    >>> input_embedding_parameters(gpt) == (50257 + 2048) * 2048
    True
    """
    positions = cfg.sequence * cfg.hidden if cfg.architecture in ("gpt", "vit") else 0
    return cfg.vocab * cfg.hidden + positions


def head_parameters(cfg: ModelConfig, *, with_embedding: bool = False) -> int:
    """Parameters of the output head held by the stage that computes it.

    A tied head shares the embedding matrix: no extra parameters when the same stage
    holds the embedding, a copy (as Megatron keeps on the last pipeline stage) otherwise.
    """
    if cfg.vocab == 0:
        return 0
    if cfg.tied_embeddings and with_embedding:
        return 0
    return cfg.vocab * cfg.hidden


def parameter_tensors(cfg: ModelConfig, index: int = 0) -> int:
    """Separate parameter tensors of layer ``index``: what a per-tensor ZeRO-3 gathers one by one.

    The fused QKV and the output projection, the FFN matrices (every expert's, plus the
    router, in an MoE layer) and the two norms; each with its bias in GPT and ViT layers.

    Examples
    --------
    >>> parameter_tensors(ModelConfig("x", "gpt", 1, 1024, 16, 4096, 0, 1024))
    12
    """
    per = 2 if cfg.architecture != "llama" else 1  # weight (+ bias)
    ffn = ffn_matrices(cfg) * per
    if cfg.is_moe_layer(index):
        ffn = cfg.experts * ffn + 1
    return 2 * per + ffn + NORMS_PER_LAYER * per


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


def _elements(nbytes16: int, element_bytes: int) -> int:
    """A byte count of 16-bit elements (``ACTIVATION_BYTES`` each) at ``element_bytes`` an element."""
    return nbytes16 * element_bytes // ACTIVATION_BYTES


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
    tensors = _elements(REPLICATED_ACTIVATION_WIDTHS - REPLICATED_DROPOUT_WIDTHS, element_bytes)
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
    softmax = _elements(SOFTMAX_OUTPUT_BYTES, element_bytes)
    if cfg.architecture not in DROPOUT_ARCHITECTURES:
        return softmax
    return softmax + DROPOUT_MASK_BYTES + _elements(ATTENTION_SCORE_BYTES - SOFTMAX_OUTPUT_BYTES - DROPOUT_MASK_BYTES, element_bytes)


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
    _check_recompute(recompute)
    h = cfg.hidden
    if recompute == "full":
        kept = _elements(CHECKPOINT_WIDTHS, element_bytes) * h
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
    _check_recompute(recompute)
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


def loss_traffic_bytes(cfg: ModelConfig, seq: int, samples: float, *, tp: int = 1) -> tuple[float, float]:
    """(forward, backward) bytes the cross-entropy's memory-bound kernels move on one GPU.

    s · b · V / t logits, ``LOSS_FORWARD_BYTES`` and ``LOSS_BACKWARD_BYTES`` each (V = 0, as a
    ViT's catalog entry has it, moves nothing).

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 2048, 16, 8192, 131072, 4096)
    >>> fwd, bwd = loss_traffic_bytes(gpt, 4096, 1)
    >>> fwd == 38 * 4096 * 131072, bwd == 14 * 4096 * 131072
    (True, True)
    """
    logits = seq * samples * cfg.vocab / tp
    return LOSS_FORWARD_BYTES * logits, LOSS_BACKWARD_BYTES * logits


# ---------------------------------------------------------------------- training state


def hardware_precision(gpus: Iterable[GpuType]) -> str:
    """The precision a job on ``gpus`` trains in when nobody says: bf16 where every GPU has BF16
    arithmetic, else fp16 (one job, one precision; Volta, Turing and Pascal parts have no BF16).

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> cat = load_gpus()
    >>> hardware_precision([cat["A100-SXM4-80GB"]]), hardware_precision([cat["A100-SXM4-80GB"], cat["V100-SXM2-32GB"]])
    ('bf16', 'fp16')
    """
    return DEFAULT_PRECISION if all(g.bf16 for g in gpus) else "fp16"


def precision_problem(precision: str, gpus: Iterable[GpuType]) -> str | None:
    """Why ``precision`` cannot run on ``gpus`` (bf16 on a GPU without BF16, tf32 on one without
    TF32 tensor cores), or None.

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> precision_problem("bf16", [load_gpus()["T4"]])
    'precision=bf16: the T4 has no BF16 arithmetic (use precision=fp16)'
    >>> precision_problem("tf32", [load_gpus()["V100-SXM2-16GB"]])
    'precision=tf32: the V100-SXM2-16GB has no TF32 tensor cores (use precision=fp32)'
    """
    gpus = tuple(gpus)
    if precision == "bf16":
        lacking = sorted({g.name for g in gpus if not g.bf16})
        if lacking:
            return f"precision=bf16: the {', '.join(lacking)} {'has' if len(lacking) == 1 else 'have'} no BF16 arithmetic (use precision=fp16)"
    if precision == "tf32":
        lacking = sorted({g.name for g in gpus if g.tf32_flops is None})
        if lacking:
            verb = "has" if len(lacking) == 1 else "have"
            return f"precision=tf32: the {', '.join(lacking)} {verb} no TF32 tensor cores (use precision=fp32)"
    return None


def element_bytes(precision: str) -> int:
    """Bytes per weight, gradient and activation element a run in ``precision`` stores and moves.

    Examples
    --------
    >>> element_bytes("bf16"), element_bytes("fp16"), element_bytes("fp32"), element_bytes("tf32")
    (2, 2, 4, 4)
    """
    if precision not in ELEMENT_BYTES:
        raise ValueError(f"unknown precision {precision!r} (valid: {', '.join(PRECISIONS)})")
    return ELEMENT_BYTES[precision]


def matmul_flops(gpu: GpuType, precision: str) -> float:
    """The peak FLOP/s the matrix multiplications of a run in ``precision`` run against on ``gpu``.

    bf16 and fp16: the catalog's ``training_tflops`` (the 16-bit tensor rate, or FP32 where
    FP16 is crippled); fp32: the CUDA cores' FP32 rate (``fp32_tflops``); tf32: the dense TF32
    tensor rate (``tf32_tflops``; :func:`precision_problem` refuses tf32 where it is missing).
    The catalog's ``gemm_efficiency`` and ``attention_efficiency`` apply to this peak as they
    do to the 16-bit one (formulations/costmodel.md, "Precision (fp32, tf32)").

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> a100 = load_gpus()["A100-SXM4-80GB"]
    >>> [matmul_flops(a100, p) / 1e12 for p in PRECISIONS]
    [312.0, 312.0, 19.5, 156.0]
    """
    element_bytes(precision)
    if precision == "fp32":
        return gpu.fp32_flops
    if precision == "tf32":
        if gpu.tf32_flops is None:
            raise ValueError(precision_problem("tf32", (gpu,)))
        return gpu.tf32_flops
    return gpu.training_flops


def gradient_bytes(precision: str, reduce_fp32: bool = False) -> int:
    """Bytes per gradient element the data-parallel reduction moves: the precision's element, or
    ``FP32_GRADIENT_BYTES`` when the runtime reduces in fp32 (``gradreduce=fp32``).

    Examples
    --------
    >>> gradient_bytes("bf16"), gradient_bytes("bf16", True), gradient_bytes("fp32")
    (2, 4, 4)
    """
    return FP32_GRADIENT_BYTES if reduce_fp32 else element_bytes(precision)


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


# ------------------------------------------------------------------------------ time


def efficiency(gpu: GpuType, tokens: float) -> float:
    """The catalog's saturating efficiency e·t/(t + t½) at ``tokens`` tokens per GPU.

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> v100 = load_gpus()["V100-SXM2-16GB"]
    >>> round(efficiency(v100, v100.half_efficiency_tokens) / v100.efficiency, 3)
    0.5
    """
    if tokens <= 0:
        raise ValueError(f"tokens per GPU must be > 0 (got {tokens})")
    return gpu.efficiency * tokens / (tokens + gpu.half_efficiency_tokens)


def compute_time_s(flops: float, gpu: GpuType, tokens: float) -> float:
    """Seconds to run ``flops`` on one GPU working on ``tokens`` tokens: FLOPs / (peak · eff(t))."""
    return flops / (gpu.training_flops * efficiency(gpu, tokens))


def gemm_efficiency(gpu: GpuType, m: float, n: float, k: float) -> float:
    """Share of peak one GEMM of m×k by k×n reaches: e_g / (1 + r·(1/m + 1/n + 1/k)).

    ``gemm_time_s`` with the GEMM's own traffic: its 2·m·n·k FLOPs at the catalog's
    sustained ``gemm_efficiency`` e_g, plus reading both 16-bit operands and writing the
    result once (2·(m·k + k·n + m·n) bytes) at the memory bandwidth. r = peak·e_g / bandwidth
    (FLOP per byte) is where the dimensions start to cost: a GEMM narrower than a few r in any
    of m (the tokens), n or k (the TP-sharded widths) is bound by its traffic, not its FLOPs.

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> a100 = load_gpus()["A100-SXM4-80GB"]
    >>> wide = gemm_efficiency(a100, 8192, 8192, 8192) / a100.gemm_efficiency
    >>> narrow = gemm_efficiency(a100, 2048, 6144, 768) / a100.gemm_efficiency  # 18.4B's projection at TP 8
    >>> round(wide, 2), round(narrow, 2)
    (0.96, 0.82)
    """
    if min(m, n, k) <= 0:
        raise ValueError(f"GEMM dimensions must be > 0 (got {m}, {n}, {k})")
    ridge = gpu.training_flops * gpu.gemm_efficiency / gpu.memory_bandwidth
    return gpu.gemm_efficiency / (1.0 + ridge * (1.0 / m + 1.0 / n + 1.0 / k))


def gemm_time_s(flops: float, gpu: GpuType, *, traffic_bytes: float = 0.0, peak_flops: float | None = None) -> float:
    """Seconds of matrix multiplication: FLOPs / (peak · e_g) + operand traffic / memory bandwidth.

    e_g, the catalog's ``gemm_efficiency``, is the sustained share of peak of a GEMM too large
    for its traffic to count; ``traffic_bytes`` is what the GEMMs read and write
    (``gemm_traffic_bytes``: the weights once per call, the tokens' inputs and outputs). The
    two add: no overlap of a GEMM's loads with its math is assumed, the form the catalog's e_g
    is fitted in (``hetopt.generate.calibrate``). ``peak_flops``: the peak of the run's precision
    (:func:`matmul_flops`; None: the 16-bit ``training_flops``), at the same e_g.

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> a100 = load_gpus()["A100-SXM4-80GB"]
    >>> gemm_time_s(1e12, a100, peak_flops=19.5e12) == 1e12 / (19.5e12 * a100.gemm_efficiency)
    True
    """
    peak = gpu.training_flops if peak_flops is None else peak_flops
    return flops / (peak * gpu.gemm_efficiency) + traffic_bytes / gpu.memory_bandwidth


def gemm_operand_widths(cfg: ModelConfig, index: int = 0) -> tuple[float, float]:
    """Elements per token the dense forward GEMMs of layer ``index`` read and write: (h-wide, TP-sharded).

    Attention: Q, K, V (fused) read h and write a + 2·kv, the output projection reads a and
    writes h. FFN (not in an MoE layer): the first matrix (or gate and up) reads h and writes
    f (2·f), the last reads f and writes h. Column-parallel outputs and row-parallel inputs
    are split over t; the h-wide sides are not (the GEMM runs on all tokens of the micro-batch).
    The attention scores' batched GEMMs are not here: their s×s operands are in
    ``score_elementwise_widths``. Experts: ``hetopt.parallelism.expert.expert_operand_widths``.

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 1024, 16, 4096, 0, 1024)
    >>> gemm_operand_widths(gpt) == (4 * 1024, 3 * 1024 + 1024 + 2 * 4096)
    True
    """
    h = cfg.hidden
    wide = 2.0 * h
    sharded = float(cfg.attention_width + 2 * cfg.kv_width + cfg.attention_width)
    if not cfg.is_moe_layer(index):
        wide += 2.0 * h
        sharded += ffn_matrices(cfg) * cfg.ffn
    return wide, sharded


def gemm_traffic_bytes(tokens: float, widths: tuple[float, float], weight_parameters: float, *, tp: int = 1,
                       element_bytes: int = ACTIVATION_BYTES) -> float:
    """Bytes one forward pass of GEMMs moves on one GPU: operands and results, weights once.

    ``element_bytes`` per element of each (2; 4 in fp32 and tf32).

    ``tokens`` rows of ``widths`` (h-wide, TP-sharded: ``gemm_operand_widths``) and
    ``weight_parameters`` weights already on the GPU (its shard). The backward moves
    ``BACKWARD_PER_FORWARD`` times as much: dgrad reads the output gradient and the weights and
    writes the input gradient, wgrad reads the input and the output gradient and writes the
    weight gradient.

    Examples
    --------
    >>> gemm_traffic_bytes(2048, (4096.0, 8192.0), 1e6, tp=2) == 2 * (2048 * (4096 + 4096) + 1e6)
    True
    """
    wide, sharded = widths
    return element_bytes * tokens * (wide + sharded / tp) + _elements(WEIGHT_BYTES, element_bytes) * weight_parameters


def attention_time_s(flops: float, gpu: GpuType, peak_flops: float | None = None) -> float:
    """Seconds of FlashAttention: its FLOPs at the catalog's ``attention_efficiency`` of peak.

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> h100 = load_gpus()["H100-SXM5"]
    >>> round(attention_time_s(989e12, h100), 3)  # FlashAttention-2 reaches 35% of an H100
    2.857
    """
    peak = gpu.training_flops if peak_flops is None else peak_flops  # the precision's (matmul_flops)
    return flops / (peak * gpu.flash_efficiency) if flops > 0 else 0.0


# ------------------------------------------------------- memory-bound (elementwise) kernels

#: FlashAttention's backward per forward for the attention scores: it keeps no s×s scores,
#: so its backward recomputes Q·Kᵀ (5 matrix products against the forward's 2, where a
#: backward that reads stored scores runs 4): 2.5, not ``BACKWARD_PER_FORWARD`` (Dao et al.,
#: FlashAttention, NeurIPS 2022, §3.1 and Alg. 4; FlashAttention-2 §3.1.2).
FLASH_SCORE_BACKWARD_PER_FORWARD = 2.5

#: Bytes a LayerNorm or RMSNorm moves per element: reads the 16-bit input, writes the output.
NORM_BYTES = 4
#: Normalizations per layer (before attention and before the FFN).
NORMS_PER_LAYER = 2
#: Bytes a residual addition moves per element: reads both 16-bit operands, writes the sum.
RESIDUAL_BYTES = 6
#: Residual additions per layer (after attention and after the FFN).
RESIDUALS_PER_LAYER = 2
#: The 1-byte dropout mask written per element by each fused bias-dropout-add (GPT, ViT).
DROPOUT_MASK_BYTES = 1
#: Bytes per element of the FFN width the FFN's activation kernel moves: GELU (fused with
#: its bias) reads and writes one 16-bit tensor (2 + 2); SwiGLU reads gate and up and
#: writes their product (2 + 2 + 2).
FFN_ACTIVATION_BYTES = {2: 4, 3: 6}
#: Bytes moved per attention-score element without FlashAttention: the Q·Kᵀ batched GEMM
#: writes the scores (2), the fused scale-mask-softmax reads and writes them (2 + 2), and
#: the probabilities·V batched GEMM reads them (2).
SCORE_BYTES = 8
#: Dropout on the attention probabilities (GPT, ViT): read 2, write 2, mask 1 byte.
SCORE_DROPOUT_BYTES = 5
#: Architectures whose layers apply dropout (Llama-style layers have none).
DROPOUT_ARCHITECTURES = ("gpt", "vit")


def score_elementwise_widths(cfg: ModelConfig, seq: int, *, flash: bool = False, element_bytes: int = ACTIVATION_BYTES) -> float:
    """Bytes per token the attention-score kernels move in forward: a·s·(8 + 5 with dropout)
    (fp32: a·s·(16 + 9), the mask's byte unchanged).

    This part is what selective recomputation runs again. With FlashAttention (``flash``) the
    scores stay in on-chip memory and none of it reaches HBM: 0.
    """
    if flash:
        return 0.0
    dropout = _elements(SCORE_DROPOUT_BYTES - DROPOUT_MASK_BYTES, element_bytes) + DROPOUT_MASK_BYTES
    return cfg.heads * seq * (_elements(SCORE_BYTES, element_bytes) + (dropout if cfg.architecture in DROPOUT_ARCHITECTURES else 0))


def elementwise_widths(cfg: ModelConfig, seq: int, index: int = 0, *, flash: bool = False,
                       element_bytes: int = ACTIVATION_BYTES) -> tuple[float, float]:
    """Bytes per token the memory-bound kernels of layer ``index`` move in forward: (h-wide, TP-sharded).

    h-wide: norms 2·4h and residual additions 2·6h (+ 2·1h of dropout masks for GPT/ViT);
    sequence parallelism splits them over t, plain TP replicates them. TP-sharded: the FFN
    activation, 4f (GELU) or 6f (SwiGLU), times top-k in an MoE layer, and the attention
    scores (``score_elementwise_widths``). ``element_bytes`` 4 (fp32, tf32) doubles every
    tensor's bytes but the 1-byte masks'.

    Examples
    --------
    >>> llama = ModelConfig("y", "llama", 1, 1024, 16, 4096, 0, 1024)
    >>> [2 * x for x in elementwise_widths(llama, 1024, flash=True)] == list(elementwise_widths(llama, 1024, flash=True, element_bytes=4))
    True
    """
    h = cfg.hidden
    dropout = cfg.architecture in DROPOUT_ARCHITECTURES
    residual = _elements(RESIDUAL_BYTES, element_bytes) + (DROPOUT_MASK_BYTES if dropout else 0)
    wide = NORMS_PER_LAYER * _elements(NORM_BYTES, element_bytes) * h + RESIDUALS_PER_LAYER * residual * h
    ffn = cfg.top_k * (cfg.expert_ffn or cfg.ffn) if cfg.is_moe_layer(index) else cfg.ffn
    activation = _elements(FFN_ACTIVATION_BYTES[ffn_matrices(cfg)], element_bytes)
    return float(wide), float(activation * ffn + score_elementwise_widths(cfg, seq, flash=flash, element_bytes=element_bytes))


def elementwise_bytes(
    cfg: ModelConfig, seq: int, samples: float = 1.0, *, tp: int = 1, sequence_parallel: bool = False, index: int = 0
) -> float:
    """Bytes the memory-bound kernels of one layer's forward move on one GPU.

    ``elementwise_widths`` per token, the h-wide part split over t only with sequence
    parallelism. The matrix multiplications are priced by FLOPs instead (``gemm_time_s``).
    The backward moves ``BACKWARD_PER_FORWARD`` times as much (each kernel reads its saved
    input and the incoming gradient and writes the outgoing one): an assumption, not a
    measurement.

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 1024, 16, 4096, 0, 1024)
    >>> per_token = 8 * 1024 + 12 * 1024 + 2 * 1024 + 4 * 4096 + 16 * 1024 * (8 + 5)
    >>> elementwise_bytes(gpt, 1024) == 1024 * per_token
    True
    """
    wide, sharded = elementwise_widths(cfg, seq, index)
    per_token = (wide / tp if sequence_parallel else wide) + sharded / tp
    return seq * samples * per_token


def memory_time_s(nbytes: float, gpu: GpuType) -> float:
    """Seconds to move ``nbytes`` through the GPU's memory at its datasheet bandwidth."""
    return nbytes / gpu.memory_bandwidth


#: Host seconds eager PyTorch takes to issue one transformer layer, forward and backward:
#: Python, the dispatcher and autograd for Megatron's op sequence (29 forward ops, 52 backward
#: nodes), measured with the kernels made negligible by ``python -m hetopt.generate.host_overhead``
#: (one-element CPU tensors, torch 2.13, one thread of the project's 2-core Intel Xeon test
#: machine, median of 5; two runs: 136-138 µs and 205-206 µs). A lower bound of the real host
#: time: CUDA's launch of each kernel is not in it, nor an older framework's slower dispatch.
HOST_LAYER_FORWARD_S = 1.37e-4
HOST_LAYER_BACKWARD_S = 2.05e-4
#: The host's (forward, backward) seconds per layer by software stack (``host=`` in a layout or
#: a runtime, ``host`` in a published row). ``torch2``, the default: today's eager PyTorch, the
#: measurement above. ``torch1``: a PyTorch 1.x stack, measured on Megatron-LM v1.1.5 layers in
#: DeepSpeed v0.3.13's pipeline module (AMP's runs, 2021), read off that stack's own per-layer profile
#: on a T4 and a V100 by ``python -m hetopt.generate.stack_host``: the profiled forward less this
#: model's kernels, 3.43 ms on the T4 and 3.20 ms on the V100, whose kernels differ 3.3-fold
#: (the mean, 3.31 ms); the backward in today's proportion (×1.50), 4.95 ms. Seconds.
HOST_STACKS = {"torch2": (HOST_LAYER_FORWARD_S, HOST_LAYER_BACKWARD_S), "torch1": (3.31e-3, 4.95e-3)}
#: The stack a layout or runtime that does not say runs on.
DEFAULT_HOST = "torch2"
#: An MoE layer's host time, (forward, backward) in units of a dense layer's, with no local
#: expert: Megatron-Core's router (linear, softmax, top-k), permutation (argsort, gather, per-
#: expert counts and split) and unpermutation (scatter back, weight and sum the k copies) in
#: place of the FFN's ops; and what each local expert's FFN, run in turn as ``SequentialMLP``
#: runs them, adds. Measured by ``python -m hetopt.generate.host_overhead`` in the same run as
#: the dense layer (MoE layers of 1, 2, 4, 8, 16 local experts, top-2; 50 + 3 per expert forward
#: ops against the dense layer's 29; least-squares line; two runs: base 1.63-1.69 and
#: 1.17-1.25, per expert 0.162-0.171 and 0.165-0.169; the means). Dimensionless: it scales
#: with the stack's per-layer time, which assumes an older stack's ops cost alike.
HOST_MOE_LAYER = (1.66, 1.21)
HOST_LOCAL_EXPERT = (0.167, 0.167)


def host_floor_s(layers: float, *, recompute: str = "none", stack: str = DEFAULT_HOST, moe_layers: float = 0,
                 local_experts: float = 0) -> tuple[float, float]:
    """The least (forward, backward) seconds ``layers`` transformer layers take per micro-batch,
    whatever their kernels: the host issues every op, and a GPU whose kernels finish sooner
    waits for the next (formulations/costmodel.md, "The host's floor").

    Full recomputation issues the forward again during backward; selective recomputation's
    few attention ops are not counted. ``stack`` names the software stack (``HOST_STACKS``).
    ``moe_layers`` of the ``layers`` are MoE layers with ``local_experts`` experts each on the
    GPU: each takes ``HOST_MOE_LAYER`` + ``local_experts`` · ``HOST_LOCAL_EXPERT`` dense layers' time.

    Examples
    --------
    >>> fwd, bwd = host_floor_s(24)  # GPT-2 345M's 24 layers: 3.3 ms and 4.9 ms of issuing
    >>> round(fwd * 1e3, 2), round(bwd * 1e3, 2)
    (3.29, 4.92)
    >>> host_floor_s(1, recompute="full")[1] == HOST_LAYER_BACKWARD_S + HOST_LAYER_FORWARD_S
    True
    >>> host_floor_s(2, stack="torch1")
    (0.00662, 0.0099)
    >>> [round(t * 1e6, 1) for t in host_floor_s(2, moe_layers=1, local_experts=8)]  # one dense, one MoE of 8 experts
    [547.5, 726.9]
    """
    _check_recompute(recompute)
    if stack not in HOST_STACKS:
        raise ValueError(f"unknown host stack {stack!r} (valid: {', '.join(HOST_STACKS)})")
    per_forward, per_backward = HOST_STACKS[stack]
    if moe_layers:
        dense = layers - moe_layers
        forward = (dense + moe_layers * (HOST_MOE_LAYER[0] + local_experts * HOST_LOCAL_EXPERT[0])) * per_forward
        backward = (dense + moe_layers * (HOST_MOE_LAYER[1] + local_experts * HOST_LOCAL_EXPERT[1])) * per_backward
        return forward, backward + (forward if recompute == "full" else 0.0)
    forward = layers * per_forward
    return forward, layers * per_backward + (forward if recompute == "full" else 0.0)


#: Bytes the mixed-precision Adam step moves per parameter of a GPU's optimizer shard, by its
#: memory-bound kernels in Megatron-LM's ``Float16OptimizerWithFloat16Params.step``
#: (megatron/core/optimizer/optimizer.py): copy the 16-bit gradient into the fp32 main
#: gradient (read 2, write 4), unscale it and check for inf/NaN in place (read 4, write 4),
#: its norm for clipping (read 4), the fused Adam update (read weight, gradient, m and v,
#: 4 each; write weight, m and v, 4 each: 28), and copy the fp32 weight back to the 16-bit
#: one (read 4, write 2). A count of bytes, not a measurement.
OPTIMIZER_STEP_BYTES = (2 + 4) + (4 + 4) + 4 + (16 + 12) + (4 + 2)


#: The same step of a run in fp32 (or tf32), which keeps no 16-bit copy and scales no loss
#: (PyTorch's fused Adam on fp32 parameters, as DeepSpeed runs it without an ``fp16`` or
#: ``bf16`` section): the gradient norm for clipping (read 4) and the Adam update (28).
FP32_OPTIMIZER_STEP_BYTES = 4 + (16 + 12)


def optimizer_step_s(parameters: float, gpu: GpuType, *, element_bytes: int = ACTIVATION_BYTES) -> float:
    """Seconds of one optimizer step over ``parameters`` (the GPU's shard) at the memory bandwidth.

    Once per iteration, after the last micro-batch's backward. Under ZeRO ≥ 1 (and Megatron's
    distributed optimizer) each GPU steps only its 1/d of the state.

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> a100 = load_gpus()["A100-SXM4-80GB"]
    >>> OPTIMIZER_STEP_BYTES, round(optimizer_step_s(1.7e9, a100) * 1e3, 1)  # GPT 1.7B on one GPU: 43 ms
    (52, 43.4)
    >>> optimizer_step_s(1e9, a100, element_bytes=4) == FP32_OPTIMIZER_STEP_BYTES * 1e9 / a100.memory_bandwidth
    True
    """
    per_parameter = OPTIMIZER_STEP_BYTES if element_bytes == ACTIVATION_BYTES else FP32_OPTIMIZER_STEP_BYTES
    return per_parameter * parameters / gpu.memory_bandwidth



#: Bytes a ZeRO-3 runtime that gathers parameter by parameter through list collectives moves
#: in the GPU's memory per element of a parameter, besides the collective itself: DeepSpeed's
#: ZeRO-3 of 2021 (v0.3.13 to v0.5.0, ``deepspeed/runtime/zero/partition_parameters.py``,
#: ``_allgather_param`` and ``_reduce_scatter_gradient``) on PyTorch's ``ProcessGroupNCCL``,
#: whose list ``all_gather`` and ``reduce_scatter`` run NCCL on a flat buffer of their own.
#: Each gather zero-fills the full tensor it builds (write 2) and PyTorch copies every rank's
#: piece out of its flat buffer into it (read 2, write 2); each gradient reduce-scatter
#: divides the full gradient by d in place (``average_tensor``: read 2, write 2) and PyTorch
#: copies the rank pieces into its flat input (read 2, write 2). 16-bit elements. A count of
#: bytes, not a measurement; a runtime that gathers into one flat buffer (FSDP's flat
#: parameters, DeepSpeed after 2021) moves none of it.
ZERO3_TENSOR_GATHER_COPY_BYTES = WEIGHT_BYTES + (WEIGHT_BYTES + WEIGHT_BYTES)
ZERO3_TENSOR_SCATTER_COPY_BYTES = (GRADIENT_BYTES + GRADIENT_BYTES) + (GRADIENT_BYTES + GRADIENT_BYTES)


def zero3_tensor_copies_s(parameters: float, gpu: GpuType, *, gathers: int, scatters: int,
                          element_bytes: int = ACTIVATION_BYTES) -> float:
    """Seconds of the memory copies around ``gathers`` all-gathers and ``scatters`` reduce-scatters
    of ``parameters`` (the full tensors a GPU gathers) under ZeRO-3 tensor by tensor
    (:data:`ZERO3_TENSOR_GATHER_COPY_BYTES`, :data:`ZERO3_TENSOR_SCATTER_COPY_BYTES`), at the
    memory bandwidth. They run on the GPU between the collectives and the compute that
    waits for them (DeepSpeed of 2021 synchronizes the device before every gather), so
    nothing hides them.

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> a100 = load_gpus()["A100-SXM4-80GB"]
    >>> round(zero3_tensor_copies_s(174.6e9, a100, gathers=3, scatters=1), 2)  # GPT 175B, full recomputation
    2.23
    """
    per_parameter = gathers * ZERO3_TENSOR_GATHER_COPY_BYTES + scatters * ZERO3_TENSOR_SCATTER_COPY_BYTES
    nbytes = _elements(per_parameter, element_bytes) * parameters  # copies of 16-bit (or fp32) elements
    return nbytes / gpu.memory_bandwidth


# ----------------------------------------------------------------------- collectives

#: What NCCL achieves per link, over the link's datasheet figure per direction: its topology
#: model's bandwidths (NVIDIA/nccl, src/graph/topo.h: ``SMxx_NVLINK_BW`` per NVLink link by
#: GPU generation, ``PCI_BW`` 12 GB/s for PCIe 3.0 x16, ``NET_BW`` 12 GB/s for 100 Gb/s),
#: which its tuner uses to pick algorithms, divided by the datasheet per-link figures
#: (NVLink1 20, NVLink2–4 25, NVLink5 50 GB/s per link per direction; PCIe 3.0 x16 15.75 GB/s;
#: 100 Gb/s = 12.5 GB/s). Protocol headers, flow control and the copy engines' gaps are why a
#: link never carries its signalling rate. NCCL's older tuner capped A100 rings at 235 GB/s
#: of 300 (0.78), the same figure within 2%.
LINK_EFFICIENCY = {
    "NVLink1": 18.0 / 20.0,
    "NVLink2": 20.0 / 25.0,
    "NVLink3": 20.0 / 25.0,
    "NVLink4": 20.6 / 25.0,
    "NVLink5": 40.1 / 50.0,
    "PCIe": 12.0 / 15.75,
    "network": 12.0 / 12.5,
}


#: What NCCL achieves between two GPUs of a node that have no peer-to-peer path over PCIe, over
#: the PCIe link's datasheet figure per direction: its SHM transport copies through host memory
#: (each byte crosses the GPU's PCIe link into a host buffer and out of it again, both
#: directions at once through the CPU's memory). Measured: an all-reduce at 3.9 GB/s of bus
#: bandwidth between two GPUs on PCIe 3.0 x16 with ``NCCL_P2P_DISABLE=1`` (NVIDIA/nccl issue
#: #384, NCCL 2.4.8; the maintainer's reply: bidirectional traffic through the CPU), over
#: 15.75 GB/s. Cloud VMs of PCIe GPUs expose no peer-to-peer between them (e.g. AWS's g6 and
#: g4dn; llm-d-incubation/llm-d-infra PR #181: "AWS g6 series does not have NVLink/NVSwitch or
#: PCIe P2P"), and GeForce drivers disable it; AMP's authors describe their g4dn.12xlarge nodes'
#: GPU link as no faster than their 50 Gb/s network (DachengLi1/AMP ``src/homogeneous.py``).
SHM_EFFICIENCY = 3.9 / 15.75


#: What NCCL achieves over an Ethernet network without RDMA, where its socket transport runs
#: over TCP, as a share of the wire speed: "not ... more than 60% of wire speed over 32 Gbps
#: networks" even with large messages (NVIDIA/nccl issue #209, nccl-tests over TCP; a single
#: flow's pace, times the sockets NCCL opens, is what a ring step gets: the maintainer's reply
#: in NVIDIA/nccl-tests issue #83). RDMA networks (InfiniBand, RoCE, EFA) keep NCCL's own
#: figure, ``LINK_EFFICIENCY["network"]``.
TCP_EFFICIENCY = 0.6
#: Transports of a node's network: NCCL's socket transport over TCP, or RDMA verbs.
TRANSPORTS = ("tcp", "rdma")
#: Per-node network bandwidth, bytes/s, from which a network whose transport is not given is
#: taken to be RDMA: 100 Gb/s and more is InfiniBand or RoCE in the clusters this project
#: models (DGX-class nodes, HPC systems); below it, the Ethernet of cloud VMs and of
#: commodity clusters (AWS ENA, GCP gVNIC, 10-50 GbE), which NCCL reaches through sockets.
RDMA_MIN_BANDWIDTH = 100e9 / 8


def network_efficiency(bandwidth: float, transport: str | None = None) -> float:
    """The share of a node's network bandwidth (bytes/s) that NCCL achieves over ``transport``.

    ``transport`` None: RDMA from :data:`RDMA_MIN_BANDWIDTH` up, TCP sockets below.

    Examples
    --------
    >>> network_efficiency(200e9 / 8), network_efficiency(50e9 / 8), network_efficiency(50e9 / 8, "rdma")
    (0.96, 0.6, 0.96)
    """
    if transport is None:
        transport = "rdma" if bandwidth >= RDMA_MIN_BANDWIDTH * (1.0 - 1e-9) else "tcp"
    return LINK_EFFICIENCY["network"] if transport == "rdma" else TCP_EFFICIENCY


def intra_link_efficiency(link: str, peer_to_peer: bool | None = None) -> float:
    """The share of a node's GPU link that NCCL achieves, with or without peer-to-peer.

    ``peer_to_peer`` None takes the catalog's default by link: NVLink-class links (and xGMI)
    are peer-to-peer; a PCIe link is not (:data:`SHM_EFFICIENCY`: traffic through host
    memory, as in cloud VMs and on GeForce cards), unless the cluster says ``p2p = true`` (a
    bare-metal server whose PCIe switch passes peer-to-peer traffic).

    Examples
    --------
    >>> intra_link_efficiency("NVLink3"), round(intra_link_efficiency("PCIe 3.0 x16"), 4)
    (0.8, 0.2476)
    >>> intra_link_efficiency("PCIe 3.0 x16", True) == LINK_EFFICIENCY["PCIe"]
    True
    """
    pcie = link.lower().startswith("pcie")
    if pcie and not peer_to_peer:
        return SHM_EFFICIENCY
    return link_efficiency(link)


def link_efficiency(link: str) -> float:
    """The share of a link's datasheet bandwidth that collectives and transfers achieve.

    ``link`` is a GPU catalog's ``intra_link`` ("NVLink3", "PCIe 4.0 x16", "NVLink bridge",
    "xGMI") or "network". A link NCCL's model does not name (AMD xGMI, a bridge) keeps its
    datasheet figure: there is no measurement to take its share from.

    Examples
    --------
    >>> link_efficiency("NVLink3"), link_efficiency("PCIe 4.0 x16") == LINK_EFFICIENCY["PCIe"]
    (0.8, True)
    >>> link_efficiency("xGMI")
    1.0
    """
    if link in LINK_EFFICIENCY:
        return LINK_EFFICIENCY[link]
    if link.lower().startswith("pcie"):
        return LINK_EFFICIENCY["PCIe"]
    return 1.0


#: NCCL's own latency model for the ring algorithm with its Simple protocol (NVIDIA/nccl,
#: src/graph/tuning.cc, ``baseLatencies`` and ``hwLatencies``, as recalibrated in NCCL 2.18):
#: a fixed launch latency per collective plus a latency per ring step, by the link the step
#: crosses. Seconds.
RING_BASE_LATENCY_S = 8.4e-6
HOP_LATENCY_S = {"nvlink": 3.4e-6, "pcie": 5.7e-6, "network": 14.0e-6}

#: The network proxy's cost of posting one step's send or receive, by host CPU vendor
#: (tuning.cc, ``getNetOverhead``: 2 µs on AMD x86 hosts, 1 µs on Intel and on every other
#: host). Seconds.
NET_POST_OVERHEAD_S = {"amd": 2.0e-6, "intel": 1.0e-6}
#: The overhead NCCL assumes for a host it does not name (Intel, Arm, unknown). Seconds.
DEFAULT_NET_POST_OVERHEAD_S = 1.0e-6
#: The Simple protocol posts three times per step (tuning.cc: ``netOverhead *= 3``).
SIMPLE_POST_FACTOR = 3


def ring_step_floor_s(host_cpu: str = "") -> float:
    """The least latency of any step of a ring that spans nodes, seconds.

    A ring over several nodes advances in lock step with its network proxy, so even its
    steps inside a node cannot be faster than the proxy posting them: NCCL's tuner charges
    every step of an inter-node ring at least 3 × the host's post overhead ("inter-node
    rings still have to launch nsteps * net overhead", tuning.cc, since NCCL 2.18). That is
    6 µs on AMD hosts (DGX A100), 3 µs on Intel hosts, above NVLink's 3.4 µs per step on
    the first.

    Examples
    --------
    >>> round(ring_step_floor_s("amd") * 1e6, 1), round(ring_step_floor_s("intel") * 1e6, 1), round(ring_step_floor_s() * 1e6, 1)
    (6.0, 3.0, 3.0)
    """
    return SIMPLE_POST_FACTOR * NET_POST_OVERHEAD_S.get(host_cpu, DEFAULT_NET_POST_OVERHEAD_S)


def intra_hop_latency_s(gpu: GpuType) -> float:
    """Per-step ring latency inside a node: NVLink-class links or PCIe (the catalog's ``intra_link``)."""
    link = gpu.intra_link.lower()
    return HOP_LATENCY_S["nvlink"] if ("nvlink" in link or "xgmi" in link) else HOP_LATENCY_S["pcie"]


def ring_latency_s(steps: int, hop_latency_s: float) -> float:
    """α of a ring collective of ``steps`` steps: the launch latency plus one hop latency a step.

    0 when ``hop_latency_s`` is 0 (the bandwidth-only model).

    Examples
    --------
    >>> round(ring_latency_s(7, HOP_LATENCY_S["network"]) * 1e6, 1)
    106.4
    """
    if steps <= 0 or hop_latency_s <= 0:
        return 0.0
    return RING_BASE_LATENCY_S + steps * hop_latency_s


def ring_hop_latency_s(gpus: int, nodes: int, intra_hop_s: float, inter_hop_s: float, step_floor_s: float = 0.0) -> float:
    """The mean per-step latency of a ring of ``gpus`` GPUs over ``nodes`` nodes.

    NCCL orders a ring node by node, so of its p − 1 links n − 1 cross the network and the
    rest stay inside a node; every collective's steps walk those links in turn, a share
    (n − 1)/(p − 1) of them at the network's latency (NCCL's tuning.cc: ``nInterSteps``
    steps at the network figure, the others at the intra-node figure). When the ring spans
    nodes, an intra-node step costs at least ``step_floor_s`` (:func:`ring_step_floor_s`,
    the network proxy's posting).

    Examples
    --------
    >>> ring_hop_latency_s(8, 1, 3.4e-6, 14e-6) == 3.4e-6, ring_hop_latency_s(2, 2, 3.4e-6, 14e-6) == 14e-6
    (True, True)
    >>> round(ring_hop_latency_s(16, 2, 3.4e-6, 14e-6) * 1e6, 3)
    4.107
    >>> round(ring_hop_latency_s(16, 2, 3.4e-6, 14e-6, step_floor_s=6e-6) * 1e6, 3)
    6.533
    """
    if gpus <= 1:
        return intra_hop_s
    inter = min(max(nodes, 1), gpus) - 1
    intra = max(intra_hop_s, step_floor_s) if inter > 0 else intra_hop_s
    return ((gpus - 1 - inter) * intra + inter * inter_hop_s) / (gpus - 1)


def ring_allreduce_s(nbytes: float, gpus: int, bandwidth: float, hop_latency_s: float = 0.0) -> float:
    """Ring all-reduce of ``nbytes`` over ``gpus`` GPUs: 2·(p − 1)/p · n / w + α (0 for one GPU).

    α = ``ring_latency_s(2·(p − 1), hop_latency_s)``: a reduce-scatter and an all-gather of
    p − 1 steps each.

    Examples
    --------
    >>> ring_allreduce_s(1e9, 4, 1e10)
    0.15
    """
    if gpus <= 1:
        return 0.0
    return 2.0 * (gpus - 1) / gpus * nbytes / bandwidth + ring_latency_s(2 * (gpus - 1), hop_latency_s)


def ring_allgather_s(nbytes: float, gpus: int, bandwidth: float, hop_latency_s: float = 0.0) -> float:
    """Ring all-gather (or reduce-scatter) of ``nbytes`` in total: (p − 1)/p · n / w + α(p − 1 steps)."""
    if gpus <= 1:
        return 0.0
    return (gpus - 1) / gpus * nbytes / bandwidth + ring_latency_s(gpus - 1, hop_latency_s)


ring_reduce_scatter_s = ring_allgather_s


def boundary_bytes(cfg: ModelConfig, seq: int, samples: float, element_bytes: int = ACTIVATION_BYTES) -> float:
    """Bytes of a layer's output for ``samples`` samples: 2·s·b·h (what TP all-reduces and p2p
    sends); 4·s·b·h in fp32 and tf32 (``element_bytes`` 4).

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 1024, 16, 4096, 0, 1024)
    >>> boundary_bytes(gpt, 1024, 2), boundary_bytes(gpt, 1024, 2, element_bytes=4)
    (4194304, 8388608)
    """
    return element_bytes * seq * samples * cfg.hidden


def tp_layer_comm_s(cfg: ModelConfig, seq: int, samples: float, tp: int, bandwidth: float, hop_latency_s: float = 0.0,
                    element_bytes: int = ACTIVATION_BYTES) -> float:
    """Seconds of Megatron TP communication per layer per pass (forward, or backward).

    Two ring all-reduces of 2·s·b·h bytes over t GPUs of a node (each with its latency α).

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 1024, 16, 4096, 0, 1024)
    >>> tp_layer_comm_s(gpt, 1024, 1, 2, 1e9) == 2 * (2 * 1 / 2 * 2 * 1024 * 1024 / 1e9)
    True
    """
    return TP_ALLREDUCES_PER_PASS * ring_allreduce_s(boundary_bytes(cfg, seq, samples, element_bytes), tp, bandwidth,
                                                     hop_latency_s)


def p2p_transfer_s(cfg: ModelConfig, seq: int, samples: float, bandwidth: float, element_bytes: int = ACTIVATION_BYTES) -> float:
    """One micro-batch's boundary activations (or their gradients) over a link: 2·s·b·h / w."""
    return boundary_bytes(cfg, seq, samples, element_bytes) / bandwidth


#: How a pipeline hands a micro-batch's boundary tensor to the next stage (``handover=``):
#: ``split``, each TP rank sends its 1/t share (Megatron-LM's scatter-gather, and every sequence-
#: parallel hand-over), the default; ``deepspeed``, DeepSpeed's pipeline engine with Megatron's
#: GPT pipe module as it ran in 2021 (v0.3.13, ``deepspeed/runtime/pipe/engine.py``): the
#: activations partitioned over the TP group and gathered again on both sides, the gradients
#: sent whole by every TP rank, the attention mask sent with every forward hand-over
#: (formulations/costmodel.md, "Hand-over between inner stages").
HANDOVERS = ("split", "deepspeed")
#: The hand-over of a layout or runtime that does not say.
DEFAULT_HANDOVER = "split"
#: Bytes per element of the (1, 1, s, s) causal attention mask DeepSpeed's pipeline engine sends
#: with every forward hand-over of Megatron's GPT pipe module: a bool tensor cast to fp16 because
#: NCCL cannot send bool (``_exec_send_activations``, v0.3.13; the mask is batch-independent:
#: Megatron's ``get_ltor_masks_and_position_ids`` builds one for the whole micro-batch).
PIPE_MASK_BYTES = 2


def pipe_mask_bytes(seq: int) -> float:
    """Bytes of the causal attention mask DeepSpeed's pipeline engine sends with every forward
    hand-over: ``PIPE_MASK_BYTES`` · s².

    Examples
    --------
    >>> pipe_mask_bytes(1024) == 2 * 1024 * 1024
    True
    """
    return PIPE_MASK_BYTES * seq * seq


def pipeline_link_s(cfg: ModelConfig, seq: int, microbatch_size: float, bandwidth: float,
                    element_bytes: int = ACTIVATION_BYTES) -> float:
    """Link time c between two pipeline blocks on different islands: activations forward plus gradients back.

    2 × 2·s·m·h / w for a micro-batch of m samples (``formulations/pipeline.md``: c is a round trip).

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 4096, 32, 16384, 50257, 2048)
    >>> pipeline_link_s(gpt, 2048, 8, 12.5e9) == 2 * 2 * 2048 * 8 * 4096 / 12.5e9
    True
    """
    return 2.0 * p2p_transfer_s(cfg, seq, microbatch_size, bandwidth, element_bytes)


@dataclass(frozen=True)
class DataParallelComm:
    """Data-parallel communication of one stage, seconds per micro-batch (amortized).

    ``forward_s`` and ``backward_s`` are added to the stage's per-micro-batch times;
    ``per_iteration_s`` is the once-per-iteration part before amortization over M.
    """

    forward_s: float
    backward_s: float
    per_iteration_s: float


def exposed_s(comm_s: float, compute_s: float, buckets: int) -> float:
    """The part of ``comm_s`` of communication that ``compute_s`` of independent compute cannot hide.

    Runtimes cut data-parallel traffic into buckets (Megatron-Core ``--overlap-grad-reduce``
    and ``--overlap-param-gather``, PyTorch DDP and FSDP, DeepSpeed ZeRO prefetching) and
    run each on a separate stream while the next layer computes: the traffic hides behind
    the compute up to its length, except one bucket, the last reduced (or the first
    gathered), which nothing follows (or precedes). ``buckets`` is the number of such
    pieces (one per layer of the stage here).

    Examples
    --------
    >>> exposed_s(1.0, 0.4, 10), exposed_s(1.0, 5.0, 10), exposed_s(1.0, 5.0, 1)
    (0.6, 0.1, 1.0)
    """
    if comm_s <= 0:
        return 0.0
    return max(comm_s - compute_s, comm_s / max(1, buckets))


def data_parallel_comm(
    parameters: float, dp: int, bandwidth: float, *, zero_stage: int, microbatches: int,
    hop_latency_s: float = 0.0, collectives: int = 1, recompute_gather: bool = False,
    overlap: tuple[float, float] | None = None, buckets: int = 1, gradient_bytes: float = GRADIENT_BYTES,
    weight_bytes: float = WEIGHT_BYTES,
) -> DataParallelComm:
    """Data-parallel (and ZeRO) traffic of a stage holding ``parameters`` per ring.

    ZeRO 0 and 1: one gradient all-reduce per iteration (stage 1 as reduce-scatter +
    all-gather, same volume), amortized over the M micro-batches. ZeRO 2: a gradient
    reduce-scatter every micro-batch (sharded gradients cannot accumulate locally) and a
    weight all-gather per iteration. ZeRO 3: weights all-gathered in forward and again in
    backward (and once more before a full recomputation, ``recompute_gather``), gradients
    reduce-scattered, every micro-batch, as ``collectives`` separate collectives each (one
    per parameter tensor: each pays the ring latency α).

    ``overlap`` = (forward, backward) compute seconds of one micro-batch of the stage: with
    it, the traffic overlaps compute as a runtime with bucketed, asynchronous collectives
    runs it (:func:`exposed_s`, ``buckets`` pieces): the once-per-iteration gradient
    reduction behind the last micro-batch's backward, the once-per-iteration weight gather
    behind the first micro-batch's forward, ZeRO-3's per-micro-batch gathers and
    reduce-scatters behind the forward and backward they feed. Without it (None) nothing
    overlaps (Megatron-LM 2021 reduced gradients after the backward pass).

    ``gradient_bytes`` per gradient element reduced: ``GRADIENT_BYTES`` (16-bit), or
    ``FP32_GRADIENT_BYTES`` when the runtime reduces in fp32 (the bytes double, the ring does not
    change). ``weight_bytes`` per weight ZeRO gathers: ``WEIGHT_BYTES``, 4 in fp32 and tf32.

    Examples
    --------
    >>> c = data_parallel_comm(1e9, 4, 1e10, zero_stage=0, microbatches=8)
    >>> c.per_iteration_s, c.backward_s
    (0.3, 0.0375)
    >>> round(data_parallel_comm(1e9, 4, 1e10, zero_stage=0, microbatches=8, overlap=(0.1, 0.2), buckets=4).backward_s, 9)
    0.0125
    >>> data_parallel_comm(1e9, 4, 1e10, zero_stage=0, microbatches=8, gradient_bytes=FP32_GRADIENT_BYTES).per_iteration_s
    0.6
    """
    if zero_stage not in ZERO_STAGES:
        raise ValueError(f"unknown ZeRO stage {zero_stage!r} (valid: 0, 1, 2, 3)")
    if microbatches < 1:
        raise ValueError(f"micro-batches must be >= 1 (got {microbatches})")
    if collectives < 1:
        raise ValueError(f"collectives must be >= 1 (got {collectives})")
    grads = gradient_bytes * parameters
    weights = weight_bytes * parameters
    if dp <= 1:
        return DataParallelComm(0.0, 0.0, 0.0)
    fwd, bwd = overlap if overlap is not None else (0.0, 0.0)
    buckets = buckets if overlap is not None else 1

    def hidden(comm_s: float, compute_s: float) -> float:
        return exposed_s(comm_s, compute_s, buckets) if overlap is not None else comm_s

    if zero_stage <= 1:
        once = ring_allreduce_s(grads, dp, bandwidth, hop_latency_s)
        return DataParallelComm(0.0, hidden(once, bwd) / microbatches, once)
    if zero_stage == 2:
        once = ring_allgather_s(weights, dp, bandwidth, hop_latency_s)
        scatter = ring_reduce_scatter_s(grads, dp, bandwidth, hop_latency_s)
        return DataParallelComm(0.0, hidden(scatter, bwd) + hidden(once, fwd) / microbatches, once)
    # ZeRO-3: the traffic is cut into `collectives` pieces, each paying its own latency
    latency = collectives * ring_latency_s(dp - 1, hop_latency_s)
    gather = ring_allgather_s(weights, dp, bandwidth) + latency
    scatter = ring_reduce_scatter_s(grads, dp, bandwidth) + latency
    backward = gather + scatter + (gather if recompute_gather else 0.0)
    return DataParallelComm(hidden(gather, fwd), hidden(backward, bwd), 0.0)


__all__ = [
    "ATTENTION_SCORE_BYTES",
    "BACKWARD_PER_FORWARD",
    "TRAINING_PER_FORWARD",
    "CHECKPOINT_WIDTHS",
    "DISTRIBUTED_OPTIMIZER_BYTES",
    "ELEMENT_BYTES",
    "FLASH_PRECISIONS",
    "FP32_OPTIMIZER_STEP_BYTES",
    "element_bytes",
    "gradient_bytes",
    "matmul_flops",
    "DataParallelComm",
    "exposed_s",
    "EMBEDDING_TP_ALLREDUCES",
    "FFN_TENSORS",
    "FLASH_SCORE_BACKWARD_PER_FORWARD",
    "FP32_GRADIENT_BYTES",
    "GRADIENT_BYTES",
    "HEAD_TP_ALLREDUCES",
    "LOGIT_BYTES",
    "LOSS_BACKWARD_BYTES",
    "LOSS_FORWARD_BYTES",
    "RECOMPUTE_MODES",
    "REPLICATED_ACTIVATION_WIDTHS",
    "REPLICATED_DROPOUT_WIDTHS",
    "SOFTMAX_OUTPUT_BYTES",
    "attention_score_bytes",
    "replicated_activation_widths",
    "TP_ALLREDUCES_PER_PASS",
    "WEIGHT_BYTES",
    "ZERO_STAGES",
    "ZERO3_TENSOR_GATHER_COPY_BYTES",
    "ZERO3_TENSOR_SCATTER_COPY_BYTES",
    "zero3_tensor_copies_s",
    "DROPOUT_ARCHITECTURES",
    "DROPOUT_MASK_BYTES",
    "FFN_ACTIVATION_BYTES",
    "HOP_LATENCY_S",
    "NORMS_PER_LAYER",
    "NORM_BYTES",
    "RESIDUALS_PER_LAYER",
    "RESIDUAL_BYTES",
    "RING_BASE_LATENCY_S",
    "ring_hop_latency_s",
    "SCORE_BYTES",
    "SCORE_DROPOUT_BYTES",
    "attention_score_flops",
    "attention_time_s",
    "elementwise_bytes",
    "elementwise_widths",
    "score_elementwise_widths",
    "gemm_efficiency",
    "gemm_operand_widths",
    "gemm_traffic_bytes",
    "gemm_time_s",
    "host_floor_s",
    "HOST_LAYER_FORWARD_S",
    "HOST_LAYER_BACKWARD_S",
    "HOST_STACKS",
    "HOST_MOE_LAYER",
    "HOST_LOCAL_EXPERT",
    "DEFAULT_HOST",
    "intra_hop_latency_s",
    "memory_time_s",
    "parameter_tensors",
    "ring_latency_s",
    "boundary_bytes",
    "compute_time_s",
    "data_parallel_comm",
    "distributed_optimizer_bytes_per_parameter",
    "DEFAULT_PRECISION",
    "PRECISIONS",
    "hardware_precision",
    "precision_problem",
    "efficiency",
    "ffn_activation_widths",
    "head_backward_flops",
    "ffn_matrices",
    "head_forward_flops",
    "head_parameters",
    "input_embedding_parameters",
    "layer_activation_bytes",
    "layer_backward_flops",
    "layer_forward_flops",
    "layer_parameters",
    "logit_bytes",
    "loss_traffic_bytes",
    "p2p_transfer_s",
    "pipe_mask_bytes",
    "HANDOVERS",
    "DEFAULT_HANDOVER",
    "PIPE_MASK_BYTES",
    "pipeline_link_s",
    "recompute_working_bytes",
    "ring_allgather_s",
    "ring_allreduce_s",
    "ring_reduce_scatter_s",
    "sharded_activation_widths",
    "state_bytes_per_parameter",
    "tp_layer_comm_s",
]
