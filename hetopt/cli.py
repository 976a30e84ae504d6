"""The ``hetopt`` command line: parse, call the library, print. No logic of its own.

Start-up is kept short: a subcommand's ``cmd_*`` function imports what only it needs (the
planner, the generators, the catalogs), and the solver registries import a method's module
(and PuLP, OR-Tools, networkx) only when it runs; ``tests/cli/test_startup.py`` guards that.
A new subcommand is a ``cmd_NAME(args, out) -> exit code`` function and a
``sub.add_parser`` block in :func:`build_parser` that sets ``run=cmd_NAME``.

Exit codes: 0 a solution (or crosscheck agreed); 1 proven infeasible or a disagreement;
2 bad input or usage (one line on stderr), or a method that declines or fails (DECLINED,
ERROR); 3 time limit without a solution; 4 internal
error (a bug: one line on stderr, the traceback with ``--debug`` or ``HETOPT_DEBUG=1``).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import errno
import itertools
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from hetopt.catalog import CALIBRATION_SETS
from hetopt.costmodel.running import help_keys as running_help_keys
from hetopt.errors import InputError, SolverBug
from hetopt.interrupt import stop_on_interrupt, stop_requested
from hetopt.io import load
from hetopt.jsonout import crosscheck_to_dict, plain, result_to_dict
from hetopt.result import CrossCheck, Result, Status
from hetopt.solvers import CROSSCHECK_TIME_LIMIT_S, FAMILIES, check_options, crosscheck, family, solve, writes_model
from hetopt.tables import cell, markdown_lines, print_table, rows_table, show
from hetopt.terminal import on_terminal, progress

if TYPE_CHECKING:  # the planner is imported by the plan command only
    from hetopt.planner.answer import HeteroPlan
    from hetopt.planner.setup.request import PlanRequest

EXIT_OK, EXIT_INFEASIBLE, EXIT_USAGE, EXIT_TIME_LIMIT, EXIT_INTERNAL = 0, 1, 2, 3, 4
#: Stopped by Ctrl-C (SIGINT): the shell's status of a program killed by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130
#: The reader of stdout went away: the shell's status of a program killed by SIGPIPE (128 + 13).
EXIT_BROKEN_PIPE = 141

#: Errors of writing the output (a full disk or device, a closed or unwritable descriptor):
#: bad surroundings, not a bug, so exit 2 with one line.
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EBADF, errno.EIO})
#: Columns of output to a file or a pipe: wide enough that no table row is folded.
FILE_WIDTH = 1000
#: Set (to anything but "" or "0") to print the traceback of an internal error.
DEBUG_ENV = "HETOPT_DEBUG"

EXIT_CODES_HELP = """exit codes:
  0  a solution was found (crosscheck: the answers agree, or too few to compare and one has a plan)
  1  proven infeasible, or a crosscheck/bench disagreement
  2  bad input or usage (one line on stderr, naming the file, the key and the fix), a
     method that declines or fails on the instance (DECLINED, ERROR: its reason is printed),
     or an output that cannot be written (stdout closed or full)
  3  time limit reached without a solution
  4  internal error: a bug in hetopt (one line; the traceback with --debug or HETOPT_DEBUG=1)
  130  stopped by Ctrl-C: the first stops the work and prints what finished; a second stops at once"""


#: Rows of a solution table ``solve`` prints; the rest are counted (``--json`` has them all).
MAX_TABLE_ROWS = 200


#: The exit code of every status, for ``solve``, ``crosscheck`` and ``plan`` alike: a method
#: that declines or fails (ERROR, with its reason) is not a proof of infeasibility.
_STATUS_EXIT = {
    Status.OPTIMAL: EXIT_OK, Status.FEASIBLE: EXIT_OK, Status.INFEASIBLE: EXIT_INFEASIBLE,
    Status.TIME_LIMIT: EXIT_TIME_LIMIT, Status.DECLINED: EXIT_USAGE, Status.ERROR: EXIT_USAGE,
}


def _exit_code(result: Result) -> int:
    return _STATUS_EXIT[result.status]


#: Command-line flag of each solver-layer option, for messages.
_FLAGS = {"time_limit": "--time-limit", "backend": "--backend", "threads": "--threads", "seed": "--seed"}


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The solver options of solve/crosscheck/bench, checked before any file is read.

    ``--workers`` is a deprecated alias of ``--threads`` (one note on stderr).

    Raises
    ------
    InputError
        A value out of range, naming the flag.
    """
    threads = args.threads
    if args.workers is not None:
        print("hetopt: note: --workers is deprecated for solve/crosscheck/bench; use --threads (same meaning)", file=sys.stderr)
        if threads is not None and threads != args.workers:
            raise InputError(f"--workers {args.workers} and --threads {threads}: give only --threads")
        threads = args.workers
    options = {"time_limit": args.time_limit, "backend": args.backend, "threads": threads, "seed": args.seed}
    try:
        return check_options(**options)
    except InputError as exc:  # named by its field; the command line names the flag
        if exc.field is None:
            raise
        raise InputError(f"{_FLAGS.get(exc.field, exc.field)}: {exc.detail}", field=exc.field) from None


def _result_line(result: Result) -> str:
    line = f"{result.problem} · {result.method}: {result.status.value}"
    if result.status.has_solution:
        line += f"  objective {cell(result.objective)}  bound {cell(result.bound)}  gap {cell(result.gap)}"
    line += f"  ({result.wall_s:.3f} s)"
    if result.reason:
        line += f"\n  reason: {result.reason}"
    return line


def _check_out(path: str, flag: str = "--out") -> Path:
    """The ``--out`` (or ``flag``) file, checked before solving: a writable file in an existing folder.

    Raises
    ------
    InputError
        A folder, a path ending in a separator, a missing or unwritable folder, or an
        unwritable file.
    """
    from hetopt.files import writable_file

    return writable_file(path, flag, "result.json" if flag == "--out" else "model.mps")


def _check_write_model(instance: Any, method: str, path: str) -> None:
    """``--write-model``: the method must build a model (MILP or CP-SAT), checked before solving.

    The file's ending is checked by the method itself, before it does any work.

    Raises
    ------
    InputError
        For a method that builds no model, naming the methods that do.
    """
    if not writes_model(instance, method):
        fam = family(instance)
        models = [m for m in fam.methods if writes_model(instance, m)]
        raise InputError(f"--write-model {path}: method {method} builds no model to write "
                         f"(for {fam.name}: {', '.join(models)})")


def _check_draw(args: argparse.Namespace) -> None:
    """``--draw FILE`` of solve and plan, checked before any work: the file type and the plot extra."""
    if args.draw is not None:
        from hetopt.draw import check_target, require_matplotlib

        check_target(args.draw, "--draw")
        require_matplotlib("--draw")


def _draw(args: argparse.Namespace, document: dict, title: str, source: str, has_plan: bool, out: Console) -> None:
    """Draw ``document`` into ``--draw FILE``; a result without a plan gets a note instead."""
    if args.draw is None:
        return
    if not has_plan:
        print(f"hetopt: note: --draw {args.draw}: no picture, the result has no plan", file=sys.stderr)
        return
    from hetopt.draw import draw

    picture = draw(document, args.draw, title=title, source=source)
    if not args.json:
        out.print(f"picture: {picture.path} ({picture.kind})", highlight=False)


