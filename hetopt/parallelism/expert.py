"""Expert parallelism (EP) and fully sharded EP (FSEP) of MoE layers: bytes, FLOPs, seconds.

A stage of t·c·d GPUs (TP t, CP c, DP d; GPU order data-parallel rank, then context-parallel
rank, then TP rank) shards the E experts of each MoE layer over EP groups of e GPUs:

* **EP inside the data-parallel group** (Megatron-Core with the expert-tensor-parallel size
  equal to TP): when e divides c·d, an EP group is e replicas' GPUs of one TP rank (it
  spans e·t consecutive GPUs) and every expert stays split by TP over t (``etp`` = t);
* **EP beyond DP** (Megatron-Core's MoE parallel folding, expert-tensor-parallel size 1):
  when e divides t·c·d but not c·d, an EP group is e consecutive GPUs and experts are whole
  (``etp`` = 1).

Each GPU holds E/e experts (split over etp); every MoE layer dispatches its tokens to the
experts and combines the results back: two all-to-alls in forward and the matching two in
backward (Lepikhin et al. 2020, GShard; Fedus et al. 2022, Switch Transformer). The busiest
EP rank sets the pace: ``ROUTING_IMBALANCE``. **FSEP** (fully sharded EP, as Galvatron's MoE
runtime and LAER-MoE): each expert's parameters are also sharded over the e GPUs of its
group and gathered per layer before use (like ZeRO-3 for the experts); the runtime then
chooses which GPU computes which expert, so the routing imbalance is not paid.

Examples
--------
>>> from hetopt.workload import ModelConfig
>>> moe = ModelConfig("m", "gpt", 2, 1024, 16, 4096, 0, 512, experts=8, top_k=2, moe_every=2)
>>> alltoall_bytes(moe, 1000, 4) == 1000 * 2 * 1024 * 2 * 3 / 4
True
>>> expert_tp(tp=2, ep=4, cp=1, dp=4), expert_tp(tp=2, ep=4, cp=1, dp=2)
(2, 1)
"""

from __future__ import annotations

from hetopt import costmodel as cm
from hetopt.workload import ACTIVATION_BYTES, ModelConfig

#: All-to-alls per MoE layer per pass: dispatch (tokens to their experts) and combine
#: (expert outputs back); backward runs the same two on the gradients (GShard, Sec. 2.2;
#: Megatron-Core's MoEAlltoAllTokenDispatcher: token_permutation + token_unpermutation).
ALLTOALLS_PER_PASS = 2
#: Load of the busiest EP rank over the mean, paid by expert GEMMs and all-to-alls whenever
#: experts are spread over e > 1 GPUs (without FSEP). Switch Transformer's training capacity
#: factor 1.25 (Fedus et al. 2022, JMLR, Sec. 2.2 and Table 1): the expert buffers a
#: capacity-based runtime sizes, so every rank computes and exchanges up to 1.25 × the
#: balanced load; a dropless runtime's busiest rank exceeds the mean by a model-dependent
#: amount that the auxiliary balancing loss keeps of this order. An assumption, sourced.
ROUTING_IMBALANCE = 1.25
#: Elements each routed token's hidden vector moves through memory per MoE layer in forward, by
#: the two token permutations every Megatron-Core dispatcher runs (alltoall, allgather and flex
#: alike; megatron/core/transformer/moe/moe_utils.py ``permute`` and ``unpermute``, with
#: ``--moe-permute-fusion``, Transformer Engine's fused kernels): per copy of a token (k a
#: token), the gather into expert order reads and writes it (2) and the probability-weighted
#: scatter back reads it (1): ``PERMUTE_COPY_ELEMENTS``; the scatter writes the token once:
#: ``UNPERMUTE_TOKEN_ELEMENTS``. Per element of h, 16-bit. A count of bytes, not a measurement.
PERMUTE_COPY_ELEMENTS = 2 + 1
UNPERMUTE_TOKEN_ELEMENTS = 1
#: Backward: each permutation's gradient is the other's transpose, the same rows moved (the
#: gather's backward scatters, the scatter's gathers), and the router probabilities' gradient
#: reads the saved permuted copies once more (``unpermute`` multiplied them by the probabilities):
#: one element more per copy.
PERMUTE_BACKWARD_EXTRA_COPY_ELEMENTS = 1
#: MoE layers whose gathered experts FSEP holds at once: the one computed and the one
#: prefetched (as ZeRO-3's gathered layers, ``hetopt.costmodel.stage.ZERO3_GATHERED_LAYERS``).
FSEP_GATHERED_LAYERS = 2


