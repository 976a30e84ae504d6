"""The planner's mixed-stages alternative: its instance and its row."""

from __future__ import annotations

import json

from hetopt.cli import main

BASE = ["plan", "--cluster", "cephalo-a", "--model", "gpt3-2.7b", "--seq", "512", "--workers", "1", "--mixed-stages"]


def test_plan_has_a_mixed_stages_row(capsys):
    assert main([*BASE, "--global-batch", "32", "--microbatch", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    row = next(a for a in doc["alternatives"] if a["name"] == "mixed-stages")
    assert row["status"] in ("FEASIBLE", "TIME_LIMIT", "DECLINED", "INFEASIBLE"), row
    if row["status"] == "FEASIBLE":  # a plan: its stages named, and never OPTIMAL (the tables approximate)
        assert row["iteration_time_s"] > 0 and "S0[" in row["detail"] and "b=2" in row["detail"]  # the fixed micro-batch
    else:
        assert row["iteration_time_s"] is None and row["detail"]


def test_more_gpu_types_than_the_family_takes_is_a_declined_row(monkeypatch, capsys):
    """A cluster of more types than ``MAX_TYPES`` gives a DECLINED row, not a crash."""
    import hetopt.mixed.problem as problem

    monkeypatch.setattr(problem, "MAX_TYPES", 1)
    assert main([*BASE, "--global-batch", "32", "--microbatch", "2", "--json"]) == 0
    row = next(a for a in json.loads(capsys.readouterr().out)["alternatives"] if a["name"] == "mixed-stages")
    assert row["status"] == "DECLINED" and "gpu" in row["detail"]


def test_block_tables_approximate_the_whole_stage_price_from_above():
    """A stage of every block, priced as the sum of its blocks (the family's tables), against
    the parallelizer's price of the same stage whole: the times within 1% and the static bytes
    within 10%, never below (the approximation of ``planner/mixed.py`` is conservative)."""
    from hetopt.costmodel.stage import Layout
    from hetopt.planner.alternatives import Setting
    from hetopt.planner.builtin import BuiltinParallelizer
    from hetopt.planner.cluster import load_cluster
    from hetopt.planner.compose import island_specs
    from hetopt.planner.mixed import _node_specs, mixed_instance
    from hetopt.planner.parallelizer import Slice
    from hetopt.planner.request import as_model

    cluster, cfg, par, seq, b = load_cluster("cephalo-a"), as_model("gpt3-2.7b"), BuiltinParallelizer(), 512, 8
    atoms = par.slice_model(cfg, seq=seq)
    members = [[k] for k in range(len(cluster.islands.nodes))]
    s = Setting(cluster, cfg, island_specs(cluster, members), members, par, atoms, 32, seq, None)
    inst = mixed_instance(s, b)
    assert inst.layers < len(atoms) and {g.name for g in inst.gpus} == {gpu.name for gpu in cluster.gpu_types}
    specs = _node_specs(s)
    for g in inst.gpus:
        for tab in g.tp:
            whole = par.plan(Slice(tuple(atoms)), specs[g.name], Layout(tab.degree, 1, 1, (len(atoms),), "none", 0),
                             microbatch_size=b, microbatches=inst.microbatches).stages[0]
            summed = sum(tab.time_s[b - 1])
            assert whole.time_s * (1 - 1e-9) <= summed <= whole.time_s * 1.01, (g.name, tab.degree)
            static = sum(tab.static_bytes) + par.reserved_bytes
            assert whole.static_bytes * (1 - 1e-9) <= static <= whole.static_bytes * 1.10, (g.name, tab.degree)


def test_the_mixed_stages_row_is_planned_only_when_asked_for(capsys):
    assert main([*BASE[:-1], "--global-batch", "32", "--microbatch", "2", "--json"]) == 0
    names = {a["name"] for a in json.loads(capsys.readouterr().out)["alternatives"]}
    assert "mixed-stages" not in names and "cephalo-fsdp" in names
