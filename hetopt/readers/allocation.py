"""Reading ``problem = "allocation"`` files into an :class:`AllocationInstance`.

Files use GiB and seconds; the instance uses bytes and seconds (converted here, once).
"""

from __future__ import annotations

from hetopt.allocation.problem import GIB, AllocationInstance, GpuGroup, Latency, floor_ratio
from hetopt.readers.fields import Fields

#: Largest global batch accepted: the DPs are O(B^2) per step, and no planner in the
#: papers goes past a few thousand samples per iteration.
MAX_GLOBAL_BATCH = 65_536
#: Largest GPU count per group (a 100,000-GPU cluster is outside what this family plans).
MAX_GPUS = 100_000
#: Longest latency table accepted.
MAX_TABLE = 4_096

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
    table = f.numbers(f"{which}_s", (), positive=True, max_len=MAX_TABLE)
    slope = f.number(f"{which}_slope_s", None)
    intercept = f.number(f"{which}_intercept_s", None)
    if (slope is None) != (intercept is None):
        missing = f"{which}_intercept_s" if intercept is None else f"{which}_slope_s"
        raise f.error(missing, f"missing: give both {which}_slope_s and {which}_intercept_s, or neither")
    if slope is None and len(table) < 2:
        raise f.error(
            f"{which}_s",
            f"has {len(table)} point(s) and no line: give at least two points, or {which}_slope_s and {which}_intercept_s",
        )
    curve = Latency(table, slope, intercept)
    s, c = curve.line()
    if s < 0:
        raise f.error(f"{which}_slope_s" if slope is not None else f"{which}_s", f"latency must not fall as the micro-batch grows beyond the table (slope {s})")
    beyond = len(table) + 1
    if s * beyond + c <= 0:
        raise f.error(f"{which}_intercept_s" if slope is not None else f"{which}_s", f"the line gives a latency <= 0 at micro-batch {beyond}")
    return curve


def read_allocation(data: dict, source: str) -> AllocationInstance:
    """Validate an allocation file's data and build the instance.

    Raises
    ------
    InputError
        With the file, the key path and the fix.
    """
    top = Fields(data, source)
    top.reject_unknown(TOP_KEYS)
    global_batch = top.integer("global_batch", minimum=1, maximum=MAX_GLOBAL_BATCH)
    phi = top.number("memory_fraction", 0.8, positive=True, maximum=1.0)
    activation = top.number("activation_gib_per_sample", positive=True) * GIB
    state = top.number("state_gib", minimum=0.0) * GIB
    groups = []
    for f in top.tables("gpu", required=True, max_len=MAX_GPUS):
        f.reject_unknown(GPU_KEYS)
        memory = f.number("memory_gib", positive=True) * GIB
        base = f.number("memory_base_gib", 0.0, minimum=0.0) * GIB
        override = f.integer("max_microbatch", None, minimum=1)
        if override is not None:
            derived = floor_ratio(phi * memory - base, activation)
            if override > derived:
                raise f.error(
                    "max_microbatch",
                    f"{override} exceeds the {derived} that memory_base_gib + m x activation_gib_per_sample "
                    f"<= memory_fraction x memory_gib allows; lower it or the memory figures",
                )
        groups.append(
            GpuGroup(
                type=f.string("type"),
                count=f.integer("count", 1, minimum=1, maximum=MAX_GPUS),
                memory_bytes=memory,
                memory_base_bytes=base,
                forward=_latency(f, "forward"),
                backward=_latency(f, "backward"),
                max_microbatch=override,
                even_shard_max_microbatch=f.integer("even_shard_max_microbatch", None, minimum=0),
            )
        )
    if sum(g.count for g in groups) > MAX_GPUS:
        raise top.error("gpu", f"{sum(g.count for g in groups)} GPUs in all, more than the limit of {MAX_GPUS}")
    return AllocationInstance(
        name=top.string("name", source),
        global_batch=global_batch,
        groups=tuple(groups),
        activation_bytes_per_sample=activation,
        state_bytes=state,
        memory_fraction=phi,
        accumulation_overhead_s=top.number("accumulation_overhead_s", 0.0, minimum=0.0),
        allgather_s=top.number("allgather_s", 0.0, minimum=0.0),
        reducescatter_s=top.number("reducescatter_s", 0.0, minimum=0.0),
        uneven_shard_overhead=top.number("uneven_shard_overhead", 0.25, minimum=0.0),
        max_microbatch=top.integer("max_microbatch", None, minimum=1),
        layers=top.integer("layers", None, minimum=1, maximum=100_000),
    )
