"""The MoE terms of a stage's price: each by hand on a small case, and each shown to be in the price.

Terms (formulations/costmodel.md, "Expert parallelism (EP, FSEP)"): the token permutations,
the experts' activation on the busiest EP rank's rows, the routed rows of the TP collectives
when experts are split over TP, the expert-data-parallel reduction across nodes (every
distinct expert shard of a node on its own ring) and the window the dense reduction leaves it.
A "removed" check patches the term's function to nothing and expects the price to drop by
exactly the hand-computed amount. Dense models never reach these functions.
"""

from __future__ import annotations

import pytest

from hetopt import costmodel as cm
from hetopt.costmodel import stage as st
from hetopt.hardware import load_gpus
from hetopt.parallelism import expert as ex
from hetopt.planner.parallelizer.builtin import BuiltinParallelizer, Layout
from hetopt.planner.parallelizer.protocol import IslandSpec, Slice, slice_model
from hetopt.workload import ModelConfig
from hetopt.costmodel.running import Running

GPUS = load_gpus()
A100 = GPUS["A100-SXM4-80GB"]
#: A tiny GPT-style MoE: h = 64, 4 heads, dense FFN 256, 8 experts of width 128, top-2, every layer.
TINY_MOE = ModelConfig("tiny-moe", "gpt", 3, 64, 4, 256, 0, 32, experts=8, top_k=2, expert_ffn=128)
#: The same shape without experts.
TINY = ModelConfig("tiny", "gpt", 3, 64, 4, 256, 0, 32)
#: Nothing overlapped and no FlashAttention: every term is on the path, as the hand counts. These
#: layers are tiny: the host's floor would set their stage times and hide the kernel and link terms
#: measured here, so they run as CUDA graphs (``host=cudagraph``: no floor).
SERIAL = dict(reserved_bytes=0.0, running=Running(flash=False, overlap=False, host="cudagraph"))
OVERLAP = dict(reserved_bytes=0.0, running=Running(flash=False, overlap=True, host="cudagraph"))


def middle(cfg: ModelConfig) -> Slice:
    """Layer 1 alone: no embedding, no head."""
    return Slice(slice_model(cfg)[1:2])


def node(nodes: int = 1, gpus: int = 8, inter: float = 0.0) -> IslandSpec:
    return IslandSpec("n", A100, nodes=nodes, gpus_per_node=gpus, inter_bandwidth=inter)


def stage(par, sl, island, m=4, M=8, **kw) -> st.StageCost:
    base = dict(tp=1, pp=1, dp=1, split=(sl.layers,), recompute="none", zero_stage=0)
    base.update(kw)
    # a parallelizer of its own: it memoizes prices, and the tests price again with a term patched
    return BuiltinParallelizer(**par).plan(sl, island, Layout(**base), microbatch_size=m, microbatches=M).stages[0]


# ---------------------------------------------------------------- the token permutations


def test_permutation_bytes_by_hand():
    # 100 tokens, k = 2, h = 64, 16-bit: forward (2 + 1)·2 + 1 = 7 elements of h a token,
    # backward one read of the 2 copies more: 9
    fwd, bwd = ex.permutation_bytes(TINY_MOE, 100)
    assert fwd == 100 * 7 * 64 * 2 == 89_600
    assert bwd == 100 * 9 * 64 * 2 == 115_200


@pytest.mark.parametrize("rc, again", [("none", 0), ("full", 1)])
def test_permutations_are_in_the_price(monkeypatch, rc, again):
    # one GPU, micro-batch 4 of 32 tokens: τ = 128 tokens, one MoE layer
    sl, isl = middle(TINY_MOE), node(gpus=1)
    with_term = stage(SERIAL, sl, isl, dp=1, recompute=rc)
    monkeypatch.setattr(ex, "permutation_bytes", lambda cfg, tokens: (0.0, 0.0))
    without = stage(SERIAL, sl, isl, dp=1, recompute=rc)
    fwd_bytes, bwd_bytes = 128 * 7 * 64 * 2, 128 * 9 * 64 * 2
    bw = A100.memory_bandwidth
    assert with_term.forward_s - without.forward_s == pytest.approx(fwd_bytes / bw, rel=1e-9)
    assert with_term.backward_s - without.backward_s == pytest.approx((bwd_bytes + again * fwd_bytes) / bw, rel=1e-9)


