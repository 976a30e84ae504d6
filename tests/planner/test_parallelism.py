"""Expert parallelism (EP, FSEP), context parallelism (CP) and activation offloading.

The formulas are checked against hand-computed small cases (an independent calculation:
literal numbers or parameter counts written out), the built-in parallelizer's new prunes
against pricing what they skip, and bad inputs against the CLI's exit 2.
"""

from __future__ import annotations

import dataclasses

import pytest

from hetopt import cli
from hetopt.catalog import instances_dir
from hetopt.hardware import load_gpus
from hetopt.parallelism import context as ctx
from hetopt.parallelism import expert as ex
from hetopt.parallelism import offload as off
from hetopt.planner.parallelizer.builtin import BuiltinParallelizer, Layout
from hetopt.planner.parallelizer.layouts import fsep_may_pay as _fsep_may_pay
from hetopt.planner.setup.layout import parse_layout
from hetopt.planner.parallelizer.protocol import IslandSpec, Slice, slice_model
from hetopt.workload import ModelConfig, load_model
from hetopt.costmodel.running import Running

GPUS = load_gpus()
MODELS = instances_dir() / "models"
#: A tiny GPT-style MoE: h = 64, 4 heads, dense FFN 256, 8 experts of width 128, top-2, every layer.
TINY_MOE = ModelConfig("tiny-moe", "gpt", 3, 64, 4, 256, 0, 32, experts=8, top_k=2, expert_ffn=128)
#: The same shape without experts.
TINY = ModelConfig("tiny", "gpt", 3, 64, 4, 256, 0, 32)
PAR0 = BuiltinParallelizer(reserved_bytes=0.0, running=Running(flash=False))  # Korthikanti's memory model, as the hand counts
#: The same with the layers run as CUDA graphs (host=cudagraph: no host floor), for the tiny
#: layers whose kernel and link terms the floor would hide.
GRAPHED = BuiltinParallelizer(reserved_bytes=0.0, running=Running(flash=False, host="cudagraph"))


def middle(cfg: ModelConfig) -> Slice:
    """Layer 1 alone: no embedding, no head."""
    return Slice(slice_model(cfg)[1:2])


def one_node(gpu: str = "A100-SXM4-80GB", gpus: int = 8) -> IslandSpec:
    return IslandSpec("n", GPUS[gpu], nodes=1, gpus_per_node=gpus)


def price(sl, island, m=4, M=8, par=PAR0, **kw) -> "PartialPlan":  # noqa: F821
    base = dict(tp=1, pp=1, dp=1, split=(sl.layers,), recompute="none", zero_stage=0)
    base.update(kw)
    lay = Layout(**base)
    return par.plan(sl, island, lay, microbatch_size=m, microbatches=M)


# ----------------------------------------------------------------------- expert parallelism


def test_expert_flops_per_token_by_hand():
    mix = load_model(MODELS / "mixtral-8x7b.toml")
    # top-2 of SwiGLU experts, 3 matrices of 4096 × 14336, 2 FLOPs per multiply-add
    assert ex.expert_forward_flops(mix, 1) == 2 * 2 * 3 * 4096 * 14336 == 704_643_072
    gshard = load_model(MODELS / "gshard-moe-10b.toml")
    assert ex.expert_forward_flops(gshard, 1, 0) == 0.0  # dense layer
    assert ex.expert_forward_flops(gshard, 1, 1) == 2 * 2 * 2 * 1536 * 12288


def test_alltoall_bytes_by_hand():
    mix = load_model(MODELS / "mixtral-8x7b.toml")
    # 4096 tokens, each to 2 experts, 4096-wide 16-bit vectors, 3 of 4 destinations remote
    assert ex.alltoall_bytes(mix, 4096, 4) == 4096 * 2 * 4096 * 2 * 3 / 4 == 50_331_648
    assert ex.alltoall_bytes(mix, 4096, 1) == 0.0


