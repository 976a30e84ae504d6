"""The end-to-end planner: cluster + model in, best heterogeneous plan out.

islands (islands family) → atoms and slices → partial plans from a homogeneous parallelizer,
enumerated with Tangram's pruning, in parallel → composition (pipeline family) → the plan;
and, on the same cost model, the alternatives: Cephalo's FSDP allocation (allocation
family), the best single-island plan, uniform and compute-proportional layer partitioning.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace

from hetopt import solvers
from hetopt.costmodel import TRAINING_PER_FORWARD
from hetopt.errors import InputError
from hetopt.family import Deadline, no_solution
from hetopt.units import GIB
from hetopt.planner.builtin import BuiltinParallelizer, best_single_island_plan
from hetopt.planner.cluster import Cluster
from hetopt.planner.compose import island_specs, link_matrix, pipeline_instance, split_layers
from hetopt.planner.enumerate import DEFAULT_IMBALANCE, DEFAULT_TASKS, POLICIES, EnumerationStats, all_slices, enumerate_plans
from hetopt.planner.fsdp import plan_fsdp
from hetopt.planner.parallelizer import IslandSpec, Parallelizer, PartialPlan, Slice, divisors
from hetopt.result import Result, Status
from hetopt.workload import ModelConfig, head_forward_flops, layer_forward_flops

#: Most islands the planner composes exactly: the pipeline DP's state grows with the subsets
#: of islands used, and it declines past about 16 (formulations/pipeline.md).
MAX_COMPOSE_ISLANDS = 16
#: Islands composed when a cluster forms more than ``MAX_COMPOSE_ISLANDS`` and no
#: ``max_islands`` is given: the ones with the most sustained FLOP/s. The plan is then
#: FEASIBLE, not OPTIMAL, with its gap to the ideal (a lower bound for the whole cluster).
#: Four keeps the 512-node datacenter's planning within minutes on two cores (README).
LARGE_CLUSTER_ISLANDS = 4
#: On that default path, when no parallelizer is given, the built-in one cuts the model into
#: at most this many atoms: the slices, and so the queries, shrink with the atoms squared.
#: GPT-3 175B's 96 layers become 24 atoms of 4.
LARGE_CLUSTER_ATOMS = 24
#: Micro-batch sizes tried when none is given: powers of two up to this (samples).
MAX_AUTO_MICROBATCH = 16


@dataclass(frozen=True)
class StageRow:
    """One stage of the composed pipeline, for the report."""

    island: str
    gpu: str
    first_layer: int
    layers: int
    layout: str
    gpus: int
    time_s: float
    memory_gib: float
    in_flight: int


@dataclass(frozen=True)
class Alternative:
    """Another plan on the same cost model: its name, iteration time (None if none fits), note."""

    name: str
    iteration_time_s: float | None
    detail: str


@dataclass
class HeteroPlan:
    """The planner's answer. Times in seconds; ``status`` is the composition's."""

    cluster: str
    model: str
    global_batch: int
    microbatch_size: int
    microbatches: int
    seq: int
    status: Status
    reason: str = ""
    islands: list[dict] = field(default_factory=list)
    stages: list[StageRow] = field(default_factory=list)
    iteration_time_s: float | None = None
    simulated_s: float | None = None
    throughput_samples_s: float | None = None
    tflops_per_gpu: float | None = None
    ideal_time_s: float | None = None
    efficiency: float | None = None
    bound_s: float | None = None  # a proven lower bound on the iteration time
    gap: float | None = None  # (iteration − bound) / iteration
    alternatives: list[Alternative] = field(default_factory=list)
    best: str = ""
    speedups: dict[str, float] = field(default_factory=dict)
    timing_s: dict[str, float] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)  # islands not composed (--max-islands)
    enumeration: dict = field(default_factory=dict)
    composition: dict = field(default_factory=dict)


def model_training_flops(cfg: ModelConfig, seq: int) -> float:
    """Training FLOPs of one sample (forward + backward, no recomputation)."""
    forward = sum(layer_forward_flops(cfg, seq, i) for i in range(cfg.layers)) + head_forward_flops(cfg, seq)
    return TRAINING_PER_FORWARD * forward


def ideal_time(cluster: Cluster, cfg: ModelConfig, global_batch: int, seq: int) -> float:
    """The iteration's training FLOPs spread over every GPU at its modeled speed
    (peak × calibrated efficiency), no communication: this cost model's physical limit."""
    speed = sum(node.gpus * gpu.training_flops * gpu.efficiency for node, gpu in zip(cluster.islands.nodes, cluster.gpu_types))
    return global_batch * model_training_flops(cfg, seq) / speed