def test_dense_models_never_reach_the_expert_terms(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("an expert term priced a dense layer")

    for name in ("permutation_bytes", "activation_bytes", "reduction_parameters", "tp_routed_factor"):
        monkeypatch.setattr(ex, name, boom)
    monkeypatch.setattr(st, "_expert_overlap", boom)
    isl = node(nodes=2, inter=200e9)
    for kw in (dict(dp=16), dict(tp=2, dp=8), dict(tp=8, dp=2, recompute="full")):
        assert stage(OVERLAP, middle(TINY), isl, **kw).time_s > 0


# ------------------------------------------------------- the experts' activation, imbalanced


def test_activation_bytes_by_hand():
    # GELU (GPT): read and write, 4 bytes an element of f_e = 128; 100 tokens, k = 2
    assert ex.activation_bytes(TINY_MOE, 100, 1) == 100 * 2 * 4 * 128 == 102_400
    assert ex.activation_bytes(TINY, 100) == 0.0


def test_imbalanced_activation_is_in_the_price(monkeypatch):
    # dp = 4, ep = 4 on one node: τ = 4·32/4 = 32 tokens a GPU, imbalance 1.25 (no FSEP)
    sl, isl = middle(TINY_MOE), node()
    with_term = stage(SERIAL, sl, isl, dp=4, ep=4)
    monkeypatch.setattr(ex, "activation_bytes", lambda cfg, tokens, index=0: 0.0)
    without = stage(SERIAL, sl, isl, dp=4, ep=4)
    extra = 0.25 * 32 * 2 * 4 * 128  # (1.25 − 1) × the balanced bytes
    bw = A100.memory_bandwidth
    assert with_term.forward_s - without.forward_s == pytest.approx(extra / bw, rel=1e-9)
    assert with_term.backward_s - without.backward_s == pytest.approx(2 * extra / bw, rel=1e-9)


def test_fsep_and_no_ep_pay_no_imbalanced_activation(monkeypatch):
    sl, isl = middle(TINY_MOE), node()
    calls = []
    real = ex.activation_bytes
    monkeypatch.setattr(ex, "activation_bytes", lambda *a, **k: calls.append(a) or real(*a, **k))
    stage(SERIAL, sl, isl, dp=4, ep=4, fsep=True)
    stage(SERIAL, sl, isl, dp=4, ep=1)
    assert calls == []


# ----------------------------------------------- routed rows in the TP collectives (etp = t)


def test_tp_routed_factor_by_hand():
    assert ex.tp_routed_factor(TINY_MOE, 1.25) == 2 * 1.25
    assert ex.tp_routed_factor(TINY_MOE, 1.0) == 2


def test_routed_tp_collectives_are_in_the_price(monkeypatch):
    # tp = 2, dp = 4, ep = 4 (4 divides c·d: EP inside DP, experts split over TP, etp = 2)
    sl, isl = middle(TINY_MOE), node()
    lay = dict(tp=2, dp=4, ep=4)
    with_term = stage(SERIAL, sl, isl, **lay)
    monkeypatch.setattr(ex, "tp_routed_factor", lambda cfg, imbalance: 1.0)
    without = stage(SERIAL, sl, isl, **lay)
    # samples a replica = 4/4 = 1: the FFN's all-reduce-equivalent moves 2·32·64 = 4,096 bytes;
    # routed, k·1.25 = 2.5 times as many; each priced as NCCL's tuner runs it on the TP pair
    # (sequence parallelism: a reduce-scatter and an all-gather)
    w, fab = isl.intra_achieved, cm.fabric(isl.gpu, 2)
    per_pass = (cm.tp_collective_s(2.5 * 4096, w, fab, sequence_parallel=True)
                - cm.tp_collective_s(4096, w, fab, sequence_parallel=True))
    assert per_pass > 0
    assert with_term.forward_s - without.forward_s == pytest.approx(per_pass, rel=1e-9)
    assert with_term.backward_s - without.backward_s == pytest.approx(per_pass, rel=1e-9)


def test_folded_ep_and_no_ep_keep_the_dense_tp_collectives(monkeypatch):
    sl, isl = middle(TINY_MOE), node()
    calls = []
    monkeypatch.setattr(ex, "tp_routed_factor", lambda *a: calls.append(a) or 1.0)
    stage(SERIAL, sl, isl, tp=2, dp=2, ep=4)  # 4 does not divide d = 2: folded, etp = 1
    stage(SERIAL, sl, isl, tp=2, dp=4, ep=1)
    assert calls == []


# ------------------------------------------------ the expert-data-parallel reduction, across nodes


def test_reduction_parameters_by_hand():
    # an EP group of 8 on a node of 8: the node holds all 8 shards, Φ_exp in all
    assert ex.reduction_parameters(8e9, ep=8, etp=1, node_gpus=8) == 8e9
    # EP 16 over two nodes of 8: 8 of the 16 shards, half of Φ_exp
    assert ex.reduction_parameters(8e9, ep=16, etp=1, node_gpus=8) == 4e9
    # EP 2 with experts over TP 4 (span 8): 8 distinct shards of Φ_exp/8
    assert ex.reduction_parameters(8e9, ep=2, etp=4, node_gpus=8) == 8e9
    # a node with 4 of the stage's GPUs and EP 8: 4 shards of Φ_exp/8
    assert ex.reduction_parameters(8e9, ep=8, etp=1, node_gpus=4) == 4e9


def test_node_carries_every_expert_shard(monkeypatch):
    # 2 nodes of 8, dp = 16, ep = 8: 8 expert-DP rings of 2 GPUs, one per EP rank, every one
    # crossing the network; the node moves Φ_exp, not Φ_exp/8
    sl, isl = middle(TINY_MOE), node(nodes=2, inter=200e9)
    M = 8
    with_term = stage(SERIAL, sl, isl, m=16, M=M, dp=16, ep=8)
    monkeypatch.setattr(ex, "reduction_parameters", lambda p, *, ep, etp, node_gpus: p / ep)
    old = stage(SERIAL, sl, isl, m=16, M=M, dp=16, ep=8)
    phi = ex.expert_parameters(TINY_MOE, 1)
    assert phi == 8 * (2 * 64 * 128 + 128 + 64)
    # an all-reduce of 16-bit gradients over a pair on two nodes, as NCCL's tuner runs it, once an
    # iteration (amortized over M)
    fab, w = cm.fabric(isl.gpu, 2, 2), isl.inter_achieved
    delta = (cm.collective_s("allreduce", cm.GRADIENT_BYTES * phi, w, fab)
             - cm.collective_s("allreduce", cm.GRADIENT_BYTES * phi / 8, w, fab)) / M
    assert with_term.backward_s - old.backward_s == pytest.approx(delta, rel=1e-9)
    assert with_term.forward_s == old.forward_s


# ------------------------------------------------ the overlap window the dense reduction leaves


def test_expert_overlap_by_hand():
    dense = cm.DataParallelComm(0.0, 0.1, 0.5)  # ZeRO 1: 0.5 s once, behind the last backward
    assert st._expert_overlap((1.0, 2.0), dense, 1, 5) == (1.0, 1.5)
    assert st._expert_overlap((1.0, 0.4), dense, 0, 5) == (1.0, 0.0)
    # ZeRO 2: the 0.5 s gather behind the forward, 0.3 − 0.5/5 = 0.2 s of scatter behind the backward
    assert st._expert_overlap((1.0, 2.0), cm.DataParallelComm(0.0, 0.3, 0.5), 2, 5) == pytest.approx((0.5, 1.8))
    # ZeRO 3: gathers behind the forward, gathers and scatters behind the backward
    assert st._expert_overlap((1.0, 2.0), cm.DataParallelComm(0.3, 2.5, 0.0), 3, 5) == pytest.approx((0.7, 0.0))
    assert st._expert_overlap(None, dense, 1, 5) is None


def test_experts_share_the_dense_window(monkeypatch):
    # with overlap, the experts' reduction hides behind less than the whole backward when the
    # dense reduction uses part of it: removing the sharing (the whole window for the experts)
    # can only make the stage faster
    # (4 MoE layers, so the reduction is cut into 4 buckets and can hide behind compute)
    wider = ModelConfig("wider", "gpt", 6, 256, 4, 1024, 0, 128, experts=8, top_k=2, expert_ffn=512)
    sl, isl = Slice(slice_model(wider)[1:5]), node(nodes=2, inter=1e10)
    shared = stage(OVERLAP, sl, isl, m=16, M=1, dp=16, ep=8, zero_stage=1)
    monkeypatch.setattr(st, "_expert_overlap", lambda overlap, dense, z, m: overlap)
    whole = stage(OVERLAP, sl, isl, m=16, M=1, dp=16, ep=8, zero_stage=1)
    assert shared.backward_s > whole.backward_s