def test_alltoall_time_by_hand():
    # 6 MB to 3 peers inside a node at 1 GB/s, NVLink latencies: 3 steps
    t = ex.alltoall_s(6e6, 4, local=4, node_gpus=4, intra_bandwidth=1e9, inter_bandwidth=1e9,
                      intra_hop_s=3.4e-6, inter_hop_s=9.6e-6)
    assert t == pytest.approx(6e-3 + 8.4e-6 + 3 * 3.4e-6)
    # two nodes of 2: 1 peer local (2 MB over 10 GB/s), 2 remote, the node's 2 GPUs share 1 GB/s: 2·2·2 MB
    t = ex.alltoall_s(6e6, 4, local=2, node_gpus=2, intra_bandwidth=1e10, inter_bandwidth=1e9, intra_hop_s=0, inter_hop_s=0)
    assert t == pytest.approx(8e-3)


def test_expert_parameters_by_hand():
    # 8 experts of two 64×128 matrices with biases 128 + 64
    assert ex.expert_parameters(TINY_MOE, 1) == 8 * (2 * 64 * 128 + 128 + 64) == 132_608


def test_memory_per_gpu_under_ep_by_hand():
    sl, isl = middle(TINY_MOE), one_node()
    layer = 4 * 64 * 64 + (64 + 128 + 64) + 4 * 64 + 132_608 + 64 * 8  # attention, biases, norms, experts, router
    dense, experts = layer - 132_608, 132_608
    assert dense == 17_408
    plain = price(sl, isl, dp=4)
    # bf16 with fp32 main gradients: 18 bytes a parameter (cm.state_bytes_per_parameter)
    assert plain.stages[0].static_bytes == 18 * layer
    ep4 = price(sl, isl, dp=4, ep=4)
    assert ep4.stages[0].static_bytes == 18 * dense + 18 * experts / 4
    zero1 = price(sl, isl, dp=4, ep=4, zero_stage=1)  # dense over 4 replicas (6 + 12/4), experts have 1 replica
    assert zero1.stages[0].static_bytes == (6 + 12 / 4) * dense + 18 * experts / 4
    fsep = price(sl, isl, dp=4, ep=4, fsep=True)  # + 2 gathered layers of 16-bit weights and gradients
    assert fsep.stages[0].static_bytes == ep4.stages[0].static_bytes + 2 * 4 * experts / 4
    # folded (EP beyond DP): tp 2, dp 2, ep 4 does not divide c·d = 2; experts whole, 1 replica each
    folded = price(sl, isl, tp=2, dp=2, ep=4)
    assert folded.stages[0].static_bytes == 18 * dense / 2 + 18 * experts / 4
    # activations do not depend on EP (the expected tokens per expert are the same)
    assert ep4.stages[0].activation_bytes == plain.stages[0].activation_bytes


def test_ep_adds_all_to_alls_and_imbalance():
    # the tiny layer is host-bound, and EP leaves each GPU fewer experts to issue: without the
    # floor (GRAPHED), the kernels and the all-to-alls are what is compared
    sl, isl = middle(TINY_MOE), one_node()
    a, b = (price(sl, isl, M=8, par=GRAPHED, dp=4, **kw).stages[0] for kw in ({}, {"ep": 4}))
    assert b.forward_s > a.forward_s and b.backward_s > a.backward_s


def test_fsep_prune_is_exact():
    """Wherever FSEP is not enumerated, pricing it shows the EP layout dominates it."""
    cfg = load_model(MODELS / "gshard-moe-10b.toml")
    sl = Slice(slice_model(cfg)[1:5])
    isl = IslandSpec("v", GPUS["V100-SXM2-16GB"], nodes=2, gpus_per_node=4, inter_bandwidth=12.5e9)
    checked = 0
    for m in (1, 8):
        for tp, dp, ep in ((1, 4, 4), (1, 8, 8), (2, 4, 4), (1, 2, 2), (2, 2, 4)):
            if dp > m or _fsep_may_pay(sl, isl, m, tp, 1, dp, ep):
                continue
            for rc in ("none", "full"):
                e = PAR0.plan(sl, isl, Layout(tp, 1, dp, (4,), rc, 1, ep=ep), microbatch_size=m, microbatches=4)
                f = PAR0.plan(sl, isl, Layout(tp, 1, dp, (4,), rc, 1, ep=ep, fsep=True), microbatch_size=m, microbatches=4)
                assert all(y.time_s >= x.time_s for x, y in zip(e.stages, f.stages)) and f.peak_bytes >= e.peak_bytes
                checked += 1
    assert checked
    mix = load_model(MODELS / "mixtral-8x7b.toml")  # large token counts: FSEP may pay, so it is searched
    assert _fsep_may_pay(Slice(slice_model(mix, seq=4096)[1:3]), one_node("H100-NVL", 2), 4, 1, 1, 2, 2)


