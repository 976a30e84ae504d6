"""The end-to-end planner: cluster + model in, best heterogeneous plan out.

islands (islands family) → atoms and slices → partial plans from a homogeneous parallelizer,
enumerated with Tangram's pruning, in parallel → composition (pipeline family) → the plan;
and, on the same cost model, the alternatives (``planner/alternatives.py``).

The steps are small functions; the plan's status, bound, gap and reason come from ONE step,
:func:`conclude_plan`, that maps the islands result and each micro-batch size's composition
(and whether its enumeration was complete) to the planner's answer, as
``family.conclude`` does for a solver: never OPTIMAL unless every step proved its part,
never INFEASIBLE unless every micro-batch size was proven not to fit.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from pathlib import Path

from hetopt import solvers
from hetopt.catalog import instances_dir
from hetopt import costmodel as cm
from hetopt.costmodel import TRAINING_PER_FORWARD
from hetopt.errors import InputError
from hetopt.family import Deadline, no_solution
from hetopt.units import GIB
from hetopt.planner.alternatives import Alternative, Setting, plan_alternatives
from hetopt.planner.builtin import BuiltinParallelizer
from hetopt.planner.cluster import Cluster, load_cluster, resolve
from hetopt.planner.compose import (island_specs, link_matrix, microbatch_candidates, pipeline_instance,
                                    pipeline_lower_bound, uncomposable_microbatch_sizes)
from hetopt.pipeline.problem import MAX_MICROBATCHES
from hetopt.planner.layout import (GivenLayout, IslandBlock, PricedLayout, PricedPipeline, given_runtime, with_precision,
                                   price_island_layouts, price_layout)
from hetopt.planner.enumerate import EnumerationStats, all_slices, enumerate_plans
from hetopt.planner.outcome import Attempt, ChosenIslands, conclude_plan
from hetopt.planner.parallelizer import IslandSpec, Parallelizer, Slice
from hetopt.planner.replicas import REPLICAS_SHARE, ReplicasPlan, plan_replicas
from hetopt.planner.request import PlanRequest
from hetopt.planner.schedule import rescore, simulated_lower_bound
from hetopt.result import Result, Status
from hetopt.workload import ModelConfig, head_forward_flops, layer_forward_flops, load_model

__all__ = ["Alternative", "HeteroPlan", "PlanRequest", "StageRow", "conclude_plan", "ideal_time", "microbatch_candidates", "plan"]

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
#: Micro-batch sizes tried on that default path (powers of two up to 16 samples): there the
#: plan is FEASIBLE by construction, and each size costs minutes of enumeration on islands of
#: hundreds of GPUs. Everywhere else every divisor of the global batch is a candidate.
LARGE_CLUSTER_MICROBATCHES = (1, 2, 4, 8, 16)
#: Under a time limit, the share of it kept for the alternatives (the composed plan comes first).
ALTERNATIVES_SHARE = 0.1
#: Seconds before the time limit at which the planner's steps stop starting work (at most half
#: the limit): a solver call returns a little after its own limit (its last unit of work and
#: ``evaluate``; the 1F1B simulation of a long pipeline), and the steps run one after another.
INNER_MARGIN_S = 0.5
#: Under a time limit, the share of one micro-batch size's budget its enumeration may use: the
#: rest composes what it found (the composition of a few thousand plans takes about as long
#: as their enumeration on the shipped clusters).
ENUMERATION_SHARE = 0.5


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
    ep: int = 1  # experts' parallel degree (1: experts split by TP like a dense FFN)
    fsep: bool = False  # fully sharded EP
    cp: int = 1  # context-parallel degree
    offload: bool = False  # activations offloaded to host memory


@dataclass
class HeteroPlan:
    """The planner's answer. Times in seconds; ``status`` comes from :func:`conclude_plan`."""

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
    iteration_time_s: float | None = None  # by ``time_model``: the 1F1B simulation unless it says why not
    simulated_s: float | None = None
    analytic_s: float | None = None  # the family's closed form T of the same pipeline
    time_model: str = ""  # what iteration_time_s is: "1F1B simulation", or "closed form" with the reason
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
    given_layout: dict | None = None  # --layout priced by the same cost model, with the plan's speed-up over it
    runtime: str | None = None  # --runtime: what the search was held to (its non-default keys)
    replicas: ReplicasPlan | None = None  # data-parallel replicas beside the pipeline (``replicas=True``)
    #: GPUs of the composed islands that run attention unfused although the runtime asks for
    #: FlashAttention: it does not run on them (the catalog's ``flash_attention``)
    unfused_attention: list[str] = field(default_factory=list)
    #: the mixed precision the plan is priced in (``cm.PRECISIONS``): its training state's bytes, and
    #: what ``hetopt export`` asks the runtime for
    precision: str = ""

    @property
    def answer_status(self) -> Status:
        """The status of the planner's answer as a whole: the composed plan's, or FEASIBLE when
        only its data-parallel replicas (``replicas=True``) found a plan, which then is the
        answer (not proven best). The command line's exit code follows it.

        Examples
        --------
        >>> HeteroPlan("c", "m", 8, 0, 0, 2048, Status.TIME_LIMIT).answer_status
        <Status.TIME_LIMIT: 'TIME_LIMIT'>
        """
        if not self.status.has_solution and self.replicas is not None and self.replicas.status.has_solution:
            return Status.FEASIBLE
        return self.status


