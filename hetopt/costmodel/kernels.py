"""Seconds of a GPU's kernels: GEMMs (by shape), attention, the memory-bound element-wise kernels and the loss.

Part of the cost model (:mod:`hetopt.costmodel`); every formula, constant and source is in
``formulations/costmodel.md``. SI units: FLOPs, bytes, seconds, bytes/s.
"""

from __future__ import annotations

import functools
import math

from hetopt.hardware import GpuType
from hetopt.workload import ACTIVATION_BYTES, ModelConfig, ffn_matrices
from hetopt.costmodel.precision import WEIGHT_BYTES, elements_of, element_bytes
from hetopt.costmodel.flops import NORMS_PER_LAYER
from hetopt.costmodel.memory import DROPOUT_ARCHITECTURES, DROPOUT_MASK_BYTES


#: Bytes per logit the loss's memory-bound kernels move, counted kernel by kernel in
#: Megatron-Core's ``_VocabParallelCrossEntropy`` (megatron/core/tensor_parallel/
#: cross_entropy.py, core r0.8), forward: the 16-bit logits cast to fp32 (read 2, write 4),
#: their max (read 4), minus the max in place (4 + 4), exp in place (4 + 4), its sum (read 4),
#: divided by the sum in place (4 + 4); backward: times the output gradient in place (4 + 4),
#: cast back to 16 bits for the head's matmuls (4 + 2). Forward 38, backward 14.
LOSS_FORWARD_BYTES = (2 + 4) + 4 + (4 + 4) + (4 + 4) + 4 + (4 + 4)

LOSS_BACKWARD_BYTES = (4 + 4) + (4 + 2)


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
    return element_bytes * tokens * (wide + sharded / tp) + elements_of(WEIGHT_BYTES, element_bytes) * weight_parameters


# ------------------------------------------------------------------ GEMM shapes: tiles in waves

#: The output tiles cuBLAS's tensor-core GEMM kernels compute, one thread block (one SM) a tile,
#: rows × columns (NVIDIA, "Matrix Multiplication Background User's Guide", DU-09799-001, §2.3
#: "Typical Tile Dimensions in cuBLAS and Performance": 256×128 and 128×256, 128×128, 256×64 and
#: 64×256, 128×64 and 64×128, 64×64).
GEMM_TILES = ((256, 128), (128, 256), (128, 128), (256, 64), (64, 256), (128, 64), (64, 128), (64, 64))


@functools.lru_cache(maxsize=65536)
def gemm_waves(sms: int, m: float, n: float) -> float:
    """How much longer (≥ 1) a GEMM with an m×n output runs on ``sms`` SMs than if its work were
    spread evenly over them: tile and wave quantization (the user's guide above, §3.1 and §3.2).

    The output is cut into ⌈m/bm⌉·⌈n/bn⌉ tiles (a partial tile at an edge costs a whole one),
    which run in waves of one tile an SM, the last wave partly idle; the time is the waves × one
    tile's work, against m·n/SMs of work spread evenly. cuBLAS picks among its tile shapes
    (:data:`GEMM_TILES`); every shape is taken at the same rate per SM, so the smallest tiles,
    which fill the waves best, are not charged for their lower data reuse: a lower bound of what
    a small GEMM loses. 1 where the catalog gives no SM count (``sms`` 0).

    Examples
    --------
    >>> round(gemm_waves(108, 8192, 8192), 3)  # a big GEMM on an A100: its waves nearly full
    1.002
    >>> round(gemm_waves(108, 1024, 384), 2)  # a TP-8 QKV at micro-batch 1: 96 tiles of 64×64 on 108 SMs
    1.12
    >>> gemm_waves(108, 2048, 128)  # a narrow shard: 64 tiles of 64×64, one wave on 108 SMs
    1.6875
    """
    if sms <= 0 or m <= 0 or n <= 0:
        return 1.0
    work = min(math.ceil(math.ceil(m / bm) * math.ceil(n / bn) / sms) * bm * bn for bm, bn in GEMM_TILES)
    return work * sms / (m * n)


def dense_gemm_shapes(cfg: ModelConfig, index: int, tokens: float, tp: int = 1) -> tuple[tuple[float, float, float], ...]:
    """(m, n, k) of the forward GEMMs of layer ``index`` on one GPU: QKV, the output projection
    and (not in an MoE layer) the FFN's first matrix (gate and up fused for SwiGLU) and last;
    m the tokens (``tokens`` rows), the column-parallel n and row-parallel k split over t
    (:func:`gemm_operand_widths`' widths). The experts' and the attention scores' are not here.

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 1024, 16, 4096, 0, 1024)
    >>> dense_gemm_shapes(gpt, 0, 1024, tp=8)
    ((1024, 384.0, 1024), (1024, 1024, 128.0), (1024, 512.0, 1024), (1024, 1024, 512.0))
    """
    h, w = cfg.hidden, cfg.attention_width
    shapes = [(tokens, (w + 2 * cfg.kv_width) / tp, h), (tokens, h, w / tp)]
    if not cfg.is_moe_layer(index):
        inner = ffn_matrices(cfg) - 1  # the first matrix, or gate and up fused
        shapes += [(tokens, inner * cfg.ffn / tp, h), (tokens, h, cfg.ffn / tp)]
    return tuple(shapes)


