"""Issue 40's bar, end to end: a model of one's own, planned on tangram-c3, exported from the plan
JSON alone, launched on every node against a stub torchrun.

A 7B Llama-like model given as a FILE: ``hetopt plan --target megatron`` and ``--target
torchtitan``, each ``--json``; ``hetopt export`` of that file alone (no model, no cluster file).
Megatron-LM's arguments carry the model's shape and its ``launch.sh`` passes ``bash -n`` and
shellcheck, is executable and starts every node's ranks; torchtitan ships no model of that shape,
so its export exits 2 naming why (whatever the plan's layout), while a file with Llama-3 8B's shape names torchtitan's
``llama3`` ``8B``.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import stat
import subprocess
import tomllib
from pathlib import Path

import pytest

from hetopt import cli
from hetopt.planfile import PLAN_VERSION

OWN_7B = """name = "Own 7B"
architecture = "llama"
layers = 32
hidden = 4096
heads = 32
kv_heads = 8
ffn = 11008
vocab = 32000
sequence = 4096
"""
#: Llama-3 8B's shape under another name, in a file of one's own: torchtitan ships it.
OWN_8B = """name = "Own 8B"
architecture = "llama"
layers = 32
hidden = 4096
heads = 32
kv_heads = 8
ffn = 14336
vocab = 128256
sequence = 8192
"""


def _plan(model: Path, target: str, out: Path) -> dict:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = cli.main(["plan", "--cluster", "tangram-c3", "--model", str(model), "--global-batch", "32",
                         "--target", target, "--no-alternatives", "--json"])
    assert code == 0
    out.write_text(printed.getvalue())
    return json.loads(printed.getvalue())


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The plans, written as files; the model files removed before anything is exported."""
    folder = tmp_path_factory.mktemp("e2e")
    paths = {}
    for name, text, target in (("own7b", OWN_7B, "megatron"), ("own8b", OWN_8B, "torchtitan")):
        model = folder / f"{name}.toml"
        model.write_text(text)
        _plan(model, target, folder / f"{name}-{target}.json")
        paths[f"{name}-{target}"] = folder / f"{name}-{target}.json"
    for model in folder.glob("*.toml"):
        model.unlink()  # the export reads the plan alone
    return paths


def test_the_plan_json_carries_its_version_and_the_models_shape(planned: dict[str, Path]) -> None:
    doc = json.loads(planned["own7b-megatron"].read_text())
    assert (doc["format"], doc["version"]) == ("hetopt-plan", PLAN_VERSION)
    shape = doc["model_shape"]
    assert (shape["name"], shape["layers"], shape["hidden"], shape["kv_heads"], shape["ffn"], shape["vocab"]) == \
        ("Own 7B", 32, 4096, 8, 11008, 32000)


def test_megatron_exports_from_the_plan_alone_and_launches(planned: dict[str, Path], tmp_path: Path, launcher) -> None:
    out = tmp_path / "run"
    assert cli.main(["export", str(planned["own7b-megatron"]), "--to", "megatron", "-o", str(out)]) == 0
    args = (out / "megatron.args").read_text()
    for expected in ("--num-layers 32", "--hidden-size 4096", "--ffn-hidden-size 11008", "--num-attention-heads 32",
                     "--group-query-attention", "--num-query-groups 8", "--kv-channels 128",
                     "--position-embedding-type rope", "--swiglu", "--normalization RMSNorm", "--disable-bias-linear",
                     "--untie-embeddings-and-output-weights", "--vocab-size 32000", "--seq-length 4096",
                     "--max-position-embeddings 4096"):
        assert f"\n{expected}\n" in args, expected
    script = out / "launch.sh"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    if shutil.which("shellcheck"):
        assert subprocess.run(["shellcheck", "--shell=bash", str(script)], capture_output=True).returncode == 0
    doc = json.loads(planned["own7b-megatron"].read_text())
    hosts = launcher.hostfile(out)
    ranks = 0
    for rank, (_, slots) in enumerate(hosts):
        argv = launcher.node(out, rank)
        assert (launcher.option(argv, "--node-rank"), launcher.option(argv, "--nproc-per-node")) == (str(rank), str(slots))
        assert launcher.option(argv, "--nnodes") == str(len(hosts))
        ranks += slots
    assert ranks == sum(s["gpus"] for s in doc["stages"])


def test_torchtitan_exits_2_for_a_model_it_does_not_ship(planned: dict[str, Path], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # the model, not the plan's layout, is what torchtitan cannot take: the Megatron-LM plan's file will do
    code = cli.main(["export", str(planned["own7b-megatron"]), "--to", "torchtitan", "-o", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "torchtitan v0.2.2 ships no model of Own 7B's shape" in err and "ffn 11008 (not 14336)" in err
    assert not (tmp_path / "run").exists()


def test_torchtitan_names_the_model_it_ships_and_launches(planned: dict[str, Path], tmp_path: Path, launcher) -> None:
    out = tmp_path / "run"
    assert cli.main(["export", str(planned["own8b-torchtitan"]), "--to", "torchtitan", "-o", str(out)]) == 0
    job = tomllib.loads((out / "torchtitan.toml").read_text())
    assert job["model"] == {"name": "llama3", "flavor": "8B"}
    script = out / "launch.sh"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755 and subprocess.run(["bash", "-n", str(script)]).returncode == 0
    for rank in range(len(launcher.hostfile(out))):
        argv = launcher.node(out, rank)
        assert argv[-3:] == ["torchtitan.train", "--job.config_file", str(out / "torchtitan.toml")]