# ---------------------------------------------------------------------- context parallelism


def test_ring_bytes_and_sequence_rule_by_hand():
    llama = load_model(MODELS / "llama-3-8b.toml")  # 8 KV heads of 128: w_kv = 1024
    # K and V, 2 bytes, 8192/4 tokens, 1024 wide, one sample, half the heads per GPU (tp 2)
    assert ctx.ring_step_bytes(llama, 8192, 1, cp=4, tp=2) == 2 * 2 * 2048 * 1024 / 2 == 4_194_304
    assert ctx.sequence_problem(8192, 4) == ""
    assert "2·cp = 6" in ctx.sequence_problem(8192, 3)


def test_cp_splits_activations_and_prices_the_ring():
    sl, isl = middle(TINY), one_node()
    cp2 = price(sl, isl, m=2, par=GRAPHED, cp=2).stages[0]
    dp2 = price(sl, isl, m=2, par=GRAPHED, dp=2).stages[0]
    one = price(sl, isl, m=2, par=GRAPHED).stages[0]
    # GPT without recomputation: s·b·h·(34 + 5·a·s/h) per layer; CP halves the tokens of a GPU
    s, h, a = 32, 64, 4
    assert one.activation_bytes == pytest.approx(s * 2 * h * (34 + 5 * a * s / h))
    assert cp2.activation_bytes == pytest.approx(one.activation_bytes / 2) == pytest.approx(dp2.activation_bytes)
    assert cp2.static_bytes == dp2.static_bytes and cp2.gpus == dp2.gpus == 2
    ring_f, ring_b = ctx.ring_attention_s(TINY, s, 2, cp=2, tp=1, gpu=isl.gpu, bandwidth=isl.intra_achieved,
                                          hop_latency_s=3.4e-6, flash=False)
    assert cp2.forward_s == pytest.approx(dp2.forward_s + ring_f)
    assert cp2.backward_s == pytest.approx(dp2.backward_s + ring_b)


def test_a_ring_over_whole_nodes_runs_at_each_gpus_share_of_the_network():
    """tp 8, cp 2 on two 8-GPU nodes: every GPU's ring step crosses the network, through an
    eighth of the node's network and at the network's hop latency; everything else of the stage
    is what DP 2 over the two nodes gives it."""
    sl = middle(TINY)
    two = IslandSpec("two", GPUS["A100-SXM4-80GB"], nodes=2, gpus_per_node=8, inter_bandwidth=200e9)
    tp8 = dict(tp=8, split=(1,), recompute="none", zero_stage=0)
    lay = Layout(pp=1, dp=1, cp=2, **tp8)
    cp2 = GRAPHED.plan(sl, two, lay, microbatch_size=2, microbatches=8).stages[0]
    dp2 = GRAPHED.plan(sl, two, Layout(pp=1, dp=2, **tp8), microbatch_size=2, microbatches=8).stages[0]
    ring_f, ring_b = ctx.ring_attention_s(TINY, 32, 2, cp=2, tp=8, gpu=two.gpu, bandwidth=two.inter_achieved / 8,
                                          hop_latency_s=14.0e-6, flash=False)
    assert ring_f > 0 and ctx.crosses_nodes(2, 8, 8) and not ctx.crosses_nodes(2, 4, 8)
    assert cp2.forward_s == pytest.approx(dp2.forward_s + ring_f)
    assert cp2.backward_s == pytest.approx(dp2.backward_s + ring_b)
    # the same ring inside one node (tp 4, cp 2) takes the GPU links: cheaper than the network's
    inside = GRAPHED.plan(sl, two, Layout(tp=4, pp=1, dp=1, cp=2, split=(1,), recompute="none", zero_stage=0),
                       microbatch_size=2, microbatches=8).stages[0]
    inside_f, _ = ctx.ring_attention_s(TINY, 32, 2, cp=2, tp=4, gpu=two.gpu, bandwidth=two.intra_achieved,
                                       hop_latency_s=3.4e-6, flash=False)
    assert inside_f < ring_f