def microbatch_candidates(global_batch: int, microbatch_size: int | None) -> list[int]:
    """The micro-batch sizes to plan for.

    Raises
    ------
    InputError
        When ``microbatch_size`` does not divide the global batch.
    """
    if microbatch_size is not None:
        if microbatch_size < 1 or global_batch % microbatch_size:
            raise InputError(
                f"--microbatch {microbatch_size}: must divide the global batch {global_batch} "
                f"(try one of {', '.join(str(d) for d in divisors(global_batch)[:8])})"
            )
        return [microbatch_size]
    out, m = [], 1
    while m <= min(MAX_AUTO_MICROBATCH, global_batch):
        if global_batch % m == 0:
            out.append(m)
        m *= 2
    return out


@dataclass
class _Composed:
    result: Result
    plans: list[PartialPlan]
    microbatch_size: int
    stats: EnumerationStats
    enumerate_s: float
    compose_s: float


def _compose(
    cluster: Cluster,
    cfg: ModelConfig,
    specs: list[IslandSpec],
    members: list[list[int]],
    parallelizer: Parallelizer,
    slices: list[Slice],
    m: int,
    global_batch: int,
    seq: int,
    policies: Sequence[str],
    imbalance: float,
    executor: Executor | None,
    time_limit: float | None,
    on_progress=None,
    tasks: int = DEFAULT_TASKS,
) -> _Composed:
    t0 = time.perf_counter()
    microbatches = global_batch // m
    progress = None if on_progress is None else (lambda done, total: on_progress(f"micro-batch {m}", done, total))
    plans, stats = enumerate_plans(
        parallelizer, slices, specs, microbatch_size=m, microbatches=microbatches, global_batch=global_batch,
        policies=policies, imbalance=imbalance, executor=executor, on_progress=progress, tasks=tasks,
    )
    t1 = time.perf_counter()
    links = link_matrix(cluster, members, cfg, seq, m)
    instance, behind = pipeline_instance(f"{cluster.name}-{cfg.name}-m{m}", cfg, specs, plans, links, microbatches, 1.0)
    result = solvers.solve(instance, "dp", time_limit=time_limit) if instance.options else None
    if result is None:
        result = no_solution(
            problem="pipeline", method="dp", status=Status.INFEASIBLE, deadline=Deadline(None),
            reason="no partial plan of any slice fits any island",
        )
    return _Composed(result, behind, m, stats, t1 - t0, time.perf_counter() - t1)


def _restricted(
    cluster: Cluster, cfg: ModelConfig, specs: list[IslandSpec], members: list[list[int]], parallelizer: Parallelizer,
    atoms: tuple, counts: list[int], m: int, global_batch: int, seq: int, time_limit: float | None,
) -> Result | None:
    """The best pipeline in which island i takes exactly counts[i] layers (0: unused)."""
    L = len(atoms)
    microbatches = global_batch // m
    plans: dict[int, list[PartialPlan]] = {i: [] for i in range(len(specs))}
    for i, k in enumerate(counts):
        if k == 0:
            continue
        positions = {0, L - k} | ({1} if L - k > 1 else set())  # first, last, and a middle slice
        for start in sorted(positions):
            sl = Slice(tuple(atoms[start : start + k]))
            plans[i].extend(
                parallelizer.parallelize(sl, specs[i], microbatch_size=m, microbatches=microbatches, global_batch=global_batch)
            )
    links = link_matrix(cluster, members, cfg, seq, m)
    instance, _ = pipeline_instance("restricted", cfg, specs, plans, links, microbatches, 1.0)
    if not instance.options:
        return None
    result = solvers.solve(instance, "dp", time_limit=time_limit)
    return result if result.status.has_solution else None


