"""Reading ``problem = "mixed"`` files into a :class:`MixedInstance`.

Files use GiB and Gb/s; the instance uses bytes and bytes/s (converted here, once). Types
and keys are checked here; shapes and ranges by the instance itself (built inside
``located(source)``, so its messages name the file too).
"""

from __future__ import annotations

from hetopt.mixed.problem import GBPS, GIB, MAX_TYPES, GpuGroup, MixedInstance, TpTables
from hetopt.readers.fields import Fields, located

TOP_KEYS = ("problem", "name", "description", "source", "microbatches", "microbatch_size", "layers", "link_s",
            "cross_bandwidth_gbps", "gradient_gib", "overlap", "buckets", "gpu")
GPU_KEYS = ("name", "count", "unit", "memory_gib", "bandwidth_gbps", "tp", "description")
TP_KEYS = ("degree", "time_s", "static_gib", "activation_gib")


def _rows(f: Fields, name: str, scale: float = 1.0, unit: str = "s") -> tuple[tuple[float, ...], ...]:
    """A list of lists of numbers in ``unit`` (one row per share), each entry times ``scale`` (:meth:`Fields.si`)."""
    value = f.data.get(name)
    if value is None:
        raise f.error(name, "missing (this key is required: one list per share y = 1, 2, ... up to microbatch_size)")
    if not isinstance(value, list) or not all(isinstance(row, list) for row in value):
        raise f.error(name, "must be a list of lists of numbers, one list per share y = 1..microbatch_size")
    rows = Fields({f"{name}[{y}]": row for y, row in enumerate(value)}, f.source, f.path)
    return tuple(rows.si_numbers(f"{name}[{y}]", scale, unit) for y in range(len(value)))


def _buckets(top: Fields) -> tuple:
    """The optional per-layer bucket counts (whole numbers, checked by the instance); () when absent."""
    value = top.data.get("buckets")
    if value is None:
        return ()
    if not isinstance(value, list):
        raise top.error("buckets", f"must be a list of whole numbers, one per layer (got {value!r})")
    return tuple(value)


def read_mixed(data: dict, source: str) -> MixedInstance:
    """Read a mixed file's data (types and keys) and build the instance.

    Every problem is an :class:`~hetopt.errors.InputError` naming the file, the key path and the fix.
    """
    top = Fields(data, source)
    top.reject_unknown(TOP_KEYS)
    gpus = []
    for f in top.tables("gpu", required=True, max_len=MAX_TYPES):
        f.reject_unknown(GPU_KEYS)
        tables = []
        for t in f.tables("tp", required=True):
            t.reject_unknown(TP_KEYS)
            tables.append(TpTables(t.integer("degree"), _rows(t, "time_s"),
                                   t.si_numbers("static_gib", GIB, "GiB"), _rows(t, "activation_gib", GIB, "GiB")))
        gpus.append(GpuGroup(f.string("name"), f.integer("count"), f.si("memory_gib", GIB, "GiB", positive=True),
                             f.si("bandwidth_gbps", GBPS, "Gb/s", positive=True), tuple(tables),
                             f.integer("unit", 1)))
    fields = {
        "name": top.string("name", source),
        "microbatches": top.integer("microbatches"),
        "microbatch_size": top.integer("microbatch_size"),
        "layers": top.integer("layers"),
        "gradient_bytes": top.si_numbers("gradient_gib", GIB, "GiB"),
        "link_s": top.number("link_s", 0.0),
        "cross_bandwidth": top.si("cross_bandwidth_gbps", GBPS, "Gb/s", positive=True),
        "gpus": tuple(gpus),
        "overlap": top.number("overlap", 0.0),
        "buckets": _buckets(top),
    }
    with located(source):
        return MixedInstance(**fields)


def mixed_data(instance: MixedInstance) -> dict:
    """The file data of ``instance`` (GiB, Gb/s): ``read_mixed(mixed_data(x), s)`` rebuilds x
    up to the rounding of the unit conversions."""
    return {
        "problem": "mixed", "name": instance.name, "microbatches": instance.microbatches,
        "microbatch_size": instance.microbatch_size, "layers": instance.layers, "link_s": instance.link_s,
        "cross_bandwidth_gbps": instance.cross_bandwidth / GBPS,
        "gradient_gib": [v / GIB for v in instance.gradient_bytes],
        **({"overlap": instance.overlap} if instance.overlap else {}),
        **({"buckets": list(instance.buckets)} if instance.buckets else {}),
        "gpu": [{"name": g.name, "count": g.count, **({"unit": g.unit} if g.unit != 1 else {}),
                 "memory_gib": g.memory_bytes / GIB,
                 "bandwidth_gbps": g.bandwidth / GBPS,
                 "tp": [{"degree": t.degree, "time_s": [list(r) for r in t.time_s],
                         "static_gib": [v / GIB for v in t.static_bytes],
                         "activation_gib": [[v / GIB for v in r] for r in t.activation_bytes]} for t in g.tp]}
                for g in instance.gpus],
    }
