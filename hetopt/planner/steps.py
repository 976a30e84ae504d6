"""The end-to-end planner: cluster + model in, best heterogeneous plan out.

:func:`plan` checks its request (``planner/setup/request.py``) and runs named steps, each a function
of this module or one below it:

1. **budget** — the call's deadlines (:func:`_budget`);
2. **islands** — the islands family forms the fewest homogeneous islands;
3. **configure** — which islands are composed, the parallelizer held to the runtime and the
   islands' precision, the micro-batch sizes and atoms (:func:`_configure`);
4. **price the given layout** — a user's layout on the same cost model (``planner/setup/layout.py``);
5. **search** — every micro-batch size enumerated and composed (``planner/search/sizes.py``);
6. **conclude** — status, bound, gap and reason from one rule (``planner/search/outcome.py``);
7. **replicas** and **alternatives** — the other plans on the same islands;
8. **answer** — the frozen :class:`~hetopt.planner.answer.HeteroPlan` (:func:`_answer`).

Never OPTIMAL unless every step proved its part, never INFEASIBLE unless every micro-batch size
was proven not to fit: ``conclude_plan`` does for the planner what ``hetopt.family.conclude``
does for a solver.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import replace
from collections.abc import Callable
from concurrent.futures import Executor

from hetopt import solvers
from hetopt.budget import Deadline
from hetopt.errors import InputError
from hetopt.interrupt import stop_requested
from hetopt.planner.alternatives.baselines import Setting, alternative_queries, plan_alternatives
from hetopt.planner.answer import (Alternative, HeteroPlan, StageRow, given_layout_figures, ideal_time, model_training_flops,
                                   plan_cost, plan_figures, rank, self_contained)
from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
from hetopt.planner.alternatives.cheapest import plan_priced
from hetopt.planner.setup.cluster import Cluster
from hetopt.planner.search.compose import microbatch_candidates, uncomposable_microbatch_sizes
from hetopt.planner.evaluation.coverage import outside_calibration
from hetopt.planner.setup.configure import (LARGE_CLUSTER_ATOMS, MAX_COMPOSE_ISLANDS, Setup,
                                      choose_islands, configure, price_given)
from hetopt.planner.search.enumerate import Ahead, all_slices
from hetopt.planner.search.launchable import launch_summary
from hetopt.planner.setup.layout import PricedLayout, PricedPipeline
from hetopt.planner.search.outcome import Attempt, ChosenIslands, PlanOutcome, conclude_plan, stopped_by_user
from hetopt.planner.parallelizer.protocol import Parallelizer, held_gpus
from hetopt.planner.parallelizer.pricecache import collector_paused
from hetopt.planner.alternatives.replicas import ReplicasPlan, plan_replicas
from hetopt.planner.setup.request import PlanRequest, as_cluster, as_model
from hetopt.planner.budget import PlanBudget
from hetopt.planner.search.sizes import SearchContext, enumeration_summary, search_sizes
from hetopt import costmodel as cm
from hetopt.result import Result, Status
from hetopt.runtimes import RUNTIMES, Job
from hetopt.units import GBPS, GIB, MEMORY_RTOL
from hetopt.workload import ModelConfig, parameters

__all__ = ["LARGE_CLUSTER_ATOMS", "MAX_COMPOSE_ISLANDS", "Alternative", "HeteroPlan", "PlanRequest", "StageRow", "as_cluster", "as_model", "choose_islands", "conclude_plan",
           "ideal_time", "microbatch_candidates", "model_training_flops", "plan"]



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

    Every option is checked by name before any work (:meth:`PlanRequest.checked`); what each
    one does is written once, in :class:`~hetopt.planner.setup.request.PlanRequest`.

    Parameters
    ----------
    request, cfg
        A :class:`~hetopt.planner.setup.request.PlanRequest`; or the cluster and the model (loaded
        objects, paths to their files, or names in ``instances/clusters`` and
        ``instances/models``), with the request's other fields as keywords.
    parallelizer
        Any :class:`~hetopt.planner.parallelizer.protocol.Parallelizer` (default: the built-in one).
    executor
        Where parallelizer queries run (a :class:`hetopt.planner.search.workers.ProcessPool`, which
        replaces dead workers, any process pool, a Dask client's executor); None runs them
        here, in this process (``hetopt plan`` uses a pool unless ``--workers 1``).
    on_progress
        Called as ``on_progress(phase, done, total)`` as the planner goes: ``"islands"`` (0 of 1,
        then 1 of 1), ``"micro-batch M: enumeration"`` (parallelizer queries answered of those
        sent; the count is known when they are sent, the answers come in batches),
        ``"micro-batch M: composing N plans"`` (micro-batch sizes done of all, while the
        pipeline family composes this one), ``"replicas"`` and ``"alternatives"`` (0 of 1, 1 of 1).

    Returns
    -------
    HeteroPlan
        Frozen; its status, bound and gap follow :func:`~hetopt.planner.search.outcome.conclude_plan`.

    Raises
    ------
    TypeError
        An unknown keyword (naming the closest option), or options beside a request.
    InputError
        A field that is not what it must be (named, ``field`` set): a micro-batch size that
        does not divide the global batch, a bad batch or time limit, an unknown cluster or
        model name, a layout the cluster or model cannot hold.
    hetopt.planner.search.workers.WorkersLost
        When the executor's workers are gone (a pool that keeps dying, a Dask cluster
        without workers).

    Examples
    --------
    >>> p = plan("tangram-c2", "gpt3-1.3b", global_batch=16, microbatch_size=4, alternatives=False)
    >>> p.status, p.microbatch_size
    (<Status.OPTIMAL: 'OPTIMAL'>, 4)
    """
    if isinstance(request, PlanRequest):
        if cfg is not None or options:
            raise TypeError("plan(request): give every option inside the PlanRequest, not beside it")
    else:
        request = PlanRequest.of(cluster=request, model=cfg, **options)
    request = request.checked()
    _check_collaborators(parallelizer, executor, on_progress, request)
    if request.layers_per_atom is not None:
        parallelizer = BuiltinParallelizer(layers_per_atom=request.layers_per_atom)
    if request.memory_headroom is not None:  # the built-in parallelizer reserves it on every GPU
        parallelizer = replace(parallelizer or BuiltinParallelizer(), reserved_bytes=request.memory_headroom * GIB)
    with collector_paused():  # the parallelizer's memo, which only grows, traversed by no pass (``collector_paused``)
        answer = _plan(request, parallelizer, executor, on_progress)
    # every answer carries its model's shape, the cluster's nodes and its memory headroom (hetopt.planfile)
    reserved = getattr(parallelizer or BuiltinParallelizer(), "reserved_bytes", None)
    answer = replace(answer, **self_contained(as_cluster(request.cluster), as_model(request.model), reserved))
    if stop_requested():  # a Ctrl-C (the command line's first): the answer says so, not "time limit"
        answer = _stopped_by_user(answer)
    if request.target is not None and answer.launchability is None:
        # stopped before the search (no time, no islands, a model too large for the cluster):
        # the target is still named, with nothing planned beside it
        runtime = RUNTIMES[request.target]
        answer = replace(answer, target=runtime.name,
                         launchability=launch_summary(runtime, None, None, answer.status, "this plan", None))
    return answer


