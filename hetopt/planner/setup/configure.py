"""The planner's configure step: which islands are composed, and how the search runs on them.

From the islands the islands family formed: the islands composed (every one, or the
``max_islands`` fastest when asked), the parallelizer held to the runtime and to the islands' precision, the
micro-batch sizes to try, the model's atoms, and what narrows the search short of the whole
space (which keeps the plan from OPTIMAL). A given layout is priced here too, on the islands
composed, by the same cost model as the plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from hetopt import costmodel as cm
from hetopt.errors import InputError
from hetopt.units import GIB
from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
from hetopt.planner.setup.cluster import Cluster
from hetopt.planner.search.compose import island_specs, link_matrix, microbatch_candidates
from hetopt.planner.setup.layout import (GivenLayout, IslandBlock, PricedLayout, PricedPipeline, given_runtime, price_island_layouts,
                                   price_layout, with_precision)
from hetopt.planner.search.outcome import ChosenIslands
from hetopt.planner.search.sizes import cuts_by_best
from hetopt.planner.parallelizer.protocol import Parallelizer, Slice
from hetopt.planner.setup.request import MAX_COMPOSE_ISLANDS, PlanRequest
from hetopt.planner.alternatives.mixedplan import MixedLayout, PricedMixed, price_mixed_layout
from hetopt.result import Result
from hetopt.runtimes import RUNTIMES, Runtime
from hetopt.workload import ModelConfig

#: On a large cluster, when no parallelizer is given, the built-in one cuts the model into
#: at most this many atoms: the slices, and so the queries, shrink with the atoms squared.
#: GPT-3 175B's 96 layers become 24 atoms of 4.
LARGE_CLUSTER_ATOMS = 24
#: Micro-batch sizes tried on that default path (powers of two up to 16 samples): there the
#: plan is FEASIBLE by construction, and the first answer comes in about 20 s on the
#: datacenter (the whole space takes minutes: docs/planner.md). Everywhere else every divisor
#: of the global batch is a candidate.
LARGE_CLUSTER_MICROBATCHES = (1, 2, 4, 8, 16)

@dataclass(frozen=True)
class Setup:
    """What the configure step decided: the islands composed and how the search runs on them."""

    chosen: ChosenIslands
    parallelizer: Parallelizer
    candidates: list[int]  # micro-batch sizes to compose
    atoms: list[Slice]
    narrowed: list[str]  # how the search is narrowed short of the whole space (keeps it from OPTIMAL)
    layout: GivenLayout | tuple[IslandBlock, ...] | None  # the given layout in the plan's precision
    precision: str
    unfused_attention: list[str]
    runtime: str | None


def configure(r: PlanRequest, parallelizer: Parallelizer | None, layout: GivenLayout | tuple[IslandBlock, ...] | None,
               cluster: Cluster, cfg: ModelConfig, islands: Result) -> Setup:
    """The islands to compose, the parallelizer held to the runtime and precision, the sizes and atoms."""
    par = parallelizer or BuiltinParallelizer()
    if r.runtime is not None and not isinstance(par, BuiltinParallelizer):
        raise InputError("runtime: holds the built-in parallelizer's search; a parallelizer of your own "
                         "decides what it searches", field="runtime")
    if r.runtime is not None:
        par = r.runtime.parallelizer(par)
    elif layout is not None and isinstance(par, BuiltinParallelizer):
        # the layout's runtime keys describe the user's runtime: plan for the same one, so the
        # plan can run there and its speed-up over the layout compares like with like
        par = given_runtime(layout, par)
    # a gap limit asks for a gap proven over the whole cluster, which a narrowed search (whose
    # only whole-cluster bound is the ideal) cannot keep: where the limit takes effect it lifts
    # the default narrowing (docs/planner.md, "What the status means")
    within_gap = r.gap_limit > 0.0 and cuts_by_best(r.time_model, r.target)
    large = (r.max_islands is None and r.narrow_above is not None and not within_gap
             and len(islands.solution.islands) > r.narrow_above)
    # the built-in parallelizer, or plan()'s copy of it with only the memory headroom set
    builtin = parallelizer is None or (r.memory_headroom is not None and r.layers_per_atom is None)
    coarsened, auto_atoms = "", large and builtin and cfg.layers > LARGE_CLUSTER_ATOMS
    if auto_atoms:
        par = replace(par, layers_per_atom=math.ceil(cfg.layers / LARGE_CLUSTER_ATOMS))
        coarsened = f", atoms of {par.layers_per_atom} layers"
    candidates = microbatch_candidates(r.global_batch, r.microbatch_size)
    if large and r.microbatch_size is None:
        # every divisor of B at one-layer atoms on islands of hundreds of GPUs takes the plan from
        # under a minute to minutes (narrow_above=None), so a large cluster keeps the sizes of
        # LARGE_CLUSTER_MICROBATCHES (the plan says so and stays FEASIBLE; narrow_above=None lifts it)
        candidates = [m for m in candidates if m in LARGE_CLUSTER_MICROBATCHES] or candidates[:1]
        coarsened += f", micro-batch sizes {', '.join(map(str, candidates))}"
    chosen = choose_islands(cluster, islands, r.max_islands)
    large_note = ([f"narrowed for a cluster of more than {r.narrow_above} islands: {coarsened.removeprefix(', ')}"]
                  if large and coarsened else [])
    if r.target is not None:
        runtime = RUNTIMES[r.target]
        chosen = target_islands(chosen, runtime)
        if runtime.pipeline and isinstance(par, BuiltinParallelizer):
            # each query keeps the Pareto set of every job-wide group of the runtime beside the
            # overall one (builtin._target_groups), so the launchable search loses nothing
            par = replace(par, target=runtime.name)
        if runtime.overlap is False and isinstance(par, BuiltinParallelizer):
            par = par.run_as(replace(par.running, overlap=False))  # priced as the runtime runs it (hetopt.runtimes)
    par, layout, precision, unfused = hold_precision(r, par, layout, chosen)
    atoms = par.slice_model(cfg, seq=r.seq or cfg.sequence)
    # stage boundaries fall only between atoms: coarser atoms narrow the search as leaving
    # islands out does (the large-cluster default already says so in its note)
    narrowed = [] if len(atoms) >= cfg.layers or auto_atoms else [
        f"atoms of {atoms[0].layers} layers (stage boundaries only every {atoms[0].layers} layers)"]
    narrowed += large_note  # a large cluster's islands are all composed (max_islands unset), so its note is the one
    return Setup(chosen, par, candidates, atoms, narrowed, layout, precision, unfused,
                  None if r.runtime is None else r.runtime.text())


def hold_precision(r: PlanRequest, par: Parallelizer, layout: GivenLayout | tuple[IslandBlock, ...] | None,
                    chosen: ChosenIslands) -> tuple[Parallelizer, GivenLayout | tuple[IslandBlock, ...] | None, str, list[str]]:
    """One job, one precision: the hardware's of the islands composed (bf16 unless one of them has
    no BF16), unless the runtime or the layout names one, which those GPUs must have.

    Returns the parallelizer and the layout held to it, the precision and the GPUs that run
    attention unfused although the runtime asks for FlashAttention.
    """
    gpu_types = [spec.gpu for spec in chosen.specs]
    precision = cm.hardware_precision(gpu_types)
    if layout is not None:
        layout = with_precision(layout, precision)
        for given_layout in tuple(b.layout for b in layout) if isinstance(layout, tuple) else (layout,):
            if (problem := given_layout.running.problem(gpu_types)) is not None:
                raise InputError(f"layout {problem}", field="layout")
    if not isinstance(par, BuiltinParallelizer):
        return par, layout, precision, []
    par = par.for_gpus(gpu_types)
    if (problem := par.running.problem(gpu_types)) is not None:
        field = "runtime" if r.runtime is not None else "parallelizer"
        raise InputError(f"{field} {problem}", field=field)
    unfused = sorted({spec.gpu.name for spec in chosen.specs if par.running.flash and not par.running_on(spec).flash})
    return par, layout, par.running.precision, unfused  # the runtime's precision, or the hardware's (for_gpus)


def target_islands(chosen: ChosenIslands, runtime: Runtime) -> ChosenIslands:
    """The islands a runtime that trains in bf16 only can use: those whose GPUs have BF16 (the
    others in ``excluded``); all of them when none has, so the search proves that none fits."""
    if runtime.precision != cm.DEFAULT_PRECISION:
        return chosen
    keep = [i for i, spec in enumerate(chosen.specs) if spec.gpu.bf16]
    if not keep or len(keep) == len(chosen.specs):
        return chosen
    return ChosenIslands([chosen.specs[i] for i in keep], [chosen.members[i] for i in keep],
                         [chosen.names[i] for i in keep], chosen.left_out, chosen.note,
                         tuple(s.name for i, s in enumerate(chosen.specs) if i not in keep))


def choose_islands(cluster: Cluster, found: Result, max_islands: int | None) -> ChosenIslands:
    """Every island, or the ``max_islands`` with the most sustained FLOP/s (a heuristic the user asks for)."""
    index = cluster.islands.index
    names = [list(isl.nodes) for isl in found.solution.islands]
    members = [[index[n] for n in group] for group in names]
    specs = island_specs(cluster, members)
    limit = max_islands or len(specs)
    if len(specs) <= limit:
        return ChosenIslands(specs, members, names, [], "")
    speed = [s.sustained_flops for s in specs]
    keep = sorted(sorted(range(len(specs)), key=lambda i: -speed[i])[:limit])
    return ChosenIslands(
        [specs[i] for i in keep], [members[i] for i in keep], [names[i] for i in keep],
        [specs[i].name for i in range(len(specs)) if i not in keep],
        f"composed over {len(keep)} of {len(specs)} islands, those with the most compute ({max_islands} asked for)",
    )


def price_given(layout: GivenLayout | tuple[IslandBlock, ...] | MixedLayout, chosen: ChosenIslands, cluster: Cluster,
                cfg: ModelConfig, global_batch: int, seq: int, memory_headroom: float | None = None, *,
                parallelizer: Parallelizer | None = None) -> PricedLayout | PricedPipeline | PricedMixed:
    """The given layout priced: one layout on a cluster of one island, or one per island (``IslandBlock`` s),
    with the plan's memory headroom (GiB per GPU; None: the default); a mixed-stages plan
    (``MixedLayout``) as the ``mixed-stages`` alternative prices its own, by the plan's
    ``parallelizer`` (held to the layout's running settings, as the alternative's is to the plan's)."""
    if isinstance(layout, MixedLayout):
        from hetopt.planner.alternatives.baselines import Setting

        par = parallelizer or BuiltinParallelizer()
        setting = Setting(cluster, cfg, chosen.specs, chosen.members, par, par.slice_model(cfg, seq=seq), global_batch,
                          seq, None)
        return price_mixed_layout(layout, setting)
    par = None if memory_headroom is None else BuiltinParallelizer(reserved_bytes=memory_headroom * GIB)
    if isinstance(layout, tuple):
        if chosen.left_out:
            raise InputError(f"layout: the plan composes {len(chosen.specs)} of the cluster's islands "
                             f"({', '.join(chosen.left_out)} left out); give max_islands to compose them all",
                             field="layout")
        element = cm.element_bytes(layout[0].layout.running.precision or cm.DEFAULT_PRECISION)  # one job, one precision
        return price_island_layouts(layout, chosen.specs, lambda m: link_matrix(cluster, chosen.members, cfg, seq, m, element), cfg,
                                    global_batch=global_batch, seq=seq, parallelizer=par)
    if len(chosen.specs) + len(chosen.left_out) != 1:
        names = ", ".join(s.name for s in chosen.specs)
        raise InputError(f"layout: {cluster.name} forms {len(chosen.specs) + len(chosen.left_out)} islands ({names}); "
                         "give one layout per island: \"ISLAND: layers=K tp=.. pp=.. dp=..; ...\"", field="layout")
    return price_layout(layout, chosen.specs[0], cfg, global_batch=global_batch, seq=seq, parallelizer=par)

__all__ = ["LARGE_CLUSTER_ATOMS", "LARGE_CLUSTER_MICROBATCHES", "MAX_COMPOSE_ISLANDS", "Setup",
           "choose_islands", "configure", "hold_precision", "price_given", "target_islands"]
