"""``hetopt --version`` and ``hetopt list gpus|models|clusters`` (issue 13, part 4)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from hetopt.catalog import instances_dir
from hetopt.cli import main
from hetopt.hardware import load_gpus
from hetopt.planner.setup.cluster import load_cluster

ROOT = Path(__file__).resolve().parents[2]


def test_version_is_the_installed_distributions(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out == f"hetopt {metadata.version('hetopt')}\n"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert out.split()[1] == pyproject["project"]["version"]


def test_version_from_the_console_script_and_python_m():
    proc = subprocess.run([sys.executable, "-m", "hetopt", "--version"], capture_output=True, text=True, check=True)
    assert proc.stdout.startswith("hetopt ") and proc.stderr == ""


def _listed(capsys, what: str) -> list[dict]:
    assert main(["list", what, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_list_gpus_gives_the_catalog_figures(capsys):
    rows = {r["gpu"]: r for r in _listed(capsys, "gpus")}
    catalog = load_gpus()
    assert set(rows) == set(catalog)
    a100 = rows["A100-SXM4-80GB"]
    assert (a100["memory_gib"], a100["fp16_tflops"], a100["intra_link"]) == (80.0, 312.0, "NVLink3")
    for name, g in catalog.items():  # the units of the key names
        assert rows[name]["training_tflops"] * 1e12 == pytest.approx(g.training_flops)
        assert rows[name]["intra_gbs"] * 1e9 == pytest.approx(g.intra_bandwidth)
    assert rows["P40"]["training_tflops"] > rows["P40"]["fp16_tflops"]  # FP16 crippled: trains at the FP32 rate


def test_list_models_gives_every_shipped_model(capsys):
    rows = {r["model"]: r for r in _listed(capsys, "models")}
    assert set(rows) == {p.stem for p in (instances_dir() / "models").glob("*.toml")}
    llama = rows["llama-2-7b"]
    assert (llama["layers"], llama["hidden"], llama["heads"]) == (32, 4096, 32)
    assert llama["params_b"] == pytest.approx(6.74, abs=0.005)  # Touvron et al.: 6.7 B
    assert rows["mixtral-8x7b"]["experts"] == 8 and rows["gpt3-175b"]["params_b"] == pytest.approx(175, rel=0.01)


def test_list_clusters_counts_nodes_and_gpus_by_type(capsys):
    rows = {r["cluster"]: r for r in _listed(capsys, "clusters")}
    assert set(rows) == {p.stem for p in (instances_dir() / "clusters").glob("*.toml")}
    for name, row in rows.items():
        cluster = load_cluster(name)
        assert row["gpus"] == cluster.gpus == sum(k["nodes"] * k["gpus_per_node"] for k in row["by_type"])
        assert row["nodes"] == len(cluster.islands.nodes) == sum(k["nodes"] for k in row["by_type"])
    assert {k["gpu"] for k in rows["tangram-c3"]["by_type"]} == {"T4", "V100-PCIe-16GB", "V100-SXM2-32GB", "A100-PCIe-80GB"}


@pytest.mark.parametrize(("what", "row"), [
    ("gpus", "H100-SXM5"),
    ("models", "llama-3-70b"),
    ("clusters", "2×8 A10G, 2×8 V100-SXM2-16GB, 4×8 T4"),  # cephalo-b: nodes × GPUs by type
])
def test_list_prints_a_table(capsys, what, row):
    assert main(["list", what]) == 0
    assert row in capsys.readouterr().out


def test_list_of_an_unknown_catalog_is_exit_2(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["list", "switches"])
    assert stop.value.code == 2
    assert "invalid choice: 'switches'" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [[], ["--json"]])  # rich's table and a plain print
def test_a_reader_that_stops_reading_is_no_internal_error(extra):
    # `hetopt list models | head -3`: stdout closed before hetopt writes
    proc = subprocess.Popen([sys.executable, "-m", "hetopt", "list", "models", *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait() == 141 and err == ""