def _stopped_by_user(answer: HeteroPlan) -> HeteroPlan:
    """The plan after a Ctrl-C stopped it: every step stopped as at its time limit and said so,
    but the plan had no limit (or not that one); its reason, the cut alternatives' and replicas'
    and the launchability line speak of Ctrl-C instead (``outcome.stopped_by_user``)."""
    cut = (Status.FEASIBLE, Status.TIME_LIMIT)  # what a stop leaves; a proven answer was not cut
    changes: dict = {}
    if answer.status in cut:
        changes["reason"] = stopped_by_user(answer.reason)
    if answer.alternatives:
        changes["alternatives"] = [replace(a, detail=stopped_by_user(a.detail, lead=False)) if a.status in cut else a
                                   for a in answer.alternatives]
    if answer.replicas is not None and answer.replicas.status in cut and answer.replicas.reason:
        changes["replicas"] = replace(answer.replicas, reason=stopped_by_user(answer.replicas.reason))
    if answer.launchability is not None:
        changes["launchability"] = {**answer.launchability,
                                    "summary": stopped_by_user(answer.launchability["summary"], lead=False)}
    return replace(answer, **changes)


def _check_collaborators(parallelizer: object, executor: object, on_progress: object, request: PlanRequest) -> None:
    """The objects beside the request, by name (``InputError.field``)."""
    if parallelizer is not None and not isinstance(parallelizer, Parallelizer):
        raise InputError(f"parallelizer: must implement hetopt.planner.Parallelizer (got {type(parallelizer).__name__})",
                         field="parallelizer")
    if parallelizer is not None and request.memory_headroom is not None:
        raise InputError("memory_headroom: sets the built-in parallelizer's reserved bytes; give them to your own "
                         "parallelizer", field="memory_headroom")
    if parallelizer is not None and request.layers_per_atom is not None:
        raise InputError("layers_per_atom: sets the built-in parallelizer's atoms; give them to your own parallelizer",
                         field="layers_per_atom")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise InputError(f"executor: must be a concurrent.futures.Executor (got {type(executor).__name__})",
                         field="executor")
    if on_progress is not None and not callable(on_progress):
        raise InputError(f"on_progress: must be callable as on_progress(phase, done, total) (got {on_progress!r})",
                         field="on_progress")


