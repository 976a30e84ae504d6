"""The end-to-end planner: exactness against its own baselines, pruning, the papers' findings."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import hetopt
from hetopt.planner import load_cluster, plan
from hetopt.planner.builtin import best_single_island_plan
from hetopt.planner.compose import island_specs
from hetopt.planner.enumerate import POLICIES
from hetopt.workload import load_model

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "instances" / "models"


def model(name):
    return load_model(MODELS / f"{name}.toml")


def tangram_fig8(v100_nodes: int):
    """16 GPUs of Tangram's C1: 4 - k T4 VMs and k V100 VMs (4 GPUs each)."""
    c1 = load_cluster("tangram-c1")
    names = [f"t4-{i}" for i in range(4 - v100_nodes)] + [f"v100-{i}" for i in range(v100_nodes)]
    return c1.subset(names, name=f"c1-t4x{4 * (4 - v100_nodes)}-v100x{4 * v100_nodes}")


def test_tangram_fig8_composition_beats_the_baselines_and_v100s_take_more_layers():
    cfg = model("gpt3-6.7b")
    v100_layers = []
    for k in range(5):
        p = plan(tangram_fig8(k), cfg, global_batch=64, microbatch_size=2)
        assert p.status is hetopt.Status.OPTIMAL
        for alt in p.alternatives:
            # the Tangram baselines are restricted compositions: never faster than the exact one
            if alt.name != "cephalo-fsdp" and alt.iteration_time_s is not None:
                assert p.iteration_time_s <= alt.iteration_time_s * (1 + 1e-9), alt.name
        v100_layers.append(sum(s.layers for s in p.stages if s.gpu.startswith("V100")))
    assert v100_layers[0] == 0 and v100_layers[-1] == 32
    assert all(a < b for a, b in zip(v100_layers, v100_layers[1:])), v100_layers


def test_one_island_plan_is_the_best_homogeneous_plan():
    cfg = model("gpt3-13b")
    one = load_cluster("tangram-c3").subset(["a100-80gb"])
    p = plan(one, cfg, global_batch=64, microbatch_size=2, alternatives=False)
    best = best_single_island_plan(cfg, island_specs(one, [[0]])[0], microbatch_size=2, microbatches=32)
    assert math.isclose(p.iteration_time_s, best.iteration_time_s, rel_tol=1e-12)
    assert {s.layout for s in p.stages} == {best.layout}


def test_adding_an_island_never_slows_the_plan():
    # Tangram Fig. 11 / 13: the composition may leave an island out, so more islands never hurt.
    # (Tangram also finds that the 4xV100-16GB island does not help at all; under this cost
    # model it does, by 12%: see the README.)
    cfg = model("gpt3-13b")
    c3 = load_cluster("tangram-c3")
    times = []
    for names in (["a100-80gb", "v100-32gb"], ["a100-80gb", "v100-32gb", "v100-16gb"], ["a100-80gb", "v100-32gb", "v100-16gb", "t4"]):
        times.append(plan(c3.subset(names), cfg, global_batch=128, microbatch_size=2, alternatives=False).iteration_time_s)
    assert times[0] >= times[1] * (1 - 1e-12) >= times[2] * (1 - 1e-12)


@pytest.mark.parametrize(
    ("cluster", "name", "batch", "seq", "off"),
    [
        ("tangram-c2", "gpt3-1.3b", 32, 2048, POLICIES),  # everything off, redundancy included
        ("cephalo-a", "gpt3-2.7b", 64, 512, ("infeasibility", "imbalance")),
        ("tangram-c3", "gpt3-13b", 64, 2048, ("infeasibility", "imbalance")),
    ],
)
def test_pruning_does_not_change_the_plan(cluster, name, batch, seq, off):
    cfg, cl = model(name), load_cluster(cluster)
    pruned = plan(cl, cfg, global_batch=batch, microbatch_size=2, seq=seq, alternatives=False)
    full = plan(cl, cfg, global_batch=batch, microbatch_size=2, seq=seq, alternatives=False,
                policies=[p for p in POLICIES if p not in off])
    assert pruned.iteration_time_s == full.iteration_time_s
    on, without = pruned.enumeration[2], full.enumeration[2]
    assert on["queried"] < without["queried"]
    assert sum(on["pruned"].values()) > sum(without["pruned"].values())