#: The longest time limit the reading alarm is armed for (about 115 days).
MAX_ALARM_S = 1e7


class _ReadingStopped(Exception):
    """The time limit passed while an instance file was read (raised by the alarm)."""


@contextlib.contextmanager
def _alarm(seconds: float | None) -> Iterator[None]:
    """Raise ``_ReadingStopped`` in the main thread once ``seconds`` pass (None: never).

    Reading a file is pure Python (tomllib, json, the readers' checks), so the signal stops
    it between two bytecodes; off the main thread, or without SIGALRM, nothing is armed and the
    solver's own limit starts after the file is read."""
    # a limit of months arms nothing (setitimer overflows; no file takes that long to read)
    usable = seconds is not None and seconds < MAX_ALARM_S and hasattr(signal, "setitimer") \
        and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def stop(_signum, _frame):
        raise _ReadingStopped

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-6))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _load_within(args: argparse.Namespace, options: dict[str, Any]) -> Any:
    """The instance of ``args.file``, read within ``--time-limit``: the limit counts from
    before the file is read, and ``options["time_limit"]`` becomes what is left of it.

    Raises
    ------
    _ReadingStopped
        When the limit passes before the file is read.
    """
    started = time.monotonic()
    limit = options.get("time_limit")
    with _alarm(limit):
        instance = load(args.file)
    if limit is not None:
        options["time_limit"] = max(0.0, limit - (time.monotonic() - started))
    return instance


def _reading_stopped(args: argparse.Namespace) -> int:
    """The answer when the limit passed while the file was read: TIME_LIMIT, exit 3."""
    reason = f"time limit reached while reading {args.file} ({args.time_limit:g} s, the file not fully read)"
    if getattr(args, "json", False):
        method = getattr(args, "method", None) or getattr(args, "methods", None)
        print(json.dumps({"status": Status.TIME_LIMIT.value, "method": method, "reason": reason}, indent=2))
    else:
        print(f"{args.file}: TIME_LIMIT: {reason}")
    return EXIT_TIME_LIMIT


def _check_drawable(args: argparse.Namespace, instance: Any) -> None:
    """``--draw`` refused before solving a problem that has no picture."""
    from hetopt.draw import KINDS

    problem = getattr(instance, "problem", None)
    if args.draw is not None and problem not in KINDS:
        raise InputError(f"--draw {args.draw}: no picture for {problem!r} results (pictures: "
                         f"{', '.join(k for k in KINDS if k != 'plan')}); leave --draw out")


def cmd_solve(args: argparse.Namespace, out: Console) -> int:
    options = _options(args)
    target = _check_out(args.out) if args.out else None
    if args.write_model:
        _check_out(args.write_model, "--write-model")
    _check_draw(args)
    try:
        instance = _load_within(args, options)
    except _ReadingStopped:
        return _reading_stopped(args)
    _check_drawable(args, instance)
    if args.write_model:
        _check_write_model(instance, args.method, args.write_model)
        options["write_model"] = args.write_model
    try:
        with progress(out, f"{getattr(instance, 'name', args.file)} · {args.method}", show=not args.json):
            result = solve(instance, args.method, **options)
    except InputError as exc:  # the model file's ending, checked by the method before it starts
        if exc.field != "write_model":
            raise
        raise InputError(f"--write-model {exc.detail}", field=exc.field) from None
    if args.write_model and "model_file" not in result.stats:
        print(f"hetopt: note: --write-model {args.write_model}: nothing written: {result.method} ended "
              f"{result.status.value} before its model was written (see its reason)", file=sys.stderr)
    # the JSON document only when something takes it (building it for 40,000 GPUs takes seconds)
    document = result_to_dict(result) if target is not None or args.json or args.draw is not None else {}
    name = getattr(instance, "name", None) or Path(args.file).stem
    if target is not None:
        try:
            target.write_text(json.dumps(document, indent=2), encoding="utf-8")
        except OSError as exc:
            raise InputError(f"--out {args.out}: cannot write ({exc.strerror})") from None
    if args.json:
        print(json.dumps(document, indent=2))
        _draw(args, document, name, args.file, result.solution is not None, out)
        return _exit_code(result)
    out.print(f"[bold]{getattr(instance, 'name', args.file)}[/bold]  ({args.file})", highlight=False)
    out.print(_result_line(result), highlight=False)
    if result.solution is not None:
        rows = result.solution.rows()
        print_table(out, rows_table(rows[:MAX_TABLE_ROWS]))
        if len(rows) > MAX_TABLE_ROWS:  # 20,000 rows took seconds to lay out, past the time limit
            out.print(f"... {len(rows) - MAX_TABLE_ROWS:,} more rows (every row: --json)", highlight=False)
        for line in result.solution.summary():
            out.print(line, highlight=False)
    _draw(args, document, name, args.file, result.solution is not None, out)
    return _exit_code(result)


def cmd_draw(args: argparse.Namespace, out: Console) -> int:
    from hetopt.draw import draw_file

    try:
        picture = draw_file(args.result, args.out, gantt=args.gantt)
    except InputError as exc:
        raise plan_flag_error(exc) from None  # "gantt: ..." -> "--gantt: ..."
    out.print(f"{picture.path}: {picture.kind} picture, {picture.width_px} x {picture.height_px} "
              f"{'pt' if picture.path.suffix.lower() == '.svg' else 'px'}", highlight=False)
    return EXIT_OK


def _agreement_line(check: CrossCheck) -> str:
    rtol, atol = check.tolerance
    if check.agree is False:
        return f"agree: NO: {check.disagreement}"
    if check.agree:
        return f"agree: yes, {check.compared} proven answers (relative {rtol:g}, absolute {atol:g})"
    proved = [r.method for r in check.results if r.status in (Status.OPTIMAL, Status.INFEASIBLE)]
    if check.compared == 1:
        return f"agree: not checked: only one method proved an answer ({', '.join(proved)}); nothing to compare it with"
    return "agree: not checked: no method proved an answer"


def _crosscheck_exit(check: CrossCheck) -> int:
    """0 agreement, 1 disagreement; with fewer than two proven answers, as solve's best result."""
    if check.agree is False:
        return EXIT_INFEASIBLE
    if check.agree:
        return EXIT_OK
    codes = [_exit_code(r) for r in check.results]
    for code in (EXIT_OK, EXIT_INFEASIBLE, EXIT_TIME_LIMIT):
        if code in codes:
            return code
    return EXIT_USAGE


