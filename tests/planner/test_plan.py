"""The end-to-end planner: exactness against its own baselines, pruning, the papers' findings."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import hetopt
from hetopt.planner import load_cluster
from hetopt.planner import plan
from hetopt.planner.parallelizer.builtin import best_single_island_plan
from hetopt.planner.search.compose import island_specs
from hetopt.planner.search.enumerate import POLICIES
from hetopt.workload import load_model

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "instances" / "models"


def model(name):
    return load_model(MODELS / f"{name}.toml")


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
    # model it does, by 12%: see docs/planner.md.)
    cfg = model("gpt3-13b")
    c3 = load_cluster("tangram-c3")
    times = []
    for names in (["a100-80gb", "v100-32gb"], ["a100-80gb", "v100-32gb", "v100-16gb"], ["a100-80gb", "v100-32gb", "v100-16gb", "t4"]):
        # by the closed form, which the composition proves; by simulated time the plan is the best
        # of the candidates re-ranked, not proven, and an added island can lead the composition
        # to a plan that simulates slower (15.44 s against 15.31 s here; formulations/pipeline.md)
        times.append(plan(c3.subset(names), cfg, global_batch=128, microbatch_size=2, alternatives=False,
                          time_model="closed-form").iteration_time_s)
    assert times[0] >= times[1] * (1 - 1e-12) >= times[2] * (1 - 1e-12)


@pytest.mark.parametrize(
    ("cluster", "name", "batch", "seq", "off"),
    [
        ("tangram-c2", "gpt3-1.3b", 32, 2048, POLICIES),  # everything off, redundancy included
        ("cephalo-a", "gpt3-2.7b", 64, 512, ("infeasibility", "imbalance")),
        ("tangram-c3", "gpt3-13b", 64, 2048, ("infeasibility", "imbalance")),
        ("tangram-c1", "gpt3-6.7b", 64, 2048, ("infeasibility", "imbalance")),
        ("cephalo-b", "gpt3-6.7b", 256, 512, ("infeasibility", "imbalance")),
        # 75 s, run with -m slow. The 512-node datacenter is composed over 4 of its 30 islands
        # by a heuristic, so it has no exact plan to compare.
        pytest.param("synthetic-64-nodes-2-pods", "gpt3-13b", 256, 2048, ("infeasibility", "imbalance"), marks=pytest.mark.slow),
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
    from hetopt.planner.search.workers import executor_for

    cfg, cl = model("gpt3-2.7b"), load_cluster("cephalo-a")
    here = plan(cl, cfg, global_batch=32, microbatch_size=2, seq=512, alternatives=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, protocol="tcp://", host="127.0.0.1",
                                  dashboard_address=None) as local:
        with executor_for(None, local.scheduler_address) as executor:
            there = plan(cl, cfg, global_batch=32, microbatch_size=2, seq=512, alternatives=False, executor=executor)
    assert here.iteration_time_s == there.iteration_time_s


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


@pytest.mark.slow
def test_the_datacenters_whole_space_is_proven_within_two_percent():
    """Issue 43's bar: the 512-node datacenter over every island and its whole search space
    (every size, one-layer atoms: the gap limit lifts the default narrowing) with a 2% gap
    limit: a plan proven within 2%, every size covered (about 2 minutes on the 2-core test
    machine, docs/planner.md; no time limit here, so a slower machine takes longer instead of
    failing)."""
    p = plan("datacenter-512-nodes", "gpt3-175b", global_batch=1536, gap_limit=0.02, alternatives=False)
    assert p.status.value in ("OPTIMAL", "FEASIBLE") and p.gap <= 0.02, p.reason
    assert p.bound_s <= 3.976 * (1 + 1e-9)  # the best plan the exact search finds (docs/planner.md)


def test_cluster_files_match_their_generator(tmp_path):
    from hetopt.generate.clusters import write

    for path in write(tmp_path):
        assert path.read_text() == (ROOT / "instances" / "clusters" / path.name).read_text(), path.name


def test_microbatch_lower_bound_never_exceeds_a_composed_plan():
    # the bound that lets the planner skip micro-batch sizes must hold for the plans it finds
    from hetopt.planner.search.compose import pipeline_lower_bound
    from hetopt.planner.steps import model_training_flops

    cfg, cl = model("gpt3-2.7b"), load_cluster("tangram-c1")
    for m in (1, 4, 16, 64):
        p = plan(cl, cfg, global_batch=64, microbatch_size=m, seq=512, alternatives=False)
        if p.iteration_time_s is None:
            continue
        flops = [x.gpus * x.gpu.training_flops * x.gpu.gemm_efficiency for x in plan_specs(p, cl)]
        bound = pipeline_lower_bound(64 * model_training_flops(cfg, 512), flops, 64 // m)
        assert bound <= p.iteration_time_s * (1 + 1e-12), (m, bound, p.iteration_time_s)


def plan_specs(p, cl):
    from hetopt.planner.search.compose import island_specs

    names = {n.name: i for i, n in enumerate(cl.islands.nodes)}
    return island_specs(cl, [[names[n] for n in isl["members"]] for isl in p.islands])


def test_every_divisor_is_a_candidate_and_skipped_sizes_keep_the_plan_optimal():
    cfg, cl = model("gpt3-2.7b"), load_cluster("cephalo-a")
    for time_model in ("closed-form", "simulated"):  # each skips by a bound of its own time
        p = plan(cl, cfg, global_batch=32, seq=512, alternatives=False, time_model=time_model)
        assert sorted(p.enumeration) == [1, 2, 4, 8, 16, 32]
        skipped = [m for m, s in p.enumeration.items() if "skipped_bound_s" in s]
        assert skipped and (p.status.value == "OPTIMAL" or time_model == "simulated")
        for m in skipped:  # planning a skipped size anyway finds nothing faster
            q = plan(cl, cfg, global_batch=32, microbatch_size=m, seq=512, alternatives=False, time_model=time_model)
            assert q.iteration_time_s is None or q.iteration_time_s >= p.iteration_time_s


def test_sizes_ruled_out_after_their_enumeration_hold_no_faster_plan():
    """Issue 43: after a size's enumeration, its composition's bound or the dp's cutoff (the best
    plan so far) may rule it out. Planned alone, every such size composes no faster plan, and
    its reported bound lies between the plan found and its own optimum (a valid bound)."""
    cl, cfg = load_cluster("tangram-c2"), model("gpt3-1.3b")
    p = plan(cl, cfg, global_batch=128, alternatives=False)
    assert p.status.value == "OPTIMAL"
    ruled = {m: s["skipped_bound_s"] for m, s in p.enumeration.items() if "skipped_bound_s" in s and s.get("queried")}
    assert ruled  # C2's sizes 8-64 are, today
    fewer = []
    for m, bound in ruled.items():
        q = plan(cl, cfg, global_batch=128, microbatch_size=m, alternatives=False)
        assert q.status.value == "OPTIMAL"
        assert p.iteration_time_s <= bound <= q.iteration_time_s * (1 + 1e-9), (m, bound, q.iteration_time_s)
        # cut by the plan before it, the size's enumeration returned fewer plans than alone
        fewer.append(p.enumeration[m]["plans"] < q.enumeration[m]["plans"])
    assert any(fewer), fewer


@pytest.mark.parametrize("gap_limit", [0.05, 0.3])
def test_a_gap_limit_keeps_the_plan_and_its_bound_within_it(gap_limit):
    """``gap_limit``: the plan is at most the optimum / (1 − g), the bound at most the optimum,
    the gap at most g; a plan that is not proven optimal says that the gap limit stopped it."""
    cl, cfg = load_cluster("tangram-c2"), model("gpt3-1.3b")
    exact = plan(cl, cfg, global_batch=128, alternatives=False)
    p = plan(cl, cfg, global_batch=128, alternatives=False, gap_limit=gap_limit)
    assert exact.status.value == "OPTIMAL"
    best = exact.iteration_time_s
    assert best * (1 - 1e-9) <= p.iteration_time_s <= best / (1 - gap_limit) * (1 + 1e-9)
    assert p.status.value == "OPTIMAL" or ("gap limit" in p.reason and p.bound_s <= best * (1 + 1e-9)
                                           and p.gap <= gap_limit), p.reason


def test_another_parallelizer_gets_every_micro_batch_size_planned():
    # the review's case: the skip bound rests on the built-in cost model's speeds, so a
    # parallelizer that prices stages its own way (here 5–10× faster) must not be skipped on
    from dataclasses import dataclass, replace

    from hetopt.planner.parallelizer.builtin import BuiltinParallelizer

    @dataclass(frozen=True)
    class Fast(BuiltinParallelizer):
        def parallelize(self, slice, island, **kw):
            f = 0.2 if kw["microbatch_size"] == 1 else 0.1
            return tuple(replace(p, stages=tuple(replace(s, forward_s=s.forward_s * f, backward_s=s.backward_s * f)
                                                 for s in p.stages)) for p in super().parallelize(slice, island, **kw))

    cl = load_cluster("tangram-c1")
    p = plan(cl, "gpt3-1.3b", global_batch=8, parallelizer=Fast(), alternatives=False, seq=512, time_model="closed-form")
    # every size enumerated: none skipped by the cost model's bound before its queries; a size
    # may still be ruled out after them by its composition's own bound (valid for any
    # parallelizer: it is over the partial plans it returned), never below the plan found
    assert all(s.get("queried", 0) > 0 for s in p.enumeration.values())
    assert all(s["skipped_bound_s"] >= p.iteration_time_s for s in p.enumeration.values() if "skipped_bound_s" in s)
    each = [plan(cl, "gpt3-1.3b", global_batch=8, microbatch_size=m, parallelizer=Fast(), alternatives=False, seq=512,
                 time_model="closed-form").iteration_time_s for m in (1, 2, 4, 8)]
    assert p.iteration_time_s == pytest.approx(min(t for t in each if t is not None), rel=1e-12)