def test_process_pool_gives_the_same_plan():
    from concurrent.futures import ProcessPoolExecutor

    cfg, cl = model("gpt3-2.7b"), load_cluster("cephalo-a")
    here = plan(cl, cfg, global_batch=32, microbatch_size=2, seq=512, alternatives=False)
    with ProcessPoolExecutor(max_workers=2) as pool:
        there = plan(cl, cfg, global_batch=32, microbatch_size=2, seq=512, alternatives=False, executor=pool)
    assert here.iteration_time_s == there.iteration_time_s and here.stages == there.stages


def test_dask_cluster_on_loopback_gives_the_same_plan():
    distributed = pytest.importorskip("distributed")
    from hetopt.planner.run import executor_for

    cfg, cl = model("gpt3-2.7b"), load_cluster("cephalo-a")
    here = plan(cl, cfg, global_batch=32, microbatch_size=2, seq=512, alternatives=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, protocol="tcp://", host="127.0.0.1",
                                  dashboard_address=None) as local:
        with executor_for(None, local.scheduler_address) as executor:
            there = plan(cl, cfg, global_batch=32, microbatch_size=2, seq=512, alternatives=False, executor=executor)
    assert here.iteration_time_s == there.iteration_time_s


def test_cephalo_fig9_on_cluster_a():
    # Cephalo Fig. 9: the A6000 gets the largest batch and state share, the L4s about half of
    # its batch, and a P40 more state than a P100 — checked on the measured Llama-3B and ViT-G
    # instances (on the GPT-2.7B one the P40s out-hold the A6000's state: see the README)
    for name in ("cephalo-a-llama-3.2-3b-b128-measured", "cephalo-a-vit-g-14-b128-measured"):
        r = hetopt.solve(hetopt.load(ROOT / "instances" / "allocation" / f"{name}.toml"))
        by = {}
        for g in r.solution.gpus:
            by.setdefault(g.type.split("-")[0], []).append(g)
        a6000 = by["A6000"][0]
        others = [g for g in r.solution.gpus if g is not a6000]
        assert all(a6000.batch > g.batch for g in others), name
        assert all(a6000.state_share > g.state_share for g in others), name
        assert all(0.35 <= l4.batch / a6000.batch <= 0.65 for l4 in by["L4"]), name
        assert min(g.state_share for g in by["P40"]) > max(g.state_share for g in by["P100"]), name
    # and the planner's FSDP alternative, from the analytic cost model, agrees on the batches
    p = plan(load_cluster("cephalo-a"), model("gpt3-2.7b"), global_batch=128, microbatch_size=4, seq=512)
    fsdp = next(a for a in p.alternatives if a.name == "cephalo-fsdp")
    assert fsdp.iteration_time_s is not None and "A6000 49" in fsdp.detail


def test_generated_pipeline_instances_match_the_generator(tmp_path):
    from hetopt.generate.pipeline import write

    for path in write(tmp_path):
        assert path.read_text() == (ROOT / "instances" / "pipeline" / path.name).read_text(), path.name


@pytest.mark.slow
@pytest.mark.parametrize("name", [s.name for s in __import__("hetopt.generate.pipeline", fromlist=["SETTINGS"]).SETTINGS])
def test_crosscheck_agrees_on_planner_pipeline_instances(name):
    check = hetopt.crosscheck(hetopt.load(ROOT / "instances" / "pipeline" / f"{name}.toml"), ["dp", "milp", "cpsat"], time_limit=120)
    assert check.agree, check.disagreement
    assert {r.status for r in check.results} == {hetopt.Status.OPTIMAL}


def test_cluster_files_match_their_generator(tmp_path):
    from hetopt.generate.clusters import write

    for path in write(tmp_path):
        assert path.read_text() == (ROOT / "instances" / "clusters" / path.name).read_text(), path.name