def expert_parameters(cfg: ModelConfig, index: int = 0) -> int:
    """Parameters of layer ``index``'s experts (all E of them, router excluded); 0 for a dense layer.

    Examples
    --------
    >>> moe = ModelConfig("m", "llama", 2, 1024, 16, 4096, 0, 512, experts=8, top_k=2)
    >>> expert_parameters(moe) == 8 * 3 * 1024 * 4096
    True
    """
    if not cfg.is_moe_layer(index):
        return 0
    width = cfg.expert_ffn or cfg.ffn
    biased = cfg.architecture != "llama"
    return cfg.experts * (cm.ffn_matrices(cfg) * cfg.hidden * width + (width + cfg.hidden if biased else 0))


def expert_forward_flops(cfg: ModelConfig, seq: int, index: int = 0) -> float:
    """Forward FLOPs of layer ``index``'s experts per sample: 2·s·k·n_f·h·f (router excluded).

    n_f = 2 matrices (GELU) or 3 (SwiGLU); each token visits k experts. 0 for a dense layer.

    Examples
    --------
    >>> moe = ModelConfig("m", "llama", 2, 1024, 16, 4096, 0, 512, experts=8, top_k=2)
    >>> expert_forward_flops(moe, 512) == 2 * 512 * 2 * 3 * 1024 * 4096
    True
    """
    if not cfg.is_moe_layer(index):
        return 0.0
    return 2.0 * seq * cfg.top_k * cm.ffn_matrices(cfg) * cfg.hidden * (cfg.expert_ffn or cfg.ffn)


def expert_operand_widths(cfg: ModelConfig, index: int = 0) -> tuple[float, float]:
    """Elements per routed token the experts' forward GEMMs read and write: (h-wide, ETP-sharded).

    Each of a token's k expert visits reads h and writes n_f − 1 times f (gate and up, or the
    first matrix), then reads f and writes h: (2·h, n_f·f), the f side split over the experts'
    TP degree. (0, 0) for a dense layer. The router's h×E GEMM is left out (E ≪ h).
    ``hetopt.costmodel.gemm_traffic_bytes`` turns these into bytes.

    Examples
    --------
    >>> moe = ModelConfig("m", "llama", 2, 1024, 16, 4096, 0, 512, experts=8, top_k=2, expert_ffn=1024)
    >>> expert_operand_widths(moe)
    (2048.0, 3072.0)
    """
    if not cfg.is_moe_layer(index):
        return 0.0, 0.0
    return 2.0 * cfg.hidden, float(cm.ffn_matrices(cfg) * (cfg.expert_ffn or cfg.ffn))


def layout_problem(cfg: ModelConfig, *, tp: int, ep: int, cp: int, dp: int) -> str:
    """Why EP degree ``ep`` cannot be laid out on t·c·d GPUs ('' when it can).

    e must divide the experts, and divide c·d (EP inside the data-parallel group) or t·c·d
    (EP beyond DP, experts whole).

    Examples
    --------
    >>> moe = ModelConfig("m", "gpt", 2, 1024, 16, 4096, 0, 512, experts=8, top_k=2)
    >>> layout_problem(moe, tp=1, ep=3, cp=1, dp=3)
    'ep=3 does not divide the 8 experts of m'
    >>> layout_problem(moe, tp=2, ep=2, cp=1, dp=2)
    ''
    """
    if ep < 1:
        return f"ep={ep} must be >= 1"
    if ep == 1:
        return ""
    if cfg.experts <= 1:
        return f"ep={ep}: {cfg.name} has no experts (give ep=1)"
    if cfg.experts % ep:
        return f"ep={ep} does not divide the {cfg.experts} experts of {cfg.name}"
    if (tp * cp * dp) % ep:
        return f"ep={ep} does not divide the tp·cp·dp = {tp * cp * dp} GPUs of a stage"
    return ""


def expert_tp(*, tp: int, ep: int, cp: int, dp: int) -> int:
    """The experts' tensor-parallel degree: t when e divides c·d (EP inside DP), else 1 (folded).

    Examples
    --------
    >>> expert_tp(tp=4, ep=2, cp=1, dp=2), expert_tp(tp=4, ep=8, cp=1, dp=2)
    (4, 1)
    """
    return tp if (cp * dp) % ep == 0 else 1


def group_span(*, tp: int, ep: int, etp: int) -> int:
    """Consecutive GPUs one EP group spans: e·t inside DP (one TP rank of e replicas), e folded.

    Examples
    --------
    >>> group_span(tp=2, ep=4, etp=2), group_span(tp=2, ep=4, etp=1)
    (8, 4)
    """
    return ep * tp if etp == tp else ep


