"""Model architectures: shapes from ``instances/models/*.toml`` and the quantities planners need.

All counts are per sample (one sequence of ``seq`` tokens) unless named otherwise; FLOPs
count a multiply-add as two. Formulas and their sources are in ``formulations/costmodel.md``
(the allocation generator's subset is in ``formulations/allocation.md``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from hetopt.files import read_toml
from hetopt.readers.fields import Fields

#: Bytes per 16-bit activation element (fp16/bf16 training).
ACTIVATION_BYTES = 2
#: Training-state bytes per parameter for mixed-precision Adam: fp16 weights and gradients
#: (2 + 2) plus fp32 master weights, momentum and variance (4 + 4 + 4) [ZeRO, Rajbhandari et al. 2020].
STATE_BYTES_PER_PARAMETER = 16

ARCHITECTURES = ("gpt", "llama", "vit")


@dataclass(frozen=True)
class ModelConfig:
    """A transformer's published shape.

    ``gpt`` and ``vit`` layers: attention with 4 h×h matrices and biases, a two-matrix GELU
    FFN; ``llama``: grouped-query attention, a three-matrix SwiGLU FFN, no biases. MoE:
    ``experts`` FFNs per MoE layer (every ``moe_every``-th layer), ``top_k`` active per token.
    """

    name: str
    architecture: str
    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    sequence: int
    kv_heads: int | None = None
    head_dim: int | None = None
    experts: int = 1
    top_k: int = 1
    expert_ffn: int | None = None
    moe_every: int = 1
    tied_embeddings: bool = False
    source: str = ""

    @property
    def attention_width(self) -> int:
        """heads × head dimension (= hidden unless the config says otherwise)."""
        return self.heads * (self.head_dim or self.hidden // self.heads)

    @property
    def kv_width(self) -> int:
        """kv_heads × head dimension."""
        return (self.kv_heads or self.heads) * (self.head_dim or self.hidden // self.heads)

    def is_moe_layer(self, index: int) -> bool:
        """Whether layer ``index`` (0-based) holds experts."""
        return self.experts > 1 and (index + 1) % self.moe_every == 0


def ffn_matrices(cfg: ModelConfig) -> int:
    """Weight matrices of one FFN: 3 for Llama's SwiGLU (gate, up, down), 2 for a GELU FFN."""
    return 3 if cfg.architecture == "llama" else 2


def layer_parameters(cfg: ModelConfig, index: int = 0) -> int:
    """Parameters of layer ``index`` (all experts counted).

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 2560, 32, 10240, 50257, 2048)
    >>> layer_parameters(gpt) == 12 * 2560**2 + 13 * 2560
    True
    """
    h = cfg.hidden
    biased = cfg.architecture != "llama"  # GPT and ViT layers carry biases and LayerNorm shifts
    attention = 2 * h * cfg.attention_width + 2 * h * cfg.kv_width
    attention_biases = cfg.attention_width + 2 * cfg.kv_width + h if biased else 0
    norms = 4 * h if biased else 2 * h

    def one_ffn(width: int) -> int:
        return ffn_matrices(cfg) * h * width + (width + h if biased else 0)

    if cfg.is_moe_layer(index):
        ffn = cfg.experts * one_ffn(cfg.expert_ffn or cfg.ffn) + h * cfg.experts  # experts + router
    else:
        ffn = one_ffn(cfg.ffn)
    return attention + attention_biases + norms + ffn


def embedding_parameters(cfg: ModelConfig) -> int:
    """Token (and, for GPT/ViT, position) embeddings plus the output head if untied."""
    positions = cfg.sequence * cfg.hidden if cfg.architecture in ("gpt", "vit") else 0
    head = 0 if cfg.tied_embeddings or cfg.architecture == "vit" else cfg.vocab * cfg.hidden
    return cfg.vocab * cfg.hidden + positions + head


def parameters(cfg: ModelConfig) -> int:
    """All parameters.

    Examples
    --------
    >>> from hetopt.catalog import instances_dir
    >>> llama = load_model(instances_dir() / "models" / "llama-2-7b.toml")
    >>> round(parameters(llama) / 1e9, 2)
    6.74
    """
    return sum(layer_parameters(cfg, i) for i in range(cfg.layers)) + embedding_parameters(cfg)


