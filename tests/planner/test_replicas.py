"""``hetopt plan --replicas``: candidates from units of islands, the replicas family over them."""

from __future__ import annotations

import json

import pytest

from hetopt import solve
from hetopt.cli import main
from hetopt.planner.setup.cluster import load_cluster
from hetopt.planner.steps import as_model, ideal_time
from hetopt.planner.alternatives.replicas import UNIT_NODES, plan_replicas, replicas_instance, unit_shapes
from hetopt.replicas.problem import evaluate
from hetopt.result import Status

BASE = ["plan", "--cluster", "tangram-c3", "--model", "gpt3-13b", "--global-batch", "64", "--microbatch", "2",
        "--workers", "1", "--no-alternatives"]


def _islands(cluster):
    islands = solve(cluster.islands)
    index = cluster.islands.index
    return islands, [[index[n] for n in isl.nodes] for isl in islands.solution.islands]


def test_units_cut_big_islands_and_keep_small_ones():
    cluster = load_cluster("datacenter-512-nodes")
    _, members = _islands(cluster)
    shapes = unit_shapes(cluster, members)
    nodes = {s.name: s.unit_nodes for s in shapes}
    assert max(nodes.values()) == UNIT_NODES
    # every unit belongs to an island of at least its size; no node is counted twice
    assert sum(s.count * s.unit_nodes for s in shapes) <= len(cluster.islands.nodes)
    big = next(s for s in shapes if s.name.startswith("H100") and s.unit_nodes == UNIT_NODES)
    assert big.count >= 18  # 48 + 56 + 56 nodes of H100 in 8-node units


def test_instance_prices_candidates_that_evaluate_checks():
    cluster = load_cluster("tangram-c3")
    _, members = _islands(cluster)
    inst = replicas_instance(cluster, as_model("gpt3-13b"), members, name="c3", global_batch=64, microbatch_size=2)
    assert inst is not None and inst.microbatches == 32
    for c in inst.candidates:
        assert 0 < c.per_microbatch_s <= c.fill_s and c.gradient_bytes > 0 and c.bandwidth > 0
    r = solve(inst, "dp")
    assert r.status is Status.OPTIMAL and evaluate(inst, r.solution).feasible


def test_plan_replicas_is_feasible_with_the_ideal_as_bound():
    cluster = load_cluster("tangram-c3")
    islands, _ = _islands(cluster)
    cfg = as_model("gpt3-13b")
    ideal = ideal_time(cluster, cfg, 64, cfg.sequence)
    rp = plan_replicas(cluster, cfg, islands, global_batch=64, ideal_s=ideal, microbatch_size=2)
    assert rp.status is Status.FEASIBLE and rp.method_status == "OPTIMAL"
    assert rp.bound_s == ideal <= rp.iteration_time_s
    assert rp.gap == pytest.approx((rp.iteration_time_s - ideal) / rp.iteration_time_s)
    assert sum(r.samples for r in rp.replicas) == 64


def test_a_model_no_unit_holds_is_infeasible_with_the_reason():
    cluster = load_cluster("tangram-c1")
    islands, _ = _islands(cluster)
    rp = plan_replicas(cluster, as_model("gpt3-175b"), islands, global_batch=64, ideal_s=1.0)
    assert rp.status is Status.INFEASIBLE and "holds the model" in rp.reason


def test_cli_prints_the_replicas_beside_the_pipeline(capsys):
    assert main([*BASE, "--replicas"]) == 0
    out = capsys.readouterr().out
    for words in ("composed pipeline", "data-parallel replicas", "replicas iteration", "of the ideal", "replicas: status"):
        assert words in out, words


def test_cli_json_carries_the_replicas_and_leaves_them_out_without_the_flag(capsys):
    assert main([*BASE, "--replicas", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rp = doc["replicas"]
    assert rp["status"] == "FEASIBLE" and rp["replicas"]
    assert sum(r["samples"] for r in rp["replicas"]) == 64
    assert main([*BASE, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["replicas"] is None


def test_plan_with_replicas_keeps_the_time_limit():
    from hetopt.family import TIME_LIMIT_SLACK_S
    from hetopt.planner.steps import plan

    limit = 3.0
    result = plan("tangram-c3", "gpt3-13b", global_batch=64, microbatch_size=2, time_limit=limit,
                  alternatives=False, replicas=True)
    assert result.timing_s["replicas_s"] >= 0
    assert sum(result.timing_s.values()) <= limit + TIME_LIMIT_SLACK_S
    rp = result.replicas
    assert rp is not None and rp.status in (Status.FEASIBLE, Status.TIME_LIMIT)
    assert rp.status is not Status.OPTIMAL  # never claimed for the cluster


def test_replicas_name_their_islands_and_share_no_unit():
    cluster = load_cluster("datacenter-512-nodes")
    islands, members = _islands(cluster)
    cfg = as_model("gpt3-175b")
    rp = plan_replicas(cluster, cfg, islands, global_batch=1536, ideal_s=ideal_time(cluster, cfg, 1536, cfg.sequence))
    assert rp.status is Status.FEASIBLE and len(rp.replicas) >= 4
    used: dict[str, int] = {}
    for r in rp.replicas:
        for part in r.islands.split(" + "):
            name, k = part.rsplit(" ×", 1)
            used[name] = used.get(name, 0) + int(k)
    units = {name: n for s in unit_shapes(cluster, members) for name, n in s.islands}
    assert all(used[name] <= units[name] for name in used)
