"""Benchmark runs: many instances × methods, timed, with the agreement of the exact methods.

A *suite* file lists instances (paths relative to the suite file)::

    suite = "allocation"
    methods = ["dp", "milp", "cpsat"]      # default for every instance
    time_limit = 60                        # seconds per method run (optional)

    [[instance]]
    path = "../allocation/cephalo-a-gpt-2.7b-b128-analytic.toml"
    methods = ["dp", "dp-faithful"]        # optional, replaces the default
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hetopt.errors import InputError
from hetopt.files import read_toml
from hetopt.io import load
from hetopt.readers.fields import Fields
from hetopt.result import Result
from hetopt.solvers import compare, family, solve


@dataclass(frozen=True)
class Job:
    """One instance file and the methods to run on it."""

    path: Path
    methods: tuple[str, ...] | None  # None: the family's crosscheck choice
    time_limit: float | None = None
    origin: str | None = None  # where the methods were named ("suite.toml: instance[0].methods"), for messages


@dataclass(frozen=True)
class Row:
    """One (instance, method) measurement. ``wall_s`` is the median over the repeats."""

    instance: str
    path: str
    method: str
    status: str
    objective: float | None
    bound: float | None
    gap: float | None
    wall_s: float
    wall_runs: tuple[float, ...]
    agree: bool | None  # do this instance's answers agree (None: fewer than two methods proved one)
    stats: dict = field(default_factory=dict)


def _suite_jobs(path: Path, methods: Sequence[str] | None, time_limit: float | None) -> list[Job]:
    top = Fields(read_toml(path), str(path))
    top.reject_unknown(("suite", "description", "methods", "time_limit", "instance"))
    default = methods or top.strings("methods", None)
    limit = time_limit if time_limit is not None else top.number("time_limit", None, positive=True)
    jobs = []
    for f in top.tables("instance", required=True):
        f.reject_unknown(("path", "methods", "note"))
        target = (path.parent / f.string("path")).resolve()
        if not target.exists():
            raise f.error("path", f"no such file {target} (paths are relative to the suite file)")
        own = f.strings("methods", None)
        named = None if methods else (f"{path}: {f.key('methods')}" if own else f"{path}: methods" if default else None)
        jobs.append(Job(target, tuple(methods or own or default or ()) or None, limit, named))
    return jobs


def collect_jobs(targets: Sequence[str], methods: Sequence[str] | None = None, time_limit: float | None = None) -> list[Job]:
    """Jobs from files, folders (every ``*.toml`` inside, recursively) and suite files.

    Raises
    ------
    InputError
        For a missing path or a malformed suite.
    """
    jobs: list[Job] = []
    for target in targets:
        p = Path(target)
        if p.is_dir():
            files = sorted(p.rglob("*.toml"))
            if not files:
                raise InputError(f"{target}: the folder holds no .toml instance files")
            for f in files:
                jobs.extend(collect_jobs([str(f)], methods, time_limit))
            continue
        data = read_toml(p)
        if "suite" in data:
            jobs.extend(_suite_jobs(p, methods, time_limit))
        else:
            jobs.append(Job(p, tuple(methods) if methods else None, time_limit))
    return jobs


def run_job(job: Job, *, repeat: int = 1, on_step: Callable[[], None] | None = None, **options) -> list[Row]:
    """Run one job; ``repeat`` runs per method, wall time reported as the median.

    Parameters
    ----------
    job
        The instance file and its methods.
    repeat
        Runs per method, at least 1; ``wall_s`` is the median of the runs' ``Result.wall_s``
        (the method call's wall time, model building included; loading the file is not
        counted), and the last run's answer is reported.
    on_step
        Called after each method (for progress bars).
    **options
        As for :func:`hetopt.solve` (``time_limit`` comes from the job).

    Returns
    -------
    list[Row]
        One row per method; ``agree`` as :func:`hetopt.solvers.compare` says for the
        instance (None when fewer than two methods proved an answer).

    Raises
    ------
    ValueError
        For ``repeat`` < 1, or as :func:`hetopt.solve`.
    """
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat: must be an integer >= 1 (got {repeat!r})")
    instance = load(job.path)
    fam = family(instance)
    names = list(job.methods) if job.methods else fam.crosscheck_methods(instance)
    results: list[tuple[Result, list[float]]] = []
    for name in names:
        try:
            runs = [solve(instance, name, time_limit=job.time_limit, **options) for _ in range(repeat)]
        except InputError as exc:  # a method the suite file names that the family does not have
            if job.origin is None or exc.field != "method":
                raise
            raise InputError(f"{job.origin}: {exc}") from None
        results.append((runs[-1], [r.wall_s for r in runs]))
        if on_step is not None:
            on_step()
    agree = compare(instance, [r for r, _ in results]).agree
    return [
        Row(
            instance=getattr(instance, "name", job.path.stem),
            path=str(job.path),
            method=r.method,
            status=r.status.value,
            objective=r.objective,
            bound=r.bound,
            gap=r.gap,
            wall_s=statistics.median(runs),
            wall_runs=tuple(runs),
            agree=agree,
            stats=r.stats,
        )
        for r, runs in results
    ]


def count_steps(job: Job) -> int:
    """Method runs a job makes (for progress bars)."""
    if job.methods:
        return len(job.methods)
    instance = load(job.path)
    return len(family(instance).crosscheck_methods(instance))