def plan(
    cluster: Cluster,
    cfg: ModelConfig,
    *,
    global_batch: int,
    microbatch_size: int | None = None,
    seq: int | None = None,
    parallelizer: Parallelizer | None = None,
    policies: Sequence[str] = POLICIES,
    imbalance: float = DEFAULT_IMBALANCE,
    executor: Executor | None = None,
    time_limit: float | None = None,
    alternatives: bool = True,
    on_progress: Callable[[str, int, int], None] | None = None,
    max_islands: int | None = None,
    tasks: int = DEFAULT_TASKS,
) -> HeteroPlan:
    """Plan training of ``cfg`` on ``cluster`` with global batch ``global_batch``.

    Parameters
    ----------
    microbatch_size
        Fixed micro-batch size; by default every power of two up to 16 that divides the
        global batch is planned and the fastest kept.
    seq
        Sequence length (default: the model's).
    parallelizer
        Any :class:`~hetopt.planner.parallelizer.Parallelizer` (default: the built-in one).
    policies
        Pruning policies to apply (default all: redundancy, infeasibility, imbalance).
    executor
        Where parallelizer queries run (a process pool, a Dask client's executor); None runs
        them here.
    tasks
        With an executor, the queries of one enumeration go out in at most this many batches.
    alternatives
        Also plan the alternatives (FSDP, single island, uniform, proportional).
    on_progress
        Called as ``on_progress(phase, done, total)`` while parallelizer queries complete.
    max_islands
        Compose only the ``max_islands`` islands with the most sustained FLOP/s (a heuristic:
        the plan is then exact over those islands only, and FEASIBLE with its gap to the
        ideal when islands are left out). Default: every island, or the
        ``LARGE_CLUSTER_ISLANDS`` fastest when the cluster forms more than
        ``MAX_COMPOSE_ISLANDS`` (and then, if no ``parallelizer`` was given, the built-in
        one cuts the model into at most ``LARGE_CLUSTER_ATOMS`` atoms).

    Raises
    ------
    InputError
        For a micro-batch size that does not divide the global batch, or a bad batch.
    """
    if global_batch < 1:
        raise InputError(f"--global-batch {global_batch}: must be >= 1")
    seq = seq or cfg.sequence
    par = parallelizer or BuiltinParallelizer()
    timing = {"islands_s": 0.0, "enumeration_s": 0.0, "composition_s": 0.0, "alternatives_s": 0.0}
    t0 = time.perf_counter()
    islands_result = solvers.solve(cluster.islands, time_limit=time_limit)
    timing["islands_s"] = time.perf_counter() - t0
    index = cluster.islands.index
    found = list(islands_result.solution.islands)
    members = [[index[name] for name in isl.nodes] for isl in found]
    specs = island_specs(cluster, members)
    left_out: list[str] = []
    large = max_islands is None and len(specs) > MAX_COMPOSE_ISLANDS
    limit = max_islands or (LARGE_CLUSTER_ISLANDS if large else len(specs))
    coarsened = ""
    if large and parallelizer is None and cfg.layers > LARGE_CLUSTER_ATOMS:
        par = replace(par, layers_per_atom=math.ceil(cfg.layers / LARGE_CLUSTER_ATOMS))
        coarsened = f", atoms of {par.layers_per_atom} layers"
    if len(specs) > limit:
        speed = [s.gpus * s.gpu.training_flops * s.gpu.efficiency for s in specs]
        keep = sorted(sorted(range(len(specs)), key=lambda i: -speed[i])[:limit])
        left_out = [specs[i].name for i in range(len(specs)) if i not in keep]
        found = [found[i] for i in keep]
        members = [members[i] for i in keep]
        specs = [specs[i] for i in keep]
    atoms = par.slice_model(cfg, seq=seq)
    slices = all_slices(par, atoms)
    best: _Composed | None = None
    reasons: list[str] = []
    total_stats: dict = {}
    for m in microbatch_candidates(global_batch, microbatch_size):
        composed = _compose(
            cluster, cfg, specs, members, par, slices, m, global_batch, seq, policies, imbalance, executor, time_limit,
            on_progress, tasks,
        )
        timing["enumeration_s"] += composed.enumerate_s
        timing["composition_s"] += composed.compose_s
        total_stats[m] = composed.stats.to_dict()
        if not composed.result.status.has_solution:
            reasons.append(f"micro-batch {m}: {composed.result.reason or composed.result.status.value}")
        if composed.result.status.has_solution and (best is None or composed.result.objective < best.result.objective):
            best = composed
    out = HeteroPlan(
        cluster=cluster.name, model=cfg.name, global_batch=global_batch, microbatch_size=0, microbatches=0, seq=seq,
        status=Status.INFEASIBLE, timing_s=timing, enumeration=total_stats,
        islands=[{"name": s.name, "gpu": s.gpu.name, "nodes": s.nodes, "gpus": s.gpus,
                  "members": list(isl.nodes)} for s, isl in zip(specs, found)],
        left_out=left_out,
    )
    ideal = ideal_time(cluster, cfg, global_batch, seq)
    out.ideal_time_s = ideal
    if best is None:
        out.reason = f"no pipeline of {cfg.name} fits {cluster.name}: " + "; ".join(reasons)
    else:
        _fill(out, best, specs, cluster, cfg, seq, ideal)
        if left_out:
            # exact over the islands composed only: a plan, not a proof, for the whole cluster
            out.status = Status.FEASIBLE
            out.bound_s, out.gap = ideal, 1.0 - ideal / out.iteration_time_s
            how = "--max-islands" if max_islands else f"the default for clusters of more than {MAX_COMPOSE_ISLANDS} islands"
            out.reason = (
                f"composed over {len(specs)} of {len(specs) + len(left_out)} islands, those with the most compute "
                f"({how}{coarsened}); exact over them only, so not proven optimal for {cluster.name}: gap {100 * out.gap:.1f}% "
                f"to the ideal {ideal:.4g} s, a lower bound for the whole cluster"
            )
    if alternatives:
        t1 = time.perf_counter()
        out.alternatives = _alternatives(cluster, cfg, specs, members, par, atoms, global_batch, seq, microbatch_size, time_limit)
        timing["alternatives_s"] = time.perf_counter() - t1
        _rank(out)
    return out