def model_training_flops(cfg: ModelConfig, seq: int) -> float:
    """Training FLOPs of one sample (forward + backward, no recomputation)."""
    forward = sum(layer_forward_flops(cfg, seq, i) for i in range(cfg.layers)) + head_forward_flops(cfg, seq)
    return TRAINING_PER_FORWARD * forward


def ideal_time(cluster: Cluster, cfg: ModelConfig, global_batch: int, seq: int) -> float:
    """The iteration's training FLOPs spread over every GPU at its modeled speed
    (``GpuType.sustained_flops``), no memory traffic, no communication: this cost
    model's physical limit, a lower bound on every plan's iteration time."""
    speed = sum(node.gpus * gpu.sustained_flops for node, gpu in zip(cluster.islands.nodes, cluster.gpu_types))
    return global_batch * model_training_flops(cfg, seq) / speed


def models_dir() -> Path:
    """The shipped model files, ``instances/models``."""
    return instances_dir() / "models"


def as_cluster(cluster: Cluster | str | Path) -> Cluster:
    """A loaded cluster, a path to a cluster file, or a name in ``instances/clusters``."""
    return cluster if isinstance(cluster, Cluster) else load_cluster(cluster)


def as_model(cfg: ModelConfig | str | Path) -> ModelConfig:
    """A loaded model, a path to a model file, or a name in ``instances/models``."""
    return cfg if isinstance(cfg, ModelConfig) else load_model(resolve(str(cfg), models_dir(), "model"))


def _limited(deadline: Deadline, share: float = 1.0) -> float | None:
    """``share`` of what is left of ``deadline`` (None: no limit)."""
    return None if math.isinf(deadline.limit) else share * deadline.remaining()


# ---- the steps -------------------------------------------------------------------------------


def _form_islands(cluster: Cluster, deadline: Deadline) -> Result:
    return solvers.solve(cluster.islands, time_limit=_limited(deadline))


def _choose_islands(cluster: Cluster, found: Result, max_islands: int | None, coarsened: str) -> ChosenIslands:
    """Every island, or the ``max_islands`` (by default ``LARGE_CLUSTER_ISLANDS`` past
    ``MAX_COMPOSE_ISLANDS``) with the most sustained FLOP/s."""
    index = cluster.islands.index
    names = [list(isl.nodes) for isl in found.solution.islands]
    members = [[index[n] for n in group] for group in names]
    specs = island_specs(cluster, members)
    large = max_islands is None and len(specs) > MAX_COMPOSE_ISLANDS
    limit = max_islands or (LARGE_CLUSTER_ISLANDS if large else len(specs))
    if len(specs) <= limit:
        return ChosenIslands(specs, members, names, [], "")
    speed = [s.sustained_flops for s in specs]
    keep = sorted(sorted(range(len(specs)), key=lambda i: -speed[i])[:limit])
    how = "--max-islands" if max_islands else f"the default for clusters of more than {MAX_COMPOSE_ISLANDS} islands"
    return ChosenIslands(
        [specs[i] for i in keep], [members[i] for i in keep], [names[i] for i in keep],
        [specs[i].name for i in range(len(specs)) if i not in keep],
        f"composed over {len(keep)} of {len(specs)} islands, those with the most compute ({how}{coarsened})",
    )


