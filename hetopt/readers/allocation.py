"""Reading ``problem = "allocation"`` files into an :class:`AllocationInstance`.

Files use GiB and seconds; the instance uses bytes and seconds (converted here, once).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from hetopt.allocation.limits import LOG, MAX_GPUS, MAX_TABLE
from hetopt.allocation.problem import GIB, AllocationInstance, GpuGroup, Latency
from hetopt.readers.fields import Fields, located

TOP_KEYS = (
    "problem", "name", "description", "source", "global_batch", "memory_fraction",
    "activation_gib_per_sample", "state_gib", "accumulation_overhead_s", "allgather_s",
    "reducescatter_s", "uneven_shard_overhead", "max_microbatch", "layers", "gpu",
)
GPU_KEYS = (
    "type", "count", "memory_gib", "memory_base_gib", "forward_s", "backward_s",
    "forward_slope_s", "forward_intercept_s", "backward_slope_s", "backward_intercept_s",
    "max_microbatch", "even_shard_max_microbatch", "source",
)


def _latency(f: Fields, which: str) -> Latency:
    # ranges, the line's presence and its sign are the constructor's (limits.validate_instance)
    table = f.numbers(f"{which}_s", (), max_len=MAX_TABLE)
    return Latency(table, f.number(f"{which}_slope_s", None), f.number(f"{which}_intercept_s", None))


class _NameTheFile(logging.Filter):
    """Prefix the constructor's warnings with the file name, as ``located`` does for errors."""

    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = f"{self.source}: {record.msg}"
        return True


@contextlib.contextmanager
def _warnings_named(source: str) -> Iterator[None]:
    name = _NameTheFile(source)
    LOG.addFilter(name)
    try:
        yield
    finally:
        LOG.removeFilter(name)


def read_allocation(data: dict, source: str) -> AllocationInstance:
    """Read an allocation file's data (types, keys) and build the instance, which checks the ranges.

    Every problem is an :class:`~hetopt.errors.InputError` naming the file, the key path and the fix.
    """
    top = Fields(data, source)
    top.reject_unknown(TOP_KEYS)
    global_batch = top.integer("global_batch")
    phi = top.number("memory_fraction", 0.8)
    activation = top.si("activation_gib_per_sample", GIB, "GiB")
    state = top.si("state_gib", GIB, "GiB")
    groups = []
    for f in top.tables("gpu", required=True, max_len=MAX_GPUS):
        f.reject_unknown(GPU_KEYS)
        groups.append(
            GpuGroup(
                type=f.string("type"),
                count=f.integer("count", 1),
                memory_bytes=f.si("memory_gib", GIB, "GiB"),
                memory_base_bytes=f.si("memory_base_gib", GIB, "GiB", 0.0),
                forward=_latency(f, "forward"),
                backward=_latency(f, "backward"),
                max_microbatch=f.integer("max_microbatch", None),
                even_shard_max_microbatch=f.integer("even_shard_max_microbatch", None),
            )
        )
    fields = {
        "name": top.string("name", source),
        "global_batch": global_batch,
        "groups": tuple(groups),
        "activation_bytes_per_sample": activation,
        "state_bytes": state,
        "memory_fraction": phi,
        "accumulation_overhead_s": top.number("accumulation_overhead_s", 0.0),
        "allgather_s": top.number("allgather_s", 0.0),
        "reducescatter_s": top.number("reducescatter_s", 0.0),
        "uneven_shard_overhead": top.number("uneven_shard_overhead", 0.25),
        "max_microbatch": top.integer("max_microbatch", None),
        "layers": top.integer("layers", None),
    }
    with located(source), _warnings_named(source):
        return AllocationInstance(**fields)
