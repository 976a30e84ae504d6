"""The ``hetopt`` command line: parse, call the library, print. No logic of its own.

Start-up is kept short: a subcommand's ``cmd_*`` function imports what only it needs (the
planner, the generators, the catalogs), and the solver registries import a method's module
(and PuLP, OR-Tools, networkx) only when it runs; ``tests/cli/test_startup.py`` guards that.
A new subcommand is a ``cmd_NAME(args, out) -> exit code`` function (here, or in a module of
:mod:`hetopt.commands`, which never imports argparse) and a ``sub.add_parser`` block in
:func:`build_parser` that sets ``run=cmd_NAME``.

Exit codes: 0 a solution (or crosscheck agreed); 1 proven infeasible or a disagreement;
2 bad input or usage (one line on stderr), or a method that declines or fails (DECLINED,
ERROR); 3 time limit without a solution; 4 internal
error (a bug: one line on stderr, the traceback with ``--debug`` or ``HETOPT_DEBUG=1``).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from hetopt.catalog import CALIBRATION_SETS
from hetopt.commands.bench import cmd_bench
from hetopt.commands.catalogs import (GENERATORS, IMPORTERS, PROFILE_COLLECTIVES, PROFILE_PARTS, cmd_export, cmd_generate,
                                      cmd_list, cmd_profile, cmd_profile_import, cmd_profile_sailor)
from hetopt.commands.common import (EXIT_BROKEN_PIPE, EXIT_INFEASIBLE, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK,
                                    EXIT_TIME_LIMIT, EXIT_USAGE, check_draw, draw_picture, exit_code, plan_flag_error, seconds_text,
                                    solver_options)
from hetopt.commands.evaluation import FINDING_NAMES, cmd_calibrate, cmd_findings, cmd_scaling, cmd_validate
from hetopt.commands.plan import cmd_plan
from hetopt.costmodel.running import help_keys as running_help_keys
from hetopt.errors import InputError, SolverBug
from hetopt.interrupt import stop_on_interrupt, stop_requested
from hetopt.io import load
from hetopt.jsonout import crosscheck_to_dict, result_to_dict
from hetopt.result import CrossCheck, Result, Status
from hetopt.solvers import CROSSCHECK_TIME_LIMIT_S, FAMILIES, crosscheck, family, solve, writes_model
from hetopt.tables import cell, print_table, rows_table
from hetopt.terminal import on_terminal, progress

if TYPE_CHECKING:  # the planner is imported by the plan command only
    pass


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
    options = solver_options(args)
    target = _check_out(args.out) if args.out else None
    if args.write_model:
        _check_out(args.write_model, "--write-model")
    check_draw(args)
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
        draw_picture(args, document, name, args.file, result.solution is not None, out)
        return exit_code(result)
    out.print(f"[bold]{getattr(instance, 'name', args.file)}[/bold]  ({args.file})", highlight=False)
    out.print(_result_line(result), highlight=False)
    if result.solution is not None:
        rows = result.solution.rows()
        print_table(out, rows_table(rows[:MAX_TABLE_ROWS]))
        if len(rows) > MAX_TABLE_ROWS:  # 20,000 rows took seconds to lay out, past the time limit
            out.print(f"... {len(rows) - MAX_TABLE_ROWS:,} more rows (every row: --json)", highlight=False)
        for line in result.solution.summary():
            out.print(line, highlight=False)
    draw_picture(args, document, name, args.file, result.solution is not None, out)
    return exit_code(result)


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
    codes = [exit_code(r) for r in check.results]
    for code in (EXIT_OK, EXIT_INFEASIBLE, EXIT_TIME_LIMIT):
        if code in codes:
            return code
    return EXIT_USAGE


def cmd_crosscheck(args: argparse.Namespace, out: Console) -> int:
    options = solver_options(args)
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
                "wall_s": seconds_text(r.wall_s),
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
    p.add_argument("--narrow-above", default=None, metavar="K|never",
                   help="narrow the search on clusters of more than K islands (default 16): at most 24 atoms, "
                        "micro-batch sizes 1-16; never: every size and atom (minutes on hundreds of GPUs; see --gap-limit)")
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
    p.add_argument("--gap-limit", type=float, default=0.0, metavar="G",
                   help="stop proving once the plan is within this relative gap of the optimum (e.g. 0.02; "
                   "default 0: prove it optimal); the plan is then FEASIBLE with its gap. By closed-form time and "
                   "without --target it lifts the --narrow-above narrowing, which proves no gap")
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
