"""A wheel ships the library and the reference data (instances/ as ``hetopt._instances``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Suffixes of the data files under instances/ that must ship (TOML, JSON, Markdown, licences).
DATA_NAMES = ("*.toml", "*.json", "*.md", "LICENSE")


def _source_copy(dest: Path) -> Path:
    """The files a build reads, copied so the build leaves no build/ or egg-info in the checkout."""
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for folder in ("hetopt", "instances"):
        shutil.copytree(ROOT / folder, dest / folder, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = _source_copy(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        check=True, capture_output=True,
    )
    (path,) = out.glob("hetopt-*.whl")
    return path


def test_the_wheel_lists_the_catalogs_and_every_module(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    data = "hetopt/_instances/"
    for required in ("gpus.toml", "clusters/tangram-c3.toml", "models/gpt3-13b.toml",
                     "profiles/cephalo/model_latencies.json", "profiles/cephalo/model_memory.json",
                     "profiles/cephalo/LICENSE", "published/megatron-sc21.toml",
                     "allocation/tiny-2gpu.toml", "pipeline/tiny.toml", "islands/tiny.toml",
                     "suites/allocation.toml"):
        assert data + required in names, required
    # every data file of instances/ and every module of hetopt/ (the package list in
    # pyproject.toml is explicit: a new sub-package must be added there)
    shipped = {data + p.relative_to(ROOT / "instances").as_posix()
               for pattern in DATA_NAMES for p in (ROOT / "instances").rglob(pattern)}
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "hetopt").rglob("*.py")}
    assert shipped - names == set()
    assert modules - names == set()
    assert "hetopt/py.typed" in names


def test_an_installed_wheel_plans_a_shipped_cluster_by_name(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}  # the wheel's copy before the editable one
    where = subprocess.run([sys.executable, "-c", "from hetopt.catalog import instances_dir; print(instances_dir())"],
                           cwd=elsewhere, env=env, check=True, capture_output=True, text=True).stdout.strip()
    assert Path(where) == (target / "hetopt" / "_instances").resolve()
    run = subprocess.run([sys.executable, "-m", "hetopt", "plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b",
                          "--global-batch", "8", "--no-alternatives", "--json"],
                         cwd=elsewhere, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    # by simulated 1F1B time a plan is FEASIBLE unless a bound closes (README, the planner)
    assert doc["cluster"] == "tangram-c2" and doc["status"] in ("OPTIMAL", "FEASIBLE") and doc["iteration_time_s"] > 0


@pytest.mark.slow
def test_a_fresh_venv_with_the_wheel_runs_the_readme_plan(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(wheel)], check=True, capture_output=True)
    run = subprocess.run([str(env_dir / "bin" / "hetopt"), "plan", "--cluster", "tangram-c3", "--model", "gpt3-13b",
                          "--global-batch", "128", "--json"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["cluster"] == "tangram-c3"


def test_a_checkout_that_was_never_installed_finds_its_own_data(monkeypatch):
    """Without the ``hetopt._instances`` package (``python -m hetopt ...`` from a bare checkout)
    the data is the checkout's ``instances/`` folder, not a traceback."""
    from hetopt.catalog import instances_dir

    monkeypatch.setitem(sys.modules, "hetopt._instances", None)  # the import now fails
    assert instances_dir() == Path(__file__).resolve().parent.parent / "instances"