def test_cp_over_whole_nodes_is_searched():
    """Llama-3-8B at 128K tokens on four 8-GPU nodes: CP 8 and 16 beside TP 2..8 (t·c whole
    nodes or part of one), never a ragged t·c."""
    llama = load_model(MODELS / "llama-3-8b.toml")
    sl = Slice(slice_model(llama, seq=131072)[1:3])
    four = IslandSpec("four", GPUS["H100-SXM5"], nodes=4, gpus_per_node=8, inter_bandwidth=400e9)
    lays = BuiltinParallelizer().layouts(sl, four, microbatch_size=1)
    pairs = {(lay.tp, lay.cp) for lay in lays}
    assert {(8, 2), (8, 4), (4, 8), (2, 16), (1, 16)} <= pairs
    assert all(8 % (t * c) == 0 or (t * c) % 8 == 0 for t, c in pairs)
    assert all(lay.tp * lay.cp * lay.dp * lay.pp <= 32 for lay in lays)


def test_cp_is_searched_only_where_dp_cannot_split():
    llama = load_model(MODELS / "llama-3-8b.toml")
    sl = Slice(slice_model(llama, seq=8192)[1:3])
    lays = BuiltinParallelizer().layouts(sl, one_node(), microbatch_size=1)
    cps = {lay.cp for lay in lays}
    assert cps == {1, 2, 4, 8} and all(lay.dp == 1 for lay in lays)  # one node: no ring over nodes
    # with m = 2, CP 2 over DP 1 equals DP 2 plus the ring: only CP over DP 2 (or more) is kept
    lays = BuiltinParallelizer().layouts(sl, one_node(), microbatch_size=2)
    assert all(2 % (lay.dp * lay.cp) for lay in lays if lay.cp > 1)
    assert not any(lay.cp > 1 for lay in BuiltinParallelizer().layouts(Slice(slice_model(llama, seq=8190)[1:2]), one_node(), microbatch_size=1)
                   if 8190 % (2 * lay.cp))


def test_cp_runs_only_on_flash_attention():
    """Ring attention merges blocks with FlashAttention's softmax statistics (Transformer Engine
    rings no unfused attention, and its fused kernels need sm80): no CP is searched on a V100
    island or under flash=no, and a given CP layout there is refused with the reason."""
    llama = load_model(MODELS / "llama-3-8b.toml")
    sl = Slice(slice_model(llama, seq=8192)[1:3])
    assert {lay.cp for lay in BuiltinParallelizer().layouts(sl, one_node(), microbatch_size=1)} == {1, 2, 4, 8}
    assert {lay.cp for lay in BuiltinParallelizer().layouts(sl, one_node("V100-SXM2-32GB"), microbatch_size=1)} == {1}
    assert {lay.cp for lay in BuiltinParallelizer(running=Running(flash=False)).layouts(sl, one_node(), microbatch_size=1)} == {1}
    v100 = ctx.flash_problem(2, load_gpus()["V100-SXM2-32GB"])
    assert "the V100-SXM2-32GB does not run" in v100 and ctx.flash_problem(2, load_gpus()["H100-SXM5"]) == ""
    assert "flash=no" in ctx.flash_problem(4, load_gpus()["H100-SXM5"], flash=False)


