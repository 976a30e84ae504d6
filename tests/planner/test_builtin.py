"""The parallelizer interface and the built-in homogeneous parallelizer.

Independent checks: the pipeline family's own memory rule (``PipelineInstance.behind_limits``),
its reader and ``evaluate``, its exact DP, and re-pricing every enumerated layout.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import hetopt
from hetopt.catalog import instances_dir
from hetopt.hardware import GIGA, load_gpus
from hetopt.pipeline.problem import GIB, Block, PipelineInstance, PipelineSolution, evaluate
from hetopt.planner.parallelizer.builtin import BuiltinParallelizer, best_single_island_plan, stage_nodes
from hetopt.planner.parallelizer.layouts import even_split, minmax_split
from hetopt.planner.parallelizer.protocol import IslandSpec, Parallelizer, Slice, concatenate, slice_model
from hetopt.readers.pipeline import read_pipeline
from hetopt.workload import ModelConfig, load_model
from hetopt.costmodel.running import Running

MODELS = instances_dir() / "models"
GPUS = load_gpus()
SMALL_GPT = ModelConfig("small", "gpt", 8, 1024, 16, 4096, 50257, 1024)
PAR = BuiltinParallelizer()


def key(p):
    return (p.total_time_s, p.max_time_s, len(p.stages), -(np.inf if p.behind is None else p.behind))


def dominates(a, b):
    return all(x <= y for x, y in zip(key(a), key(b)))


def islands():
    return [
        IslandSpec("v100", GPUS["V100-SXM2-16GB"], nodes=1, gpus_per_node=8),
        IslandSpec("t4", GPUS["T4"], nodes=2, gpus_per_node=4, inter_bandwidth=32 / 8 * GIGA),
        IslandSpec("a100", GPUS["A100-PCIe-80GB"], nodes=1, gpus_per_node=4),
    ]


# ------------------------------------------------------------------ atoms and slices


def test_builtin_implements_the_protocol():
    assert isinstance(PAR, Parallelizer)


def test_atoms_carry_embedding_first_and_head_last():
    atoms = PAR.slice_model(SMALL_GPT)
    assert [a.first_layer for a in atoms] == list(range(8))
    assert [a.embedding for a in atoms] == [True] + [False] * 7
    assert [a.head for a in atoms] == [False] * 7 + [True]
    assert Slice(atoms).role == "whole" and Slice(atoms[:3]).role == "first"
    assert Slice(atoms[5:]).role == "last" and Slice(atoms[2:4]).role == "middle"


def test_signatures_equal_for_equal_slices_and_different_otherwise():
    atoms = slice_model(SMALL_GPT)
    mid = [Slice(atoms[i : i + 3]).signature for i in range(1, 5)]
    assert len(set(mid)) == 1  # interior slices of 3 layers are the same work
    others = {Slice(atoms[1:3]).signature, Slice(atoms[0:3]).signature, Slice(atoms[5:8]).signature, mid[0]}
    assert len(others) == 4  # length, embedding and head all change the signature
    assert concatenate(atoms[1], concatenate(atoms[2], atoms[3])).signature == mid[0]
    # a wider model with the same depth differs
    wide = slice_model(ModelConfig("wide", "gpt", 8, 2048, 16, 8192, 50257, 1024))
    assert Slice(wide[1:4]).signature != mid[0]
    # the sequence length is part of the work
    assert Slice(slice_model(SMALL_GPT, seq=512)[1:4]).signature != mid[0]
    # MoE on every other layer: a slice starting on a dense layer differs from one starting on an MoE layer
    gshard = slice_model(load_model(MODELS / "gshard-moe-2.4b.toml"))
    assert Slice(gshard[2:4]).signature == Slice(gshard[4:6]).signature != Slice(gshard[3:5]).signature


def test_signature_is_stable_across_processes():
    code = (
        "from hetopt.planner.parallelizer.protocol import Slice, slice_model; from hetopt.workload import ModelConfig;"
        "a = slice_model(ModelConfig('small', 'gpt', 8, 1024, 16, 4096, 50257, 1024)); print(Slice(a[2:5]).signature)"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout.strip()
    assert out == Slice(slice_model(SMALL_GPT)[2:5]).signature


def test_concatenate_rejects_non_adjacent_atoms():
    atoms = slice_model(SMALL_GPT)
    with pytest.raises(ValueError, match="consecutive"):
        concatenate(atoms[1], atoms[3])
    with pytest.raises(ValueError, match="one model"):
        concatenate(atoms[1], slice_model(SMALL_GPT, seq=512)[2])


# ------------------------------------------------------------------------- splits


def test_splits():
    for k in range(1, 12):
        for p in range(1, k + 1):
            e = even_split(k, p)
            assert sum(e) == k and max(e) - min(e) <= 1 and list(e) == sorted(e)
            m = minmax_split([1.0] * k, p)
            assert sum(m) == k and min(m) >= 1 and max(m) == max(e)  # same bottleneck on uniform layers
    rng = np.random.default_rng(3)
    for _ in range(50):  # min-max against exhaustive search
        k = int(rng.integers(1, 8))
        p = int(rng.integers(1, k + 1))
        w = [float(x) for x in rng.integers(1, 9, size=k)]
        cuts = [c for c in __import__("itertools").combinations(range(1, k), p - 1)]
        best = min(max(sum(w[a:b]) for a, b in zip((0,) + c, c + (k,))) for c in cuts)
        split = minmax_split(w, p)
        bounds = np.cumsum((0,) + split)
        assert len(split) == p and min(split) >= 1
        assert max(sum(w[a:b]) for a, b in zip(bounds, bounds[1:])) == best


def test_stages_stay_inside_nodes_when_they_can():
    isl = IslandSpec("t4", GPUS["T4"], nodes=3, gpus_per_node=4, inter_bandwidth=4e9)
    for tp in (1, 2, 4):
        for dp in range(1, 13):
            for pp in range(1, 13):
                if tp * dp * pp > isl.gpus:
                    continue
                nodes = stage_nodes(isl, tp, dp, pp)
                assert len(nodes) == pp and all(0 <= a <= b < isl.nodes for a, b in nodes)
                if tp * dp <= 4 and pp <= 3 * (4 // (tp * dp)):
                    assert all(a == b for a, b in nodes)


# ------------------------------------------------------------------ parallelize


def _check_plans(sl, isl, plans, m, M, phi=1.0):
    assert plans, "expected at least one plan"
    for p in plans:
        assert p.layers == sl.layers == sum(s.layers for s in p.stages) and p.first_layer == sl.first_layer
        assert len(p.stages) == p.pp and all(s.layers >= 1 for s in p.stages)
        assert all(s.gpus == p.tp * p.cp * p.dp for s in p.stages)
        assert p.gpus == p.tp * p.cp * p.dp * p.pp <= isl.gpus  # disjoint GPUs of the island
        assert isl.gpus_per_node % (p.tp * p.cp) == 0 and m % p.dp == 0
        assert p.behind is None or p.behind >= 0
        # the pipeline family's own rule agrees on the stages-behind limit
        probe = PipelineInstance("probe", sl.layers, M, (isl.to_island(),), (p.to_option(0),), ((0.0,),), memory_fraction=phi)
        assert probe.behind_limits[0] == p.behind
    for a in plans:
        for b in plans:
            if a is not b:
                assert not dominates(a, b), f"{a.layout} dominates {b.layout}"


@pytest.mark.parametrize("first,stop", [(0, 8), (0, 3), (2, 6), (5, 8), (3, 4)])
@pytest.mark.parametrize("island", islands(), ids=lambda i: i.name)
def test_parallelize_returns_feasible_non_dominated_plans_that_cover_every_layout(first, stop, island):
    sl = Slice(slice_model(SMALL_GPT)[first:stop])
    m, M = 4, 8
    plans = PAR.parallelize(sl, island, microbatch_size=m, microbatches=M, global_batch=m * M, memory_fraction=0.5)
    _check_plans(sl, island, plans, m, M, 0.5)
    # exactness of the pruning: every feasible layout is matched or beaten by a returned plan;
    # a whole model is one block, so there only its 1F1B time counts and one plan is returned
    whole = first == 0 and stop == 8
    assert not whole or len(plans) == 1
    for lay in PAR.layouts(sl, island, microbatch_size=m, microbatches=M):
        p = PAR.plan(sl, island, lay, microbatch_size=m, microbatches=M, memory_fraction=0.5)
        if p.behind is None or p.behind >= 0:
            if whole:
                assert plans[0].iteration_time_s <= p.iteration_time_s * (1 + 1e-12)
            else:
                assert any(dominates(q, p) for q in plans)


def test_memory_pressure_selects_memory_saving_layouts():
    """On 16 GB V100s GPT-3 6.7B needs TP, ZeRO or recomputation; the plain layout is gone."""
    cfg = load_model(MODELS / "gpt3-6.7b.toml")
    isl = IslandSpec("v100", GPUS["V100-SXM2-16GB"], nodes=2, gpus_per_node=8, inter_bandwidth=100 / 8 * GIGA)
    sl = Slice(slice_model(cfg)[4:12])
    plans = PAR.parallelize(sl, isl, microbatch_size=8, microbatches=16, global_batch=128)
    _check_plans(sl, isl, plans, 8, 16)
    assert all(p.tp > 1 or p.pp > 1 or p.zero_stage > 0 or p.recompute != "none" for p in plans)
    assert len({p.recompute for p in plans}) >= 2  # a real time/memory trade-off is offered


def test_nothing_fits_gives_no_plan():
    cfg = load_model(MODELS / "gpt3-13b.toml")
    t4 = IslandSpec("t4", GPUS["T4"], nodes=1, gpus_per_node=4)
    assert PAR.parallelize(Slice(slice_model(cfg)), t4, microbatch_size=4, microbatches=8, global_batch=32) == ()
    assert best_single_island_plan(cfg, t4, microbatch_size=4, microbatches=8) is None


def test_monotone_in_tp_and_recompute():
    isl = IslandSpec("a100", GPUS["A100-SXM4-80GB"], nodes=1, gpus_per_node=8)
    cfg = load_model(MODELS / "gpt3-6.7b.toml")
    sl = Slice(slice_model(cfg)[3:9])
    by = {(lay.tp, lay.pp, lay.dp, lay.split, lay.recompute, lay.zero_stage): lay for lay in PAR.layouts(sl, isl, microbatch_size=8)
          if (lay.ep, lay.cp, lay.offload) == (1, 1, False)}

    def price(tp, pp, dp, split, rc, z):
        return PAR.plan(sl, isl, by[(tp, pp, dp, split, rc, z)], microbatch_size=8, microbatches=16)

    for (tp, pp, dp, split, rc, z) in by:
        p = price(tp, pp, dp, split, rc, z)
        if (2 * tp, pp, dp, split, rc, z) in by:  # more TP: less memory per GPU
            q = price(2 * tp, pp, dp, split, rc, z)
            assert all(b.static_bytes < a.static_bytes and b.activation_bytes <= a.activation_bytes for a, b in zip(p.stages, q.stages))
        if rc == "none":  # full recomputation: less activation memory, more time
            f = price(tp, pp, dp, split, "full", z)
            assert all(b.activation_bytes < a.activation_bytes and b.backward_s > a.backward_s for a, b in zip(p.stages, f.stages))
            assert all(b.forward_s == a.forward_s for a, b in zip(p.stages, f.stages))
        if dp > 1 and z < 3:  # 1 and 2 always save memory
            # (stage 3 may not: its two gathered layers can outweigh the weights it shards at small d)
            y = price(tp, pp, dp, split, rc, z + 1)
            if z == 0:  # ZeRO-1 moves the same bytes and steps 1/d of the optimizer: faster
                assert all(b.time_s < a.time_s for a, b in zip(p.stages, y.stages))
            else:  # ZeRO-2 and 3 add traffic: never faster
                assert all(b.time_s >= a.time_s for a, b in zip(p.stages, y.stages))
            assert z == 2 or all(b.static_bytes < a.static_bytes for a, b in zip(p.stages, y.stages))


def test_a_handover_across_nodes_carries_each_nodes_replicas_only():
    """A stage of t·d GPUs over several nodes: every node sends its own replicas' activations to
    the next stage's node at once, so a node's network carries m·(GPUs per node)/(t·d) samples."""
    sl = Slice(slice_model(SMALL_GPT)[2:6])
    slow, fast = (IslandSpec("t4", GPUS["T4"], nodes=4, gpus_per_node=4, inter_bandwidth=w) for w in (4e9, 8e9))
    lay = next(x for x in PAR.layouts(sl, slow, microbatch_size=8)
               if (x.tp, x.pp, x.dp, x.recompute, x.zero_stage) == (1, 2, 8, "none", 0))
    assert stage_nodes(slow, 1, 8, 2) == ((0, 1), (2, 3))  # 8 GPUs a stage: 2 nodes each
    f_slow, f_fast = (PAR.plan(sl, isl, lay, microbatch_size=8, microbatches=4).stages[0].forward_s for isl in (slow, fast))
    # only the hand-over depends on the network in the forward of ZeRO-0: 8 samples over 2 nodes,
    # 4 a node, 2·s·h bytes each (32 and 64 Gb/s are Ethernet without RDMA: NCCL's sockets get 60%)
    per_node = 4 * 2 * 1024 * 1024
    assert f_slow - f_fast == pytest.approx(per_node / (4e9 * 0.6) - per_node / (8e9 * 0.6), rel=1e-9)


def test_the_loss_kernels_memory_traffic_is_on_the_heads_stage(monkeypatch):
    """Megatron's cross-entropy moves 38 bytes a logit in forward and 14 in backward, at the
    memory bandwidth, on the stage with the head only (s·b·V/t logits)."""
    from hetopt.costmodel import kernels
    isl = IslandSpec("a100", GPUS["A100-PCIe-80GB"], nodes=1, gpus_per_node=4)
    sl = Slice(slice_model(SMALL_GPT))
    lay = next(x for x in PAR.layouts(sl, isl, microbatch_size=4)
               if (x.tp, x.pp, x.dp, x.recompute, x.zero_stage) == (2, 2, 1, "none", 0))
    with_loss = PAR.plan(sl, isl, lay, microbatch_size=4, microbatches=2).stages
    monkeypatch.setattr(kernels, "LOSS_FORWARD_BYTES", 0)  # the module that prices the loss reads them
    monkeypatch.setattr(kernels, "LOSS_BACKWARD_BYTES", 0)
    without = BuiltinParallelizer().plan(sl, isl, lay, microbatch_size=4, microbatches=2).stages
    logits = 1024 * 4 * 50257 / 2  # s · b · V / t
    bw = GPUS["A100-PCIe-80GB"].memory_bandwidth
    assert with_loss[0].forward_s == without[0].forward_s and with_loss[0].backward_s == without[0].backward_s
    assert with_loss[1].forward_s - without[1].forward_s == pytest.approx(38 * logits / bw, rel=1e-9)
    assert with_loss[1].backward_s - without[1].backward_s == pytest.approx(14 * logits / bw, rel=1e-9)


def test_tp_comm_overlap_hides_tp_traffic_behind_the_gemms_but_one_chunk():
    """--tp-comm-overlap: a pass's TP traffic costs max(traffic − its GEMMs, traffic / t)
    instead of all of it; only with sequence parallelism; nothing else changes. The layers run
    as CUDA graphs (host=cudagraph): the host's floor would hide the TP traffic of these small layers."""
    isl = IslandSpec("a100", GPUS["A100-SXM4-80GB"], nodes=1, gpus_per_node=8)
    sl = Slice(slice_model(SMALL_GPT)[2:4])

    def stage(**running):
        return BuiltinParallelizer(running=Running(host="cudagraph", **running)).plan(
            sl, isl, lay, microbatch_size=2, microbatches=1).stages[0]

    lay = next(x for x in BuiltinParallelizer().layouts(sl, isl, microbatch_size=2)
               if (x.tp, x.pp, x.dp, x.recompute, x.zero_stage) == (4, 1, 1, "none", 0))
    hidden, plain = stage(tp_overlap=True), stage()
    no_sp, unsplit = stage(tp_overlap=True, sequence_parallel=False), stage(sequence_parallel=False)
    assert no_sp.forward_s == unsplit.forward_s and no_sp.backward_s == unsplit.backward_s  # no SP: no overlap
    from hetopt import costmodel as cm
    intra = isl.intra_achieved
    # two layers, each two reduce-scatter + all-gather pairs of its 2 samples' output, as NCCL runs them
    output = cm.boundary_bytes(SMALL_GPT, 1024, 2)
    tp_pass = 2 * cm.TP_ALLREDUCES_PER_PASS * cm.tp_collective_s(output, intra, cm.fabric(isl.gpu, 4), sequence_parallel=True)
    # the layers' GEMMs: their FLOPs less the attention scores (FlashAttention's own kernels), and
    # what their tiles lose in waves on the A100's SMs
    matmul = cm.layer_forward_flops(SMALL_GPT, 1024) - cm.attention_score_flops(SMALL_GPT, 1024)
    waves = cm.quantization_flops(isl.gpu.sms, cm.dense_gemm_shapes(SMALL_GPT, 2, 2 * 1024, tp=4))[0]
    # and their operands: 2 samples of 1024 tokens, the two layers' weights over t = 4, read once
    traffic = 2 * cm.gemm_traffic_bytes(2 * 1024, cm.gemm_operand_widths(SMALL_GPT), cm.layer_parameters(SMALL_GPT) / 4, tp=4)
    gemm_fwd = cm.gemm_time_s(2 * matmul * 2 / 4 + 2 * waves, isl.gpu, traffic_bytes=traffic)
    saved = tp_pass - max(tp_pass - gemm_fwd, tp_pass / 4)
    assert 0 < saved < tp_pass
    assert plain.forward_s - hidden.forward_s == pytest.approx(saved, rel=1e-9)
    assert hidden.static_bytes == plain.static_bytes and hidden.activation_bytes == plain.activation_bytes


