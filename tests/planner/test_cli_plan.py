"""``hetopt plan`` as a user runs it: the plan, JSON, and every kind of bad input."""

from __future__ import annotations

import json
import re

import pytest

from hetopt.cli import main

BASE = ["plan", "--cluster", "cephalo-a", "--model", "gpt3-2.7b", "--seq", "512", "--workers", "1"]


def test_plan_prints_islands_pipeline_alternatives_and_timing(capsys):
    assert main([*BASE, "--global-batch", "32", "--microbatch", "2"]) == 0
    out = capsys.readouterr().out
    for words in ("islands", "composed pipeline", "TFLOPs per GPU", "efficiency", "cephalo-fsdp",
                  "single-island", "uniform-layers", "compute-proportional", "best:", "planning: islands"):
        assert words in out, words


def test_plan_json_carries_the_same(capsys):
    assert main([*BASE, "--global-batch", "32", "--microbatch", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # by default the closed form (Tangram's objective), proven; the simulated time beside it
    assert doc["status"] == "OPTIMAL" and doc["microbatch_size"] == 2 and doc["microbatches"] == 16
    assert doc["time_model"].startswith("closed form") and doc["iteration_time_s"] == doc["analytic_s"] and doc["simulated_s"] > 0
    assert sum(s["layers"] for s in doc["stages"]) == 32
    assert {a["name"] for a in doc["alternatives"]} == {"cephalo-fsdp", "single-island", "uniform-layers",
                                                        "compute-proportional"}
    assert 0 < doc["efficiency"] <= 1 and doc["best"]
    assert set(doc["timing_s"]) == {"islands_s", "enumeration_s", "composition_s", "alternatives_s"}
    pruned = doc["enumeration"]["2"]["pruned"]
    assert set(pruned) == {"redundancy", "infeasibility", "imbalance"} and pruned["redundancy"] > 0


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--global-batch", "30", "--microbatch", "4"], "--microbatch-size 4: must divide the global batch 30"),
        (["--global-batch", "0"], "--global-batch: must be between 1 and 1048576 (got 0)"),
        (["--global-batch", "32", "--no-prune", "balance"], "--no-prune: unknown policy balance"),
        (["--global-batch", "32", "--gap-limit", "1"], "--gap-limit: must be below 1"),
        (["--global-batch", "32", "--gap-limit", "-0.1"], "--gap-limit: must be >= 0"),
    ],
)
def test_bad_sizes_exit_2(capsys, args, words):
    assert main([*BASE, *args]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_unknown_model_and_cluster_exit_2(capsys):
    assert main(["plan", "--cluster", "cephalo-a", "--model", "gpt-5", "--global-batch", "8"]) == 2
    assert "gpt-5: unknown model" in capsys.readouterr().err
    assert main(["plan", "--cluster", "cluster-z", "--model", "gpt3-2.7b", "--global-batch", "8"]) == 2
    assert "cluster-z: unknown cluster" in capsys.readouterr().err


def test_unknown_gpu_in_a_cluster_file_names_the_key(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text('name = "c"\n[[node]]\nname = "n0"\ngpu = "V1000"\ngpus = 4\n')
    assert main(["plan", "--cluster", str(path), "--model", "gpt3-2.7b", "--global-batch", "8"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: node[0].gpu: unknown GPU type 'V1000' (give one of: " in err and "A100-SXM4-80GB" in err


def test_a_model_that_fits_nowhere_is_infeasible_with_the_reason(capsys):
    args = ["plan", "--cluster", "tangram-c1", "--model", "gpt3-175b", "--global-batch", "64", "--microbatch", "1",
            "--workers", "1", "--no-alternatives", "--json"]
    assert main(args) == 1
    doc = json.loads(capsys.readouterr().out)
    # settled before any search (issue 28): the training state alone exceeds the cluster's memory
    assert doc["status"] == "INFEASIBLE" and "the training state alone does not fit tangram-c1" in doc["reason"]


def test_unreachable_scheduler_exits_2(capsys):
    pytest.importorskip("distributed")
    assert main([*BASE, "--global-batch", "8", "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "--scheduler tcp://127.0.0.1:9: cannot connect" in capsys.readouterr().err


def test_max_islands_composes_the_fastest_islands(capsys):
    assert main([*BASE, "--global-batch", "32", "--microbatch", "2", "--max-islands", "2", "--json", "--no-alternatives"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["islands"]) == 2 and len(doc["left_out"]) == 3
    assert {i["gpu"] for i in doc["islands"]} == {"A6000", "L4"}
    assert doc["status"] == "FEASIBLE" and "composed over 2 of 5 islands" in doc["reason"] and "(2 asked for)" in doc["reason"]
    # exact over the islands kept, not for the cluster: the bound is the ideal
    assert 0 < doc["bound_s"] == doc["ideal_time_s"] < doc["iteration_time_s"]
    assert doc["gap"] == pytest.approx(1 - doc["efficiency"])
    assert main([*BASE, "--global-batch", "32", "--microbatch", "2", "--max-islands", "2", "--no-alternatives"]) == 0
    out = capsys.readouterr().out
    assert "left out of the composition:" in out
    assert re.search(r"status FEASIBLE, bound [0-9.]+ s, gap [0-9.]+: composed over 2 of 5 islands", out), out
    assert main([*BASE, "--global-batch", "32", "--max-islands", "0"]) == 2
    assert "--max-islands: must be >= 1 (got 0)" in capsys.readouterr().err


def test_all_islands_composed_is_optimal_with_a_zero_gap(capsys):
    # the closed form, which the composition proves; by simulated time see tests/planner/test_schedule.py
    assert main([*BASE, "--global-batch", "32", "--microbatch", "2", "--json", "--no-alternatives",
                 "--time-model", "closed-form"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "OPTIMAL" and doc["left_out"] == [] and doc["gap"] == 0
    assert doc["bound_s"] == doc["iteration_time_s"] >= doc["ideal_time_s"]


def test_coarser_atoms_are_a_restriction(capsys):
    # atoms of 4 layers allow only slices of multiples of 4: never a faster plan than atoms of 1
    times = []
    for k in ("1", "4"):
        assert main([*BASE, "--global-batch", "32", "--microbatch", "2", "--no-alternatives", "--json", "--layers-per-atom", k]) == 0
        doc = json.loads(capsys.readouterr().out)
        times.append(doc["iteration_time_s"])
    assert times[0] <= times[1]
    assert main([*BASE, "--global-batch", "32", "--layers-per-atom", "0"]) == 2


def test_tasks_batch_the_queries_without_changing_the_plan(capsys):
    times = []
    for tasks in ("1", "1000"):  # one batch for all queries; one query per task
        assert main([*BASE, "--workers", "2", "--global-batch", "32", "--microbatch", "2", "--no-alternatives", "--json",
                     "--tasks", tasks]) == 0
        times.append(json.loads(capsys.readouterr().out)["iteration_time_s"])
    assert times[0] == times[1]
    assert main([*BASE, "--global-batch", "32", "--tasks", "0"]) == 2
    assert "--tasks: must be >= 1 (got 0)" in capsys.readouterr().err


def test_the_plan_says_its_precision_and_shows_only_the_columns_it_uses(capsys):
    """Issue 28: the human plan names fp16/bf16, and a dense plan has no EP/CP/offload columns."""
    assert main(["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "16",
                 "--no-alternatives"]) == 0
    out = capsys.readouterr().out
    assert "sequence 2048, bf16" in out and "micro-batches of" in out
    assert " EP " not in out and "offload" not in out


def test_a_given_layout_on_fewer_gpus_says_how_many_sit_idle(capsys):
    """Issue 28: a speed-up over a layout that leaves GPUs idle says so beside it."""
    args = ["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "16", "--no-alternatives",
            "--layout", "h100nvl-0+3: layers=24 tp=2 pp=1 dp=2 mbs=1"]
    assert main(args) == 0
    assert "it uses 4 of the 16 GPUs, 12 idle; the plan is" in capsys.readouterr().out
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["given_layout"]["gpus"] == 4


def test_dp_left_out_of_a_layout_is_derived_as_megatron_does(capsys):
    """Issue 28: ``--layout "tp=2 pp=1 mbs=1"`` was refused with "give dp"; Megatron derives
    dp = GPUs / (tp·pp·cp), and so does the planner (8 H100 NVL / 2 = 4)."""
    args = ["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "16", "--no-alternatives",
            "--layout", "h100nvl-0+3: layers=24 tp=2 pp=1 mbs=1", "--json"]
    assert main(args) == 0
    given = json.loads(capsys.readouterr().out)["given_layout"]
    assert "tp=2 pp=1 dp=4 mbs=1" in given["layout"] and given["gpus"] == 8
    bad = ["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "16", "--no-alternatives",
           "--layout", "h100nvl-0+3: layers=24 tp=1 pp=3 mbs=1"]
    assert main(bad) == 2
    assert "tp·pp = 3: does not divide the 8 GPUs of h100nvl-0+3, so dp cannot be derived; give dp" in capsys.readouterr().err


def test_the_library_and_the_command_line_share_their_names(capsys):
    """Issue 28: ``--microbatch-size`` is plan()'s ``microbatch_size`` (``--microbatch`` is short
    for it), and a status prints as the command line prints it."""
    from hetopt import plan
    from hetopt.result import Status

    p = plan("tangram-c2", "gpt3-1.3b", global_batch=16, microbatch_size=2, alternatives=False)
    assert str(p.status) == "OPTIMAL" and f"{p.status}" == "OPTIMAL"
    assert main(["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "16",
                 "--microbatch-size", "2", "--no-alternatives", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert p.status_line in out and p.status_line.startswith("status OPTIMAL, bound ")
    assert str(Status.TIME_LIMIT) == "TIME_LIMIT"
    with pytest.raises(TypeError, match="did you mean 'microbatch_size'"):
        plan("tangram-c2", "gpt3-1.3b", global_batch=16, microbatch=2)


def test_a_speed_up_is_shown_only_between_comparable_answers():
    """Issue 28: "1.63x the single pipeline" compared replicas with a single pipeline the limit
    had cut; a proven time beside a cut one is not a speed-up."""
    from hetopt.planner.answer import comparable
    from hetopt.result import Status

    assert comparable(Status.OPTIMAL, Status.OPTIMAL) and comparable(Status.FEASIBLE, Status.FEASIBLE)
    assert not comparable(Status.OPTIMAL, Status.FEASIBLE) and not comparable(Status.FEASIBLE, Status.OPTIMAL)
    assert not comparable(Status.TIME_LIMIT, Status.TIME_LIMIT)


def test_the_alternatives_name_the_model_that_priced_each(capsys):
    """Issue 28: the table was titled "same cost model" over a row the allocation model priced."""
    assert main(["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "128",
                 "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "same cost model" not in out and "priced by" in out
    # its line under the table (issue 44: the details left the table to fit 80 columns)
    fsdp = next(line for line in out.splitlines() if line.lstrip().startswith("cephalo-fsdp,"))
    assert "priced by the allocation model" in fsdp
    best = next(line for line in out.splitlines() if line.startswith("best: "))
    # an alternative outside the pipeline search says so when it is the best
    assert best == "best: tangram-composed" or "outside the pipeline search and priced by the" in best


@pytest.mark.parametrize(("single", "shown"), [
    ("OPTIMAL", "2.00× the single pipeline"),
    ("FEASIBLE", "no speed-up shown: the single pipeline was cut by the time limit (FEASIBLE and OPTIMAL)"),
])
def test_the_replicas_speed_up_is_shown_only_against_a_single_pipeline_as_proven(single, shown):
    """The datacenter run printed "1.63x the single pipeline" where the limit had cut the single
    pipeline short (7.10 s; 4.49 s when not cut)."""
    from types import SimpleNamespace

    from rich.console import Console

    from hetopt.planner import report
    from hetopt.planner.answer import HeteroPlan
    from hetopt.result import Status

    replicas = SimpleNamespace(status=Status.OPTIMAL, bound_s=2.0, gap=0.0, method_status="OPTIMAL", candidates=3,
                               reason="", shapes=[{"name": "u", "count": 2}], replicas=[], iteration_time_s=2.0,
                               sync_s=0.1, efficiency=0.9)
    p = HeteroPlan("c", "m", 8, 1, 8, 2048, Status[single], iteration_time_s=4.0, replicas=replicas)
    out = Console(record=True, width=300)
    report._print_replicas(p, out)
    assert shown in out.export_text()


def test_plan_help_defines_the_micro_batch_once():
    from hetopt.cli import build_parser

    sub = build_parser()._subparsers._group_actions[0].choices["plan"]
    text = " ".join(sub.format_help().split()).replace("micro- batch", "micro-batch")  # argparse wraps at hyphens
    assert "--microbatch-size N, --microbatch N pipeline micro-batch" in text
    assert "the samples of one micro-batch through the pipeline, all of a stage's data-parallel replicas together" in text
    assert "mbs: the micro-batch per replica" in text and "dp left out: the GPUs over tp·pp·cp" in text