@pytest.mark.parametrize(("cluster", "layout", "message"), [
    ("tangram-c1", "v100-0+3: layers=16 tp=1 pp=1 dp=2 cp=2; t4-0+3: layers=16 tp=1 pp=1 dp=2 cp=2",
     "cp=2: context parallelism rings FlashAttention, which the V100-PCIe-16GB does not run"),
    ("tangram-c2", "a100-0+1: layers=16 tp=1 pp=1 dp=2 cp=2 flash=no; h100nvl-0+3: layers=16 tp=1 pp=1 dp=2 cp=2 flash=no",
     "which flash=no turns off"),
])
def test_a_given_cp_layout_without_flash_attention_exits_2(capsys, cluster, layout, message):
    code = cli.main(["plan", "--cluster", cluster, "--model", "llama-3-8b", "--global-batch", "16", "--seq", "8192",
                     "--layout", layout, "--no-alternatives"])
    assert code == 2 and message in capsys.readouterr().err


# ------------------------------------------------------------------------------- offloading


def test_offload_by_hand():
    sl = middle(TINY)
    slow = dataclasses.replace(GPUS["A100-SXM4-80GB"], host_bandwidth=1e3)  # 1 kB/s: the copy is never hidden
    isl = IslandSpec("n", slow, nodes=1, gpus_per_node=8)
    keep = price(sl, isl).stages[0]
    gone = price(sl, isl, offload=True).stages[0]
    a = keep.activation_bytes
    assert gone.activation_bytes == 0.0
    assert gone.static_bytes == keep.static_bytes + a  # one layer: it stays resident
    assert gone.forward_s == pytest.approx(a / 1e3) and gone.backward_s == pytest.approx(a / 1e3)
    fast = IslandSpec("n", dataclasses.replace(slow, host_bandwidth=1e15), nodes=1, gpus_per_node=8)
    hidden = price(sl, fast, offload=True).stages[0]
    assert hidden.forward_s == keep.forward_s and hidden.backward_s == keep.backward_s
    assert off.resident_bytes(30.0, layers=6) == 10.0


def test_offload_saves_the_memory_that_binds():
    """A100-40GB and GPT-3 6.7B at sequence 4096: offloading lets more micro-batches be in flight."""
    cfg = load_model(MODELS / "gpt3-6.7b.toml")
    sl = Slice(slice_model(cfg, seq=4096)[2:10])
    isl = one_node("A100-SXM4-40GB")
    base = dict(tp=8, pp=1, dp=1, split=(8,), recompute="none", zero_stage=0)
    keep = PAR0.plan(sl, isl, Layout(**base), microbatch_size=2, microbatches=16)
    gone = PAR0.plan(sl, isl, Layout(**base, offload=True), microbatch_size=2, microbatches=16)
    assert gone.behind is None and (keep.behind is not None and keep.behind < 16)


def test_gpus_without_a_host_link_are_not_offloaded():
    assert GPUS["B200"].host_bandwidth is None and GPUS["A100-SXM4-80GB"].host_bandwidth == 32e9
    assert off.host_problem(GPUS["B200"]).startswith("offload: the GPU catalog has no host-link figure")
    sl = middle(TINY_MOE)
    assert not any(lay.offload for lay in BuiltinParallelizer().layouts(sl, one_node("B200"), microbatch_size=2))
    assert any(lay.offload for lay in BuiltinParallelizer().layouts(sl, one_node(), microbatch_size=2))


def test_short_dense_slices_keep_the_previous_search_space():
    dense = BuiltinParallelizer().layouts(middle(TINY), one_node(), microbatch_size=1)
    assert all((lay.ep, lay.cp, lay.offload) == (1, 1, False) for lay in dense)
    wide = BuiltinParallelizer(long_sequence=32).layouts(middle(TINY), one_node(), microbatch_size=1)
    assert any(lay.cp > 1 for lay in wide) and any(lay.offload for lay in wide) and all(lay.ep == 1 for lay in wide)


# ----------------------------------------------------------------------- search and output