def test_dp_allreduce_is_amortized_over_the_microbatches():
    """ZeRO-0: the per-micro-batch backward carries the iteration's all-reduce / M."""
    isl = IslandSpec("t4", GPUS["T4"], nodes=2, gpus_per_node=4, inter_bandwidth=4e9)
    sl = Slice(slice_model(SMALL_GPT)[2:4])
    par = BuiltinParallelizer(running=Running(overlap=False))  # all of it on the critical path
    lay = next(x for x in par.layouts(sl, isl, microbatch_size=8) if (x.tp, x.pp, x.dp, x.recompute, x.zero_stage) == (1, 1, 8, "none", 0))
    one = par.plan(sl, isl, lay, microbatch_size=8, microbatches=1).stages[0]
    four = par.plan(sl, isl, lay, microbatch_size=8, microbatches=4).stages[0]
    params = 2 * (12 * 1024**2 + 13 * 1024)
    # 8 replicas across 2 nodes: the node network carries it, 2·7 ring steps each crossing it
    # 32 Gb/s is Ethernet without RDMA: NCCL's sockets get 60% of it; of the ring's 7 links one
    # crosses it (PCIe hops 5.7 µs, network 14 µs; a T4's host is unnamed, so the proxy's 3 µs
    # floor is below PCIe's 5.7); NCCL's tuner runs it as the Simple ring, whose latency across
    # nodes it charges 1.9 times before Ampere (the ring's "plateau", tuning.cc)
    allreduce = 2 * 7 / 8 * 2 * params / (4e9 * 0.6) + 1.9 * (8.4e-6 + 14 * (6 * 5.7e-6 + 14e-6) / 7)
    # and the optimizer step over the GPU's whole copy (ZeRO-0): 52 bytes a parameter at 320 GB/s,
    # and the GPU's fixed time of its five fused passes' kernels (25.2 M parameters: two a pass)
    from hetopt import costmodel as cm
    step = 52 * params / 320e9 + 5 * 2 * cm.GPU_KERNEL_S
    assert step == cm.optimizer_step_s(params, GPUS["T4"])
    assert one.backward_s - four.backward_s == pytest.approx((allreduce + step) * (1 - 1 / 4))
    faster = IslandSpec("t4", GPUS["T4"], nodes=2, gpus_per_node=4, inter_bandwidth=40e9)
    assert par.plan(sl, faster, lay, microbatch_size=8, microbatches=4).stages[0].backward_s < four.backward_s
    # overlapped: only what the last micro-batch's backward cannot hide, at least one layer's bucket
    hidden = PAR.plan(sl, isl, lay, microbatch_size=8, microbatches=4).stages[0]
    compute_bwd = four.backward_s - allreduce / 4 - step / 4
    exposed = max(allreduce - compute_bwd, allreduce / 2)  # two layers: two buckets
    assert hidden.backward_s == pytest.approx(compute_bwd + exposed / 4 + step / 4)


