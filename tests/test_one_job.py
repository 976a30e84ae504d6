"""Issue 26: plans a stock runtime launches as one job.

``hetopt plan --target`` keeps the runtime's rules (``hetopt.runtimes``); ``hetopt export`` then
writes one job with a launch script and a hostfile, refuses a plan that breaks the rules unless
gaps are allowed, and the exported arguments, read back as a runtime reads them, price as the
plan did (a round trip through ``--layout``). The golden files of the one-job exports are in
``tests/test_export.py`` (``ONE_JOB``).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

import hetopt
from hetopt import cli
from hetopt.export import export_file
from hetopt.export.source import plan_view, shapes
from hetopt.runtimes import RUNTIMES, Job, plan_breaks

INPUTS = Path(__file__).parent / "golden" / "export" / "inputs"
C1 = INPUTS / "plan-tangram-c1-gpt3-6.7b.json"  # T4 tp4 and V100 tp2: breaks every pipeline runtime's rules
TARGETED = sorted(INPUTS.glob("plan-*-target-*.json"))


def _target(path: Path) -> str:
    return path.stem.rsplit("-target-", 1)[1]


@pytest.mark.parametrize("path", TARGETED, ids=lambda p: p.stem)
def test_a_targeted_plan_is_one_job_with_no_gap(path: Path) -> None:
    # the target: tangram-c2, tangram-c3 and 2x8 A100 + 4x8 V100 export one job each, no gap line
    out = export_file(path, _target(path))
    assert out.one_job and out.gaps == ()
    assert {"launch.sh", "hostfile", "README.md"} <= set(out.files)


@pytest.mark.parametrize("path", TARGETED, ids=lambda p: p.stem)
def test_the_launch_places_every_stage_on_its_island(path: Path) -> None:
    doc = json.loads(path.read_text())
    out = export_file(path, _target(path))
    hosts = [line.split() for line in out.files["hostfile"].splitlines() if line and not line.startswith("#")]
    nproc = [int(n) for n in re.search(r"NPROC=\(([\d ]+)\)", out.files["launch.sh"]).group(1).split()]
    assert nproc == [int(slots.removeprefix("slots=")) for _, slots in hosts]
    # rank r runs on the node whose slots hold it; pipeline outermost: stage k holds ranks [k·S, (k+1)·S)
    ranks = _rank_islands(out.files, doc)
    assert len(ranks) == sum(s["gpus"] for s in doc["stages"])
    first = 0
    for stage in doc["stages"]:
        assert set(ranks[first:first + stage["gpus"]]) == {stage["island"]}
        first += stage["gpus"]


@pytest.mark.parametrize("target", ["megatron", "torchtitan", "deepspeed"])
def test_a_plan_that_breaks_the_rules_exits_2_unless_gaps_are_allowed(target: str, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # torchtitan: the same plan of a model it ships (its job file names one)
    plan = INPUTS / "plan-tangram-c1-gpt3-6.7b-as-llama-3-8b.json" if target == "torchtitan" else C1
    code = cli.main(["export", str(plan), "--to", target, "-o", str(tmp_path / "refused")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1
    assert "differs by island" in err and f"--target {target}" in err and "--allow-gaps" in err
    assert not (tmp_path / "refused").exists()
    assert cli.main(["export", str(plan), "--to", target, "--allow-gaps", "-o", str(tmp_path / "gaps")]) == 0
    assert (tmp_path / "gaps" / "GAPS.txt").read_text().strip()


def test_the_plan_and_the_export_read_the_same_rules() -> None:
    # the planner's unrestricted plan breaks what export refuses, in the same words
    doc = json.loads(C1.read_text())
    view = plan_view(doc, "c1")
    breaks = plan_breaks(RUNTIMES["megatron"], shapes(view), Job(view.precision, view.seq))
    with pytest.raises(hetopt.InputError) as refused:
        export_file(C1, "megatron")
    assert breaks[0] in str(refused.value)


def _megatron_layouts(files: dict[str, str], doc: dict) -> tuple[str, int]:
    """The exported Megatron-LM job read back as Megatron-LM reads it, as ``--layout`` text per
    island, and the pipeline micro-batch (mbs · dp)."""
    text = files["megatron.args"]
    words = shlex.split(" ".join(line for line in text.splitlines() if not line.startswith("#")))
    args: dict[str, str | None] = {}
    for k, w in enumerate(words):
        if w.startswith("--"):
            args[w] = words[k + 1] if k + 1 < len(words) and not words[k + 1].startswith("--") else None
    tp, pp = int(args["--tensor-model-parallel-size"]), int(args["--pipeline-model-parallel-size"])
    layers = int(args["--num-layers"])
    if "--pipeline-model-parallel-layout" in args:
        split = [part.count("t") for part in args["--pipeline-model-parallel-layout"].split("|")]
    elif "--decoder-first-pipeline-num-layers" in args:
        a, b = int(args["--decoder-first-pipeline-num-layers"]), int(args["--decoder-last-pipeline-num-layers"])
        split = [a] + [(layers - a - b) // (pp - 2)] * (pp - 2) + [b]
    else:
        split = [layers // pp] * pp
    dp = len(_rank_islands(files, doc)) // (tp * pp)  # Megatron-LM: world / (tp·pp·cp)
    mbs = int(args["--micro-batch-size"])
    recompute = args.get("--recompute-granularity") or "none"
    zero = 1 if "--use-distributed-optimizer" in args else 0
    words = f"tp={tp} dp={dp} mbs={mbs} recompute={recompute} zero={zero}"
    return _layout_text(_stage_islands(files, doc, tp * dp, pp), split, words), mbs * dp


def _rank_islands(files: dict[str, str], doc: dict) -> list[str]:
    """The island of every global rank, from the launch files: torchrun numbers ranks node by node
    in hostfile order, ``NPROC`` of them on each node."""
    nproc = [int(n) for n in re.search(r"NPROC=\(([\d ]+)\)", files["launch.sh"]).group(1).split()]
    nodes = [line.split()[0] for line in files["hostfile"].splitlines() if line and not line.startswith("#")]
    island_of = {m: i["name"] for i in doc["islands"] for m in i["members"]}
    return [island_of[name] for name, n in zip(nodes, nproc) for _ in range(n)]


def _stage_islands(files: dict[str, str], doc: dict, stage_gpus: int, stages: int) -> list[str]:
    """The island of every stage: pipeline outermost, stage k on ranks [k·S, (k+1)·S)."""
    ranks = _rank_islands(files, doc)
    assert len(ranks) == stage_gpus * stages
    return [ranks[k * stage_gpus] for k in range(stages)]


def _layout_text(islands: list[str], split: list[int], words: str) -> str:
    """Per-island ``--layout`` text: consecutive stages on one island form its block."""
    blocks: list[tuple[str, list[int]]] = []
    for island, n in zip(islands, split):
        if blocks and blocks[-1][0] == island:
            blocks[-1][1].append(n)
        else:
            blocks.append((island, [n]))
    return "; ".join(f"{island}: layers={sum(s)} pp={len(s)} {words} split={'+'.join(map(str, s))}" for island, s in blocks)


def _priced_back(doc: dict, layout: str, micro: int, target: str):
    # the model and the memory headroom the plan carries (hetopt.planfile)
    from hetopt.planfile import check_plan

    return hetopt.plan(doc["cluster"], check_plan(doc, "plan"), global_batch=doc["global_batch"], microbatch_size=micro,
                       layout=layout, alternatives=False, target=target, memory_headroom=doc["memory"]["headroom_gib"])


@pytest.mark.parametrize("stem", ["tangram-c2-llama-3-8b", "tangram-c3-llama-3-8b"])
def test_the_exported_torchtitan_job_read_back_prices_as_planned(stem: str) -> None:
    import tomllib

    path = INPUTS / f"plan-{stem}-target-torchtitan.json"
    doc = json.loads(path.read_text())
    files = export_file(path, "torchtitan").files
    job = tomllib.loads(files["torchtitan.toml"])
    par = job["parallelism"]
    tp, pp = par["tensor_parallel_degree"], par["pipeline_parallel_degree"]
    dp = par["data_parallel_shard_degree"] * par["data_parallel_replicate_degree"]
    zero = 3 if par["fsdp_reshard_after_forward"] == "always" else 0  # FSDP2 resharding: ZeRO-3; replicas: DDP
    # one stage: no module parts, all the model's layers (torchtitan builds the whole model)
    split = ([sum(m.startswith("layers.") for m in part) for part in par["module_fqns_per_model_part"]] if pp > 1
             else [sum(st["layers"] for st in doc["stages"])])
    mbs = par["pipeline_parallel_microbatch_size"] if pp > 1 else job["training"]["local_batch_size"]
    islands = _stage_islands(files, doc, tp * dp, pp)
    words = f"tp={tp} dp={dp} mbs={mbs} recompute={job['activation_checkpoint']['mode']} zero={zero}"
    priced = _priced_back(doc, _layout_text(islands, split, words), mbs * dp, "torchtitan")
    assert priced.given_layout["iteration_time_s"] == pytest.approx(doc["iteration_time_s"], rel=1e-9)


def test_the_exported_deepspeed_job_read_back_prices_as_planned() -> None:
    path = INPUTS / "plan-tangram-c3-gpt3-13b-target-deepspeed.json"
    doc = json.loads(path.read_text())
    files = export_file(path, "deepspeed").files
    config, side = json.loads(files["ds_config.json"]), json.loads(files["pipeline.json"])
    topo = side["topology"]
    edges = side["decoder_layer_boundaries"]
    split = [b - a for a, b in zip(edges, edges[1:])]
    mbs = config["train_micro_batch_size_per_gpu"]
    islands = _stage_islands(files, doc, topo["num_mp"] * topo["num_dp"], topo["num_pp"])
    recompute = "full" if side["activation_checkpoint_interval"] else "none"
    # DeepSpeed's pipeline engine reduces gradients after the flush: priced without overlap
    words = (f"tp={topo['num_mp']} dp={topo['num_dp']} mbs={mbs} recompute={recompute} "
             f"zero={config['zero_optimization']['stage']} overlap=no")
    priced = _priced_back(doc, _layout_text(islands, split, words), mbs * topo["num_dp"], "deepspeed")
    assert priced.given_layout["iteration_time_s"] == pytest.approx(doc["iteration_time_s"], rel=1e-9)


@pytest.mark.parametrize("stem", ["tangram-c2-gpt3-1.3b-target-megatron", "tangram-c3-gpt3-13b-target-megatron"])
def test_the_exported_megatron_job_read_back_prices_as_planned(stem: str) -> None:
    path = INPUTS / f"plan-{stem}.json"
    doc = json.loads(path.read_text())
    files = export_file(path, "megatron").files
    layout, micro = _megatron_layouts(files, doc)
    cluster = doc["cluster"]
    model = {"GPT-3 1.3B": "gpt3-1.3b", "GPT-3 13B": "gpt3-13b"}[doc["model"]]
    # priced with the memory headroom the plan was made with (its document says it)
    priced = hetopt.plan(cluster, model, global_batch=doc["global_batch"], microbatch_size=micro, layout=layout,
                         alternatives=False, target="megatron", memory_headroom=doc["memory"]["headroom_gib"])
    assert priced.given_layout["fits"]
    assert priced.given_layout["iteration_time_s"] == pytest.approx(doc["iteration_time_s"], rel=1e-9)
    # and the plan found again is the one exported
    assert priced.iteration_time_s == pytest.approx(doc["iteration_time_s"], rel=1e-9)


@pytest.mark.parametrize("cluster, model, target", [
    ("tangram-c3", "gpt3-13b", "torchtitan"),  # islands without BF16 left out: the unrestricted plan is planned again
    ("a100-v100-2x8-4x8", "gpt3-2.7b", "megatron"),
    ("tangram-c2", "gpt3-1.3b", "cephalo"),  # the launchable plan is an alternative
])
def test_a_target_keeps_the_time_limit(cluster: str, model: str, target: str) -> None:
    import time

    from hetopt.family import TIME_LIMIT_SLACK_S

    start = time.perf_counter()
    p = hetopt.plan(cluster, model, global_batch=64, target=target, time_limit=1.0)
    assert time.perf_counter() - start <= 1.0 + TIME_LIMIT_SLACK_S
    assert p.target == target and p.launchability["summary"].startswith("launchable on")


def test_plan_target_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "64", "--microbatch-size", "8",
            "--no-alternatives", "--workers", "1", "--target", "megatron"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "launchable on Megatron-LM" in printed and "unrestricted plan" in printed
    assert cli.main(argv + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["target"] == "megatron"
    assert doc["launchability"]["launchable"]["iteration_time_s"] == doc["iteration_time_s"]
    assert doc["launchability"]["unrestricted"]["iteration_time_s"] <= doc["iteration_time_s"]
    with pytest.raises(SystemExit) as bad:  # not a runtime: argparse's own one line and exit 2
        cli.main(argv[:-1] + ["jax"])
    assert bad.value.code == 2


@pytest.mark.parametrize("cluster, model, options, reason", [
    ("tangram-c2", "gpt3-1.3b", {"time_limit": 0}, "time limit"),
    ("tangram-c2", "gpt3-175b", {}, "does not fit"),  # proven before any search
    ("tangram-c1", "gpt3-6.7b", {"global_batch": 32}, "no island's GPUs have BF16"),  # T4s and V100s: torchtitan
])
def test_a_target_is_named_even_without_a_launchable_plan(cluster: str, model: str, options: dict, reason: str) -> None:
    target = "torchtitan" if cluster == "tangram-c1" else "megatron"
    p = hetopt.plan(cluster, model, **{"global_batch": 64, **options}, target=target, alternatives=False)
    assert not p.status.has_solution and reason in p.reason
    assert p.target == target and p.launchability["launchable"]["iteration_time_s"] is None
    assert "no plan" in p.launchability["summary"]