def test_moe_search_covers_every_layout():
    """Every feasible EP/FSEP/CP/offload layout is matched or beaten by a returned plan."""
    cfg = load_model(MODELS / "gshard-moe-2.4b.toml")
    sl = Slice(slice_model(cfg)[2:6])
    isl = IslandSpec("t4", GPUS["T4"], nodes=2, gpus_per_node=4, inter_bandwidth=4e9)
    par = BuiltinParallelizer()
    plans = par.parallelize(sl, isl, microbatch_size=4, microbatches=8, global_batch=32, memory_fraction=0.5)
    assert any(p.ep > 1 for p in plans)
    key = lambda p: (p.total_time_s, p.max_time_s, len(p.stages), -(float("inf") if p.behind is None else p.behind))  # noqa: E731
    for lay in par.layouts(sl, isl, microbatch_size=4):
        p = par.plan(sl, isl, lay, microbatch_size=4, microbatches=8, memory_fraction=0.5)
        if p.behind is None or p.behind >= 0:
            assert any(all(x <= y * (1 + 1e-12) for x, y in zip(key(q), key(p))) for q in plans), p.layout


def test_descriptions_and_layout_text():
    sl, isl = middle(TINY_MOE), one_node()
    p = price(sl, isl, dp=4, ep=4, fsep=True, offload=True)
    assert p.layout == "tp1 pp1 dp4 none zero0 ep4 fsep offload"
    assert price(middle(TINY), isl, m=1, cp=2).layout == "tp1 pp1 dp1 none zero0 cp2"
    g = parse_layout("tp=2 pp=1 dp=4 ep=8 cp=2 offload=1 mbs=1")
    assert (g.ep, g.cp, g.offload, g.fsep) == (8, 2, True, False)


TWO_NODES = """name = "two-nodes"
[[node]]
name = "n0"
gpu = "{gpu}"
gpus = 8
[[node]]
name = "n1"
gpu = "{gpu}"
gpus = 8
[network]
default_gbps = 1600.0
"""


