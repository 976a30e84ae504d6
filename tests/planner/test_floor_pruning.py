"""Layouts left unpriced by their compute floor (``builtin.FLOOR_FIRST``) never change an answer.

Two checks: the floor (``costmodel.stage.path_floor_s``: kernels and TP/CP collectives, each
pass held to the host's floor) is below the priced time of every stage of every layout of
seeded cases, for either host stack and hand-over, and ``parallelize`` returns the same plans, bit for bit, with the floor
pruning on and off, with and without a target runtime (whose job-wide groups keep Pareto
fronts of their own).
"""

from __future__ import annotations

import pytest

from hetopt.costmodel.stage import layer_table, path_floor_s
from hetopt.planner import builtin
from hetopt.planner.builtin import BuiltinParallelizer
from hetopt.planner.parallelizer import IslandSpec, Slice, slice_model
from hetopt.workload import load_model
from hetopt import costmodel as cm
from hetopt.costmodel.running import Running
from tests.planner.test_exact_pruning import GPUS, MODELS, _case


@pytest.mark.parametrize("seed", range(16))
@pytest.mark.parametrize("host,handover", [("torch2", "split"), ("torch1", "deepspeed")])
def test_the_floor_is_below_every_priced_stage(seed, host, handover):
    """``path_floor_s`` (kernels, TP and CP collectives, the host's floor) bounds the priced time
    of every stage of every layout of seeded cases, dense and MoE, under either host stack and
    hand-over."""
    sl, isl, m, M, _, flash = _case(seed)
    par = BuiltinParallelizer(running=Running(flash=flash, host=host, handover=handover))
    tab = layer_table(sl, flash=par.running_on(isl).flash, element_bytes=cm.element_bytes(par.running_on(isl).precision))
    checked = 0
    for lay in par.layouts(sl, isl, microbatch_size=m, microbatches=M):
        if lay.vpp > 1:
            continue  # interleaved stages are rescaled after pricing; never bounded (whole models)
        for q, st in enumerate(par.plan(sl, isl, lay, microbatch_size=m, microbatches=M).stages):
            floor = path_floor_s(sl, isl, tab, lay, q, microbatch_size=m, running=par.running_on(isl))
            assert 0.0 < floor <= st.time_s, (lay, q)
            checked += 1
    assert checked


def _both(sl, isl, par, monkeypatch, **args):
    got = par.parallelize(sl, isl, **args)
    want = type(par)(**{f: getattr(par, f) for f in ("running", "target")}, floor_first=False).parallelize(sl, isl, **args)
    return got, want


@pytest.mark.parametrize("seed", range(32))
@pytest.mark.parametrize("target", [None, "megatron", "torchtitan"])
def test_floor_pruning_returns_exactly_what_pricing_every_layout_does(seed, target, monkeypatch):
    sl, isl, m, M, phi, flash = _case(seed)
    par = BuiltinParallelizer(target=target, running=Running(flash=flash))
    for fraction in (phi, 1.0):
        got, want = _both(sl, isl, par, monkeypatch, microbatch_size=m, microbatches=M, global_batch=m * M,
                          memory_fraction=fraction)
        assert got == want
        assert [p.launch_group for p in got] == [p.launch_group for p in want]
        assert [p.front for p in got] == [p.front for p in want]


@pytest.mark.parametrize("model,first,stop", [("gpt3-1.3b", 4, 9), ("gpt3-1.3b", 0, 6), ("gshard-moe-2.4b", 2, 6)])
@pytest.mark.parametrize("m", [1, 4, 16])
def test_floor_pruning_on_shipped_models(model, first, stop, m, monkeypatch):
    cfg = load_model(MODELS / f"{model}.toml")
    sl = Slice(slice_model(cfg, seq=1024)[first:stop])
    isl = IslandSpec("a100", GPUS["A100-SXM4-40GB"], nodes=2, gpus_per_node=8, inter_bandwidth=25e9)
    got, want = _both(sl, isl, BuiltinParallelizer(), monkeypatch, microbatch_size=m, microbatches=8,
                      global_batch=8 * m)
    assert got == want and got