def _plan(r: PlanRequest, parallelizer: Parallelizer | None, executor: Executor | None,
          on_progress: Callable[[str, int, int], None] | None) -> HeteroPlan:
    """:func:`plan` of a checked request: the steps in order."""
    budget = PlanBudget(r.time_limit, alternatives=r.alternatives, replicas=r.replicas)
    inner, composing = budget.inner, budget.composing
    cluster, cfg = as_cluster(r.cluster), as_model(r.model)
    layout = r.runtime.layouts(r.layout) if r.runtime is not None and r.layout is not None else r.layout
    seq = r.seq or cfg.sequence
    ideal = ideal_time(cluster, cfg, r.global_batch, seq)
    # the ideal rests on the GPUs' peak FLOP/s, which a measured profile's times may beat: then
    # it bounds nothing, and a plan's bound is its composition's alone
    ideal_bound = 0.0 if getattr(parallelizer, "measured", None) is not None else ideal
    timing = {"islands_s": 0.0, "enumeration_s": 0.0, "composition_s": 0.0, "alternatives_s": 0.0}
    too_large = _state_exceeds_cluster(cluster, cfg, parallelizer)
    if too_large is not None:  # proven before any search: no layout of any plan holds the training state
        return _answer(r, cluster, cfg, seq, ideal, PlanOutcome(Status.INFEASIBLE, too_large), timing=timing)
    t0 = time.perf_counter()
    _progress(on_progress, "islands", 0)
    islands = _form_islands(cluster, composing)
    _progress(on_progress, "islands", 1)
    timing["islands_s"] = time.perf_counter() - t0
    if not islands.status.has_solution:
        outcome = conclude_plan(islands, None, [], len(microbatch_candidates(r.global_batch, r.microbatch_size)),
                                cluster=cluster.name, model=cfg.name, ideal_s=ideal_bound)
        return _answer(r, cluster, cfg, seq, ideal, outcome, timing=timing)
    if r.priced:  # the cheapest plan, or the fastest within a budget: over the sets of islands it pays for
        answer = plan_priced(r, cluster, cfg, seq, islands, inner, lambda q: _plan(q, parallelizer, executor, on_progress))
        return _with_every_island(answer, cluster, islands)
    setup = configure(r, parallelizer, layout, cluster, cfg, islands)
    given = None if setup.layout is None else price_given(setup.layout, setup.chosen, cluster, cfg, r.global_batch, seq,
                                                                    r.memory_headroom, parallelizer=setup.parallelizer)
    runtime = None if r.target is None else RUNTIMES[r.target]
    job = Job(setup.precision, seq, cfg.experts, cfg.tied_embeddings)
    wants_alternatives = r.alternatives or (runtime is not None and not runtime.pipeline)  # Cephalo's plan is the FSDP alternative
    setting = Setting(cluster, cfg, setup.chosen.specs, setup.chosen.members, setup.parallelizer, setup.atoms,
                      r.global_batch, seq, r.microbatch_size, r.time_model, tuple(setup.candidates), r.mixed_stages)
    ahead = None
    if wants_alternatives and math.isinf(composing.limit) and Ahead.usable(setup.parallelizer, executor):
        # the alternatives' queries go to the workers while this process composes; not under a
        # time limit, where they would take worker time from an enumeration the deadline cuts
        ahead = Ahead(setup.parallelizer, executor)
    ctx = SearchContext(cluster, cfg, seq, r.global_batch, setup.chosen, setup.parallelizer,
                        all_slices(setup.parallelizer, setup.atoms), r.policies, r.imbalance, executor, r.tasks,
                        on_progress, r.time_model, r.global_batch * model_training_flops(cfg, seq),
                        runtime if runtime is not None and runtime.pipeline else None, job,
                        None if ahead is None else _sender(ahead, setting), r.gap_limit)
    try:
        attempts = search_sizes(ctx, setup.candidates, r.microbatch_size, composing, timing)
    except BaseException:
        if ahead is not None:
            ahead.cancel()
        raise
    planned = len(setup.candidates) + len(uncomposable_microbatch_sizes(r.global_batch, r.microbatch_size))
    outcome = conclude_plan(islands, setup.chosen, attempts, planned, setup.narrowed, cluster=cluster.name,
                            model=cfg.name, ideal_s=ideal_bound, gap_limit=r.gap_limit)
    replicas = None
    if r.replicas:
        t1 = time.perf_counter()
        _progress(on_progress, "replicas", 0)
        replicas = plan_replicas(cluster, cfg, islands, global_batch=r.global_batch, ideal_s=ideal,
                                 microbatch_size=r.microbatch_size or 1, seq=seq, deadline=inner)
        timing["replicas_s"] = time.perf_counter() - t1
        _progress(on_progress, "replicas", 1)
    alternatives = None
    if wants_alternatives:
        t1 = time.perf_counter()
        _progress(on_progress, "alternatives", 0)
        if ahead is not None:
            ahead.collect(inner)
        alternatives = plan_alternatives(setting, inner)
        timing["alternatives_s"] = time.perf_counter() - t1
        _progress(on_progress, "alternatives", 1)
    answer = _answer(r, cluster, cfg, seq, ideal, outcome, timing=timing, setup=setup, attempts=attempts, given=given,
                     replicas=replicas, alternatives=alternatives)
    if runtime is None:
        return answer
    t1 = time.perf_counter()
    free = _unrestricted(r, cluster, cfg, seq, ideal, islands, setup, attempts, planned, answer, inner, parallelizer,
                         executor)
    timing["unrestricted_s"] = time.perf_counter() - t1
    if runtime.pipeline:
        launch = (answer.iteration_time_s, answer.status, "this plan")
    else:
        fsdp = next((a for a in answer.alternatives if a.name == CEPHALO_PLAN), None)
        launch = (None, Status.INFEASIBLE, CEPHALO_PLAN) if fsdp is None else (fsdp.iteration_time_s, fsdp.status,
                                                                               f"the {CEPHALO_PLAN} alternative")
    if runtime.precision is not None and not any(spec.gpu.bf16 for spec in setup.chosen.specs) and not answer.status.has_solution:
        answer = replace(answer, reason=f"{runtime.title} trains in {runtime.precision} only and no island's GPUs have BF16 "
                         f"({', '.join(sorted({spec.gpu.name for spec in setup.chosen.specs}))})")
    return replace(answer, target=runtime.name,
                   launchability=launch_summary(runtime, job, *launch, free, setup.chosen.excluded))