@dataclass(frozen=True)
class _Context:
    """What every micro-batch size's enumeration and composition share."""

    cluster: Cluster
    cfg: ModelConfig
    seq: int
    global_batch: int
    islands: ChosenIslands
    parallelizer: Parallelizer
    slices: list[Slice]
    policies: Sequence[str]
    imbalance: float
    executor: Executor | None
    tasks: int
    on_progress: Callable[[str, int, int], None] | None
    time_model: str = "simulated"


def _attempt(ctx: _Context, m: int, deadline: Deadline) -> Attempt:
    """Enumerate and compose one micro-batch size within ``deadline``."""
    t0 = time.perf_counter()
    microbatches = ctx.global_batch // m
    progress = None if ctx.on_progress is None else (lambda done, total: ctx.on_progress(f"micro-batch {m}", done, total))
    plans, stats = enumerate_plans(
        ctx.parallelizer, ctx.slices, ctx.islands.specs, microbatch_size=m, microbatches=microbatches,
        global_batch=ctx.global_batch, policies=ctx.policies, imbalance=ctx.imbalance, executor=ctx.executor,
        on_progress=progress, tasks=ctx.tasks, deadline=Deadline(_limited(deadline, ENUMERATION_SHARE)),
    )
    t1 = time.perf_counter()
    links = link_matrix(ctx.cluster, ctx.islands.members, ctx.cfg, ctx.seq, m)
    instance, behind = pipeline_instance(f"{ctx.cluster.name}-{ctx.cfg.name}-m{m}", ctx.cfg, ctx.islands.specs, plans,
                                         links, microbatches, 1.0)
    if not instance.options:
        result = no_solution(problem="pipeline", method="dp", status=Status.INFEASIBLE, deadline=Deadline(None),
                             reason="no partial plan of any slice fits any island")
    elif deadline.expired():
        result = None
    else:
        result = solvers.solve(instance, "dp", time_limit=_limited(deadline))
        if ctx.time_model == "simulated":  # the plan's time is its 1F1B schedule's (planner/schedule.py)
            # interleaved plans' stages are shaped for the closed form, not for the simulator
            interleaved = frozenset(o for o, pp in enumerate(behind) if getattr(pp, "vpp", 1) > 1)
            result = rescore(instance, result, deadline, interleaved)
    return Attempt(m, result, stats.complete, behind, stats, t1 - t0, time.perf_counter() - t1)


# ---- the planner -----------------------------------------------------------------------------


