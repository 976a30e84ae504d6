"""Bring plan documents written before plan format 1 (issue 40) to format 1, without re-planning.

The committed inputs of the export and picture tests keep the plans they were written with (so
the tests do not depend on today's planner numbers); format 1 added keys beside them, which this
script fills from the shipped files, as those plans were priced:

* ``format`` and ``version``;
* ``model_shape``: the shipped model file whose ``name`` is the plan's ``model``;
* ``nodes``: the cluster file the plan names (a shipped one, or ``inputs/<cluster>.toml``);
* ``memory``: the 1 GiB per GPU the planner reserved before the headroom of issue 40;
* each stage's ``capacity_gib``: its GPU type's catalog memory (the capacity before issue 40).

Run ``python tests/golden/export/upgrade_inputs.py FILE...``; a file already at format 1 is left alone.

``--as MODEL FILE OUT`` writes the plan in FILE as a plan of the shipped MODEL instead (its name
and shape; the last stage takes the layers that differ; times and memory stay FILE's): the
torchtitan inputs, since torchtitan's job file names one of the models it ships (issue 40).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

#: What the planner reserved per GPU before issue 40 (``hetopt.planner.builtin.RESERVED_BYTES`` then).
RESERVED_BEFORE_GIB = 1.0


def upgrade(path: Path) -> bool:
    """Add format 1's keys to the plan in ``path``; False when it has them already."""
    from hetopt.catalog import instances_dir
    from hetopt.hardware import load_gpus
    from hetopt.planfile import PLAN_FORMAT, PLAN_VERSION, model_shape
    from hetopt.planner.answer import self_contained
    from hetopt.planner.setup.cluster import load_cluster
    from hetopt.units import GIB
    from hetopt.workload import load_model

    doc = json.loads(path.read_text(encoding="utf-8"))
    if "format" in doc:
        return False
    model = next(cfg for cfg in map(load_model, sorted((instances_dir() / "models").glob("*.toml")))
                 if cfg.name == doc["model"])
    local = path.parent / f"{doc['cluster']}.toml"
    cluster = load_cluster(local if local.exists() else doc["cluster"])
    made = self_contained(cluster, model, RESERVED_BEFORE_GIB * GIB)
    made["memory"]["parts"] = [{"what": "reserved before issue 40", "gib": RESERVED_BEFORE_GIB,
                                "source": "hetopt.planner.builtin.RESERVED_BYTES of the hetopt that wrote the plan"}]
    catalog = load_gpus()
    for stage in doc.get("stages") or []:
        stage["capacity_gib"] = catalog[stage["gpu"]].memory_bytes / GIB
    assert made["model_shape"] == model_shape(model)
    out = {"format": PLAN_FORMAT, "version": PLAN_VERSION, **doc, **made}
    path.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return True


def swap_model(path: Path, model_name: str, out: Path) -> None:
    """Write the plan in ``path`` as a plan of the shipped model ``model_name`` into ``out``."""
    from hetopt.catalog import instances_dir
    from hetopt.planfile import model_shape
    from hetopt.planner.setup.cluster import resolve
    from hetopt.workload import load_model

    doc = json.loads(path.read_text(encoding="utf-8"))
    model = load_model(resolve(model_name, instances_dir() / "models", "model"))
    doc["stages"][-1]["layers"] += model.layers - sum(s["layers"] for s in doc["stages"])
    doc["reason"] = (f"by hand from {path.name}: the model swapped to {model.name} (the last stage takes the layers "
                     "that differ; times and memory are the original plan's)")
    doc |= {"model": model.name, "model_shape": model_shape(model)}
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--as"]:
        swap_model(Path(sys.argv[3]), sys.argv[2], Path(sys.argv[4]))
        sys.exit(0)
    for name in sys.argv[1:]:
        print(name, "upgraded" if upgrade(Path(name)) else "already at format 1")