# ------------------------------------------------------------ conversion and composition


def test_to_option_is_accepted_by_the_pipeline_reader_and_evaluate():
    cfg = SMALL_GPT
    atoms = slice_model(cfg)
    v100, a100 = islands()[0], islands()[2]
    m, M = 4, 8
    front = PAR.parallelize(Slice(atoms[:5]), v100, microbatch_size=m, microbatches=M, global_batch=m * M)
    back = PAR.parallelize(Slice(atoms[5:]), a100, microbatch_size=m, microbatches=M, global_batch=m * M)
    f, b = front[0], back[0]
    link = 0.01

    def stage_table(st):
        return {"layers": st.layers, "forward_s": st.forward_s, "backward_s": st.backward_s,
                "static_gib": st.static_bytes / GIB, "activation_gib": st.activation_bytes / GIB, "gpus": st.gpus}

    data = {
        "problem": "pipeline", "name": "planner-test", "layers": cfg.layers, "microbatches": M,
        "island": [{"name": "v100", "gpus": v100.gpus, "memory_gib": v100.memory_bytes / GIB},
                   {"name": "a100", "gpus": a100.gpus, "memory_gib": a100.memory_bytes / GIB}],
        "link": [{"a": "v100", "b": "a100", "time_s": link}],
        "option": [
            {"island": "v100", "layers": 5, "role": "first", "stage": [stage_table(s) for s in f.to_option(0).stages]},
            {"island": "a100", "layers": 3, "role": "last", "stage": [stage_table(s) for s in b.to_option(1).stages]},
        ],
    }
    inst = read_pipeline(data, "planner-test")
    assert inst.options[0].role == f.to_option(0).role == "first" and inst.options[1].role == "last"
    ev = evaluate(inst, PipelineSolution((Block(0, 0, 0, 5), Block(1, 1, 5, 3))))
    assert ev.feasible, ev.violations
    times = [s.time_s for s in f.stages + b.stages]
    assert ev.objective == pytest.approx(sum(times) + link + (M - 1) * max(max(times), link), rel=1e-9)