def plan(
    request: PlanRequest | Cluster | str | os.PathLike,
    cfg: ModelConfig | str | os.PathLike | None = None,
    /,
    *,
    parallelizer: Parallelizer | None = None,
    executor: Executor | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
    **options: object,
) -> HeteroPlan:
    """Plan training of a model on a cluster: ``plan(PlanRequest(...))``, or
    ``plan(cluster, model, global_batch=..., ...)`` with the request's fields as keywords.

    Every option is checked by name before any work (:meth:`PlanRequest.checked`).

    Parameters
    ----------
    request, cfg
        A :class:`~hetopt.planner.request.PlanRequest`; or the cluster and the model (loaded
        objects, paths to their files, or names in ``instances/clusters`` and
        ``instances/models``, as the command line takes them), with the other fields of the
        request as keywords (``global_batch`` is required).
    microbatch_size
        Fixed micro-batch size; by default every divisor of the global batch is a
        candidate (powers of two first) and the fastest plan kept; a size whose lower bound
        (:func:`~hetopt.planner.compose.pipeline_lower_bound`) cannot beat the best plan
        found is skipped, which proves it cannot.
    seq
        Sequence length (default: the model's).
    parallelizer
        Any :class:`~hetopt.planner.parallelizer.Parallelizer` (default: the built-in one).
    policies
        Pruning policies to apply (default all: redundancy, infeasibility, imbalance).
    executor
        Where parallelizer queries run (a :class:`hetopt.planner.workers.ProcessPool`, which
        replaces dead workers, any process pool, a Dask client's executor); None runs them here.
    time_limit
        Seconds for the whole call (islands, enumeration, composition, alternatives); it
        returns within ``time_limit + hetopt.family.TIME_LIMIT_SLACK_S``. Stopped early, the
        plan is FEASIBLE with its bound and gap, or TIME_LIMIT without one; never a false
        OPTIMAL or INFEASIBLE. 0 returns at once with what is known (TIME_LIMIT).
    layers_per_atom
        Layers per atom of the built-in parallelizer (None: 1, coarser on very large
        clusters); above 1 the search is narrowed and the plan FEASIBLE, not OPTIMAL.
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

    time_model
        "simulated" (default): the plan is the best by simulated 1F1B time among the
        candidates re-ranked (``hetopt.planner.schedule``), OPTIMAL only when that is proven;
        "closed-form": the pipeline family's closed form T, as Tangram composes.
    runtime
        What the training framework can run (:mod:`hetopt.planner.runtime`, ``"recompute=none,full
        zero=0 flash=no"``): the built-in parallelizer searches only that, priced as it runs, and
        a given ``layout`` is priced under it too (its text must then not name runtime keys).
    layout
        A layout to price beside the plan (``"tp=8 pp=8 dp=12 mbs=1 recompute=full zero=1"``
        or a :class:`~hetopt.planner.layout.GivenLayout`) on a cluster that forms one
        island, or one per island (``"ISLAND: layers=K tp=.. pp=.. dp=..; ..."``, front of
        the pipeline first, or a tuple of :class:`~hetopt.planner.layout.IslandBlock`);
        ``given_layout`` then holds its iteration time and the plan's speed-up.
    replicas
        Also plan data-parallel replicas (``hetopt.planner.replicas``): the islands cut into
        units, whole-model pipelines on units of one shape, the replicas family's ``dp``
        choosing the replicas and their micro-batch shares; in ``HeteroPlan.replicas``,
        FEASIBLE with the ideal time as bound.

    Raises
    ------
    TypeError
        An unknown keyword (naming the closest option), or options beside a request.
    InputError
        A field that is not what it must be (named, ``field`` set); for a micro-batch size that does not divide the global batch, a bad batch or time
        limit, an unknown cluster or model name, a layout the cluster or model cannot hold
        or given for a cluster of several islands.
    hetopt.planner.workers.WorkersLost
        When the executor's workers are gone (a pool that keeps dying, a Dask cluster
        without workers).
    """
    if isinstance(request, PlanRequest):
        if cfg is not None or options:
            raise TypeError("plan(request): give every option inside the PlanRequest, not beside it")
    else:
        request = PlanRequest.of(cluster=request, model=cfg, **options)
    request = request.checked()
    if parallelizer is not None and not isinstance(parallelizer, Parallelizer):
        raise InputError(f"parallelizer: must implement hetopt.planner.Parallelizer (got {type(parallelizer).__name__})",
                         field="parallelizer")
    if parallelizer is not None and request.layers_per_atom is not None:
        raise InputError("layers_per_atom: sets the built-in parallelizer's atoms; give them to your own parallelizer",
                         field="layers_per_atom")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise InputError(f"executor: must be a concurrent.futures.Executor (got {type(executor).__name__})",
                         field="executor")
    if on_progress is not None and not callable(on_progress):
        raise InputError(f"on_progress: must be callable as on_progress(phase, done, total) (got {on_progress!r})",
                         field="on_progress")
    if request.layers_per_atom is not None:
        parallelizer = BuiltinParallelizer(layers_per_atom=request.layers_per_atom)
    return _plan(request, parallelizer, executor, on_progress)


