"""Reading ``problem = "pipeline"`` files into a :class:`PipelineInstance`.

Files use GiB and seconds; the instance uses bytes and seconds (converted here, once).
Islands are referred to by name in ``[[option]]`` and ``[[link]]``; every reference is
checked here. The ranges and each option's consistency (stage layers sum to the option's
layers, GPUs within the island's count, times and memory in range) are checked by
:class:`PipelineInstance` itself, built inside ``located(source)`` so its messages name
the file: one rule in one place for files and the API.
"""

from __future__ import annotations

from hetopt.pipeline.problem import (  # noqa: F401  (the limits are re-exported for callers of this module)
    GIB,
    MAX_GPUS,
    MAX_ISLANDS,
    MAX_LAYERS,
    MAX_MICROBATCHES,
    MAX_OPTIONS,
    MAX_STAGES,
    ROLES,  # noqa: F401
    PipelineIsland,
    PipelineInstance,
    PipelineOption,
    StagePlan,
    time_problem,
)
from hetopt.readers.fields import Fields, located

TOP_KEYS = (
    "problem", "name", "description", "source", "layers", "microbatches", "memory_fraction", "default_link_s",
    "island", "link", "option", "generator",
)
ISLAND_KEYS = ("name", "gpus", "memory_gib", "gpu", "nodes", "gpus_per_node", "description")
LINK_KEYS = ("a", "b", "time_s", "note")
OPTION_KEYS = ("island", "layers", "role", "stage", "layout", "note")
STAGE_KEYS = ("layers", "forward_s", "backward_s", "static_gib", "activation_gib", "gpus", "layout")


def _islands(top: Fields) -> tuple[tuple[PipelineIsland, ...], dict[str, int]]:
    islands, index = [], {}
    for f in top.tables("island", required=True, max_len=MAX_ISLANDS):
        f.reject_unknown(ISLAND_KEYS)
        name = f.string("name")
        if name in index:  # names resolve the references below, so this is checked before the instance
            raise f.error("name", f"island {name!r} is defined twice (island[{index[name]}] has the same name)")
        index[name] = len(islands)
        islands.append(PipelineIsland(name, f.integer("gpus"), f.si("memory_gib", GIB, "GiB")))
    return tuple(islands), index


def _island_ref(f: Fields, key: str, index: dict[str, int]) -> int:
    name = f.string(key)
    if name not in index:
        raise f.error(key, f"unknown island {name!r} (islands: {', '.join(index)})")
    return index[name]


def _links(top: Fields, islands: tuple[PipelineIsland, ...], index: dict[str, int]) -> tuple[tuple[float, ...], ...]:
    default = _time(top, "default_link_s", 0.0)
    n = len(islands)
    link = [[0.0 if a == b else default for b in range(n)] for a in range(n)]
    given: dict[tuple[int, int], str] = {}
    for f in top.tables("link"):
        f.reject_unknown(LINK_KEYS)
        a, b = _island_ref(f, "a", index), _island_ref(f, "b", index)
        if a == b:
            raise f.error("b", f"a link joins two different islands (both are {islands[a].name!r})")
        pair = (min(a, b), max(a, b))
        if pair in given:
            raise f.error(None, f"the link {islands[a].name}-{islands[b].name} is given twice (also at {given[pair]})")
        given[pair] = f.path
        link[a][b] = link[b][a] = _time(f, "time_s")
    return tuple(tuple(row) for row in link)


def _time(f: Fields, key: str, default=None) -> float:
    """A link time, under its own key path (the instance sees only the matrix)."""
    value = f.number(key) if default is None else f.number(key, default)
    problem = time_problem(value)
    if problem is not None:
        raise f.error(key, problem)
    return value


def _option(f: Fields, index: dict[str, int]) -> PipelineOption:
    f.reject_unknown(OPTION_KEYS)
    island = _island_ref(f, "island", index)
    layers = f.integer("layers")
    role = f.string("role", "any")
    stages = []
    for s in f.tables("stage", required=True, max_len=MAX_STAGES):
        s.reject_unknown(STAGE_KEYS)
        stages.append(
            StagePlan(
                layers=s.integer("layers"),
                forward_s=s.number("forward_s"),
                backward_s=s.number("backward_s"),
                static_bytes=s.si("static_gib", GIB, "GiB"),
                activation_bytes=s.si("activation_gib", GIB, "GiB"),
                gpus=s.integer("gpus", 1),
            )
        )
    return PipelineOption(island, layers, tuple(stages), role)


def read_pipeline(data: dict, source: str) -> PipelineInstance:
    """Validate a pipeline file's data and build the instance.

    Every problem is an :class:`~hetopt.errors.InputError` naming the file, the key path and the fix.
    """
    top = Fields(data, source)
    top.reject_unknown(TOP_KEYS)
    layers = top.integer("layers")
    microbatches = top.integer("microbatches")
    phi = top.number("memory_fraction", 1.0)
    islands, index = _islands(top)
    link = _links(top, islands, index)
    options = []
    for f in top.tables("option", required=True, max_len=MAX_OPTIONS):
        options.append(_option(f, index))
    name = top.string("name", source)
    with located(source):  # the instance checks the ranges; its errors get the file name
        return PipelineInstance(
            name=name,
            layers=layers,
            microbatches=microbatches,
            islands=islands,
            options=tuple(options),
            link_s=link,
            memory_fraction=phi,
            description=str(data.get("description", "")),
        )