def _fill(out: HeteroPlan, best: _Composed, specs, cluster, cfg, seq, ideal) -> None:
    res = best.result
    sol = res.solution
    out.status = res.status
    out.microbatch_size = best.microbatch_size
    out.microbatches = out.global_batch // best.microbatch_size
    out.iteration_time_s = res.objective
    out.simulated_s = getattr(sol, "simulated_s", None)
    out.throughput_samples_s = out.global_batch / res.objective
    gpus = cluster.gpus
    out.tflops_per_gpu = out.global_batch * model_training_flops(cfg, seq) / res.objective / gpus / 1e12
    out.efficiency = ideal / res.objective
    # the composition's bound is over the islands and partial plans it was given
    out.bound_s, out.gap = res.bound, res.gap
    out.composition = {"method": res.method, "status": res.status.value, "gap": res.gap, "stats": res.stats}
    stage_iter = iter(sol.stages)
    for block in sol.blocks:
        pp = best.plans[block.option]
        first = block.first_layer
        for s in pp.stages:
            report = next(stage_iter)
            out.stages.append(
                StageRow(
                    island=specs[block.island].name, gpu=specs[block.island].gpu.name, first_layer=first,
                    layers=s.layers, layout=pp.layout, gpus=s.gpus, time_s=report.time_s,
                    memory_gib=report.memory_bytes / GIB, in_flight=report.in_flight,
                )
            )
            first += s.layers


def _alternatives(cluster, cfg, specs, members, par, atoms, global_batch, seq, microbatch_size, time_limit) -> list[Alternative]:
    alts: list[Alternative] = []
    fsdp = plan_fsdp(cluster, cfg, global_batch, seq, time_limit=time_limit)
    if fsdp.status.has_solution:
        batches = {}
        for g in fsdp.solution.gpus:
            batches.setdefault(g.type, g.batch)
        detail = "FSDP, per-GPU batch " + ", ".join(f"{t} {b}" for t, b in batches.items())
        alts.append(Alternative("cephalo-fsdp", fsdp.objective, detail))
    else:
        alts.append(Alternative("cephalo-fsdp", None, fsdp.reason))
    single: tuple[float, str] | None = None
    uniform: tuple[float, str] | None = None
    proportional: tuple[float, str] | None = None
    gpus = [s.gpus for s in specs]
    speed = [s.gpus * s.gpu.training_flops * s.gpu.efficiency for s in specs]
    L = len(atoms)
    for m in microbatch_candidates(global_batch, microbatch_size):
        M = global_batch // m
        for s in specs:
            p = best_single_island_plan(cfg, s, microbatch_size=m, microbatches=M, seq=seq, parallelizer=par)
            if p is not None and (single is None or p.iteration_time_s < single[0]):
                single = (p.iteration_time_s, f"{s.name} ({s.gpus}x {s.gpu.name}), {p.layout}, m={m}")
        for label, weights in (("uniform", gpus), ("proportional", speed)):
            counts = split_layers(weights, L)
            r = _restricted(cluster, cfg, specs, members, par, atoms, counts, m, global_batch, seq, time_limit)
            if r is None:
                continue
            detail = "layers " + ", ".join(f"{s.name} {k}" for s, k in zip(specs, counts) if k) + f", m={m}"
            current = uniform if label == "uniform" else proportional
            if current is None or r.objective < current[0]:
                if label == "uniform":
                    uniform = (r.objective, detail)
                else:
                    proportional = (r.objective, detail)
    alts.append(Alternative("single-island", *(single or (None, "no island holds the whole model"))))
    alts.append(Alternative("uniform-layers", *(uniform or (None, "no fit with layers split by GPU count"))))
    alts.append(Alternative("compute-proportional", *(proportional or (None, "no fit with layers split by compute"))))
    return alts


def _rank(out: HeteroPlan) -> None:
    candidates = [("tangram-composed", out.iteration_time_s)] + [(a.name, a.iteration_time_s) for a in out.alternatives]
    timed = [(n, t) for n, t in candidates if t is not None]
    if not timed:
        return
    out.best = min(timed, key=lambda nt: nt[1])[0]
    if out.iteration_time_s is not None:
        out.speedups = {a.name: a.iteration_time_s / out.iteration_time_s for a in out.alternatives if a.iteration_time_s}
