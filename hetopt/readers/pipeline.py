"""Reading ``problem = "pipeline"`` files into a :class:`PipelineInstance`.

Files use GiB and seconds; the instance uses bytes and seconds (converted here, once).
Islands are referred to by name in ``[[option]]`` and ``[[link]]``; every reference is
checked, and so is each option's consistency (stage layers sum to the option's layers,
GPUs within the island's count, times and memory not negative).
"""

from __future__ import annotations

from hetopt.pipeline.problem import GIB, ROLES, Island, PipelineInstance, PipelineOption, StagePlan
from hetopt.readers.fields import Fields

#: Most layers accepted: GPT-3 175B has 96, the deepest published LLMs a few hundred.
MAX_LAYERS = 4_096
#: Most micro-batches per iteration (a 10^6 would be an input error, and the simulator is O(S·M)).
MAX_MICROBATCHES = 65_536
#: Most islands: the DP is exponential in the number of distinct islands.
MAX_ISLANDS = 64
#: Most options in one file.
MAX_OPTIONS = 200_000
#: Most stages in one option.
MAX_STAGES = 1_024
#: Most GPUs per island.
MAX_GPUS = 100_000

TOP_KEYS = (
    "problem", "name", "description", "source", "layers", "microbatches", "memory_fraction", "default_link_s",
    "island", "link", "option", "generator",
)
ISLAND_KEYS = ("name", "gpus", "memory_gib", "gpu", "nodes", "gpus_per_node", "description")
LINK_KEYS = ("a", "b", "time_s", "note")
OPTION_KEYS = ("island", "layers", "role", "stage", "layout", "note")
STAGE_KEYS = ("layers", "forward_s", "backward_s", "static_gib", "activation_gib", "gpus", "layout")


def _islands(top: Fields) -> tuple[tuple[Island, ...], dict[str, int]]:
    islands, index = [], {}
    for f in top.tables("island", required=True, max_len=MAX_ISLANDS):
        f.reject_unknown(ISLAND_KEYS)
        name = f.string("name")
        if name in index:
            raise f.error("name", f"island {name!r} is defined twice (island[{index[name]}] has the same name)")
        index[name] = len(islands)
        islands.append(Island(name, f.integer("gpus", minimum=1, maximum=MAX_GPUS), f.number("memory_gib", positive=True) * GIB))
    return tuple(islands), index


def _island_ref(f: Fields, key: str, index: dict[str, int]) -> int:
    name = f.string(key)
    if name not in index:
        raise f.error(key, f"unknown island {name!r} (islands: {', '.join(index)})")
    return index[name]


def _links(top: Fields, islands: tuple[Island, ...], index: dict[str, int]) -> tuple[tuple[float, ...], ...]:
    default = top.number("default_link_s", 0.0, minimum=0.0)
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
        link[a][b] = link[b][a] = f.number("time_s", minimum=0.0)
    return tuple(tuple(row) for row in link)


def _option(f: Fields, islands: tuple[Island, ...], index: dict[str, int], model_layers: int) -> PipelineOption:
    f.reject_unknown(OPTION_KEYS)
    island = _island_ref(f, "island", index)
    layers = f.integer("layers", minimum=1, maximum=MAX_LAYERS)
    if layers > model_layers:
        raise f.error("layers", f"{layers} is more than the model's {model_layers} layers")
    role = f.string("role", "any", choices=ROLES)
    stages = []
    for s in f.tables("stage", required=True, max_len=MAX_STAGES):
        s.reject_unknown(STAGE_KEYS)
        stages.append(
            StagePlan(
                layers=s.integer("layers", minimum=1, maximum=MAX_LAYERS),
                forward_s=s.number("forward_s", minimum=0.0),
                backward_s=s.number("backward_s", minimum=0.0),
                static_bytes=s.number("static_gib", minimum=0.0) * GIB,
                activation_bytes=s.number("activation_gib", minimum=0.0) * GIB,
                gpus=s.integer("gpus", 1, minimum=1, maximum=MAX_GPUS),
            )
        )
    total = sum(st.layers for st in stages)
    if total != layers:
        raise f.error("stage", f"the stages' layers add up to {total}, the option's layers = {layers}; make them equal")
    gpus = sum(st.gpus for st in stages)
    if gpus > islands[island].gpus:
        raise f.error(
            "stage",
            f"the stages use {gpus} GPUs, island {islands[island].name!r} has {islands[island].gpus} "
            "(an option's stages use disjoint GPUs of its island)",
        )
    return PipelineOption(island, layers, tuple(stages), role)


def read_pipeline(data: dict, source: str) -> PipelineInstance:
    """Validate a pipeline file's data and build the instance.

    Raises
    ------
    InputError
        With the file, the key path and the fix.
    """
    top = Fields(data, source)
    top.reject_unknown(TOP_KEYS)
    layers = top.integer("layers", minimum=1, maximum=MAX_LAYERS)
    microbatches = top.integer("microbatches", minimum=1, maximum=MAX_MICROBATCHES)
    phi = top.number("memory_fraction", 1.0, positive=True, maximum=1.0)
    islands, index = _islands(top)
    link = _links(top, islands, index)
    options = []
    for f in top.tables("option", required=True, max_len=MAX_OPTIONS):
        options.append(_option(f, islands, index, layers))
    return PipelineInstance(
        name=top.string("name", source),
        layers=layers,
        microbatches=microbatches,
        islands=islands,
        options=tuple(options),
        link_s=link,
        memory_fraction=phi,
        description=str(data.get("description", "")),
    )