@pytest.mark.parametrize(("gpu", "model", "text", "message"), [
    ("A100-SXM4-80GB", "gshard-moe-2.4b", "tp=1 pp=1 dp=8 ep=3", "ep=3 does not divide the 16 experts"),
    ("A100-SXM4-80GB", "gpt3-1.3b", "tp=1 pp=1 dp=8 ep=2", "has no experts"),
    ("A100-SXM4-80GB", "gshard-moe-2.4b", "tp=1 pp=1 dp=2 cp=3", "does not split into 2·cp = 6 equal chunks"),
    ("B200", "gpt3-1.3b", "tp=1 pp=1 dp=8 offload=1", "no host-link figure (host_gbs) for B200"),
    ("A100-SXM4-80GB", "gpt3-1.3b", "tp=1 pp=1 dp=8 fsep=1", "fully sharded EP needs an expert-parallel degree"),
    ("A100-SXM4-80GB", "gpt3-1.3b", "tp=1 pp=1 dp=8 offload=maybe", "offload=maybe: must be 1 or 0"),
])
def test_bad_inputs_exit_2(tmp_path, capsys, gpu, model, text, message):
    path = tmp_path / "one.toml"
    path.write_text(TWO_NODES.format(gpu=gpu))
    code = cli.main(["plan", "--cluster", str(path), "--model", model, "--global-batch", "64", "--microbatch", "8",
                     "--no-alternatives", "--workers", "1", "--layout", text])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_a_cp_group_is_part_of_a_node_or_whole_nodes(tmp_path, capsys):
    """tp·cp = 4 on nodes of 6 GPUs would leave a group's ragged end beside another's: exit 2.
    On nodes of 8, tp·cp = 16 is two whole nodes: priced (Megatron-Core's CP groups span nodes)."""
    six = tmp_path / "six.toml"
    six.write_text(TWO_NODES.format(gpu="A100-SXM4-80GB").replace("gpus = 8", "gpus = 6"))
    code = cli.main(["plan", "--cluster", str(six), "--model", "gpt3-1.3b", "--global-batch", "64", "--microbatch", "8",
                     "--no-alternatives", "--workers", "1", "--layout", "tp=2 pp=1 dp=1 cp=2"])
    err = capsys.readouterr().err
    assert code == 2 and "tp·cp = 4 must divide the 6 GPUs of a node or be a multiple of them" in err, err
    eight = tmp_path / "eight.toml"
    eight.write_text(TWO_NODES.format(gpu="A100-SXM4-80GB"))
    code = cli.main(["plan", "--cluster", str(eight), "--model", "gpt3-1.3b", "--global-batch", "64", "--microbatch", "8",
                     "--no-alternatives", "--workers", "1", "--layout", "tp=4 pp=1 dp=1 cp=4", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err


def test_export_reads_ep_cp_offload_layouts():
    # the exporters write these now (tests/test_export.py tests what they write)
    from hetopt.export.source import parse_layout as export_layout

    assert export_layout("tp2 pp3 dp2 selective zero1 sp", "p.json", "").tp == 2
    for text, want in (("tp1 pp2 dp4 none zero1 ep4", (4, False, 1, False)),
                       ("tp1 pp2 dp4 none zero1 ep4 fsep", (4, True, 1, False)),
                       ("tp2 pp1 dp1 none zero0 sp cp2 offload", (1, False, 2, True))):
        lay = export_layout(text, "p.json", "stages[0].")
        assert (lay.ep, lay.fsep, lay.cp, lay.offload) == want


TINY_MOE_FILE = """name = "tiny-moe"
architecture = "gpt"
layers = 4
hidden = 256
heads = 4
ffn = 1024
vocab = 1000
sequence = 128
experts = 4
top_k = 2
"""


def test_plan_prints_and_exports_ep_cp_offload(tmp_path, capsys):
    import json

    cluster, model = tmp_path / "one.toml", tmp_path / "tiny-moe.toml"
    cluster.write_text(TWO_NODES.format(gpu="A100-SXM4-80GB"))
    model.write_text(TINY_MOE_FILE)
    args = ["plan", "--cluster", str(cluster), "--model", str(model), "--global-batch", "16", "--microbatch", "2",
            "--no-alternatives", "--workers", "1"]
    assert cli.main([*args, "--json", "--layout", "tp=1 pp=1 dp=8 ep=4 fsep=1 mbs=1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["stages"] and all({"ep", "fsep", "cp", "offload"} <= set(s) for s in doc["stages"])
    assert doc["given_layout"]["layout"] == "tp=1 pp=1 dp=8 mbs=1 recompute=none zero=0 ep=4 fsep=1"
    assert doc["given_layout"]["fits"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    # the columns show where a stage uses them (issue 28: a dense plan has none)
    used = any(st["ep"] > 1 or st["cp"] > 1 or st["offload"] for st in doc["stages"])
    assert all((col in out) == used for col in ("EP", "CP", "offload"))


def test_per_island_layouts_carry_ep_and_cp(tmp_path):
    """``--layout "ISLAND: layers=K ..."`` on a heterogeneous cluster prices EP too, and refuses a bad CP."""
    from hetopt.errors import InputError
    from hetopt.planner.steps import plan

    model = tmp_path / "tiny-moe.toml"
    model.write_text(TINY_MOE_FILE)
    cfg = load_model(model)
    p = plan("tangram-c2", cfg, global_batch=16, microbatch_size=4, seq=128, alternatives=False)
    names = [i["name"] for i in p.islands]
    a100 = next(n for n in names if n.startswith("a100"))
    h100 = next(n for n in names if n.startswith("h100"))
    given = plan("tangram-c2", cfg, global_batch=16, microbatch_size=4, seq=128, alternatives=False,
                 layout=f"{a100}: layers=2 tp=1 pp=1 dp=4 ep=4 mbs=1; {h100}: layers=2 tp=1 pp=1 dp=4 mbs=1")
    assert given.given_layout is not None and "ep=4" in given.given_layout["layout"]
    with pytest.raises(InputError, match="2·cp = 6"):
        plan("tangram-c2", cfg, global_batch=16, microbatch_size=4, seq=128, alternatives=False,
             layout=f"{a100}: layers=2 tp=1 pp=1 dp=1 cp=3 mbs=1; {h100}: layers=2 tp=1 pp=1 dp=4 mbs=1")