def cmd_crosscheck(args: argparse.Namespace, out: Console) -> int:
    options = _options(args)
    default_limit = "time_limit" not in options
    options.setdefault("time_limit", CROSSCHECK_TIME_LIMIT_S)  # the library's default; the file is read within it too
    names = [n.strip() for n in args.methods.split(",") if n.strip()] if args.methods is not None else None
    if names is not None and len(set(names)) < 2:
        raise InputError(f"--methods {args.methods}: a crosscheck compares at least two different methods "
                         "(e.g. --methods dp,milp; `hetopt methods` lists them)")
    try:
        with _alarm(options.get("time_limit")):  # the file is read within one method's limit
            instance = load(args.file)
    except _ReadingStopped:
        return _reading_stopped(args)
    count = len(names) if names is not None else len(family(instance).crosscheck_methods(instance))
    with progress(out, "crosscheck", count, show=not args.json) as bar:
        started: list[str] = []

        def on_method(method: str) -> None:
            bar.update(len(started), count, f"{getattr(instance, 'name', args.file)} · {method}")
            started.append(method)

        check = crosscheck(instance, names, on_method=on_method, **options)
    if args.json:
        print(json.dumps(crosscheck_to_dict(check), indent=2))
    else:
        out.print(f"[bold]{getattr(instance, 'name', args.file)}[/bold]  ({args.file})", highlight=False)
        rows = [
            {
                "method": r.method,
                "status": r.status.value,
                "objective": r.objective,
                "bound": r.bound,
                "gap": r.gap,
                "wall_s": _seconds(r.wall_s),
                "note": r.reason,
            }
            for r in check.results
        ]
        print_table(out, rows_table(rows))
        out.print(_agreement_line(check), highlight=False)
        out.print(f"time limit: {options['time_limit']:g} s per method"
                  + (" (the default; --time-limit S sets another)" if default_limit else ""), highlight=False)
        for method, gap in check.heuristic_gaps.items():
            out.print(f"{method}: gap to the best proven bound {cell(gap)}", highlight=False)
    return _crosscheck_exit(check)


def _seconds(value: float) -> str:
    """Wall time for tables: fixed point, never the 6g exponent form ("5.5e-05" reads as 5.5 s)."""
    return f"{value:.3f}"


BENCH_FIELDS = ("instance", "method", "status", "objective", "bound", "gap", "wall_s", "agree")


class _BenchOutput:
    """Where ``bench`` puts its rows: CSV and JSON Lines are written as each instance finishes
    (its rows need all its methods, for ``agree``); the table and the JSON document are
    printed at the end, or at Ctrl-C with the rows finished so far."""

    def __init__(self, args: argparse.Namespace, out: Console) -> None:
        self.args, self.out, self.rows = args, out, []
        self.writer = csv.writer(sys.stdout, lineterminator="\n") if args.csv else None
        if self.writer is not None:
            self.writer.writerow(BENCH_FIELDS)
            sys.stdout.flush()

    def add(self, rows: list) -> None:
        self.rows.extend(rows)
        if self.writer is not None:
            for r in rows:
                self.writer.writerow(["" if getattr(r, k) is None else getattr(r, k) for k in BENCH_FIELDS])
        elif self.args.jsonl:
            for r in rows:
                print(json.dumps(plain(r)))
        sys.stdout.flush()  # a reader of the pipe sees each instance as it ends

    def close(self) -> None:
        if self.args.json:
            print(json.dumps([plain(r) for r in self.rows], indent=2))
        elif not (self.args.csv or self.args.jsonl):
            table = [{k: getattr(r, k) for k in BENCH_FIELDS} for r in self.rows]
            for row in table:
                row["wall_s"] = _seconds(row["wall_s"])
            show(self.out, table, markdown=self.args.markdown)


