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
from hetopt.planner.builtin import BuiltinParallelizer
from hetopt.planner.parallelizer import IslandSpec, Slice, slice_model
from hetopt.workload import load_model
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
        mp.setattr(cm, "HOST_LAYER_FORWARD_S", 0.0)
        mp.setattr(cm, "HOST_LAYER_BACKWARD_S", 0.0)
        return _stage(*args, **kwargs)


def test_a_small_layer_on_a_fast_gpu_waits_for_its_host(monkeypatch):
    # OPT-350M's layer (h 1024) on 128 tokens: ~3.2 GFLOP a forward, microseconds on an H100,
    # against 137 µs of issuing. One GPU: no collective, no hand-over; the optimizer step,
    # amortised over a million micro-batches, is the only other part of backward.
    args = ("opt-350m", 4, 128, "H100-SXM5", 1)
    stage, kernels = _stage(*args, microbatches=10**6), _without_floor(monkeypatch, *args, microbatches=10**6)
    assert kernels.forward_s < 4 * 1.37e-4 / 3 and kernels.backward_s < 4 * 2.05e-4 / 2
    assert stage.forward_s == 4 * 1.37e-4
    assert stage.backward_s == pytest.approx(4 * 2.05e-4, rel=1e-6)
    stage = _stage(*args, recompute="full", microbatches=10**6)
    assert stage.backward_s == pytest.approx(4 * (2.05e-4 + 1.37e-4), rel=1e-6)


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
    big = ["plan", "--cluster", "tangram-c2", "--model", "opt-350m", "--global-batch", "64", "--seq", "2048",
           "--no-alternatives", "--workers", "1"]
    assert cli.main(big) == 0  # layers big enough for their GPUs: no note
    assert "host's floor" not in capsys.readouterr().out
