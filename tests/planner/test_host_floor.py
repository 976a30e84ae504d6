"""The host's floor: a stage's kernels take at least the time the host needs to issue them.

Hand computations of ``cm.host_floor_s``, a stage that is host-bound (priced at exactly the
floor, and not at its kernels' time), a stage that is GPU-bound (untouched), and the
measurement that gives the constants.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from hetopt import costmodel as cm
from hetopt.costmodel.stage import Layout
from hetopt.hardware import load_gpus
from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
from hetopt.planner.parallelizer.protocol import IslandSpec, Slice, slice_model
from hetopt.workload import load_model
from hetopt.costmodel.running import Running
from tests.planner.test_exact_pruning import MODELS

GPUS = load_gpus()


def test_the_floor_by_hand():
    fwd, bwd = cm.host_floor_s(4)
    assert fwd == 4 * 1.37e-4 and bwd == 4 * 2.05e-4  # 0.548 ms and 0.82 ms
    fwd, bwd = cm.host_floor_s(4, recompute="full")  # the forward is issued again in backward
    assert bwd == pytest.approx(4 * (2.05e-4 + 1.37e-4))
    assert cm.host_floor_s(4, recompute="selective") == cm.host_floor_s(4)
    with pytest.raises(ValueError, match="unknown recompute mode"):
        cm.host_floor_s(4, recompute="some")


def _stage(model: str, layers: int, seq: int, gpu: str, m: int, recompute: str = "none", microbatches: int = 1):
    cfg = dataclasses.replace(load_model(MODELS / f"{model}.toml"), layers=layers + 2)
    atoms = slice_model(cfg, seq=seq)  # one atom a layer; the first holds the embedding, the last the head
    sl = Slice(atoms[1:1 + layers])  # the transformer layers alone
    assert sl.layers == layers and not sl.embedding and not sl.head
    isl = IslandSpec("i", GPUS[gpu], nodes=1, gpus_per_node=1)
    lay = Layout(tp=1, pp=1, dp=1, split=(layers,), recompute=recompute, zero_stage=0)
    return BuiltinParallelizer().plan(sl, isl, lay, microbatch_size=m, microbatches=microbatches).stages[0]


def _without_floor(monkeypatch, *args, **kwargs):
    with monkeypatch.context() as mp:
        mp.setitem(cm.HOST_STACKS, cm.DEFAULT_HOST, (0.0, 0.0))
        mp.setattr(cm.host, "HOST_LAUNCH_S", 0.0)
        return _stage(*args, **kwargs)


def test_a_small_layer_on_a_fast_gpu_waits_for_its_host(monkeypatch):
    # OPT-350M's layer (h 1024) on 128 tokens: ~3.2 GFLOP a forward, microseconds on an H100,
    # against 137 µs of issuing and 6 µs a launch of its 10 kernels (FlashAttention: one). One
    # GPU: no collective, no hand-over; the optimizer step, amortised over a million
    # micro-batches, is the only other part of backward.
    args = ("opt-350m", 4, 128, "H100-SXM5", 1)
    stage, kernels = _stage(*args, microbatches=10**6), _without_floor(monkeypatch, *args, microbatches=10**6)
    launches = 4 * 10  # the forward's; the backward launches twice as many
    assert kernels.forward_s < 4 * 1.37e-4 / 3 and kernels.backward_s < 4 * 2.05e-4 / 2
    assert stage.forward_s == pytest.approx(4 * 1.37e-4 + launches * cm.HOST_LAUNCH_S, rel=1e-12)
    assert stage.backward_s == pytest.approx(4 * 2.05e-4 + 2 * launches * cm.HOST_LAUNCH_S, rel=1e-6)
    stage = _stage(*args, recompute="full", microbatches=10**6)  # the forward issued again, its launches too
    assert stage.backward_s == pytest.approx(4 * (2.05e-4 + 1.37e-4) + 3 * launches * cm.HOST_LAUNCH_S, rel=1e-6)


def test_a_big_layer_is_priced_by_its_kernels(monkeypatch):
    # GPT-3 13B's layer (h 5120) on 2048 tokens: ~0.7 TFLOP a forward, tens of ms on a T4
    args = ("gpt3-13b", 2, 2048, "T4", 1)
    stage = _stage(*args)
    assert stage.forward_s > 100 * 2 * 1.37e-4
    assert stage == _without_floor(monkeypatch, *args)  # bit for bit


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (the runtimes extra)")
def test_the_measurement_counts_megatrons_ops():
    from hetopt.generate import host_overhead

    m = host_overhead.measure(samples=1)
    assert m["forward_ops"] == 29 and m["backward_nodes"] == 52
    assert 0 < m["forward_s"] < m["forward_s"] + m["backward_s"] < 0.05  # seconds per layer: a host, not a hang


def test_a_plan_says_when_the_host_sets_its_pace(capsys):
    from hetopt import cli

    args = ["plan", "--cluster", "tangram-c2", "--model", "opt-350m", "--global-batch", "8", "--seq", "128",
            "--no-alternatives", "--workers", "1"]
    assert cli.main(args) == 0
    assert "stage priced at the host's floor" in capsys.readouterr().out
    # (OPT-350M at 2048 tokens is no longer enough: its TP-split stages are host-bound once the
    # host's launches are counted, issue 41)
    big = ["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "64", "--seq", "2048",
           "--no-alternatives", "--workers", "1"]
    assert cli.main(big) == 0  # layers big enough for their GPUs: no note
    assert "host's floor" not in capsys.readouterr().out


def test_the_2021_stacks_floor_by_hand():
    # Megatron-LM v1.1.5 in DeepSpeed v0.3.13 (AMP's runs): 3.25 ms forward, 4.86 ms backward a layer
    fwd, bwd = cm.host_floor_s(6, stack="torch1")
    assert fwd == pytest.approx(6 * 3.25e-3) and bwd == pytest.approx(6 * 4.86e-3)
    assert cm.host_floor_s(6) == (6 * 1.37e-4, 6 * 2.05e-4)  # today's stack, the default
    with pytest.raises(ValueError, match="unknown host stack"):
        cm.host_floor_s(1, stack="torch0")


def test_the_2021_stack_is_read_off_amps_profiles():
    """The constant is what ``python -m hetopt.generate.stack_host`` derives from the shipped
    profile: each GPU's median profiled layer less this model's kernels (T4 ≈ 5.70 − 2.27 ms,
    V100 ≈ 3.90 − 0.70 ms: nearly the same though the kernels differ 3.3-fold), averaged; the
    backward in today's stack's proportion."""
    from hetopt.generate import stack_host

    d = stack_host.derive()
    t4, v100 = d["per_gpu"]
    assert t4["profiled_s"] == pytest.approx(5.698e-3, abs=1e-6) and v100["profiled_s"] == pytest.approx(3.896e-3, abs=1e-6)
    assert t4["kernels_s"] / v100["kernels_s"] > 3.0
    assert abs(t4["host_s"] - v100["host_s"]) < 0.1 * v100["host_s"]
    assert cm.HOST_STACKS["torch1"] == (round(d["forward_s"], 5), round(d["backward_s"], 5))


def test_a_stage_of_the_2021_stack_waits_for_its_host():
    """A GPT-2 345M stage of 6 layers at micro-batch 1 on a T4 with TP 1: kernels 2.3 ms a layer
    forward, under the 2021 stack's 3.25 ms; the stage's forward is the floor exactly."""
    from hetopt.generate.stack_host import GPT2_345M

    sl = Slice(slice_model(GPT2_345M, seq=1024)[1:7])
    isl = IslandSpec("t4", GPUS["T4"], nodes=1, gpus_per_node=1)
    lay = Layout(tp=1, pp=1, dp=1, split=(6,), recompute="none", zero_stage=0)

    def stage(host):
        par = BuiltinParallelizer(running=Running(flash=False, sequence_parallel=False, precision="fp16", host=host))
        return par.plan(sl, isl, lay, microbatch_size=1, microbatches=1).stages[0]

    old, new = stage("torch1"), stage("torch2")
    assert old.host_bound and not new.host_bound
    assert old.forward_s == pytest.approx(6 * 3.25e-3) and new.forward_s < old.forward_s


def test_the_host_key_reads_and_writes_back():
    from hetopt.planner.setup.layout import parse_layout
    from hetopt.planner.setup.framework import parse_runtime

    lay = parse_layout("tp=1 pp=2 host=torch1")
    assert lay.running.host == "torch1" and lay.text().endswith("host=torch1")
    assert parse_runtime("host=torch1").layout(parse_layout("tp=1 pp=2")).running.host == "torch1"
    assert parse_layout("tp=1 pp=2 host=cudagraph").text().endswith("host=cudagraph")
    with pytest.raises(Exception, match="host=torch0: must be torch2, torch1 or cudagraph"):
        parse_layout("tp=1 pp=2 host=torch0")


def test_a_plan_on_an_older_stack_says_the_fsdp_alternative_has_no_floor(capsys):
    import json

    from hetopt import cli

    assert cli.main(["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "128",
                     "--runtime", "host=torch1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["running"]["host"] == "torch1"
    assert any("cephalo-fsdp alternative is priced without the host's time of host=torch1" in line
               for line in doc["outside_calibration"])


def test_an_moe_layers_floor_by_hand():
    # one dense layer and one MoE layer of 8 local experts: 1 + 1.66 + 8 · 0.167 dense layers forward,
    # 1 + 1.21 + 8 · 0.167 backward
    fwd, bwd = cm.host_floor_s(2, moe_layers=1, local_experts=8)
    assert fwd == pytest.approx(1.37e-4 * (1 + 1.66 + 8 * 0.167)) and bwd == pytest.approx(2.05e-4 * (1 + 1.21 + 8 * 0.167))
    assert cm.host_floor_s(2, moe_layers=0, local_experts=8) == cm.host_floor_s(2)  # a dense stage: as before, bit for bit
    t1 = cm.host_floor_s(1, moe_layers=1, local_experts=2, stack="torch1")
    assert t1[0] == pytest.approx(3.25e-3 * (1.66 + 2 * 0.167))  # the same ops at the older stack's pace


def test_expert_parallelism_leaves_each_gpu_fewer_experts_to_issue():
    """A small MoE layer (h 64, 8 experts) is host-bound: its floor is the MoE layer's with all 8
    experts on the GPU without EP, with 2 at EP 4."""
    from hetopt.workload import ModelConfig

    tiny = ModelConfig("tiny-moe", "gpt", 3, 64, 4, 256, 0, 32, experts=8, top_k=2, expert_ffn=128)
    sl = Slice(slice_model(tiny, seq=32)[1:2])
    isl = IslandSpec("a", GPUS["A100-SXM4-80GB"], nodes=1, gpus_per_node=8)
    par = BuiltinParallelizer(reserved_bytes=0.0, running=Running(flash=False))

    from hetopt.costmodel.stage import layer_table, path_floor_s

    def on_path(ep):  # kernels and collectives held to the floor, before the EP all-to-alls are added
        lay = Layout(tp=1, pp=1, dp=4, split=(1,), recompute="none", zero_stage=0, ep=ep)
        assert par.plan(sl, isl, lay, microbatch_size=4, microbatches=8).stages[0].host_bound
        return path_floor_s(sl, isl, layer_table(sl), lay, 0, microbatch_size=4, running=Running(flash=False, precision="bf16"))

    def moe_floor(experts):
        # the MoE layer's ops, and its kernels' launches: a dense layer's 14 (unfused attention)
        # in the forward's proportion of ops, twice as many in backward
        kernels = 14 * (1.66 + experts * 0.167)
        return 1.37e-4 * (1.66 + experts * 0.167) + 2.05e-4 * (1.21 + experts * 0.167) + 3 * kernels * cm.HOST_LAUNCH_S

    assert on_path(1) == pytest.approx(moe_floor(8))
    assert on_path(4) == pytest.approx(moe_floor(2))


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (the runtimes extra)")
def test_the_moe_measurement_counts_megatrons_ops():
    from hetopt.generate import host_overhead

    # router, top-k, permutation, split, unpermutation in place of the FFN; 3 ops a local expert
    assert host_overhead.measure(samples=1, experts=2)["forward_ops"] == 53
    assert host_overhead.measure(samples=1, experts=4)["forward_ops"] == 59
