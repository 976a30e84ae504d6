"""``hetopt plan``: the planner's request from the parsed flags, the run with its progress line,
the plan printed (:mod:`hetopt.planner.report`), its JSON and its picture."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console

from hetopt.commands.common import (EXIT_USAGE, STATUS_EXIT, Args, check_draw, draw_picture, plan_flag_error)
from hetopt.errors import InputError
from hetopt.jsonout import plain
from hetopt.terminal import progress

if TYPE_CHECKING:  # the planner is imported when a plan runs only
    from hetopt.planner.answer import HeteroPlan
    from hetopt.planner.setup.request import PlanRequest


#: What the counts of a plan's progress phase are (``plan()``'s ``on_progress``), by the phase's
#: kind: its last part's first word ("micro-batch 4: enumeration" counts queries).
PLAN_PROGRESS_UNITS = {"enumeration": "queries", "composing": "sizes"}




def policies_from(no_prune: str | None) -> tuple[str, ...]:
    """The pruning policies left on after ``--no-prune a,b`` (or ``all``)."""
    from hetopt.planner.search.enumerate import POLICIES

    if not no_prune:
        return POLICIES
    off = set(POLICIES) if no_prune == "all" else {p.strip() for p in no_prune.split(",")}
    unknown = off - set(POLICIES)
    if unknown:
        raise InputError(f"--no-prune: unknown policy {', '.join(sorted(unknown))} (known: {', '.join(POLICIES)}, all)")
    return tuple(p for p in POLICIES if p not in off)


def narrow_above_from(text: str | None) -> int | None:
    """``--narrow-above``'s value: the planner's default when not given, None for ``never``.

    >>> narrow_above_from("8"), narrow_above_from("never"), narrow_above_from(None)
    (8, None, 16)
    """
    from hetopt.planner.setup.request import MAX_COMPOSE_ISLANDS

    if text is None:
        return MAX_COMPOSE_ISLANDS
    if text.strip().lower() == "never":
        return None
    try:
        return int(text)  # PlanRequest.checked() holds it to >= 1
    except ValueError:
        raise InputError(f"--narrow-above: must be a whole number of islands or 'never' (got {text!r})") from None


def request_from(args: Args) -> PlanRequest:
    """The :class:`PlanRequest` of parsed ``hetopt plan`` arguments (not yet checked)."""
    from hetopt.planner.search.enumerate import DEFAULT_TASKS
    from hetopt.planner.setup.request import PlanRequest

    return PlanRequest(
        cluster=args.cluster, model=args.model, global_batch=args.global_batch, microbatch_size=args.microbatch_size,
        seq=args.seq, policies=policies_from(args.no_prune), time_limit=args.time_limit,
        gap_limit=getattr(args, "gap_limit", 0.0),
        alternatives=not args.no_alternatives, max_islands=args.max_islands,
        narrow_above=narrow_above_from(getattr(args, "narrow_above", None)),
        tasks=DEFAULT_TASKS if args.tasks is None else args.tasks,
        # unset: plan() picks the atoms (coarser on clusters of very many islands)
        layers_per_atom=args.layers_per_atom, layout=getattr(args, "layout", None),
        time_model=getattr(args, "time_model", "closed-form"), replicas=getattr(args, "replicas", False),
        runtime=getattr(args, "runtime", None), target=getattr(args, "target", None),
        objective=getattr(args, "objective", "time"), budget=getattr(args, "budget", None),
        mixed_stages=getattr(args, "mixed_stages", False), memory_headroom=getattr(args, "memory_headroom", None),
    )


def run_plan(args: Args, on_progress: Callable[[str, int, int], None] | None = None) -> HeteroPlan:
    """Run the planner for parsed ``hetopt plan`` arguments.

    Every option is checked (:meth:`PlanRequest.checked`) and the cluster and model read
    before any worker starts.

    Raises
    ------
    InputError
        Unknown cluster or model, bad sizes or time limit (``field`` names the option), a
        scheduler address that is malformed or where no Dask scheduler answers.
    hetopt.planner.search.workers.WorkersLost
        When the worker processes keep dying or the Dask cluster has no worker left.
    """
    from dataclasses import replace

    from hetopt.planner.setup.cluster import load_cluster
    from hetopt.planner.steps import plan
    from hetopt.planner.setup.request import as_model
    from hetopt.planner.search.workers import executor_for

    request = request_from(args).checked()
    request = replace(request, cluster=load_cluster(request.cluster), model=as_model(request.model))
    parallelizer = None
    if getattr(args, "profile", None):  # the built-in parallelizer pricing from the profiles where they cover it
        from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
        from hetopt.profile.command import load_measured

        parallelizer = BuiltinParallelizer(layers_per_atom=request.layers_per_atom or 1, measured=load_measured(args.profile))
        request = replace(request, layers_per_atom=None)
    started = time.monotonic()
    with executor_for(args.workers, args.scheduler, request.time_limit) as executor:
        # the limit bounds the whole call: what connecting to a scheduler took is not the plan's
        limit = None if request.time_limit is None else max(request.time_limit - (time.monotonic() - started), 0.0)
        return plan(replace(request, time_limit=limit), executor=executor, on_progress=on_progress,
                    parallelizer=parallelizer)


def cmd_plan(args: Args, out: Console) -> int:
    from hetopt.planner import report
    from hetopt.planner.search.workers import WorkersLost

    check_draw(args)
    try:
        return _run_plan(args, out, report)
    except InputError as exc:
        raise plan_flag_error(exc) from None
    except WorkersLost as exc:  # the pool or the cluster is gone: one line, like bad input
        print(f"hetopt: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _run_plan(args: Args, out: Console, report) -> int:
    """Plan (with a progress line on a terminal), print, draw; the exit code."""
    with progress(out, "reading the cluster and the model", 1, show=not args.json) as bar:
        def on_progress(phase: str, done: int, total: int) -> None:
            kind = phase.rsplit(": ", 1)[-1].split(" ", 1)[0]
            bar.update(done, total, phase, PLAN_PROGRESS_UNITS.get(kind, ""))

        result = run_plan(args, on_progress if bar.shown else None)
    document = plain(result)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        report.print_plan(result, out, verbose=args.verbose)
    draw_picture(args, document, "hetopt plan", "plan", bool(document.get("stages")), out)
    return STATUS_EXIT[result.answer_status]
