"""``hetopt plan``: resolve names, set up where the parallelizer queries run, call :func:`plan`."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from concurrent.futures import Executor
from dataclasses import replace

from hetopt.errors import InputError
from hetopt.planner.cluster import load_cluster
from hetopt.planner.enumerate import DEFAULT_TASKS, POLICIES
from hetopt.planner.plan import HeteroPlan, as_model, plan
from hetopt.planner.request import PlanRequest
from hetopt.planner.workers import ProcessPool, dask_executor


def policies_from(no_prune: str | None) -> tuple[str, ...]:
    """The pruning policies left on after ``--no-prune a,b`` (or ``all``)."""
    if not no_prune:
        return POLICIES
    off = set(POLICIES) if no_prune == "all" else {p.strip() for p in no_prune.split(",")}
    unknown = off - set(POLICIES)
    if unknown:
        raise InputError(f"--no-prune: unknown policy {', '.join(sorted(unknown))} (known: {', '.join(POLICIES)}, all)")
    return tuple(p for p in POLICIES if p not in off)


@contextlib.contextmanager
def executor_for(workers: int | None, scheduler: str | None, timeout: float | None = None) -> Iterator[Executor | None]:
    """A Dask scheduler's executor (``scheduler``, connecting within ``timeout`` seconds), a
    process pool of ``workers`` processes that replaces dead workers (``workers`` > 1), or
    None (here).

    Raises
    ------
    InputError
        A malformed scheduler address, no Dask scheduler answering there, ``workers`` < 1.
    """
    if scheduler:
        with dask_executor(scheduler, timeout) as executor:
            yield executor
        return
    n = os.cpu_count() or 1 if workers is None else workers
    if n < 1:
        raise InputError(f"--workers {workers}: must be >= 1")
    if n == 1:
        yield None
        return
    with ProcessPool(n) as pool:
        yield pool


def request_from(args) -> PlanRequest:
    """The :class:`PlanRequest` of parsed ``hetopt plan`` arguments (not yet checked)."""
    return PlanRequest(
        cluster=args.cluster, model=args.model, global_batch=args.global_batch, microbatch_size=args.microbatch,
        seq=args.seq, policies=policies_from(args.no_prune), time_limit=args.time_limit,
        alternatives=not args.no_alternatives, max_islands=args.max_islands,
        tasks=DEFAULT_TASKS if args.tasks is None else args.tasks,
        # unset: plan() picks the atoms (coarser on clusters of very many islands)
        layers_per_atom=args.layers_per_atom, layout=getattr(args, "layout", None),
        time_model=getattr(args, "time_model", "closed-form"), replicas=getattr(args, "replicas", False),
        runtime=getattr(args, "runtime", None),
    )


def run_plan(args, on_progress=None) -> HeteroPlan:
    """Run the planner for parsed ``hetopt plan`` arguments.

    Every option is checked (:meth:`PlanRequest.checked`) and the cluster and model read
    before any worker starts.

    Raises
    ------
    InputError
        Unknown cluster or model, bad sizes or time limit (``field`` names the option), a
        scheduler address that is malformed or where no Dask scheduler answers.
    hetopt.planner.workers.WorkersLost
        When the worker processes keep dying or the Dask cluster has no worker left.
    """
    request = request_from(args).checked()
    request = replace(request, cluster=load_cluster(request.cluster), model=as_model(request.model))
    started = time.monotonic()
    with executor_for(args.workers, args.scheduler, request.time_limit) as executor:
        # the limit bounds the whole call: what connecting to a scheduler took is not the plan's
        limit = None if request.time_limit is None else max(request.time_limit - (time.monotonic() - started), 0.0)
        return plan(replace(request, time_limit=limit), executor=executor, on_progress=on_progress)