def layer_forward_flops(cfg: ModelConfig, seq: int, index: int = 0) -> float:
    """Forward FLOPs of layer ``index`` for one sample of ``seq`` tokens.

    2 × (matrix parameters a token meets) × seq for the matmuls, plus 4·seq²·width for the
    attention scores and their weighted sum (the 4·b·s²·h term of Narayanan et al. 2021).

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 2560, 32, 10240, 50257, 2048)
    >>> layer_forward_flops(gpt, 512) == 24 * 512 * 2560**2 + 4 * 512**2 * 2560
    True
    """
    h = cfg.hidden
    attention = 2 * h * cfg.attention_width + 2 * h * cfg.kv_width
    if cfg.is_moe_layer(index):
        ffn = cfg.top_k * ffn_matrices(cfg) * h * (cfg.expert_ffn or cfg.ffn) + h * cfg.experts  # + router
    else:
        ffn = ffn_matrices(cfg) * h * cfg.ffn
    return 2.0 * seq * (attention + ffn) + 4.0 * seq * seq * cfg.attention_width


def head_forward_flops(cfg: ModelConfig, seq: int) -> float:
    """Forward FLOPs of the output projection to the vocabulary (0 for ViT)."""
    return 2.0 * seq * cfg.hidden * cfg.vocab


def layer_activation_bytes(cfg: ModelConfig, seq: int) -> float:
    """Activation bytes one layer keeps per sample without recomputation or parallelism.

    s·h·(34 + 5·a·s/h) [Korthikanti et al. 2022, 16-bit activations], a = attention heads.
    """
    return seq * cfg.hidden * (34.0 + 5.0 * cfg.heads * seq / cfg.hidden)


def load_model(path: str | Path) -> ModelConfig:
    """Read one ``instances/models/*.toml`` file.

    Raises
    ------
    InputError
        With the file, the key and the fix.
    """
    return model_from_fields(Fields(read_toml(path), str(path)))


def model_from_fields(f: Fields) -> ModelConfig:
    """A model shape from a table with the keys of ``instances/models/*.toml``.

    The model files and the tables of other files (e.g. ``[models.KEY]`` of a published
    measurement set) go through this one reader.

    Raises
    ------
    InputError
        With the file, the key path and the fix.
    """
    f.reject_unknown(
        ("name", "architecture", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "expert_ffn",
         "vocab", "sequence", "experts", "top_k", "moe_every", "tied_embeddings", "source", "note")
    )
    cfg = ModelConfig(
        name=f.string("name"),
        architecture=f.string("architecture", choices=ARCHITECTURES),
        layers=f.integer("layers", minimum=1, maximum=10_000),
        hidden=f.integer("hidden", minimum=1),
        heads=f.integer("heads", minimum=1),
        ffn=f.integer("ffn", minimum=1),
        vocab=f.integer("vocab", minimum=0),
        sequence=f.integer("sequence", minimum=1),
        kv_heads=f.integer("kv_heads", None, minimum=1),
        head_dim=f.integer("head_dim", None, minimum=1),
        experts=f.integer("experts", 1, minimum=1),
        top_k=f.integer("top_k", 1, minimum=1),
        expert_ffn=f.integer("expert_ffn", None, minimum=1),
        moe_every=f.integer("moe_every", 1, minimum=1),
        tied_embeddings=f.boolean("tied_embeddings", False),
        source=f.string("source", ""),
    )
    if cfg.head_dim is None and cfg.hidden % cfg.heads:
        raise f.error("heads", f"hidden {cfg.hidden} is not a multiple of heads {cfg.heads}; give head_dim")
    if cfg.kv_heads is not None and cfg.heads % cfg.kv_heads:
        raise f.error("kv_heads", f"{cfg.kv_heads} does not divide heads {cfg.heads} (grouped-query attention shares "
                                  "each key/value head among heads / kv_heads query heads)")
    if cfg.experts > 1 and cfg.moe_every > cfg.layers:
        raise f.error("moe_every", f"{cfg.moe_every} exceeds layers {cfg.layers}: no layer would have experts "
                                   f"(every moe_every-th layer is an MoE layer; give at most {cfg.layers})")
    if cfg.top_k > cfg.experts:
        raise f.error("top_k", f"{cfg.top_k} exceeds experts {cfg.experts}")
    return cfg


def state_bytes(cfg: ModelConfig) -> float:
    """Mixed-precision Adam training state of the whole model, bytes."""
    return float(STATE_BYTES_PER_PARAMETER * parameters(cfg))


def ceil_div(a: int, b: int) -> int:
    """Ceiling of a / b for positive integers."""
    return -(-a // b)


__all__ = [
    "ACTIVATION_BYTES",
    "STATE_BYTES_PER_PARAMETER",
    "ModelConfig",
    "ceil_div",
    "embedding_parameters",
    "ffn_matrices",
    "head_forward_flops",
    "layer_activation_bytes",
    "layer_forward_flops",
    "layer_parameters",
    "load_model",
    "model_from_fields",
    "math",
    "parameters",
    "state_bytes",
]