def test_best_single_island_plan_equals_the_pipeline_dp_over_its_options():
    cfg = load_model(MODELS / "gpt3-1.3b.toml")
    isl = IslandSpec("v100", GPUS["V100-SXM2-16GB"], nodes=1, gpus_per_node=8)
    m, M = 4, 16
    best = best_single_island_plan(cfg, isl, microbatch_size=m, microbatches=M, seq=1024)
    plans = PAR.parallelize(Slice(slice_model(cfg, seq=1024)), isl, microbatch_size=m, microbatches=M, global_batch=m * M)
    assert best is not None and best.iteration_time_s == min(p.iteration_time_s for p in plans)
    inst = PipelineInstance("single", cfg.layers, M, (isl.to_island(),), tuple(p.to_option(0) for p in plans), ((0.0,),))
    res = hetopt.solve(inst, method="dp")
    assert res.status.name == "OPTIMAL"
    assert res.objective == pytest.approx(best.iteration_time_s, rel=1e-9)


def test_bad_arguments():
    sl = Slice(slice_model(SMALL_GPT)[:2])
    isl = islands()[0]
    with pytest.raises(ValueError, match="global batch"):
        PAR.parallelize(sl, isl, microbatch_size=4, microbatches=8, global_batch=30)
    with pytest.raises(ValueError, match="memory fraction"):
        PAR.parallelize(sl, isl, microbatch_size=4, microbatches=8, global_batch=32, memory_fraction=0.0)
    with pytest.raises(ValueError, match="recompute"):
        BuiltinParallelizer(recompute=("sometimes",))
    with pytest.raises(ValueError, match="inter-node"):
        IslandSpec("x", GPUS["T4"], nodes=2, gpus_per_node=4)