def routed_rows(cfg: ModelConfig, tokens: float, *, tp: int, etp: int) -> float:
    """Token rows the experts on one GPU compute in all, balanced: τ·k·etp / t.

    τ = tokens of the GPU's replica (b·s/c). Each of the GPU's E/e experts sees e·τ·k·etp/(E·t)
    rows (inside DP the e ranks' tokens meet; folded, each GPU brings its τ/t sequence-parallel
    share); their GEMMs' operand traffic is counted over these rows
    (``hetopt.costmodel.gemm_traffic_bytes`` with ``expert_operand_widths``).

    Examples
    --------
    >>> moe = ModelConfig("m", "gpt", 2, 1024, 16, 4096, 0, 512, experts=8, top_k=2)
    >>> routed_rows(moe, 4096, tp=1, etp=1), routed_rows(moe, 4096, tp=2, etp=1)
    (8192.0, 4096.0)
    """
    return tokens * cfg.top_k * etp / tp


def alltoall_bytes(cfg: ModelConfig, tokens: float, ep: int) -> float:
    """Bytes one GPU sends in one dispatch (or combine) all-to-all: τ_g·k·h·2·(e − 1)/e.

    τ_g tokens on the GPU (b·s/(c·t) with sequence parallelism), each copied to its k experts,
    16-bit hidden vectors; the 1/e that stays local moves nothing (balanced routing).

    Examples
    --------
    >>> moe = ModelConfig("m", "gpt", 2, 1024, 16, 4096, 0, 512, experts=8, top_k=2)
    >>> alltoall_bytes(moe, 512, 1), alltoall_bytes(moe, 512, 2) == 512 * 2 * 1024 * 2 / 2
    (0.0, True)
    """
    if ep <= 1:
        return 0.0
    return tokens * cfg.top_k * cfg.hidden * ACTIVATION_BYTES * (ep - 1) / ep


def alltoall_s(
    nbytes: float, ep: int, *, local: int, node_gpus: int, intra_bandwidth: float, inter_bandwidth: float,
    intra_hop_s: float, inter_hop_s: float,
) -> float:
    """Seconds of one all-to-all in which every GPU sends ``nbytes`` to its e − 1 peers, α–β.

    Each peer gets nbytes/(e − 1). Inside a node (``local`` = e members on the node) the
    sends run over every GPU's own link: nbytes / w_intra. Across nodes a GPU reaches its
    local − 1 node mates over w_intra and its e − local remote peers over the node's network,
    which carries the remote traffic of all ``node_gpus`` GPUs of the stage on the node; the
    two proceed at once, the slower sets the time. α = NCCL's latency for e − 1 steps
    (``costmodel.ring_latency_s``): the pairwise exchange takes e − 1 rounds.

    Examples
    --------
    >>> alltoall_s(3e6, 4, local=4, node_gpus=4, intra_bandwidth=1e9, inter_bandwidth=1e9, intra_hop_s=0, inter_hop_s=0)
    0.003
    >>> alltoall_s(3e6, 4, local=2, node_gpus=2, intra_bandwidth=1e10, inter_bandwidth=1e9, intra_hop_s=0, inter_hop_s=0)
    0.004
    """
    if ep <= 1 or nbytes <= 0:
        return 0.0
    per_peer = nbytes / (ep - 1)
    if local >= ep:
        return nbytes / intra_bandwidth + cm.ring_latency_s(ep - 1, intra_hop_s)
    intra = (local - 1) * per_peer / intra_bandwidth
    inter = node_gpus * (ep - local) * per_peer / inter_bandwidth
    return max(intra, inter) + cm.ring_latency_s(ep - 1, inter_hop_s)


def permutation_bytes(cfg: ModelConfig, tokens: float) -> tuple[float, float]:
    """Bytes one MoE layer's token permutations move on a GPU holding ``tokens``: (forward, backward).

    Forward τ_g·((2 + 1)·k + 1)·h·2: the gather into expert order reads and writes the k copies
    of each token, the weighted scatter back reads them and writes the token
    (``PERMUTE_COPY_ELEMENTS``, ``UNPERMUTE_TOKEN_ELEMENTS``); backward one read of the k copies
    more (``PERMUTE_BACKWARD_EXTRA_COPY_ELEMENTS``). τ_g = b·s/(c·t), the tokens the GPU routes
    (its sequence-parallel share, as :func:`alltoall_bytes`); balanced, since the sender's side
    permutes its own tokens. Memory-bound: they run at the memory bandwidth.

    Examples
    --------
    >>> moe = ModelConfig("m", "gpt", 2, 1024, 16, 4096, 0, 512, experts=8, top_k=2)
    >>> permutation_bytes(moe, 100) == (100 * (3 * 2 + 1) * 1024 * 2, 100 * (4 * 2 + 1) * 1024 * 2)
    True
    """
    k, h = cfg.top_k, cfg.hidden
    forward = PERMUTE_COPY_ELEMENTS * k + UNPERMUTE_TOKEN_ELEMENTS
    backward = forward + PERMUTE_BACKWARD_EXTRA_COPY_ELEMENTS * k
    return tokens * forward * h * ACTIVATION_BYTES, tokens * backward * h * ACTIVATION_BYTES