def _plan(request: PlanRequest, parallelizer: Parallelizer | None, executor: Executor | None,
          on_progress: Callable[[str, int, int], None] | None) -> HeteroPlan:
    """:func:`plan` of a checked request."""
    r = request
    cluster, cfg, global_batch, microbatch_size, seq = r.cluster, r.model, r.global_batch, r.microbatch_size, r.seq
    policies, imbalance, time_limit, alternatives, max_islands = r.policies, r.imbalance, r.time_limit, r.alternatives, r.max_islands
    tasks, layout, time_model, replicas, runtime = r.tasks, r.layout, r.time_model, r.replicas, r.runtime
    # the steps stop by this inner deadline: each may overshoot it by its own last unit of
    # work (a DP layer, an evaluate), which the margin and the stated slack absorb
    deadline = Deadline(None if time_limit is None else time_limit - min(INNER_MARGIN_S, time_limit / 2))
    cluster, cfg = as_cluster(cluster), as_model(cfg)
    if runtime is not None and layout is not None:
        layout = runtime.layouts(layout)
    seq = seq or cfg.sequence
    candidates = microbatch_candidates(global_batch, microbatch_size)
    composing = Deadline(None if time_limit is None else deadline.limit * (1 - ALTERNATIVES_SHARE) if alternatives
                         else deadline.limit)
    if replicas and time_limit is not None:  # leave the replicas their share of the budget
        composing = Deadline(composing.limit * (1 - REPLICAS_SHARE))
    timing = {"islands_s": 0.0, "enumeration_s": 0.0, "composition_s": 0.0, "alternatives_s": 0.0}
    out = HeteroPlan(cluster=cluster.name, model=cfg.name, global_batch=global_batch, microbatch_size=0, microbatches=0,
                     seq=seq, status=Status.ERROR, timing_s=timing, ideal_time_s=ideal_time(cluster, cfg, global_batch, seq))
    t0 = time.perf_counter()
    islands = _form_islands(cluster, composing)
    timing["islands_s"] = time.perf_counter() - t0
    if not islands.status.has_solution:
        conclude_plan(out, islands, None, [], len(candidates))
        return out
    par, coarsened, auto_atoms = parallelizer or BuiltinParallelizer(), "", False
    if runtime is not None:
        if not isinstance(par, BuiltinParallelizer):
            raise InputError("--runtime: holds the built-in parallelizer's search; a parallelizer of your own "
                             "decides what it searches")
        par = runtime.parallelizer(par)
        out.runtime = runtime.text()
    elif layout is not None and isinstance(par, BuiltinParallelizer):
        # the layout's runtime keys describe the user's runtime: plan for the same one, so the
        # plan can run there and its speed-up over the layout compares like with like
        par = given_runtime(layout, par)
    if max_islands is None and parallelizer is None and cfg.layers > LARGE_CLUSTER_ATOMS \
            and len(islands.solution.islands) > MAX_COMPOSE_ISLANDS:
        par = replace(par, layers_per_atom=math.ceil(cfg.layers / LARGE_CLUSTER_ATOMS))
        coarsened, auto_atoms = f", atoms of {par.layers_per_atom} layers", True
    if max_islands is None and microbatch_size is None and len(islands.solution.islands) > MAX_COMPOSE_ISLANDS:
        # the large-cluster path is a heuristic already (islands left out, FEASIBLE against
        # the ideal); every divisor of B on islands of hundreds of GPUs would take it from
        # minutes to tens of minutes, so it keeps the sizes of LARGE_CLUSTER_MICROBATCHES
        candidates = [m for m in candidates if m in LARGE_CLUSTER_MICROBATCHES] or candidates[:1]
        coarsened += f", micro-batch sizes {', '.join(map(str, candidates))}"
    chosen = _choose_islands(cluster, islands, max_islands, coarsened)
    # one job, one precision: the hardware's of the islands composed (bf16 unless one of them has
    # no BF16), unless the runtime or the layout names one, which those GPUs must have
    gpu_types = [spec.gpu for spec in chosen.specs]
    out.precision = cm.hardware_precision(gpu_types)
    if layout is not None:
        layout = with_precision(layout, out.precision)
        for given_layout in (layout,) if isinstance(layout, GivenLayout) else tuple(b.layout for b in layout):
            if (problem := cm.precision_problem(given_layout.precision, gpu_types)) is not None:
                raise InputError(f"--layout {problem}")
    if isinstance(par, BuiltinParallelizer):
        named = par.precision
        par = par.for_gpus(gpu_types)
        if named is not None and (problem := cm.precision_problem(named, gpu_types)) is not None:
            raise InputError(f"{'--runtime' if runtime is not None else 'parallelizer'} {problem}")
        out.unfused_attention = sorted({spec.gpu.name for spec in chosen.specs if par.flash_attention and not par.flash_on(spec)})
        out.precision = par.precision  # the runtime's, or the hardware's (for_gpus)
    out.islands = [{"name": s.name, "gpu": s.gpu.name, "nodes": s.nodes, "gpus": s.gpus, "members": names}
                   for s, names in zip(chosen.specs, chosen.names)]
    given = None if layout is None else _price_given(layout, chosen, cluster, cfg, global_batch, seq)
    out.left_out = chosen.left_out
    atoms = par.slice_model(cfg, seq=seq)
    # stage boundaries fall only between atoms: coarser atoms narrow the search as leaving
    # islands out does (the large-cluster default already says so in its note)
    narrowed = [] if len(atoms) >= cfg.layers or auto_atoms else [
        f"atoms of {atoms[0].layers} layers (stage boundaries only every {atoms[0].layers} layers)"]
    ctx = _Context(cluster, cfg, seq, global_batch, chosen, par, all_slices(par, atoms), policies, imbalance, executor,
                   tasks, on_progress, time_model)
    attempts: list[Attempt] = []
    work = global_batch * model_training_flops(cfg, seq)
    island_flops = [x.sustained_flops for x in chosen.specs]
    for m in candidates:
        if composing.expired():
            break
        # the closed form's bound does not bound the schedule: by simulated time, its own
        bound = (simulated_lower_bound if time_model == "simulated" else pipeline_lower_bound)(
            work, island_flops, global_batch // m)
        incumbent = _incumbent_s(attempts)
        # the bound rests on the built-in cost model's speeds; another parallelizer (a subclass
        # too: it may price stages its own way) gets every size planned
        if type(par) is BuiltinParallelizer and incumbent is not None and bound >= incumbent:
            # exact: no plan with this micro-batch size beats the best one found
            attempts.append(Attempt(m, None, True, [], EnumerationStats(), pruned_bound=bound))
            continue
        # in turn, each with what is left: one micro-batch size composed completely is worth
        # more than five enumerated in part
        attempt = _attempt(ctx, m, composing)
        if _imbalance_hid_plans(attempt) and not composing.expired():
            # imbalance pruning is Tangram's heuristic: an infeasibility it may have caused is
            # no proof, so this size is enumerated again without it
            timing["enumeration_s"] += attempt.enumerate_s
            timing["composition_s"] += attempt.compose_s
            attempt = _attempt(replace(ctx, policies=tuple(p for p in ctx.policies if p != "imbalance")), m, composing)
        attempts.append(attempt)
        timing["enumeration_s"] += attempts[-1].enumerate_s
        timing["composition_s"] += attempts[-1].compose_s
    for m in uncomposable_microbatch_sizes(global_batch, microbatch_size):
        # a size the pipeline family cannot compose is not planned; only its bound can still
        # prove that no plan of it beats the one found
        bound = (simulated_lower_bound if time_model == "simulated" else pipeline_lower_bound)(
            work, island_flops, global_batch // m)
        incumbent = _incumbent_s(attempts)
        if type(par) is BuiltinParallelizer and incumbent is not None and bound >= incumbent:
            attempts.append(Attempt(m, None, True, [], EnumerationStats(), pruned_bound=bound))
        else:
            attempts.append(Attempt(m, None, True, [], EnumerationStats(), not_planned=(
                f"not planned: {global_batch // m} micro-batches, more than the {MAX_MICROBATCHES} a pipeline composes")))
    out.enumeration = {a.microbatch_size: {"skipped_bound_s": a.pruned_bound} if a.pruned_bound is not None
                       else {"not_planned": a.not_planned} if a.not_planned else a.stats.to_dict() for a in attempts}
    planned = len(candidates) + len(uncomposable_microbatch_sizes(global_batch, microbatch_size))
    best = conclude_plan(out, islands, chosen, attempts, planned, narrowed)
    if best is not None:
        _fill(out, best, chosen.specs, cluster, cfg, seq)
    if given is not None:
        out.given_layout = given.to_dict()
        simulated = out.given_layout.get("simulated_s")
        if time_model == "simulated" and simulated is not None:
            # a per-island layout is a pipeline: priced like the plan, by its simulated schedule
            out.given_layout["analytic_s"] = out.given_layout["iteration_time_s"]
            out.given_layout["iteration_time_s"] = simulated
        if out.given_layout.get("iteration_time_s") is not None and out.iteration_time_s:
            out.given_layout["plan_speedup"] = out.given_layout["iteration_time_s"] / out.iteration_time_s
    if replicas:
        t2 = time.perf_counter()
        out.replicas = plan_replicas(cluster, cfg, islands, global_batch=global_batch, ideal_s=out.ideal_time_s,
                                     microbatch_size=microbatch_size or 1, seq=seq, deadline=deadline)
        timing["replicas_s"] = time.perf_counter() - t2
    if alternatives:
        t1 = time.perf_counter()
        setting = Setting(cluster, cfg, chosen.specs, chosen.members, par, atoms, global_batch, seq, microbatch_size,
                          time_model, tuple(candidates))
        out.alternatives = plan_alternatives(setting, deadline)
        timing["alternatives_s"] = time.perf_counter() - t1
        _rank(out)
    return out


def _incumbent_s(attempts: list[Attempt]) -> float | None:
    """The best iteration time found so far (None: no plan yet): what a micro-batch size's
    lower bound must beat for the size to be planned."""
    times = [a.result.objective for a in attempts if a.result is not None and a.result.status.has_solution]
    return min(times, default=None)


def _imbalance_hid_plans(attempt: Attempt) -> bool:
    """The composition proved no pipeline fits, but only over pairs left after imbalance pruning."""
    return (attempt.result is not None and attempt.result.status is Status.INFEASIBLE
            and attempt.stats.pruned.get("imbalance", 0) > 0)


def _price_given(layout: GivenLayout | tuple[IslandBlock, ...], chosen: ChosenIslands, cluster: Cluster, cfg: ModelConfig,
                 global_batch: int, seq: int) -> PricedLayout | PricedPipeline:
    """``--layout`` priced: one layout on a cluster of one island, or one per island (``IslandBlock`` s)."""
    if isinstance(layout, tuple):
        if chosen.left_out:
            raise InputError(f"--layout: the plan composes {len(chosen.specs)} of the cluster's islands "
                             f"({', '.join(chosen.left_out)} left out); give --max-islands to compose them all")
        return price_island_layouts(layout, chosen.specs, lambda m: link_matrix(cluster, chosen.members, cfg, seq, m), cfg,
                                    global_batch=global_batch, seq=seq)
    if len(chosen.specs) + len(chosen.left_out) != 1:
        names = ", ".join(s.name for s in chosen.specs)
        raise InputError(f"--layout: {cluster.name} forms {len(chosen.specs) + len(chosen.left_out)} islands ({names}); "
                         "give one layout per island: \"ISLAND: layers=K tp=.. pp=.. dp=..; ...\"")
    return price_layout(layout, chosen.specs[0], cfg, global_batch=global_batch, seq=seq)


def _fill(out: HeteroPlan, best: Attempt, specs: list[IslandSpec], cluster: Cluster, cfg: ModelConfig, seq: int) -> None:
    """The plan's figures and stages from the composition's solution."""
    res = best.result
    sol = res.solution
    out.microbatch_size = best.microbatch_size
    out.microbatches = out.global_batch // best.microbatch_size
    out.iteration_time_s = res.objective
    out.simulated_s = getattr(sol, "simulated_or_none", None)
    out.analytic_s = getattr(sol, "iteration_time_s", None)
    out.time_model = res.stats.get("time_model", "closed form")
    out.throughput_samples_s = out.global_batch / res.objective
    out.tflops_per_gpu = out.global_batch * model_training_flops(cfg, seq) / res.objective / cluster.gpus / 1e12
    out.efficiency = out.ideal_time_s / res.objective
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
                    ep=pp.ep, fsep=pp.fsep, cp=pp.cp, offload=pp.offload,
                )
            )
            first += s.layers


def _rank(out: HeteroPlan) -> None:
    candidates = [("tangram-composed", out.iteration_time_s)] + [(a.name, a.iteration_time_s) for a in out.alternatives]
    timed = [(n, t) for n, t in candidates if t is not None]
    if not timed:
        return
    out.best = min(timed, key=lambda nt: nt[1])[0]
    if out.iteration_time_s is not None:
        out.speedups = {a.name: a.iteration_time_s / out.iteration_time_s for a in out.alternatives if a.iteration_time_s}