def cmd_bench(args: argparse.Namespace, out: Console) -> int:
    from hetopt import bench as benchmod

    options = {k: v for k, v in _options(args).items() if k != "time_limit"}
    if args.repeat < 1:
        raise InputError(f"--repeat {args.repeat}: must be >= 1 (runs per method)")
    names = [n.strip() for n in args.methods.split(",") if n.strip()] if args.methods is not None else None
    jobs = benchmod.collect_jobs(args.targets, names, args.time_limit)
    output = _BenchOutput(args, out)
    table_mode = not (args.json or args.csv or args.jsonl)
    total = sum(benchmod.count_steps(j) for j in jobs) if table_mode and on_terminal() else None
    with progress(out, "bench", total, show=table_mode) as bar:
        for job in jobs:
            bar.describe(job.path.name)
            rows = benchmod.run_job(job, repeat=args.repeat, on_step=bar.advance, **options)
            if stop_requested():  # its methods were cut short by Ctrl-C: not a measurement
                print(f"hetopt: bench: interrupted during {job.path}; its rows are left out", file=sys.stderr)
                break
            output.add(rows)
    output.close()
    disagree = any(r.agree is False for r in output.rows)
    return EXIT_INFEASIBLE if disagree else EXIT_OK


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit 2), like every other input error."""

    def error(self, message: str) -> Any:
        command = self.prog.removeprefix("hetopt").strip() or "usage"
        self.exit(EXIT_USAGE, f"hetopt: {command}: {message} (see {self.prog} --help)\n")


def _add_solver_options(p: argparse.ArgumentParser, output: Any = None) -> None:
    """The solver options; ``--json`` joins ``output`` (a group of formats that exclude each other) when given."""
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="seconds per method run (finite, >= 0), reading the file included: solve counts it from "
                   "the start, before the file is read; a file not read in time is TIME_LIMIT (exit 3)")
    p.add_argument("--backend", choices=("highs", "cbc"), default=None, help="MILP backend (default highs)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="solver threads: CP-SAT workers, HiGHS/CBC threads (default: CP-SAT 1, so runs repeat)")
    p.add_argument("--workers", type=int, default=None, metavar="N", help="deprecated alias of --threads")
    p.add_argument("--seed", type=int, default=None, help="CP-SAT random seed (default 0)")
    (output or p).add_argument("--json", action="store_true", help="print one JSON document")


def _add_solve_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``hetopt solve``: one instance file, its result, model file and picture."""
    p = sub.add_parser("solve", help="solve one instance file", epilog=EXIT_CODES_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file")
    p.add_argument("--method", default="auto", help="auto (may change), dp, milp, cpsat, ... (see `hetopt methods`)")
    p.add_argument("--out", default=None, metavar="FILE", help="also write the JSON result to FILE (checked before solving)")
    p.add_argument("--write-model", default=None, metavar="FILE",
                   help="write the model the method solves, before solving it: FILE.mps or FILE.lp (milp), "
                   "FILE.pb.txt or FILE.pb (cpsat)")
    p.add_argument("--draw", default=None, metavar="FILE", help="also draw the result into FILE.svg or FILE.png (needs the plot extra)")
    _add_solver_options(p)
    p.set_defaults(run=cmd_solve)


def _add_crosscheck_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``hetopt crosscheck``: several methods on one instance, compared."""
    p = sub.add_parser("crosscheck", help="run several methods on one instance and compare", epilog=EXIT_CODES_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file")
    p.add_argument("--methods", default=None, help="comma-separated, at least two (default: the family's choice)")
    _add_solver_options(p)
    p.set_defaults(run=cmd_crosscheck)


def _add_bench_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``hetopt bench``: methods timed over files, folders or suites, in one output format."""
    p = sub.add_parser("bench", help="time methods over instance files, folders or suites", epilog=EXIT_CODES_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("targets", nargs="+", metavar="FILE|FOLDER|SUITE")
    p.add_argument("--methods", default=None, help="comma-separated; replaces the suite's lists")
    p.add_argument("--repeat", type=int, default=1, help="runs per method (>= 1); wall_s is the median")
    formats = p.add_mutually_exclusive_group()  # one format on stdout
    formats.add_argument("--csv", action="store_true", help="print CSV, a row as soon as its instance finishes")
    formats.add_argument("--jsonl", action="store_true", help="print JSON Lines (one object per row), as soon as each instance finishes")
    formats.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    _add_solver_options(p, formats)
    p.set_defaults(run=cmd_bench)


def _add_plan_search_arguments(p: argparse.ArgumentParser) -> None:
    """``hetopt plan``'s problem (cluster, model, batch) and how the search runs (workers, pruning, islands)."""
    p.add_argument("--cluster", required=True, help="a cluster file, or a name in instances/clusters/")
    p.add_argument("--model", required=True, help="a model file, or a name in instances/models/")
    p.add_argument("--global-batch", type=int, required=True, help="samples per iteration")
    p.add_argument("--microbatch-size", "--microbatch", dest="microbatch_size", type=int, default=None, metavar="N",
                   help="pipeline micro-batch (plan()'s microbatch_size; --microbatch is short for it): the samples of one micro-batch through the pipeline, all of a stage's "
                   "data-parallel replicas together (a replica gets this over its stage's dp: Megatron's "
                   "--micro-batch-size, mbs in --layout) (default: every divisor of the global batch, powers of two "
                   "first; sizes a bound proves slower are skipped)")
    p.add_argument("--seq", type=int, default=None, help="sequence length (default: the model's)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="run the parallelizer queries in N worker processes (default: the CPU count; 1: in this process)")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help="run the queries on a Dask distributed cluster (then --workers is not used)")
    p.add_argument("--no-prune", default=None, metavar="POLICIES", help="switch pruning policies off: redundancy,infeasibility,imbalance or all")
    p.add_argument("--no-alternatives", action="store_true", help="skip the baselines")
    p.add_argument("--replicas", action="store_true",
                   help="also plan data-parallel replicas: islands cut into units, pipelines on units of one shape, "
                        "the replicas family choosing them and their batch shares")
    p.add_argument("--max-islands", type=int, default=None, metavar="K",
                   help="compose only the K islands with the most compute (default: all); leaving islands out gives a FEASIBLE plan")
    p.add_argument("--tasks", type=int, default=None, metavar="N",
                   help="send each enumeration's parallelizer queries in at most N batches (default 64; "
                   "a slow external parallelizer on a large Dask cluster wants one query per task)")
    p.add_argument("--layers-per-atom", type=int, default=None, metavar="K",
                   help="slice the model in atoms of K layers (default 1; at most 24 atoms on clusters of more than 16 islands): fewer slices for deep models")


def _add_plan_pricing_arguments(p: argparse.ArgumentParser) -> None:
    """``hetopt plan``'s pricing: your layout and runtime, the target, objective, memory, time model and profiles."""
    p.add_argument("--layout", default=None, metavar="LAYOUT",
                   help='price your layout beside the plan, e.g. "tp=8 pp=8 dp=12 mbs=1 recompute=full zero=1" '
                   "(mbs: the micro-batch per replica, as Megatron's --micro-batch-size; left out: its best under the "
                   "model; dp left out: the GPUs over tp·pp·cp, as Megatron derives it; also vpp, ep, fsep, cp, offload, "
                   f"split; how it runs: {running_help_keys()}); on a cluster of "
                   'several islands one per island, front first: "ISLAND: layers=K tp=.. pp=.. dp=..; ..."')
    p.add_argument("--runtime", default=None, metavar="RUNTIME",
                   help='what your framework can run: "recompute=none,full zero=0 flash=no sp=no overlap=no" '
                   f"(also ep, cp, offload=yes|no; how it runs: {running_help_keys()}); the plan searches only that, "
                   "and --layout is priced under it")
    p.add_argument("--target", choices=EXPORT_TARGETS, default=None,
                   help="plan only what that runtime, unmodified, runs as one job (one TP, DP, micro-batch, "
                   "recompute and ZeRO for the job; its rules: docs/runtimes.md), shown beside the unrestricted plan; "
                   "`hetopt export --to` the same runtime then writes one job with a launch script")
    p.add_argument("--mixed-stages", action="store_true",
                   help="also plan the mixed-stages alternative: stages whose data-parallel replicas span GPU "
                   "types, each type with its own TP and share of every micro-batch (docs/mixed.md; up to 30 s)")
    p.add_argument("--objective", choices=("time", "cost"), default="time",
                   help="minimise the iteration time (default) or the cost per iteration, where a plan pays for "
                   "every GPU of the islands it runs on (prices: the catalog's usd_per_hour, a cluster file's [price] "
                   "table); the cheapest and the fastest plan are shown side by side")
    p.add_argument("--budget", type=float, default=None, metavar="USD_PER_HOUR",
                   help="a ceiling on what the plan's islands cost per hour: only the islands it pays for are used")
    p.add_argument("--memory-headroom", type=float, default=None, metavar="GIB",
                   help="GiB per GPU that training holds beyond its tensors (CUDA context, NCCL's buffers, the "
                   "allocator's fragmentation); every stage fits its node's memory_gib with it (default: 2 = 0.75 "
                   "+ 0.5 + 0.75, each part's source in the plan and docs/formats.md)")
    p.add_argument("--time-model", choices=("simulated", "closed-form"), default="closed-form",
                   help="the plan's iteration time: the pipeline family's closed form (default; Tangram's "
                   "objective) or the simulated 1F1B schedule (the candidates re-ranked by simulation)")
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="seconds for the whole plan (islands, enumeration, composition, alternatives); stopped early: "
                   "FEASIBLE with bound and gap, or TIME_LIMIT (exit 3)")
    p.add_argument("--profile", action="append", default=None, metavar="FILE",
                   help="price from your measurements (repeatable): a term is taken from the profiles where they "
                   "cover its setting, from the cost model elsewhere; --json says which (priced_from); "
                   "write one with `hetopt profile`")


def _add_plan_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``hetopt plan``: a model's training planned on a cluster, end to end."""
    p = sub.add_parser("plan", help="plan training of a model on a heterogeneous cluster (end to end)")
    _add_plan_search_arguments(p)
    _add_plan_pricing_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="also print each island's member nodes and each micro-batch size's pruning counters")
    p.add_argument("--draw", default=None, metavar="FILE", help="also draw the plan into FILE.svg or FILE.png (needs the plot extra)")
    p.set_defaults(run=cmd_plan)


def _add_draw_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``hetopt draw``: a result drawn as a picture."""
    p = sub.add_parser("draw", help="draw a result (solve --json or plan --json) as an SVG or PNG picture",
                       description="Draw the JSON of `hetopt solve --json` (pipeline: the 1F1B schedule; allocation: "
                       "per-GPU batch, state share and memory; islands: nodes by island and bandwidth) or of `hetopt "
                       "plan --json` (stages over islands beside the alternatives). Needs the plot extra: "
                       'pip install -e ".[plot]".')
    p.add_argument("result", metavar="RESULT.json")
    p.add_argument("-o", "--out", required=True, metavar="FILE", help="the picture to write: .svg or .png")
    p.add_argument("--gantt", action="store_true",
                   help="draw the 1F1B schedule of a plan (or pipeline) result as a Gantt chart: one lane per stage, "
                   "forward, backward and idle time, each island's layout")
    p.set_defaults(run=cmd_draw)


def _add_generate_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``hetopt generate``: generated instance files rewritten."""
    p = sub.add_parser("generate", help="rewrite generated instance files from catalogs and profiles")
    p.add_argument("family", choices=sorted(GENERATORS), help="which instances to write")
    p.add_argument("--out", default=None, metavar="DIR", help="folder to write (default: instances/<family>/)")
    p.add_argument("--profiles", default=None, metavar="DIR", help="the cephalo-profiles folder (default: the shipped instances/profiles/cephalo)")
    p.set_defaults(run=cmd_generate)


def _add_export_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``hetopt export``: a plan or allocation written as a runtime's config files."""
    p = sub.add_parser("export", help="write a plan or allocation result as a training runtime's config files",
                       description="Export RESULT.json (`hetopt plan --json`, or `hetopt solve --json` of an allocation) "
                       "to a runtime's files, from that file alone (a plan carries its model's shape and its "
                       "cluster's nodes); whatever the runtime cannot express is printed as one gap line each "
                       "(stderr) and written to GAPS.txt.")
    p.add_argument("file", metavar="RESULT.json")
    p.add_argument("--to", required=True, choices=EXPORT_TARGETS, help="the runtime")
    p.add_argument("--allow-gaps", action="store_true",
                   help="export a plan that breaks the runtime's rules anyway (docs/runtimes.md): per-island files "
                   "and GAPS.txt, which are not one job as written; without it such a plan exits 2")
    p.add_argument("--alternative", default=None, choices=("mixed-stages",),
                   help="export the plan's mixed-stages alternative (plan --mixed-stages) instead of its composed "
                   "pipeline: one job where the runtime can run it, else exit 2 with the rules it breaks")
    p.add_argument("-o", "--out", default=None, metavar="DIR", help="folder to write (default: print the files)")
    p.set_defaults(run=cmd_export)


def _add_methods_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``hetopt methods``: each family's methods listed."""
    p = sub.add_parser("methods", help="list the methods of each problem family")
    p.set_defaults(run=lambda args, out: _print_methods(out))


def _add_profile_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``hetopt profile``: measurements on this machine (its actions: :func:`_add_profile_actions`)."""
    p = sub.add_parser(
        "profile", help="measure your model's layers, the optimizer step, collectives and the host on this machine "
        "(torch), or import nccl-tests, Sailor or Metis measurements: a profile for plan --profile",
        description="Measure one part per setting (a layer, the embedding, the head; never a stage of several) with "
        "torch: CUDA and NCCL on GPUs, CPU and gloo otherwise; collectives over --ranks local processes, or over the "
        "ranks of a torchrun job across a cluster's nodes. Rows are appended as measured (Ctrl-C keeps them; the same "
        "command again resumes). Importers: `hetopt profile import nccl-tests|sailor|metis` (docs/formats.md).")
    p.add_argument("--model", default=None, help="a model file, or a name in instances/models/ (dense GPT)")
    p.add_argument("--out", default=None, metavar="FILE", help="the profile file written (appended to when it exists)")
    p.add_argument("--gpu", default=None, metavar="NAME",
                   help="the catalog GPU type these rows price (hetopt list gpus; default: cpu, or the CUDA device's name)")
    p.add_argument("--microbatch", default="1,2,4", metavar="B,..", help="micro-batch sizes per replica (default 1,2,4)")
    p.add_argument("--tp", default="1", metavar="T,..", help="TP degrees: one GPU's share of each part (default 1)")
    p.add_argument("--recompute", default="none,full", help="recomputation of a layer: none, full (default both)")
    p.add_argument("--precision", default="fp32", help="fp32 (default), tf32, bf16, fp16 (CUDA only)")
    p.add_argument("--seq", type=int, default=None, help="sequence length (default: the model's)")
    p.add_argument("--parts", default=",".join(PROFILE_PARTS), help="layer,embedding,head (default all)")
    p.add_argument("--collectives", default=",".join(PROFILE_COLLECTIVES), help="which collectives (default all)")
    p.add_argument("--sizes", default="4KiB,64KiB,1MiB,16MiB", help="collective message sizes (default 4KiB,64KiB,1MiB,16MiB)")
    p.add_argument("--ranks", type=int, default=2, help="local processes for the collectives (default 2)")
    p.add_argument("--parameters", default="100000,1000000,10000000", help="optimizer-step parameter counts")
    p.add_argument("--stack", default="torch2", help="the software stack the host rows are for (default torch2)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when torch sees one)")
    p.add_argument("--memory-gib", type=float, default=None, help="the device memory settings are checked against "
                   "(default: the CUDA device's, or this machine's RAM)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per setting, after --warmup (default 5)")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    p.add_argument("--dry-run", action="store_true", help="list what would be measured, and what is refused, and stop")
    p.set_defaults(run=cmd_profile)
    _add_profile_actions(p)


def _add_profile_actions(p: argparse.ArgumentParser) -> None:
    """Add ``hetopt profile import`` (measurements from other tools) and ``hetopt profile sailor`` (Sailor's runs)."""
    imports = p.add_subparsers(dest="action", metavar="import | sailor")
    q = imports.add_parser("import", help="import nccl-tests output, Sailor's or Metis's profiles into a profile file",
                           description="nccl-tests: the tables all_reduce_perf and friends print; sailor: Sailor's "
                           "planner profiles (profile.json of sailor/Planner/sailor_planner/profiles/MODEL/GPU); metis: "
                           "Metis's DeviceType.* / mbsB_tmpT.json profiles. What maps to what: docs/formats.md.")
    q.add_argument("kind", choices=IMPORTERS, help="what the files are")
    q.add_argument("files", nargs="+", help="the files (or folders) to import")
    q.add_argument("--out", required=True, metavar="FILE", help="the profile file written")
    q.add_argument("--gpu", required=True, metavar="NAME", help="the catalog GPU type the rows price")
    q.add_argument("--model", default=None, help="the model the layer rows measured (sailor, metis; a file or a name "
                   "in instances/models/)")
    q.add_argument("--precision", default=None, help="the precision the measurements ran in (default: the source's)")
    q.add_argument("--scope", choices=("intra", "inter"), default="intra",
                   help="nccl-tests: one node's GPUs (intra, default) or one rank per node (inter)")
    q.add_argument("--source", default="", help="where the files come from (repository, commit, path), kept in the provenance")
    q.add_argument("--sailor-gpu", default=None, help="sailor: Sailor's name of the GPU in its network file and "
                   "profiles_tmp.json (default --gpu)")
    q.add_argument("--sailor-model", default=None, help="sailor: Sailor's name of the model in its simulator's "
                   "profiles_tmp.json (which holds every model and GPU)")
    q.set_defaults(run=cmd_profile_import)
    q = imports.add_parser("sailor", help="Sailor's measured runs priced from Sailor's own profiles, beside Sailor's "
                           "simulator (docs/validation.md)")
    q.add_argument("checkout", help="a checkout of github:eth-easl/sailor (commit cf2c8e3)")
    q.add_argument("--sailor-sim", default=None, metavar="FILE",
                   help="Sailor's simulator's seconds per validation file (JSON), shown beside")
    q.add_argument("--profiles-out", default=None, metavar="DIR", help="keep the imported profiles in DIR")
    q.add_argument("--json", action="store_true", help="one JSON document")
    q.set_defaults(run=cmd_profile_sailor)


def _add_validate_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``hetopt validate``: the cost model against published runs."""
    p = sub.add_parser("validate", help="the cost model against published, measured training runs",
                       description="Predicted against published training throughput, row by row.")
    p.add_argument("--file", default=None,
                   help="a published measurement set: a file, or the name of a shipped one (calibration sets: "
                   f"{', '.join(CALIBRATION_SETS)}, the first the default; every other shipped set is held out)")
    p.add_argument("--only", default=None, help="comma-separated measurement ids")
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="one JSON document")
    shape.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--plan", action="store_true",
                   help="also run the planner on every row's cluster (slow: minutes for the shipped set)")
    p.add_argument("--profile", action="append", default=None, metavar="FILE",
                   help="price the rows from these measurements where they cover them (repeatable; hetopt profile)")
    p.set_defaults(run=cmd_validate)


def _add_findings_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``hetopt findings``: the papers' findings re-run on this cost model."""
    p = sub.add_parser("findings", help="the papers' findings (Tangram, Cephalo), measured on this cost model",
                       description="Each finding of the papers, re-run on this cost model: does it hold here?")
    p.add_argument("--only", choices=FINDING_NAMES, help="run one finding")
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="print JSON instead of tables")
    shape.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    p.set_defaults(run=cmd_findings)


def _add_scaling_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``hetopt scaling``: the pipeline dp's wall time by islands and layers."""
    p = sub.add_parser("scaling", help="how the pipeline dp's time grows with islands and layers",
                       description="dp wall time by islands (rows) and layers (columns) on synthetic instances.")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds per dp run (default 60)")
    p.add_argument("--islands", default="1,2,4,6,8,10,12,16", help="island counts, comma-separated")
    p.add_argument("--layers", default="8,16,32,64,96,128", help="layer counts, comma-separated")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table, a row as soon as it is measured")
    p.set_defaults(run=cmd_scaling)


def _add_calibrate_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``hetopt calibrate``: the catalog's efficiency figures fitted to measured profiles."""
    p = sub.add_parser("calibrate", help="the GPU catalog's efficiency figures, fitted to Cephalo's measured profiles",
                       description="Print the gpus.toml efficiency lines that the measured layer profiles give.")
    p.add_argument("--profiles", default=None, help="the cephalo-profiles folder (default: the shipped one)")
    p.set_defaults(run=cmd_calibrate)


def _add_list_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``hetopt list``: the shipped GPU types, models or clusters."""
    p = sub.add_parser("list", help="list the shipped GPU types, models or clusters with their key figures")
    p.add_argument("what", choices=("gpus", "models", "clusters"), help="which catalog")
    p.add_argument("--json", action="store_true", help="print one JSON document (a list of entries)")
    p.set_defaults(run=cmd_list)


def build_parser() -> argparse.ArgumentParser:
    """The ``hetopt`` command line: its global flags and one subparser per command (``_add_*_parser``)."""
    parser = _Parser(prog="hetopt", description="Exact, cross-checked solvers for heterogeneous-GPU training planners.",
                     epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true", help=f"print the traceback of an internal error (or set {DEBUG_ENV}=1)")
    parser.add_argument("--version", action=_Version, help="print the installed version and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_solve_parser(sub)
    _add_crosscheck_parser(sub)
    _add_bench_parser(sub)
    _add_plan_parser(sub)
    _add_draw_parser(sub)
    _add_generate_parser(sub)
    _add_export_parser(sub)
    _add_methods_parser(sub)
    _add_profile_parser(sub)
    _add_validate_parser(sub)
    _add_findings_parser(sub)
    _add_scaling_parser(sub)
    _add_calibrate_parser(sub)
    _add_list_parser(sub)
    for p in sub.choices.values():  # `hetopt solve ... --debug` as well as `hetopt --debug solve ...`
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return parser


#: ``hetopt plan``'s flag for each ``PlanRequest`` field whose flag is not ``--`` and the
#: field's name with dashes: the library names fields, the command line its flags.
PLAN_FLAGS = {"policies": "--no-prune"}


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


def request_from(args: argparse.Namespace) -> PlanRequest:
    """The :class:`PlanRequest` of parsed ``hetopt plan`` arguments (not yet checked)."""
    from hetopt.planner.search.enumerate import DEFAULT_TASKS
    from hetopt.planner.setup.request import PlanRequest

    return PlanRequest(
        cluster=args.cluster, model=args.model, global_batch=args.global_batch, microbatch_size=args.microbatch_size,
        seq=args.seq, policies=policies_from(args.no_prune), time_limit=args.time_limit,
        alternatives=not args.no_alternatives, max_islands=args.max_islands,
        tasks=DEFAULT_TASKS if args.tasks is None else args.tasks,
        # unset: plan() picks the atoms (coarser on clusters of very many islands)
        layers_per_atom=args.layers_per_atom, layout=getattr(args, "layout", None),
        time_model=getattr(args, "time_model", "closed-form"), replicas=getattr(args, "replicas", False),
        runtime=getattr(args, "runtime", None), target=getattr(args, "target", None),
        objective=getattr(args, "objective", "time"), budget=getattr(args, "budget", None),
        mixed_stages=getattr(args, "mixed_stages", False), memory_headroom=getattr(args, "memory_headroom", None),
    )


def run_plan(args: argparse.Namespace, on_progress: Callable[[str, int, int], None] | None = None) -> HeteroPlan:
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


def plan_flag_error(exc: InputError) -> InputError:
    """``exc`` with the field it starts with replaced by the command line's flag for it
    (``hetopt plan``'s, and ``--to``, ``--profiles``, ``--only`` of the other commands).

    >>> str(plan_flag_error(InputError("microbatch_size 4: must divide 30", field="microbatch_size")))
    '--microbatch-size 4: must divide 30'
    """
    if exc.field is None or exc.detail == str(exc):
        return exc
    flag = PLAN_FLAGS.get(exc.field, "--" + exc.field.replace("_", "-"))
    return InputError(flag + str(exc)[len(exc.field):], field=exc.field)


def cmd_plan(args: argparse.Namespace, out: Console) -> int:
    from hetopt.planner import report
    from hetopt.planner.search.workers import WorkersLost

    _check_draw(args)
    try:
        return _run_plan(args, out, report)
    except InputError as exc:
        raise plan_flag_error(exc) from None
    except WorkersLost as exc:  # the pool or the cluster is gone: one line, like bad input
        print(f"hetopt: {exc}", file=sys.stderr)
        return EXIT_USAGE


#: What the counts of a plan's progress phase are (``plan()``'s ``on_progress``), by the phase's
#: kind: its last part's first word ("micro-batch 4: enumeration" counts queries).
PLAN_PROGRESS_UNITS = {"enumeration": "queries", "composing": "sizes"}


def _run_plan(args: argparse.Namespace, out: Console, report) -> int:
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
    _draw(args, document, "hetopt plan", "plan", bool(document.get("stages")), out)
    return _STATUS_EXIT[result.answer_status]


#: ``hetopt generate NAME``: the module whose ``write(folder, ...)`` rewrites the shipped files,
#: and the folder under ``instances/``. ``pipeline`` writes the planner's ``planner-*`` files,
#: ``pipeline-synthetic`` the synthetic generator's (``tangram-*``, ``scale-*``, ...) beside them.
GENERATORS = {
    "allocation": ("hetopt.generate.allocation", "allocation"),
    "pipeline": ("hetopt.generate.pipeline", "pipeline"),
    "pipeline-synthetic": ("hetopt.pipeline.synthetic", "pipeline"),
    "clusters": ("hetopt.generate.clusters", "clusters"),
    "islands": ("hetopt.islands.generate", "islands"),
    "replicas": ("hetopt.generate.replicas", "replicas"),
}


def cmd_generate(args: argparse.Namespace, out: Console) -> int:
    import importlib
    from pathlib import Path

    from hetopt.catalog import instances_dir

    module_name, folder = GENERATORS[args.family]
    module = importlib.import_module(module_name)
    target = Path(args.out) if args.out else instances_dir() / folder
    if target.exists() and not target.is_dir():
        raise InputError(f"--out {target}: exists and is not a folder (give a folder name)")
    # only the allocation generator reads Cephalo's profiles
    if args.profiles and args.family != "allocation":
        raise InputError(f"--profiles {args.profiles}: only `hetopt generate allocation` reads profiles "
                         f"(the {args.family} generator reads none)")
    extra = (Path(args.profiles) if args.profiles else None,) if args.family == "allocation" else ()
    try:
        for path in module.write(target, *extra):
            out.print(str(path), highlight=False)
    except OSError as exc:  # the folder cannot be made or written (permissions, a full disk)
        raise InputError(f"--out {target}: cannot write ({exc.strerror or exc})") from None
    except InputError as exc:
        raise plan_flag_error(exc) from None  # "profiles ..." -> "--profiles ..."
    return EXIT_OK


#: ``hetopt findings --only`` (the keys of ``hetopt.planner.evaluation.findings.FINDINGS``; the test
#: ``tests/planner/test_findings.py`` holds them equal, so the CLI starts without the planner).
FINDING_NAMES = ("fig8", "fig11", "fig11-what-if", "fig9", "gshard-c1", "moe-c2")


def cmd_findings(args: argparse.Namespace, out: Console) -> int:
    from dataclasses import asdict

    from hetopt.planner.evaluation import findings

    names = [args.only] if args.only else list(FINDING_NAMES)
    with progress(out, "findings", len(names), show=not args.json) as bar:
        def started(name: str) -> None:
            bar.update(names.index(name), len(names), f"finding {name}")

        found = findings.run_findings(args.only, on_start=started)
    if args.json:
        print(json.dumps([asdict(f) for f in found], indent=2))
        return EXIT_OK
    for f in found:
        claim = f"claim: {f.claim}" + (f" ({f.note})" if f.note else "")
        show(out, f.rows, title=f"{f.name}: {findings.verdict(f)}", caption=claim, digits=4, markdown=args.markdown)
        out.print()
    return EXIT_OK


def _counts(text: str, flag: str) -> list[int]:
    """Comma-separated whole numbers >= 1 of a flag."""
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise InputError(f"{flag} {text}: give whole numbers >= 1, comma-separated (e.g. 1,2,4)")
    return counts


def cmd_scaling(args: argparse.Namespace, out: Console) -> int:
    from hetopt.budget import check_time_limit
    from hetopt.pipeline.scaling import scaling_rows

    islands, layers = _counts(args.islands, "--islands"), _counts(args.layers, "--layers")
    try:
        limit = check_time_limit(args.time_limit)
    except InputError as exc:
        raise InputError(f"--time-limit: {exc.detail}") from None
    cells = len(islands) * len(layers)
    rows: list[dict] = []
    with progress(out, "scaling", cells, show=not args.markdown) as bar:
        ran = itertools.count()

        def started(n: int, L: int) -> None:
            bar.update(next(ran), cells, f"dp on {n} islands, {L} layers")

        for row in scaling_rows(islands, layers, time_limit=limit, on_cell=started):
            if args.markdown:  # a row as soon as it is measured
                lines = markdown_lines([row])
                print("\n".join(lines if not rows else lines[2:]), flush=True)
            rows.append(row)
    if not args.markdown:
        show(out, rows, title="dp wall time (s) by islands and layers")
    return EXIT_OK


def cmd_calibrate(args: argparse.Namespace, out: Console) -> int:
    from pathlib import Path

    from hetopt.generate.calibrate import calibration_lines

    for line in calibration_lines(None if args.profiles is None else Path(args.profiles)):
        print(line)
    return EXIT_OK


def cmd_validate(args: argparse.Namespace, out: Console) -> int:
    from hetopt.catalog import instances_dir
    from hetopt.planner.evaluation import published
    from hetopt.planner.evaluation import validate
    from hetopt.planner.evaluation import validate_report
    from hetopt.planner.setup.cluster import resolve

    try:
        path = None if args.file is None else resolve(args.file, instances_dir() / "published", "published measurement set")
        measurements = published.load_published(path)
        # rows stating a heterogeneous layout stage by stage (docs/formats.md), priced beside the others
        hetero_all = published.load_heterogeneous(path or published.default_published())
        only = published.select_only([*measurements, *hetero_all], args.only, path or published.default_published())
    except InputError as exc:
        raise plan_flag_error(exc) from None  # "only ..." -> "--only ..."
    parallelizer = measured = None
    if args.profile:
        from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
        from hetopt.profile.command import load_measured

        measured = load_measured(args.profile)
        parallelizer = BuiltinParallelizer(measured=measured)
    hetero = [m for m in hetero_all if only is None or m.id in only]
    with progress(out, "validate", show=not args.json) as bar:
        rows = validate.validate(measurements, only=only, with_plan=args.plan, parallelizer=parallelizer,
                                 on_row=lambda done, total, name: bar.update(done, total, f"validate {name}"))
    mixed = validate.hetero_rows(hetero, measured)
    if args.json:
        doc = validate.rows_to_dict(rows)
        doc["rows"] += mixed
        print(json.dumps(doc, indent=2, allow_nan=False))
    else:
        if rows:
            validate_report.print_rows(rows, with_plan=args.plan, out=out, markdown=args.markdown)
        if mixed:
            keys = ("id", "layout", "published", "predicted", "ratio", "published_peak_gib", "predicted_peak_gib")
            show(out, [{k: r[k] for k in keys} for r in mixed], markdown=args.markdown)
    return EXIT_OK


#: ``hetopt profile``'s parts, collectives and importers (hetopt.profile's names, kept here so the
#: parser does not import them; tests/profile/test_cli.py checks the two agree).
PROFILE_PARTS = ("layer", "embedding", "head")
PROFILE_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "send_recv", "all_to_all")
IMPORTERS = ("nccl-tests", "sailor", "metis")


def cmd_profile(args: argparse.Namespace, out: Console) -> int:
    from hetopt.planner.setup.request import as_model
    from hetopt.profile import command as pc
    from hetopt.profile.measure import Options, device_memory, run

    if args.model is None or args.out is None:
        raise InputError("hetopt profile: give --model and --out (or `hetopt profile import ...`)")
    device = args.device
    if device is None:
        device = "cpu"
        with contextlib.suppress(ImportError):
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
    gpu = args.gpu or "cpu"
    if args.gpu is None and device.startswith("cuda"):
        import torch

        gpu = torch.cuda.get_device_name()
    try:
        o = Options(model=as_model(args.model), gpu=gpu, microbatches=pc.parse_ints(args.microbatch, "microbatch"),
                    tps=pc.parse_ints(args.tp, "tp"), recompute=pc.parse_names(args.recompute, "recompute", ("none", "full")),
                    precision=args.precision, seq=args.seq, parts=pc.parse_names(args.parts, "parts", PROFILE_PARTS),
                    collectives=pc.parse_names(args.collectives, "collectives", PROFILE_COLLECTIVES),
                    sizes=pc.parse_sizes(args.sizes), ranks=args.ranks, parameters=pc.parse_ints(args.parameters, "parameters"),
                    stack=args.stack, device=device,
                    memory_bytes=None if args.memory_gib is None else args.memory_gib * 2 ** 30,
                    warmup=args.warmup, repeats=args.repeats)
        target = Path(args.out)
        if args.dry_run:
            for line in pc.dry_run_lines(o, target, device_memory(o)):
                out.print(line, highlight=False)
            return EXIT_OK
        with progress(out, "profile", show=True) as bar:
            report = run(o, target, on_step=lambda done, total, label: bar.update(done, total, f"profile {label}"))
    except InputError as exc:
        raise plan_flag_error(exc) from None
    for line in report.refused:
        print(f"hetopt profile: refused before running: {line}", file=sys.stderr)
    out.print(pc.summary_line(report, target), highlight=False)
    return EXIT_INTERRUPTED if report.stopped else EXIT_OK


def cmd_profile_sailor(args: argparse.Namespace, out: Console) -> int:
    from hetopt.profile.sidebyside import report

    print(report(args.checkout, sailor_sim=args.sailor_sim, profiles_out=args.profiles_out, as_json=args.json))
    return EXIT_OK


def cmd_profile_import(args: argparse.Namespace, out: Console) -> int:
    from hetopt.profile import importers

    profile = importers.IMPORT[args.kind](args.files, gpu=args.gpu, model=args.model, precision=args.precision,
                                          scope=args.scope, source=args.source, sailor_gpu=args.sailor_gpu,
                                          sailor_model=args.sailor_model)
    from hetopt.profile.format import write_profile

    write_profile(profile, args.out)
    out.print(f"{profile.rows} rows ({len(profile.layers)} layer, {len(profile.optimizer)} optimizer, "
              f"{len(profile.collectives)} collective) imported into {args.out}", highlight=False)
    return EXIT_OK


def cmd_list(args: argparse.Namespace, out: Console) -> int:
    from hetopt.listing import CATALOGS, by_type_text

    rows = CATALOGS[args.what]()
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    if args.what == "clusters":  # one line per cluster: the node kinds as text
        rows = [dict(r, by_type=by_type_text(r["by_type"])) for r in rows]
        for r in rows:
            r["nodes × GPUs by type"] = r.pop("by_type")
            r["description"] = r.pop("description")
    print_table(out, rows_table(rows))
    return EXIT_OK


def installed_version() -> str:
    """The installed distribution's version (package metadata), or the source tree's.

    Examples
    --------
    >>> installed_version().split()[0].count(".") >= 1
    True
    """
    from importlib import metadata

    try:
        return metadata.version("hetopt")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        from hetopt import __version__

        return f"{__version__} (not installed)"


class _Version(argparse.Action):
    """``--version``: the version is looked up only when asked for (importlib.metadata is not free)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"hetopt {installed_version()}")
        parser.exit(EXIT_OK)


#: ``hetopt export --to``: the names of ``hetopt.export.TARGETS`` (kept here so the parser
#: does not import the exporters; tests/test_export.py checks the two agree).
EXPORT_TARGETS = ("megatron", "torchtitan", "deepspeed", "cephalo")


def cmd_export(args: argparse.Namespace, out: Console) -> int:
    from hetopt.export import export_file, write_output

    if args.out is not None and Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError(f"-o {args.out}: exists and is not a folder (give a folder name)")
    try:  # the plan alone: it carries its model's shape and its cluster's nodes
        result = export_file(args.file, args.to, allow_gaps=args.allow_gaps, alternative=args.alternative)
    except InputError as exc:
        raise plan_flag_error(exc) from None  # "to ..." -> "--to ..."
    if args.out is not None:
        for path in write_output(result, args.out):
            out.print(str(path), highlight=False)
    else:
        for name, text in result.files.items():
            sys.stdout.write(f"==> {name} <==\n{text}\n")
    for gap in result.gaps:
        print(f"hetopt: gap: {gap}", file=sys.stderr)
    return EXIT_OK


def _print_methods(out: Console) -> int:
    for name, fam in FAMILIES.items():
        out.print(f"{name}: auto (= {fam.auto}), " + ", ".join(fam.methods), highlight=False)
    return EXIT_OK


class _Console(Console):
    """rich's Console, except that a closed stdout is left to :func:`main` (rich would exit 1,
    which here means "proven infeasible")."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code.

    Every outcome is an exit code and at most one line on stderr: 2 for bad input or usage
    (``InputError``, the library's ``ValueError``s), 4 for an internal error (``SolverBug``,
    any other exception: a bug to report; ``--debug`` or ``HETOPT_DEBUG=1`` adds the
    traceback), 130 for Ctrl-C (the first stops the work at its next clock check and prints
    what finished: bench's rows, the best plan so far; a second stops at once), 141 when the
    reader of stdout stops reading (``| head``), as for a program stopped by SIGPIPE.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if sys.stdout is None:  # started with stdout closed (`hetopt ... >&-`): nowhere to answer
        print("hetopt: stdout is closed; give the command somewhere to write (a file, a pipe or /dev/null)",
              file=sys.stderr)
        return EXIT_USAGE
    args = build_parser().parse_args(argv)
    debug = args.debug or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    # on a terminal, lines wrap at its width (words, never inside a number); off a terminal
    # rich would assume 80 columns, but tables are wider and files want whole lines and rows
    tty = on_terminal()
    out = _Console(soft_wrap=not tty, width=None if tty else FILE_WIDTH)
    try:
        with stop_on_interrupt():  # the first Ctrl-C stops the work at its next clock check
            code = args.run(args, out)
            sys.stdout.flush()  # here, where a full disk or a gone reader is caught, not at exit
            if stop_requested():
                print("hetopt: interrupted (Ctrl-C): stopped early; what is printed above is what finished "
                      "before the stop (a second Ctrl-C stops at once)", file=sys.stderr)
                return EXIT_INTERRUPTED
        return code
    except (InputError, ValueError) as exc:  # bad files, names, sizes and option values
        print(f"hetopt: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # a second Ctrl-C, or one outside the work
        print("hetopt: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `hetopt list models | head`: the reader left; nothing is wrong here
        # stdout to /dev/null, or flushing it at exit raises the same error once more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        if exc.errno not in OUTPUT_ERRNOS:
            raise
        # stdout is full or gone (`> /dev/full`): one line, and nothing left to flush at exit
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print(f"hetopt: cannot write the output: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    except SolverBug as exc:
        if debug:
            traceback.print_exc()
        print(f"hetopt: internal error: solver bug: {_one_line(exc)}; please report it (with the input file)", file=sys.stderr)
        return EXIT_INTERNAL
    except MemoryError:
        if debug:
            traceback.print_exc()
        print("hetopt: internal error: out of memory; please report it (with the input file and the command)", file=sys.stderr)
        return EXIT_INTERNAL
    except Exception as exc:  # noqa: BLE001 - the top level: no traceback reaches the user unasked
        if debug:
            traceback.print_exc()
        print(f"hetopt: internal error: {type(exc).__name__}: {_one_line(exc)}; please report it "
              f"(rerun with --debug for the traceback)", file=sys.stderr)
        return EXIT_INTERNAL