def tp_routed_factor(cfg: ModelConfig, imbalance: float) -> float:
    """The routed rows an MoE layer's TP collectives move, over a dense FFN's tokens: k × imbalance.

    With the experts split over TP (etp = t > 1), Megatron-Core's ``MoEAlltoAllTokenDispatcher``
    all-gathers the rows each GPU received from the all-to-all over the expert-TP group before the
    expert GEMMs (``dispatch_postprocess``: ``gather_from_sequence_parallel_region`` on
    ``tp_group``) and reduce-scatters the outputs before the combine: a token's k copies, on the
    busiest rank ``imbalance`` times as many, where a dense FFN's sequence-parallel all-gather
    and reduce-scatter move each token once.

    Examples
    --------
    >>> moe = ModelConfig("m", "gpt", 2, 1024, 16, 4096, 0, 512, experts=8, top_k=2)
    >>> tp_routed_factor(moe, 1.25)
    2.5
    """
    return cfg.top_k * imbalance


def activation_bytes(cfg: ModelConfig, tokens: float, index: int = 0) -> float:
    """Bytes layer ``index``'s expert activation (GELU or SwiGLU) moves in forward for ``tokens``, balanced.

    τ·k·a·f_e, a = ``costmodel.FFN_ACTIVATION_BYTES`` per element (4 GELU, 6 SwiGLU): the part of
    ``costmodel.elementwise_widths`` that runs on the routed rows, and so on the busiest EP
    rank's rows, ``ROUTING_IMBALANCE`` times as many, as its GEMMs. 0 for a dense layer.

    Examples
    --------
    >>> moe = ModelConfig("m", "llama", 2, 1024, 16, 4096, 0, 512, experts=8, top_k=2, expert_ffn=1024)
    >>> activation_bytes(moe, 100) == 100 * 2 * 6 * 1024
    True
    """
    if not cfg.is_moe_layer(index):
        return 0.0
    return tokens * cfg.top_k * cm.FFN_ACTIVATION_BYTES[cm.ffn_matrices(cfg)] * (cfg.expert_ffn or cfg.ffn)


def reduction_parameters(expert_params: float, *, ep: int, etp: int, node_gpus: int) -> float:
    """Expert parameters a node's network carries in the expert-data-parallel reduction, per ring step.

    Every GPU holds Φ_exp/(e·etp) expert parameters and reduces them over its own ring, the GPUs
    holding the same shard in the other EP groups (Megatron-Core's expert data-parallel group).
    A node's ``node_gpus`` GPUs of the stage hold min(e·etp, node_gpus) distinct shards (an EP
    group's e·etp GPUs, or the part of one on the node), each on its own ring, and every ring
    crosses the node's network: min(e·etp, n)·Φ_exp/(e·etp), all of Φ_exp when an EP group fits
    on a node. (The dense part's rings, one per TP rank, carry the stage's Φ in the same way.)

    Examples
    --------
    >>> reduction_parameters(8e9, ep=8, etp=1, node_gpus=8), reduction_parameters(8e9, ep=16, etp=1, node_gpus=8)
    (8000000000.0, 4000000000.0)
    """
    shards = ep * etp
    return expert_params * min(shards, node_gpus) / shards


def fsep_gather_bytes(expert_params: float, ep: int, etp: int) -> float:
    """Bytes one GPU receives to gather its E/e experts of one layer under FSEP.

    Its experts hold P_exp/(e·etp) parameters (16-bit), of which it owns 1/e already.

    Examples
    --------
    >>> fsep_gather_bytes(8e6, 4, 1) == 2 * 8e6 / 4 * 3 / 4
    True
    """
    if ep <= 1:
        return 0.0
    return cm.WEIGHT_BYTES * expert_params / (ep * etp) * (ep - 1) / ep


__all__ = [
    "ALLTOALLS_PER_PASS",
    "FSEP_GATHERED_LAYERS",
    "PERMUTE_BACKWARD_EXTRA_COPY_ELEMENTS",
    "PERMUTE_COPY_ELEMENTS",
    "ROUTING_IMBALANCE",
    "UNPERMUTE_TOKEN_ELEMENTS",
    "activation_bytes",
    "alltoall_bytes",
    "alltoall_s",
    "expert_forward_flops",
    "expert_operand_widths",
    "expert_parameters",
    "expert_tp",
    "routed_rows",
    "tp_routed_factor",
    "fsep_gather_bytes",
    "group_span",
    "layout_problem",
    "permutation_bytes",
    "reduction_parameters",
]
