"""docs/formats.md: every TOML example loads, and every key a reader accepts is documented."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

import hetopt
from hetopt.hardware import load_gpus
from hetopt.planner.cluster import load_cluster
from hetopt.workload import load_model

DOC = Path(__file__).resolve().parents[1] / "docs" / "formats.md"
TEXT = DOC.read_text(encoding="utf-8")
BLOCKS = re.findall(r"```toml\n(.*?)```", TEXT, flags=re.S)


def _kind(data: dict) -> str:
    """Which reader a block is for: an instance, a cluster, the GPU catalog or a model."""
    if "problem" in data:
        return "instance"
    if "gpu" in data and isinstance(data["gpu"], dict):
        return "catalog"
    if "architecture" in data:
        return "model"
    if "node" in data:
        return "cluster"
    if "measurement" in data:
        return "published"
    if data.get("format") == "hetopt-profile":
        return "profile"
    raise AssertionError(f"docs/formats.md: a toml block of no known kind: {sorted(data)}")


def test_the_page_has_an_example_of_every_kind():
    kinds = [_kind(tomllib.loads(b)) for b in BLOCKS]
    problems = {tomllib.loads(b)["problem"] for b in BLOCKS if "problem" in tomllib.loads(b)}
    assert {"instance", "cluster", "catalog", "model", "published"} <= set(kinds)
    assert problems == {"allocation", "pipeline", "islands", "replicas"}


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_every_example_loads(index, tmp_path):
    block = BLOCKS[index]
    kind = _kind(tomllib.loads(block))
    path = tmp_path / f"example-{index}.toml"
    path.write_text(block, encoding="utf-8")
    if kind == "instance":
        instance = hetopt.load(path)
        assert instance.problem == tomllib.loads(block)["problem"]
        assert hetopt.solve(instance).status.name in ("OPTIMAL", "FEASIBLE")  # a working example
    elif kind == "cluster":
        assert load_cluster(path).gpus > 0
    elif kind == "catalog":
        assert set(load_gpus(path)) == set(tomllib.loads(block)["gpu"])
    elif kind == "published" and any("stage" in m for m in tomllib.loads(block)["measurement"]):
        from hetopt.planner.published import load_heterogeneous
        from hetopt.profile.hetero import price_hetero

        (row,) = load_heterogeneous(path)
        assert price_hetero(row).iteration_time_s > 0
    elif kind == "published":
        from hetopt.planner.validate import load_published, validate

        (row,) = validate(load_published(path))
        assert row.ratio is not None and row.ratio > 0
    elif kind == "profile":
        from hetopt.profile import read_profile

        assert read_profile(path).rows > 0
    else:
        assert load_model(path).layers > 0


def _documented(key: str) -> bool:
    # as `key`, `table.key`, `[key]` or `[[table.key]]`
    return re.search(rf"`\[{{0,2}}(?:[\w.]+\.)?{re.escape(key)}\]{{0,2}}`", TEXT) is not None


@pytest.mark.parametrize("module, names", [
    ("hetopt.readers.allocation", ("TOP_KEYS", "GPU_KEYS")),
    ("hetopt.readers.pipeline", ("TOP_KEYS", "ISLAND_KEYS", "LINK_KEYS", "OPTION_KEYS", "STAGE_KEYS")),
    ("hetopt.readers.islands", ("TOP_KEYS", "TOLERANCE_KEYS", "NODE_KEYS", "NETWORK_KEYS", "LINK_KEYS",
                                "GROUP_KEYS", "SWITCH_KEYS", "MACHINE_KEYS")),
    ("hetopt.readers.replicas", ("TOP_KEYS", "SHAPE_KEYS", "CANDIDATE_KEYS")),
    ("hetopt.hardware", ("GPU_KEYS",)),
])
def test_every_accepted_key_is_documented(module, names):
    import importlib

    mod = importlib.import_module(module)
    keys = {k for name in names for k in getattr(mod, name)}
    assert sorted(k for k in keys if not _documented(k)) == []
