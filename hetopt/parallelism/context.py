"""Context parallelism (CP): the sequence split over c GPUs, attention by a ring of K/V blocks.

Megatron-Core's context parallelism (ring attention, Liu et al. 2023): each of the c GPUs
of a CP group holds s/c tokens of every sample; attention passes the K and V blocks around
the ring, c − 1 steps per layer in forward, and in backward the K/V blocks together with
their gradients dK, dV (Transformer Engine's ring backward). For causal masks the sequence
is cut into 2c chunks and GPU i takes chunks i and 2c − 1 − i, so every GPU has the same
attention work; hence c must divide the sequence into 2c equal chunks.

Each step's transfer runs while the GPU computes attention on the block it already holds:
the exposed time of a step is max(0, transfer − attention on one block). A CP group is part
of a node (the ring runs over the node's GPU links) or whole nodes (:func:`placement_problem`);
over whole nodes every step also crosses the network, where each GPU at a node's edge sends
through its share of the node's network (Llama 3 ran CP 16 with TP 8 over 16 nodes;
Megatron-Core's CP groups span nodes whenever t·c exceeds one). Everything else
in a layer is token-parallel (no communication); the weights' gradients are reduced over
DP × CP (Megatron does so), which :mod:`hetopt.planner.parallelizer.builtin` handles as data parallelism
over c·d.

Examples
--------
>>> from hetopt.workload import ModelConfig
>>> llama = ModelConfig("l", "llama", 2, 4096, 32, 11008, 0, 8192, kv_heads=8)
>>> ring_step_bytes(llama, 8192, 1, cp=4, tp=2) == 2 * 2 * (8192 / 4) * 1024 / 2
True
>>> sequence_problem(8192, 3)
'cp=3: the sequence of 8192 tokens does not split into 2·cp = 6 equal chunks (give a cp with 8192 divisible by 2·cp)'
"""

from __future__ import annotations

from hetopt import costmodel as cm
from hetopt.hardware import GpuType
from hetopt.workload import ACTIVATION_BYTES, ModelConfig

#: Chunks per CP rank of the load-balanced causal split (Megatron's get_batch_on_this_cp_rank:
#: the sequence is cut into 2·cp chunks, rank i takes chunks i and 2·cp − 1 − i).
CHUNKS_PER_RANK = 2
#: K/V-sized tensors a backward ring step passes: K and V, and their gradients dK and dV.
BACKWARD_RING_TENSORS = 2


def sequence_problem(seq: int, cp: int) -> str:
    """Why the sequence cannot be split over ``cp`` ranks ('' when it can).

    Examples
    --------
    >>> sequence_problem(4096, 8), sequence_problem(4096, 1)
    ('', '')
    """
    if cp < 1:
        return f"cp={cp} must be >= 1"
    if cp > 1 and seq % (CHUNKS_PER_RANK * cp):
        return (f"cp={cp}: the sequence of {seq} tokens does not split into 2·cp = {CHUNKS_PER_RANK * cp} equal chunks "
                f"(give a cp with {seq} divisible by 2·cp)")
    return ""


def flash_problem(cp: int, gpu: GpuType, flash: bool = True) -> str:
    """Why ``cp`` ranks cannot run ring attention on ``gpu`` ('' when they can).

    Ring attention merges the partial attention of each K/V block with the softmax
    statistics (row max and sum) that fused kernels return; Transformer Engine, which
    Megatron-Core's CP runs on, rings only its FlashAttention and cuDNN fused backends and
    disables unfused attention under CP, and both fused backends need sm80 or later
    (``get_attention_backend`` in NVIDIA/TransformerEngine,
    ``transformer_engine/pytorch/attention/dot_product_attention/utils.py``). So CP needs
    FlashAttention on (``flash``) and a GPU that runs it (the catalog's ``flash_attention``).

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> cat = load_gpus()
    >>> flash_problem(2, cat["A100-SXM4-80GB"]), flash_problem(1, cat["V100-SXM2-32GB"])
    ('', '')
    >>> flash_problem(2, cat["V100-SXM2-32GB"])
    'cp=2: context parallelism rings FlashAttention, which the V100-SXM2-32GB does not run (use cp=1)'
    """
    if cp <= 1:
        return ""
    if not gpu.flash_attention:
        return f"cp={cp}: context parallelism rings FlashAttention, which the {gpu.name} does not run (use cp=1)"
    if not flash:
        return f"cp={cp}: context parallelism rings FlashAttention, which flash=no turns off (use cp=1 or drop flash=no)"
    return ""


