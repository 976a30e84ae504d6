"""``hetopt plan``: resolve names, set up where the parallelizer queries run, call :func:`plan`."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from concurrent.futures import Executor

from hetopt.errors import InputError
from hetopt.planner.builtin import BuiltinParallelizer
from hetopt.planner.cluster import load_cluster
from hetopt.planner.enumerate import DEFAULT_TASKS, POLICIES
from hetopt.planner.plan import HeteroPlan, as_model, check_time_limit, plan
from hetopt.planner.workers import ProcessPool, dask_executor
#: Largest global batch ``hetopt plan`` accepts (samples per iteration).
MAX_GLOBAL_BATCH = 1 << 20
#: The least time limit a plan is given after connecting to a scheduler took the rest: it
#: then returns TIME_LIMIT at once (a limit must be > 0).
MIN_TIME_LEFT_S = 1e-3


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


def run_plan(args, on_progress=None) -> HeteroPlan:
    """Run the planner for parsed ``hetopt plan`` arguments.

    Raises
    ------
    InputError
        Unknown cluster or model, bad sizes or time limit, a scheduler address that is
        malformed or where no Dask scheduler answers.
    hetopt.planner.workers.WorkersLost
        When the worker processes keep dying or the Dask cluster has no worker left.
    """
    if not 1 <= args.global_batch <= MAX_GLOBAL_BATCH:
        raise InputError(f"--global-batch {args.global_batch}: must be between 1 and {MAX_GLOBAL_BATCH}")
    if args.max_islands is not None and args.max_islands < 1:
        raise InputError(f"--max-islands {args.max_islands}: must be >= 1")
    if args.seq is not None and not 1 <= args.seq <= 1 << 20:
        raise InputError(f"--seq {args.seq}: must be between 1 and {1 << 20}")
    if args.tasks is not None and args.tasks < 1:
        raise InputError(f"--tasks {args.tasks}: must be >= 1")
    if args.layers_per_atom is not None and args.layers_per_atom < 1:
        raise InputError(f"--layers-per-atom {args.layers_per_atom}: must be >= 1")
    check_time_limit(args.time_limit)
    cluster = load_cluster(args.cluster)
    cfg = as_model(args.model)
    started = time.monotonic()
    with executor_for(args.workers, args.scheduler, args.time_limit) as executor:
        # the limit bounds the whole call: what connecting to a scheduler took is not the plan's
        limit = None if args.time_limit is None else max(args.time_limit - (time.monotonic() - started), MIN_TIME_LEFT_S)
        return plan(
            cluster,
            cfg,
            global_batch=args.global_batch,
            microbatch_size=args.microbatch,
            seq=args.seq,
            policies=policies_from(args.no_prune),
            executor=executor,
            time_limit=limit,
            alternatives=not args.no_alternatives,
            on_progress=on_progress,
            max_islands=args.max_islands,
            tasks=args.tasks or DEFAULT_TASKS,
            layout=None if getattr(args, "layout", None) is None else args.layout,
            time_model=getattr(args, "time_model", "closed-form"),
            # unset: plan() picks the atoms (coarser on clusters of very many islands)
            parallelizer=BuiltinParallelizer(layers_per_atom=args.layers_per_atom) if args.layers_per_atom else None,
            replicas=getattr(args, "replicas", False),
            runtime=getattr(args, "runtime", None),
        )
