"""The planner's search step: every micro-batch size enumerated and composed, or proven useless.

For each candidate micro-batch size, in turn and with what is left of the budget: a lower bound
(:func:`~hetopt.planner.search.compose.pipeline_lower_bound`, or the simulated schedule's own) that
cannot beat the best plan found proves the size useless and skips it; otherwise the parallelizer
enumerates partial plans for every (slice, island) pair (``planner/search/enumerate.py``) and the
pipeline family's ``dp`` composes them (``planner/search/compose.py``), re-scored by the 1F1B
simulation when the time model asks for it. By closed-form time, the composition's own bound
(:func:`~hetopt.pipeline.bound.composition_bound`) may rule the size out right after its
enumeration, and the ``dp`` gets the best plan so far as its cutoff (:func:`_ruled_out`);
the built-in parallelizer's enumeration itself is then cut to the plans that may beat it
(:func:`start_enumeration`), and a gap limit lowers that aim by its share (:func:`cutoff`).
Sizes with more micro-batches than the pipeline family composes are not planned, unless
their bound rules them out. The result is one
:class:`~hetopt.planner.search.outcome.Attempt` per size, which ``conclude_plan`` turns into a status.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from typing import Any

from hetopt import solvers
from hetopt.budget import Deadline
from hetopt.family import no_solution
from hetopt.interrupt import armed
from hetopt.pipeline.bound import composition_bound
from hetopt.pipeline.dp_table import MAX_USAGE_STATES
from hetopt.pipeline.problem import MAX_MICROBATCHES
from hetopt.planner.budget import enumeration_deadline
from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
from hetopt.planner.setup.cluster import Cluster
from hetopt.planner.search.compose import job_element_bytes, link_matrix, pipeline_instance, pipeline_lower_bound, uncomposable_microbatch_sizes
from hetopt.planner.search.enumerate import Enumeration, EnumerationStats
from hetopt.planner.search.launchable import compose_launchable
from hetopt.planner.search.outcome import Attempt, ChosenIslands
from hetopt.planner.parallelizer.protocol import Parallelizer, Slice
from hetopt.planner.parallelizer.pricecache import collector_paused
from hetopt.planner.search.schedule import rescore, simulated_lower_bound
from hetopt.planner.search.workers import ProcessPool
from hetopt.result import Status, bound_within_gap
from hetopt.runtimes import Job, Runtime
from hetopt.tables import counted
from hetopt.workload import ModelConfig

@dataclass(frozen=True)
class SearchContext:
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
    #: training FLOPs of one iteration, for the micro-batch sizes' lower bounds
    work_flops: float = 0.0
    #: the runtime a launchable plan is searched for (``planner/search/launchable.py``) and the job it runs
    target: Runtime | None = None
    job: Job | None = None
    #: called with a micro-batch size once its enumeration is in (or the size is skipped), before
    #: it is composed: the planner sends the alternatives' queries of that size to the workers,
    #: which would otherwise wait while this process composes
    ahead: Callable[[int], None] | None = None
    #: the relative gap within which a plan counts as proven (``PlanRequest.gap_limit``): a size
    #: whose plans cannot beat the best one found by more than it is not searched further
    gap_limit: float = 0.0


#: Seconds between two looks at the deadline while :func:`within` waits for its work.
WITHIN_POLL_S = 0.05


def within(deadline: Deadline, work: Callable[[], Any]) -> Any:
    """``work()``, or None when ``deadline`` expires (a time limit, or Ctrl-C) before it ends.

    For work that cannot look at a clock itself: building the composition's instance checks
    every option of every plan (12 s for the datacenter's 12,891 plans on a loaded machine),
    which kept a Ctrl-C waiting and ran past a time limit. It runs in a thread of its own that
    is left to finish unread (a daemon thread: it does not hold the process at exit) when the
    deadline comes first; an error it raises is raised here.

    Examples
    --------
    >>> within(Deadline(None), lambda: 6 * 7)
    42
    >>> within(Deadline(0.0), lambda: 6 * 7) is None
    True
    """
    if math.isinf(deadline.limit) and not armed():  # nothing can stop it: no thread needed
        return work()
    if deadline.expired():
        return None
    done, out = threading.Event(), {}

    def run() -> None:
        try:
            out["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            out["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="hetopt-within", daemon=True).start()
    while not done.wait(WITHIN_POLL_S):
        if deadline.expired():
            return None
    if "error" in out:
        raise out["error"]
    return out["value"]


def start_enumeration(ctx: SearchContext, m: int, incumbent: float = math.inf) -> Enumeration:
    """Micro-batch size ``m``'s queries, pruned and (with an executor) sent to the workers.

    With the best plan's time so far (``incumbent``) and a search that cuts (:func:`cutoff`),
    the built-in parallelizer returns only the plans that may be part of a faster pipeline
    (its ``faster_than``): on the datacenter's whole space, 337-2,007 of a size's 12,005-35,415
    plans, and most of their pricing skipped (docs/planner.md).
    """
    progress = None if ctx.on_progress is None else (
        lambda done, total: ctx.on_progress(f"micro-batch {m}: enumeration", done, total))
    limit = cutoff(ctx, incumbent)
    faster_than = limit if limit is not None and _cuts_enumerations(ctx) else math.inf
    return Enumeration(ctx.parallelizer, ctx.slices, ctx.islands.specs, microbatch_size=m,
                       microbatches=ctx.global_batch // m, global_batch=ctx.global_batch, policies=ctx.policies,
                       imbalance=ctx.imbalance, executor=ctx.executor, on_progress=progress, tasks=ctx.tasks,
                       faster_than=faster_than)


def cutoff(ctx: SearchContext, incumbent: float) -> float | None:
    """The time a plan of the next size must beat to matter, or None when the search does not cut.

    The best plan so far less the gap limit, T·(1 − g): a size proven to hold no plan faster
    than that leaves the answer within g of optimal (at g = 0, optimal). Only by closed-form
    time (the simulated schedule has its own bound, :func:`_skipped_by_bound`) and without a
    ``target`` (its launchable search composes groups apart).

    Examples
    --------
    >>> ctx = SearchContext(*[None] * 12, time_model="closed-form", gap_limit=0.02)
    >>> cutoff(ctx, 4.0), cutoff(ctx, math.inf)
    (3.9200000000000004, None)
    >>> cutoff(replace(ctx, gap_limit=0.0), 4.0)
    4.0
    """
    if math.isinf(incumbent) or not _cuts(ctx):
        return None
    return bound_within_gap(incumbent, ctx.gap_limit)


def cuts_by_best(time_model: str, target: str | None) -> bool:
    """Whether the best plan of the sizes before may rule a size out (:func:`cutoff`), and so
    whether a gap limit takes effect: by closed-form time (the simulated schedule is compared
    only after composing) and with no target (a launchable plan is composed per runtime group).

    >>> cuts_by_best("closed-form", None), cuts_by_best("simulated", None), cuts_by_best("closed-form", "megatron")
    (True, False, False)
    """
    return time_model != "simulated" and target is None


def _cuts(ctx: SearchContext) -> bool:
    return cuts_by_best(ctx.time_model, ctx.target)


def _cuts_enumerations(ctx: SearchContext) -> bool:
    """Whether a size's enumeration is cut too (the built-in parallelizer's ``faster_than``;
    another parallelizer answers the protocol's call)."""
    return _cuts(ctx) and type(ctx.parallelizer) is BuiltinParallelizer


def attempt_size(ctx: SearchContext, m: int, deadline: Deadline, started: Enumeration | None = None,
                 then: Callable[[], None] | None = None, *, sizes: tuple[int, int] = (0, 1),
                 incumbent: float = math.inf) -> Attempt:
    """Enumerate and compose one micro-batch size within ``deadline``.

    ``started``: its enumeration, already sent to the workers (:func:`start_enumeration`);
    ``then``: called once the enumeration is in, before composing (the search starts the next
    size's enumeration there); ``sizes``: the sizes done before this one and all of them, for
    the progress of the composition; ``incumbent``: the best plan's time so far, which the
    composition's own bound may prove this size cannot beat (:func:`_ruled_out`). The
    attempt's ``enumerate_s`` is the time this process waited for the enumeration.
    """
    t0 = time.perf_counter()
    microbatches = ctx.global_batch // m
    enumeration = enumeration_deadline(deadline)
    started = started or start_enumeration(ctx, m, incumbent)
    if ctx.on_progress is not None:  # the count is known now; answers arrive in batches
        ctx.on_progress(f"micro-batch {m}: enumeration", 0, started.stats.queried)
    plans, stats = started.finish(enumeration)
    t1 = time.perf_counter()
    if deadline.expired() and any(plans.values()):
        # stopped (the limit, or Ctrl-C) before composing: nothing more is started for this size,
        # and the composition's instance alone takes seconds to build on the datacenter
        return Attempt(m, None, stats.complete, [], stats, t1 - t0, 0.0)
    if then is not None:
        then()
    if ctx.ahead is not None:
        ctx.ahead(m)
    if ctx.on_progress is not None:
        ctx.on_progress(f"micro-batch {m}: composing {counted(stats.plans, 'plan')}", *sizes)
    links = link_matrix(ctx.cluster, ctx.islands.members, ctx.cfg, ctx.seq, m, job_element_bytes(ctx.parallelizer))
    if ctx.target is not None:
        # the plans on a query's overall Pareto set first, so that an option two plans share is
        # the front one's (pipeline_instance keeps the first of equal options); without a
        # target every plan is on a front
        plans = {i: sorted(ps, key=lambda p: not p.front) for i, ps in plans.items()}
    built = within(deadline, lambda: pipeline_instance(f"{ctx.cluster.name}-{ctx.cfg.name}-m{m}", ctx.cfg,
                                                       ctx.islands.specs, plans, links, microbatches, 1.0))
    if built is None:  # the deadline (or Ctrl-C) came while the instance was built
        return Attempt(m, None, stats.complete, [], stats, t1 - t0, time.perf_counter() - t1)
    whole, whole_behind = built
    instance, behind = whole, whole_behind
    if ctx.target is not None:
        # the unrestricted composition needs only the fronts; the plans a target added are the
        # launchable search's (below)
        on_front = [o for o, p in enumerate(whole_behind) if p.front]
        instance, behind = whole.subset(on_front, whole.name), [whole_behind[o] for o in on_front]
    # a cut enumeration holds every plan of this size faster than its cutoff, so a bound over it
    # bounds the size only up to that cutoff
    cut_at = started.faster_than if stats.complete else math.inf
    limit = cutoff(ctx, incumbent) if stats.complete else None
    if not instance.options and cut_at < math.inf:
        # proven: every plan of this size the parallelizer found was slower than its cutoff
        return Attempt(m, None, True, [], stats, t1 - t0, time.perf_counter() - t1, pruned_bound=cut_at)
    if not instance.options:
        result = no_solution(problem="pipeline", method="dp", status=Status.INFEASIBLE, deadline=Deadline(None),
                             reason="no partial plan of any slice fits any island")
    elif deadline.expired():
        result = None
    elif (bound := _ruled_out(instance, stats, limit, cut_at, deadline)) is not None:
        return Attempt(m, None, True, [], stats, t1 - t0, time.perf_counter() - t1, pruned_bound=min(bound, cut_at))
    else:
        result = compose_exactly(instance, deadline, cutoff=limit, gap_limit=ctx.gap_limit)
        if limit is not None and _none_faster(result, limit, trusted=cut_at < math.inf or not stats.pruned.get("imbalance")):
            # proven: no plan of this size is faster than the best one found, less the gap limit
            return Attempt(m, None, True, [], stats, t1 - t0, time.perf_counter() - t1,
                           pruned_bound=min(result.bound, cut_at))
        if cut_at < math.inf and result.status is Status.INFEASIBLE:
            # no pipeline over the plans faster than the cutoff: none of this size beats it
            return Attempt(m, None, True, [], stats, t1 - t0, time.perf_counter() - t1, pruned_bound=cut_at)
        if ctx.time_model == "simulated":  # the plan's time is its 1F1B schedule's (planner/search/schedule.py)
            # interleaved plans' stages are shaped for the closed form, not for the simulator
            interleaved = frozenset(o for o, pp in enumerate(behind) if getattr(pp, "vpp", 1) > 1)
            result = rescore(instance, result, deadline, interleaved)
    if ctx.target is not None:
        # the same enumeration, held to what the runtime runs as one job; the unrestricted
        # composition stays beside it for the price of launchability
        launch, launch_behind = result, behind
        if result is not None and whole.options:
            launch, launch_behind = compose_launchable(ctx.target, ctx.job, whole, whole_behind, ctx.islands.specs,
                                                       deadline, ctx.time_model)
        return Attempt(m, launch, stats.complete, launch_behind, stats, t1 - t0, time.perf_counter() - t1,
                       free=result, free_plans=behind)
    return Attempt(m, result, stats.complete, behind, stats, t1 - t0, time.perf_counter() - t1)


def _ruled_out(instance, stats: EnumerationStats, limit: float | None, cut_at: float,
               deadline: Deadline) -> float | None:
    """The composition's own lower bound when it proves that no plan of this enumeration beats
    ``limit`` (:func:`cutoff`; the size is then not composed), else None.

    :func:`~hetopt.pipeline.bound.composition_bound` (roles, links and the islands' options
    under each bottleneck, no DP run: a second or two on the datacenter's largest instances)
    bounds the closed form over the pairs enumerated, as the composition's OPTIMAL does; so
    only for a complete enumeration (``limit`` is None otherwise). ``cut_at``: the cutoff the
    enumeration was cut at (inf: not cut).
    """
    if limit is None:
        return None
    bound = composition_bound(instance, stop_at=limit, deadline=deadline)
    if math.isinf(bound) and math.isinf(cut_at) and stats.pruned.get("imbalance", 0):
        # no pipeline at all over the pairs imbalance pruning (a heuristic) left is no proof:
        # the composition says INFEASIBLE and the size is enumerated again without it
        # (``_imbalance_hid_plans``). Over a cut enumeration the same finding says only that no
        # plan beats the cutoff, which is all a cut is asked to prove (``_search_sizes``)
        return None
    return bound if bound >= limit else None


def _none_faster(result, limit: float, *, trusted: bool) -> bool:
    """The composition proved that no plan is faster than ``limit`` (its cutoff) and found none that is.

    ``trusted``: whether a composition that found no plan at all proves it. Not over an uncut
    enumeration that imbalance pruning (a heuristic) left: as for an INFEASIBLE composition, the
    size is then enumerated again without it; over a cut one, no plan is what a cut expects.
    """
    if result.bound is None or result.bound < limit:
        return False
    if not result.status.has_solution:
        return trusted
    return result.objective >= limit


def compose_exactly(instance, deadline: Deadline, *, max_usage_states: int = MAX_USAGE_STATES,
                    cutoff: float | None = None, gap_limit: float = 0.0):
    """The pipeline family's exact composition of ``instance``: ``dp``, or, when the DP declines
    (more usage vectors than ``max_usage_states``: many islands of different signatures), the
    ``milp``'s level model over island signatures with what is left of the time (issue 43).
    ``cutoff``: the dp seeks only plans faster than it (the best of the sizes before);
    ``gap_limit``: the dp stops within it (:func:`~hetopt.pipeline.dp.solve_dp`)."""
    result = solvers.solve(instance, "dp", time_limit=deadline.seconds_left(), max_usage_states=max_usage_states,
                           cutoff=cutoff, gap_limit=gap_limit)
    if result.status is Status.DECLINED and not deadline.expired():
        result = solvers.solve(instance, "milp", time_limit=deadline.seconds_left())
    return result


def _skipped_by_bound(ctx: SearchContext, m: int, attempts: list[Attempt]) -> Attempt | None:
    """The size skipped, with its bound as the proof, when that bound cannot beat the best plan found."""
    island_flops = [x.sustained_flops for x in ctx.islands.specs]
    # the closed form's bound does not bound the schedule: by simulated time, its own
    lower_bound = simulated_lower_bound if ctx.time_model == "simulated" else pipeline_lower_bound
    bound = lower_bound(ctx.work_flops, island_flops, ctx.global_batch // m)
    best = _best_time(attempts)
    aim = cutoff(ctx, best) or best  # less the gap limit, by closed-form time (inf: no plan yet)
    # the bound rests on the built-in cost model's speeds; another parallelizer (a subclass
    # too: it may price stages its own way) gets every size planned
    # (and on the analytic model's: a measured profile's times may beat the GPUs' peak FLOP/s)
    if (type(ctx.parallelizer) is BuiltinParallelizer and ctx.parallelizer.measured is None and math.isfinite(best)
            and bound >= aim):
        return Attempt(m, None, True, [], EnumerationStats(), pruned_bound=bound)
    return None


def _best_time(attempts: Sequence[Attempt]) -> float:
    """The best plan's time among the sizes attempted (inf: none has a plan)."""
    return min((a.result.objective for a in attempts if a.result is not None and a.result.status.has_solution),
               default=math.inf)


def _imbalance_hid_plans(attempt: Attempt) -> bool:
    """The composition proved no pipeline fits, but only over pairs left after imbalance pruning."""
    return (attempt.result is not None and attempt.result.status is Status.INFEASIBLE
            and attempt.stats.pruned.get("imbalance", 0) > 0)


def search_sizes(ctx: SearchContext, candidates: Sequence[int], microbatch_size: int | None, deadline: Deadline,
                 timing: dict[str, float]) -> list[Attempt]:
    """One attempt per micro-batch size, in order; stops starting sizes when ``deadline`` expires.

    ``timing`` gains the enumeration and composition seconds of every size tried.
    """
    with collector_paused():  # the enumeration's memo is traversed by no collector pass (``collector_paused``)
        return _search_sizes(ctx, candidates, microbatch_size, deadline, timing)


def _search_sizes(ctx: SearchContext, candidates: Sequence[int], microbatch_size: int | None, deadline: Deadline,
                  timing: dict[str, float]) -> list[Attempt]:
    """:func:`search_sizes` with the garbage collector paused."""
    attempts: list[Attempt] = []
    # with a local pool and no time limit, the next size's queries go to the workers while this
    # process composes the current one (they would wait otherwise); should the composition
    # then prove the next size useless by its bound, the queries not started are dropped. Not
    # under a time limit: the next size's enumeration would start before its share of the time;
    # nor when the enumerations are cut: each waits for the best plan of every size before it
    # (a cut with one size less would make the answer depend on the pool, and cut less)
    overlap = isinstance(ctx.executor, ProcessPool) and math.isinf(deadline.limit) and not _cuts_enumerations(ctx)
    started: dict[int, Enumeration] = {}
    try:
        for n, m in enumerate(candidates):
            if deadline.expired():
                break
            skipped = _skipped_by_bound(ctx, m, attempts)
            if skipped is not None:  # exact: no plan with this micro-batch size beats the best one found
                if m in started:
                    started.pop(m).cancel()
                attempts.append(skipped)
                if ctx.ahead is not None:
                    ctx.ahead(m)
                continue
            # in turn, each with what is left: one micro-batch size composed completely is worth
            # more than five enumerated in part
            incumbent = _best_time(attempts)
            then = None
            if overlap and n + 1 < len(candidates) and _skipped_by_bound(ctx, candidates[n + 1], attempts) is None:
                nxt = candidates[n + 1]

                def then(nxt: int = nxt) -> None:
                    started[nxt] = start_enumeration(ctx, nxt)
            attempt = attempt_size(ctx, m, deadline, started.pop(m, None), then, sizes=(n, len(candidates)),
                                   incumbent=incumbent)
            if _imbalance_hid_plans(attempt) and not deadline.expired():
                # imbalance pruning is Tangram's heuristic: an infeasibility it may have caused is
                # no proof, so this size is enumerated again without it, and so are the sizes
                # after it (the pairs it prunes are the same for every size; a cut size, which
                # may find no plan by design, could not tell that it failed there)
                timing["enumeration_s"] += attempt.enumerate_s
                timing["composition_s"] += attempt.compose_s
                for left in started.values():
                    left.cancel()
                started.clear()
                ctx = replace(ctx, policies=tuple(p for p in ctx.policies if p != "imbalance"))
                attempt = attempt_size(ctx, m, deadline, sizes=(n, len(candidates)), incumbent=incumbent)
            attempts.append(attempt)
            timing["enumeration_s"] += attempt.enumerate_s
            timing["composition_s"] += attempt.compose_s
    finally:
        for left in started.values():  # stopped early: the queries sent for a size not reached
            left.cancel()
    for m in uncomposable_microbatch_sizes(ctx.global_batch, microbatch_size):
        # a size the pipeline family cannot compose is not planned; only its bound can still
        # prove that no plan of it beats the one found
        attempts.append(_skipped_by_bound(ctx, m, attempts) or Attempt(
            m, None, True, [], EnumerationStats(),
            not_planned=f"not planned: {ctx.global_batch // m} micro-batches, more than the {MAX_MICROBATCHES} "
                        "a pipeline composes"))
    return attempts


def enumeration_summary(attempts: list[Attempt]) -> dict:
    """Per micro-batch size: its enumeration's statistics, or why it was not enumerated."""
    return {a.microbatch_size: {"skipped_bound_s": a.pruned_bound, **(a.stats.to_dict() if a.stats.queried else {})}
            if a.pruned_bound is not None else {"not_planned": a.not_planned} if a.not_planned else a.stats.to_dict()
            for a in attempts}


__all__ = ["WITHIN_POLL_S", "SearchContext", "attempt_size", "enumeration_summary", "search_sizes", "start_enumeration",
           "within"]
