"""Reading ``problem = "replicas"`` files into a :class:`ReplicasInstance`.

Files use GiB and Gb/s; the instance uses bytes and bytes/s (converted here, once). A
candidate names the shapes it uses (``uses = { H100x64 = 1 }``); every name is checked
here, the ranges by the instance itself (built inside ``located(source)``).
"""

from __future__ import annotations

from hetopt.readers.fields import Fields, located
from hetopt.replicas.problem import (
    GBPS,
    MAX_CANDIDATES,
    MAX_SHAPES,
    Candidate,
    IslandShape,
    ReplicasInstance,
)
from hetopt.units import GIB

TOP_KEYS = ("problem", "name", "description", "source", "microbatches", "hop_latency_s", "shape", "candidate",
            "generator")
SHAPE_KEYS = ("name", "count", "gpu", "gpus", "description", "members")
CANDIDATE_KEYS = ("name", "uses", "fill_s", "per_microbatch_s", "gradient_gib", "bandwidth_gbps", "stages", "note")


def read_replicas(data: dict, source: str) -> ReplicasInstance:
    """Read a replicas file's data (types, keys, shape names) and build the instance.

    Every problem is an :class:`~hetopt.errors.InputError` naming the file, the key path and the fix.
    """
    top = Fields(data, source)
    top.reject_unknown(TOP_KEYS)
    shapes = []
    index: dict[str, int] = {}
    for f in top.tables("shape", required=True, max_len=MAX_SHAPES):
        f.reject_unknown(SHAPE_KEYS)
        name = f.string("name")
        if name in index:  # names resolve the candidates' uses, so this is checked here
            raise f.error("name", f"shape {name!r} is defined twice (shape[{index[name]}] has the same name)")
        index[name] = len(shapes)
        shapes.append(IslandShape(name, f.integer("count"), f.string("gpu", ""), f.integer("gpus", 1)))
    candidates = []
    for f in top.tables("candidate", required=True, max_len=MAX_CANDIDATES):
        f.reject_unknown(CANDIDATE_KEYS)
        uses_table = f.table("uses", required=True)
        uses = [0] * len(shapes)
        for shape_name in uses_table.data:
            if shape_name not in index:
                raise uses_table.error(shape_name, f"unknown shape {shape_name!r} (shapes: {', '.join(index)})")
            uses[index[shape_name]] = uses_table.integer(shape_name)
        candidates.append(Candidate(
            name=f.string("name"),
            uses=tuple(uses),
            fill_s=f.number("fill_s"),
            per_microbatch_s=f.number("per_microbatch_s"),
            gradient_bytes=f.si("gradient_gib", GIB, "GiB"),
            bandwidth=f.si("bandwidth_gbps", GBPS, "Gb/s", positive=True),
            stages=f.string("stages", ""),
        ))
    fields = {
        "name": top.string("name", source),
        "microbatches": top.integer("microbatches"),
        "shapes": tuple(shapes),
        "candidates": tuple(candidates),
    }
    if "hop_latency_s" in top.data:
        fields["hop_latency_s"] = top.number("hop_latency_s")
    with located(source):
        return ReplicasInstance(**fields)
