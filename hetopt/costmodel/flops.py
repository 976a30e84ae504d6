"""FLOPs and parameter counts of a transformer layer, its embedding and its head, by recomputation mode.

Part of the cost model (:mod:`hetopt.costmodel`); every formula, constant and source is in
``formulations/costmodel.md``. SI units: FLOPs, bytes, seconds, bytes/s.
"""

from __future__ import annotations

from hetopt.workload import ModelConfig, ffn_matrices, head_forward_flops, layer_forward_flops


#: Activation recomputation modes: keep everything, recompute the attention scores
#: (Korthikanti et al.'s selective recomputation), recompute the whole layer from its input.
RECOMPUTE_MODES = ("none", "selective", "full")

#: Backward FLOPs per forward FLOP: every matmul has an input- and a weight-gradient matmul.
BACKWARD_PER_FORWARD = 2.0

#: Training FLOPs per forward FLOP without recomputation: forward 1 + backward 2.
TRAINING_PER_FORWARD = 1.0 + BACKWARD_PER_FORWARD


def check_recompute(recompute: str) -> None:
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
    check_recompute(recompute)
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


#: Normalizations per layer (before attention and before the FFN).
NORMS_PER_LAYER = 2