def quantization_flops(sms: int, shapes: tuple[tuple[float, float, float], ...]) -> tuple[float, float]:
    """The FLOPs (forward, backward) that GEMMs of ``shapes`` lose to their tiles and waves
    (:func:`gemm_waves`), beyond their 2·m·n·k: the forward's m×n outputs, the backward's input
    gradient (m×k, inner n) and weight gradient (k×n, inner m).

    Examples
    --------
    >>> quantization_flops(108, ((8192, 8192, 8192),))[0] / (2 * 8192**3) < 0.01
    True
    """
    forward = backward = 0.0
    for m, n, k in shapes:
        flops = 2.0 * m * n * k
        forward += flops * (gemm_waves(sms, m, n) - 1.0)
        backward += flops * (gemm_waves(sms, m, k) - 1.0) + flops * (gemm_waves(sms, k, n) - 1.0)
    return forward, backward


# ----------------------------------------------------------------- kernels: the GPU's side of a launch

#: Seconds the GPU spends on a kernel beyond its work: taking the queued launch, starting its
#: blocks and draining them before the next kernel of the stream starts. CUDA.jl's documentation
#: ("Graphs": an RK4 integration of 80 broadcast kernels of 1,024 elements takes 70 µs launched as
#: one CUDA graph, the host out of the way) measures 70/80 = 0.875 µs a kernel on the GPU, the
#: kernels' own work included: a tiny kernel's whole time, so an upper bound of the fixed part.
GPU_KERNEL_S = 70e-6 / 80

#: Kernels a dense layer launches in its forward, by role (Megatron-LM's GPT layer, the op
#: sequence ``hetopt.generate.host_overhead`` times): the two norms, the four GEMMs (QKV,
#: projection, the FFN's two; SwiGLU's gate and up are one GEMM), the two bias-dropout-adds, the
#: FFN's activation; attention unfused: Q·Kᵀ, the fused scale-mask-softmax, P·V and the copy of the
#: context back to [s, b, h] (and the scores' dropout in GPT and ViT); FlashAttention: one kernel.
LAYER_KERNELS = {"norm": 2, "gemm": 4, "residual": 2, "activation": 1}
UNFUSED_ATTENTION_KERNELS = 4
FLASH_ATTENTION_KERNELS = 1
#: The embedding's forward (the lookup; GPT adds the learned positions) and the head's (its GEMM
#: and the cross-entropy's six: cast, max, subtract, exp, sum, divide: ``LOSS_FORWARD_BYTES``).
EMBEDDING_KERNELS = 2
HEAD_KERNELS = 1 + 6


def layer_kernels(cfg: ModelConfig, *, flash: bool = False) -> int:
    """Kernels one dense layer launches in its forward (:data:`LAYER_KERNELS`); the backward
    launches ``BACKWARD_PER_FORWARD`` times as many (each GEMM its input and weight gradients,
    each element-wise kernel its input gradient and a reduction for its bias or weight).

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 1024, 16, 4096, 0, 1024)
    >>> layer_kernels(gpt), layer_kernels(gpt, flash=True)
    (14, 10)
    """
    attention = FLASH_ATTENTION_KERNELS if flash else (
        UNFUSED_ATTENTION_KERNELS + (1 if cfg.architecture in DROPOUT_ARCHITECTURES else 0))
    return sum(LAYER_KERNELS.values()) + attention


def kernels_time_s(kernels: float) -> float:
    """The GPU's seconds for ``kernels`` launches beyond their work (:data:`GPU_KERNEL_S` each)."""
    return kernels * GPU_KERNEL_S


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

#: Bytes a residual addition moves per element: reads both 16-bit operands, writes the sum.
RESIDUAL_BYTES = 6

#: Residual additions per layer (after attention and after the FFN).
RESIDUALS_PER_LAYER = 2

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


def score_elementwise_widths(cfg: ModelConfig, seq: int, *, flash: bool = False, element_bytes: int = ACTIVATION_BYTES) -> float:
    """Bytes per token the attention-score kernels move in forward: a·s·(8 + 5 with dropout)
    (fp32: a·s·(16 + 9), the mask's byte unchanged).

    This part is what selective recomputation runs again. With FlashAttention (``flash``) the
    scores stay in on-chip memory and none of it reaches HBM: 0.
    """
    if flash:
        return 0.0
    dropout = elements_of(SCORE_DROPOUT_BYTES - DROPOUT_MASK_BYTES, element_bytes) + DROPOUT_MASK_BYTES
    return cfg.heads * seq * (elements_of(SCORE_BYTES, element_bytes) + (dropout if cfg.architecture in DROPOUT_ARCHITECTURES else 0))


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
    residual = elements_of(RESIDUAL_BYTES, element_bytes) + (DROPOUT_MASK_BYTES if dropout else 0)
    wide = NORMS_PER_LAYER * elements_of(NORM_BYTES, element_bytes) * h + RESIDUALS_PER_LAYER * residual * h
    ffn = cfg.top_k * (cfg.expert_ffn or cfg.ffn) if cfg.is_moe_layer(index) else cfg.ffn
    activation = elements_of(FFN_ACTIVATION_BYTES[ffn_matrices(cfg)], element_bytes)
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