def _progress(on_progress: Callable[[str, int, int], None] | None, phase: str, done: int) -> None:
    """A one-step phase begun (``done`` 0) or ended (1), for :func:`plan`'s ``on_progress``."""
    if on_progress is not None:
        on_progress(phase, done, 1)


def _sender(ahead: Ahead, setting: Setting) -> Callable[[int], None]:
    """What the search calls after each micro-batch size's enumeration: that size's alternative
    queries sent to the workers (``Ahead``)."""
    pairs = alternative_queries(setting)

    def send(m: int) -> None:
        ahead.send(pairs, microbatch_size=m, microbatches=setting.global_batch // m, global_batch=setting.global_batch)

    return send


#: The alternative that is Cephalo's launchable plan (per-GPU batches under FSDP).
CEPHALO_PLAN = "cephalo-fsdp"


def _unrestricted(r: PlanRequest, cluster: Cluster, cfg: ModelConfig, seq: int, ideal: float, islands: Result, setup: Setup,
                  attempts: list[Attempt], planned: int, answer: HeteroPlan, inner: Deadline,
                  parallelizer: Parallelizer | None, executor: Executor | None) -> HeteroPlan:
    """The plan without the target's rules, for the price of launchability.

    Cephalo's plan is an alternative, so the unrestricted one is the plan itself. Otherwise the
    search composed both on one enumeration (``Attempt.free``), unless the target left islands
    out (no BF16): then the unrestricted plan, which may use them, is planned again over all.
    """
    if not RUNTIMES[r.target].pipeline:
        return answer
    if setup.chosen.excluded:
        return _plan(replace(r, target=None, alternatives=False, replicas=False, layout=None,
                             time_limit=inner.seconds_left()),
                     parallelizer, executor, None)
    free = [replace(a, result=a.free, plans=a.free_plans) if a.free is not None else a for a in attempts]
    outcome = conclude_plan(islands, setup.chosen, free, planned, setup.narrowed, cluster=cluster.name, model=cfg.name,
                            ideal_s=0.0 if getattr(parallelizer, "measured", None) is not None else ideal,
                            gap_limit=r.gap_limit)
    return _answer(replace(r, target=None), cluster, cfg, seq, ideal, outcome, timing={}, setup=setup, attempts=free)


def _outside_calibration(setup: Setup, best: Attempt, seq: int) -> list[str]:
    """The plan's regimes no calibration covers: its GPUs, its islands' networks, its micro-batches."""
    specs = setup.chosen.specs
    used = {block.island for block in best.result.solution.blocks}
    plans = [best.plans[block.option] for block in best.result.solution.blocks]
    lines = outside_calibration(
        [specs[i].gpu for i in sorted(used)],
        [specs[i].inter_bandwidth / GBPS for i in sorted(used) if specs[i].nodes > 1],
        [max(1, pp.microbatch_size * seq // (pp.dp * pp.cp)) for pp in plans],
        host_bound=sum(st.host_bound for pp in plans for st in pp.stages),
    )
    host = setup.parallelizer.running.host
    if cm.HOST_STACKS[host] > cm.HOST_STACKS[cm.DEFAULT_HOST]:  # a slower stack than the default's (not cudagraph)
        # the allocation model is affine in the batch, with no floor (formulations/costmodel.md,
        # "The host's floor"): beside pipelines held to an older stack's host time it is optimistic
        lines.append(f"the cephalo-fsdp alternative is priced without the host's time of host={host} "
                     "(the allocation model has no floor)")
    return lines


def _state_exceeds_cluster(cluster: Cluster, cfg: ModelConfig, parallelizer: Parallelizer | None) -> str | None:
    """Why no plan fits, when the training state alone does not fit the whole cluster (None: it may).

    Every layout holds the model's training state once over the cluster, at least the bytes a
    parameter of the leanest of ``cm.PRECISIONS`` (``cm.DISTRIBUTED_OPTIMIZER_BYTES``, all of it
    sharded: ZeRO-3 over every GPU), and keeps the built-in parallelizer's reserved bytes on every
    GPU: a proof under the built-in cost model (another parallelizer prices memory its own way,
    so it is not asked).
    """
    if parallelizer is not None and type(parallelizer) is not BuiltinParallelizer:
        return None
    reserved = (parallelizer or BuiltinParallelizer()).reserved_bytes
    per_parameter = min(sum(cm.DISTRIBUTED_OPTIMIZER_BYTES[p]) for p in cm.PRECISIONS)
    count = parameters(cfg)
    state = count * per_parameter
    gpus = sum(node.gpus for node in cluster.islands.nodes)
    memory = sum(node.gpus * node.memory_bytes for node in cluster.islands.nodes)
    if state + gpus * reserved <= memory * (1.0 + MEMORY_RTOL):
        return None
    return (f"the training state alone does not fit {cluster.name}: {count:,} parameters x {per_parameter:g} "
            f"bytes (fully sharded) = {state / GIB:,.1f} GiB, with {reserved / GIB:g} GiB reserved on each of its {gpus} GPUs, "
            f"exceeds its {memory / GIB:,.1f} GiB; no layout fits (a smaller model or a larger cluster)")


def _form_islands(cluster: Cluster, deadline: Deadline) -> Result:
    """The islands family's fewest homogeneous islands, within ``deadline``."""
    return solvers.solve(cluster.islands, time_limit=deadline.seconds_left())


def _with_every_island(answer: HeteroPlan, cluster: Cluster, islands: Result) -> HeteroPlan:
    """A priced plan (``planner/cheapest.py``) listing every island of the cluster: each set of
    them was planned over, not only the one the plan runs on (whose islands come first)."""
    held = {node for i in answer.islands for node in i["members"]}
    others = [row for row in _island_rows(choose_islands(cluster, islands, None)) if held.isdisjoint(row["members"])]
    return replace(answer, islands=answer.islands + others)


def _island_rows(chosen: ChosenIslands) -> list[dict]:
    """The plan's ``islands``: each island's name, GPU type, nodes, GPUs and member nodes."""
    return [{"name": s.name, "gpu": s.gpu.name, "nodes": s.nodes, "gpus": s.gpus, "members": names}
            for s, names in zip(chosen.specs, chosen.names)]


def _answer(r: PlanRequest, cluster: Cluster, cfg: ModelConfig, seq: int, ideal: float, outcome: PlanOutcome, *,
            timing: dict[str, float], setup: Setup | None = None, attempts: list[Attempt] = (),
            given: PricedLayout | PricedPipeline | None = None, replicas: ReplicasPlan | None = None,
            alternatives: list[Alternative] | None = None) -> HeteroPlan:
    """The frozen plan from what the steps found."""
    figures = {} if outcome.best is None else plan_figures(outcome.best, setup.chosen.specs, cluster, cfg, seq, r.global_batch,
                                                        ideal)
    time_s = figures.get("iteration_time_s")
    tokens = r.global_batch * seq
    alternatives = None if alternatives is None else [
        a if a.gpus_by_type is None or not a.iteration_time_s else
        replace(a, cost=plan_cost(a.gpus_by_type, cluster.prices, a.iteration_time_s, tokens)) for a in alternatives]
    ranked = {} if alternatives is None else rank(time_s, alternatives)
    extra = {} if setup is None else {
        "islands": _island_rows(setup.chosen),
        "left_out": setup.chosen.left_out, "runtime": setup.runtime,
        "unfused_attention": setup.unfused_attention, "enumeration": enumeration_summary(attempts),
        # every setting the plan was priced under, its precision the job's
        "running": replace(setup.parallelizer.running, precision=setup.precision),
    }
    if setup is not None and outcome.best is not None:
        extra["outside_calibration"] = _outside_calibration(setup, outcome.best, seq)
        if getattr(setup.parallelizer, "measured", None) is not None:  # plan --profile: which term came from where
            from hetopt.profile.measured import priced_from
            extra["priced_from"] = priced_from(
                [(setup.chosen.specs[b.island].name, outcome.best.plans[b.option]) for b in outcome.best.result.solution.blocks],
                setup.parallelizer.measured)
    if time_s:
        extra["cost"] = plan_cost(held_gpus(setup.chosen.specs, {b.island for b in outcome.best.result.solution.blocks}),
                                  cluster.prices, time_s, tokens)
    return HeteroPlan(
        cluster=cluster.name, model=cfg.name, global_batch=r.global_batch, seq=seq, status=outcome.status,
        reason=outcome.reason, bound_s=outcome.bound_s, gap=outcome.gap, ideal_time_s=ideal, timing_s=timing,
        **{"microbatch_size": 0, "microbatches": 0, **figures}, **extra, **ranked,
        given_layout=None if given is None else given_layout_figures(given, r.time_model, time_s),
        replicas=replicas, alternatives=alternatives or [],
    )