@pytest.mark.parametrize("seed", range(6))
def test_random_shapes_keep_the_invariants(seed):
    rng = np.random.default_rng(seed)
    heads = int(rng.choice([8, 16]))
    arch = str(rng.choice(["gpt", "llama"]))
    h = heads * int(rng.choice([32, 64]))
    cfg = ModelConfig("r", arch, int(rng.integers(2, 9)), h, heads, 4 * h, 32000, 512,
                      kv_heads=heads // 2 if arch == "llama" else None)
    gpu = GPUS[str(rng.choice(["T4", "V100-SXM2-32GB", "A10G", "A100-SXM4-40GB"]))]
    isl = IslandSpec("i", gpu, nodes=int(rng.integers(1, 3)), gpus_per_node=int(rng.choice([2, 4])), inter_bandwidth=5e9)
    atoms = slice_model(cfg)
    a = int(rng.integers(0, cfg.layers))
    b = int(rng.integers(a + 1, cfg.layers + 1))
    m = int(rng.choice([1, 2, 4, 6]))
    M = int(rng.integers(1, 9))
    phi = float(rng.uniform(0.05, 1.0))
    sl = Slice(atoms[a:b])
    plans = PAR.parallelize(sl, isl, microbatch_size=m, microbatches=M, global_batch=m * M, memory_fraction=phi)
    if plans:
        _check_plans(sl, isl, plans, m, M, phi)
    prof = PAR.profile(sl, isl)
    assert prof.signature == sl.signature and prof.layers == sl.layers
    # no plan beats the memory floor of the profile (its fullest stage holds at least the average share)
    assert all(max(st.static_bytes for st in p.stages) >= prof.min_bytes_per_gpu * (1 - 1e-12) for p in plans)


def test_everything_crossing_the_interface_pickles():
    """Queries run in worker processes or on Dask workers: inputs and answers must pickle."""
    import pickle

    sl = Slice(slice_model(SMALL_GPT)[1:4])
    isl = islands()[1]
    plans = PAR.parallelize(sl, isl, microbatch_size=2, microbatches=4, global_batch=8)
    for obj in (PAR, sl, isl, plans, PAR.profile(sl, isl)):
        assert pickle.loads(pickle.dumps(obj)) == obj
    assert pickle.loads(pickle.dumps(sl)).signature == sl.signature


def test_the_memo_of_stage_prices_never_changes_an_answer_and_stays_home():
    """Prices memoized by one query serve the next; a fresh parallelizer answers the same, and
    a pickled copy (what a worker receives) carries no memo."""
    import pickle

    cfg = load_model(MODELS / "gshard-moe-2.4b.toml")  # dense and expert layers alternate: kinds matter
    atoms = slice_model(cfg)
    warm = BuiltinParallelizer()
    for isl in islands():
        for a, b in ((0, 4), (1, 5), (2, 3), (3, 7), (0, len(atoms))):
            sl = Slice(atoms[a:b])
            args = dict(microbatch_size=4, microbatches=8, global_batch=32)
            assert warm.parallelize(sl, isl, **args) == BuiltinParallelizer().parallelize(sl, isl, **args), (isl.name, a, b)
    assert warm._memo["prices"] and pickle.loads(pickle.dumps(warm))._memo == {}
    assert warm == BuiltinParallelizer() and hash(warm) == hash(BuiltinParallelizer())


@pytest.mark.parametrize("seed", range(8))
def test_whole_model_pruning_holds_when_attention_runs_faster_than_the_gemms(seed):
    # the review's case: a catalog whose FlashAttention share of peak tops the GEMM asymptote;
    # the pruning (and every bound) must use the faster of the two (GpuType.sustained_flops)
    import dataclasses
    import math
    import random

    rnd = random.Random(seed)
    gpu = dataclasses.replace(GPUS[rnd.choice(["P100-SXM2", "T4", "A100-SXM4-80GB"])], attention_efficiency=1.0)
    h = rnd.choice([128, 256])
    cfg = ModelConfig("t", "gpt", rnd.choice([2, 4, 6]), h, rnd.choice([4, 8]), 4 * h, 1000, rnd.choice([8192, 16384]))
    isl = IslandSpec("i", gpu, nodes=1, gpus_per_node=rnd.choice([2, 4]))
    m, M = rnd.choice([1, 2]), rnd.choice([1, 2, 4])
    par = BuiltinParallelizer()
    whole = Slice(par.slice_model(cfg))
    got = par.parallelize(whole, isl, microbatch_size=m, microbatches=M, global_batch=m * M)
    every = math.inf
    for lay in BuiltinParallelizer().layouts(whole, isl, microbatch_size=m, microbatches=M):
        p = BuiltinParallelizer().plan(whole, isl, lay, microbatch_size=m, microbatches=M)
        if p.behind is None or p.behind >= 0:
            every = min(every, p.iteration_time_s)
    assert (got[0].iteration_time_s if got else math.inf) == pytest.approx(every, rel=1e-12)