def placement_problem(cp: int, tp: int, gpus_per_node: int) -> str:
    """Why a CP group of ``cp`` ranks at TP ``tp`` cannot be placed on nodes of ``gpus_per_node`` ('' when it can).

    Megatron-Core orders ranks TP first, then CP: a CP group's t·c GPUs are contiguous. They
    must be part of one node (t·c divides it: the ring runs over the node's links) or whole
    nodes (t·c a multiple of it: the ring walks node by node and crosses the network once
    per node), so that no node holds a CP group's GPUs next to another group's ragged end.

    Examples
    --------
    >>> placement_problem(2, 4, 8), placement_problem(16, 8, 8), placement_problem(1, 8, 8)
    ('', '', '')
    >>> placement_problem(3, 4, 8)
    'cp=3: tp·cp = 12 must divide the 8 GPUs of a node or be a multiple of them (a CP group is part of a node or whole nodes)'
    """
    span = tp * cp
    if cp <= 1 or gpus_per_node % span == 0 or span % gpus_per_node == 0:
        return ""
    return (f"cp={cp}: tp·cp = {span} must divide the {gpus_per_node} GPUs of a node or be a multiple of them "
            f"(a CP group is part of a node or whole nodes)")


def crosses_nodes(cp: int, tp: int, gpus_per_node: int) -> bool:
    """Whether the K/V ring of ``cp`` ranks at TP ``tp`` leaves the node (t·c above the node's GPUs).

    Examples
    --------
    >>> crosses_nodes(2, 4, 8), crosses_nodes(16, 8, 8)
    (False, True)
    """
    return cp > 1 and tp * cp > gpus_per_node


def ring_step_bytes(cfg: ModelConfig, seq: int, samples: float, *, cp: int, tp: int) -> float:
    """Bytes one GPU sends per forward ring step: K and V of its s/c tokens, its 1/t of the heads.

    2 (K, V) · 2 bytes · (s/c) · w_kv · b / t for b samples per replica.

    Examples
    --------
    >>> gpt = ModelConfig("g", "gpt", 2, 1024, 16, 4096, 0, 2048)
    >>> ring_step_bytes(gpt, 2048, 2, cp=2, tp=1) == 2 * 2 * 1024 * 1024 * 2
    True
    """
    return 2 * ACTIVATION_BYTES * (seq / cp) * cfg.kv_width * samples / tp


def ring_attention_s(
    cfg: ModelConfig, seq: int, samples: float, *, cp: int, tp: int, gpu: GpuType, bandwidth: float, hop_latency_s: float,
    flash: bool = False,
) -> tuple[float, float]:
    """Exposed seconds of one layer's K/V ring per micro-batch: (forward, backward).

    Forward: c − 1 steps, each max(0, x − y) with x = ``ring_step_bytes`` / w + hop latency
    and y the attention of one (s/c) × (s/c) block on the GPU (4·(s/c)²·w·b/t FLOPs at the
    GEMM efficiency of its b·s/c token rows; with ``flash``, FlashAttention's kernels at their
    own share of peak, ``costmodel.attention_time_s``). Backward: the same steps passing K, V,
    dK, dV (2x), overlapped with the block's backward attention (2y; with FlashAttention
    ``FLASH_SCORE_BACKWARD_PER_FORWARD``·y, Q·Kᵀ recomputed). Each pass adds one launch
    latency. 0 for c = 1.

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> llama = ModelConfig("l", "llama", 2, 4096, 32, 11008, 0, 8192, kv_heads=8)
    >>> f, b = ring_attention_s(llama, 8192, 1, cp=2, tp=1, gpu=load_gpus()["A100-SXM4-80GB"], bandwidth=1e6, hop_latency_s=0)
    >>> f > 0 and b > f
    True
    """
    if cp <= 1:
        return 0.0, 0.0
    x = ring_step_bytes(cfg, seq, samples, cp=cp, tp=tp) / bandwidth + hop_latency_s
    block = 4.0 * (seq / cp) ** 2 * cfg.attention_width * samples / tp
    y = cm.attention_time_s(block, gpu) if flash else cm.gemm_time_s(block, gpu)  # the scores' bytes: elementwise
    y_back = (cm.FLASH_SCORE_BACKWARD_PER_FORWARD if flash else cm.BACKWARD_PER_FORWARD) * y
    base = cm.RING_BASE_LATENCY_S if hop_latency_s > 0 else 0.0
    forward = (cp - 1) * max(0.0, x - y) + base
    backward = (cp - 1) * max(0.0, BACKWARD_RING_TENSORS * x - y_back) + base
    return forward, backward


__all__ = [
    "BACKWARD_RING_TENSORS", "CHUNKS_PER_RANK", "crosses_nodes", "placement_problem", "ring_attention_s", "ring_step_bytes",
    "sequence_problem",
]
