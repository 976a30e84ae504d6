"""The ``hetopt`` command line: parse, call the library, print. No logic of its own.

Exit codes: 0 a solution (or crosscheck agreed); 1 proven infeasible or a disagreement;
2 bad input or usage; 3 time limit without a solution.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from hetopt import bench as benchmod
from hetopt.errors import InputError
from hetopt.io import crosscheck_to_dict, load, plain, result_to_dict
from hetopt.result import Result, Status
from hetopt.solvers import FAMILIES, crosscheck, solve

EXIT_OK, EXIT_INFEASIBLE, EXIT_USAGE, EXIT_TIME_LIMIT = 0, 1, 2, 3


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _table(rows: list[dict], title: str | None = None) -> Table:
    table = Table(title=title, show_edge=False, header_style="bold")
    if not rows:
        return table
    for key in rows[0]:
        table.add_column(str(key), justify="right" if isinstance(rows[0][key], (int, float)) else "left")
    for row in rows:
        table.add_row(*(_fmt(v) for v in row.values()))
    return table


def _exit_code(result: Result) -> int:
    if result.status.has_solution:
        return EXIT_OK
    if result.status is Status.INFEASIBLE:
        return EXIT_INFEASIBLE
    if result.status is Status.TIME_LIMIT:
        return EXIT_TIME_LIMIT
    return EXIT_USAGE if result.status is Status.DECLINED else EXIT_INFEASIBLE


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "time_limit": args.time_limit,
        "backend": getattr(args, "backend", None),
        "workers": getattr(args, "workers", None),
        "seed": getattr(args, "seed", None),
    }


def _result_line(result: Result) -> str:
    line = f"{result.problem} · {result.method}: {result.status.value}"
    if result.status.has_solution:
        line += f"  objective {_fmt(result.objective)}  bound {_fmt(result.bound)}  gap {_fmt(result.gap)}"
    line += f"  ({result.wall_s:.3f} s)"
    if result.reason:
        line += f"\n  reason: {result.reason}"
    return line


def cmd_solve(args: argparse.Namespace, out: Console) -> int:
    instance = load(args.file)
    result = solve(instance, args.method, **_options(args))
    document = result_to_dict(result)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(document, fh, indent=2)
    if args.json:
        print(json.dumps(document, indent=2))
        return _exit_code(result)
    out.print(f"[bold]{getattr(instance, 'name', args.file)}[/bold]  ({args.file})", highlight=False)
    out.print(_result_line(result), highlight=False)
    if result.solution is not None:
        out.print(_table(result.solution.rows()))
        for line in result.solution.summary():
            out.print(line, highlight=False)
    return _exit_code(result)


def cmd_crosscheck(args: argparse.Namespace, out: Console) -> int:
    instance = load(args.file)
    names = args.methods.split(",") if args.methods else None
    check = crosscheck(instance, names, **_options(args))
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
                "wall_s": r.wall_s,
                "note": r.reason,
            }
            for r in check.results
        ]
        out.print(_table(rows))
        rtol, atol = check.tolerance
        if check.agree:
            out.print(f"agree: yes (relative {rtol:g}, absolute {atol:g})", highlight=False)
        else:
            out.print(f"agree: NO: {check.disagreement}", highlight=False)
        for method, gap in check.heuristic_gaps.items():
            out.print(f"{method}: gap to the best proven bound {_fmt(gap)}", highlight=False)
    return EXIT_OK if check.agree else EXIT_INFEASIBLE


BENCH_FIELDS = ("instance", "method", "status", "objective", "bound", "gap", "wall_s", "agree")


def cmd_bench(args: argparse.Namespace, out: Console) -> int:
    names = args.methods.split(",") if args.methods else None
    jobs = benchmod.collect_jobs(args.targets, names, args.time_limit)
    options = {k: v for k, v in _options(args).items() if k != "time_limit"}
    rows: list[benchmod.Row] = []
    show_progress = sys.stdout.isatty() and not (args.json or args.csv)
    if show_progress:
        from rich.progress import Progress

        with Progress(console=out, transient=True) as progress:
            task = progress.add_task("bench", total=sum(benchmod.count_steps(j) for j in jobs))
            for job in jobs:
                progress.update(task, description=job.path.name)
                rows.extend(benchmod.run_job(job, repeat=args.repeat, on_step=lambda: progress.advance(task), **options))
    else:
        for job in jobs:
            rows.extend(benchmod.run_job(job, repeat=args.repeat, **options))
    if args.json:
        print(json.dumps([plain(r) for r in rows], indent=2))
    elif args.csv:
        writer = csv.writer(sys.stdout)
        writer.writerow(BENCH_FIELDS)
        for r in rows:
            writer.writerow(["" if getattr(r, k) is None else getattr(r, k) for k in BENCH_FIELDS])
    else:
        out.print(_table([{k: getattr(r, k) for k in BENCH_FIELDS} for r in rows]))
    disagree = any(r.agree is False for r in rows)
    return EXIT_INFEASIBLE if disagree else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hetopt", description="Exact, cross-checked solvers for heterogeneous-GPU training planners.")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--time-limit", type=float, default=None, metavar="S", help="seconds per method run")
        p.add_argument("--backend", choices=("highs", "cbc"), default=None, help="MILP backend (default highs)")
        p.add_argument("--workers", type=int, default=None, help="CP-SAT workers (default 2)")
        p.add_argument("--seed", type=int, default=None, help="CP-SAT random seed (default 0)")
        p.add_argument("--json", action="store_true", help="print one JSON document")

    p = sub.add_parser("solve", help="solve one instance file")
    p.add_argument("file")
    p.add_argument("--method", default="auto", help="auto (may change), dp, milp, cpsat, ... (see `hetopt methods`)")
    p.add_argument("--out", default=None, metavar="FILE", help="also write the JSON result to FILE")
    common(p)
    p.set_defaults(run=cmd_solve)

    p = sub.add_parser("crosscheck", help="run several methods on one instance and compare")
    p.add_argument("file")
    p.add_argument("--methods", default=None, help="comma-separated (default: the family's choice)")
    common(p)
    p.set_defaults(run=cmd_crosscheck)

    p = sub.add_parser("bench", help="time methods over instance files, folders or suites")
    p.add_argument("targets", nargs="+", metavar="FILE|FOLDER|SUITE")
    p.add_argument("--methods", default=None, help="comma-separated; replaces the suite's lists")
    p.add_argument("--repeat", type=int, default=1, help="runs per method; wall_s is the median")
    p.add_argument("--csv", action="store_true", help="print CSV")
    common(p)
    p.set_defaults(run=cmd_bench)

    p = sub.add_parser("plan", help="plan training of a model on a heterogeneous cluster (end to end)")
    p.add_argument("--cluster", required=True, help="a cluster file, or a name in instances/clusters/")
    p.add_argument("--model", required=True, help="a model file, or a name in instances/models/")
    p.add_argument("--global-batch", type=int, required=True, help="samples per iteration")
    p.add_argument("--microbatch", type=int, default=None, help="micro-batch size (default: try powers of two up to 16)")
    p.add_argument("--seq", type=int, default=None, help="sequence length (default: the model's)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="run the parallelizer queries in N worker processes (default: the CPU count; 1: in this process)")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT", help="run the queries on a Dask distributed cluster")
    p.add_argument("--no-prune", default=None, metavar="POLICIES", help="switch pruning policies off: redundancy,infeasibility,imbalance or all")
    p.add_argument("--no-alternatives", action="store_true", help="skip the baselines")
    p.add_argument("--max-islands", type=int, default=None, metavar="K",
                   help="compose only the K islands with the most compute (default: all, or the 4 fastest past 16 islands); leaving islands out gives a FEASIBLE plan")
    p.add_argument("--tasks", type=int, default=None, metavar="N",
                   help="send each enumeration's parallelizer queries in at most N batches (default 64; "
                   "a slow external parallelizer on a large Dask cluster wants one query per task)")
    p.add_argument("--layers-per-atom", type=int, default=None, metavar="K",
                   help="slice the model in atoms of K layers (default 1; at most 24 atoms on clusters of more than 16 islands): fewer slices for deep models")
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="seconds for the whole plan (islands, enumeration, composition, alternatives); stopped early: "
                   "FEASIBLE with bound and gap, or TIME_LIMIT (exit 3)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(run=cmd_plan)

    p = sub.add_parser("generate", help="rewrite generated instance files from catalogs and profiles")
    p.add_argument("family", choices=sorted(GENERATORS), help="which instances to write")
    p.add_argument("--out", default=None, metavar="DIR", help="folder to write (default: instances/<family>/)")
    p.add_argument("--profiles", default=None, metavar="DIR", help="the cephalo-profiles folder (default: ../shared/data/cephalo-profiles)")
    p.set_defaults(run=cmd_generate)

    p = sub.add_parser("methods", help="list the methods of each problem family")
    p.set_defaults(run=lambda args, out: _print_methods(out))
    return parser


def cmd_plan(args: argparse.Namespace, out: Console) -> int:
    from hetopt.planner import report, run
    from hetopt.planner.workers import WorkersLost

    try:
        if sys.stdout.isatty() and not args.json:
            from rich.progress import Progress

            with Progress(console=out, transient=True) as progress:
                task = progress.add_task("enumeration", total=None)

                def on_progress(phase: str, done: int, total: int) -> None:
                    progress.update(task, description=f"enumeration, {phase}", completed=done, total=total)

                result = run.run_plan(args, on_progress)
        else:
            result = run.run_plan(args)
    except WorkersLost as exc:  # the pool or the cluster is gone: one line, like bad input
        print(f"hetopt: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(plain(result), indent=2))
    else:
        report.print_plan(result, out)
    if result.status.has_solution:
        return EXIT_OK
    if result.status is Status.TIME_LIMIT:
        return EXIT_TIME_LIMIT
    return EXIT_USAGE if result.status in (Status.DECLINED, Status.ERROR) else EXIT_INFEASIBLE


#: ``hetopt generate NAME``: the module whose ``write(folder, ...)`` rewrites the shipped files,
#: and the folder under ``instances/``. ``pipeline`` writes the planner's ``planner-*`` files,
#: ``pipeline-synthetic`` the synthetic generator's (``tangram-*``, ``scale-*``, ...) beside them.
GENERATORS = {
    "allocation": ("hetopt.generate.allocation", "allocation"),
    "pipeline": ("hetopt.generate.pipeline", "pipeline"),
    "pipeline-synthetic": ("hetopt.pipeline.generate", "pipeline"),
    "clusters": ("hetopt.generate.clusters", "clusters"),
}


def cmd_generate(args: argparse.Namespace, out: Console) -> int:
    import importlib
    from pathlib import Path

    module_name, folder = GENERATORS[args.family]
    module = importlib.import_module(module_name)
    target = Path(args.out) if args.out else Path(module.__file__).resolve().parents[2] / "instances" / folder
    # only the allocation generator reads Cephalo's profiles
    extra = (Path(args.profiles) if args.profiles else None,) if args.family == "allocation" else ()
    for path in module.write(target, *extra):
        out.print(str(path), highlight=False)
    return EXIT_OK


def _print_methods(out: Console) -> int:
    for name, fam in FAMILIES.items():
        out.print(f"{name}: auto (= {fam.auto}), " + ", ".join(fam.methods), highlight=False)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # off a terminal rich assumes 80 columns; plan tables are wider, and files want whole rows
    out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)
    try:
        return args.run(args, out)
    except InputError as exc:
        print(f"hetopt: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:  # unknown method or backend names
        print(f"hetopt: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("hetopt: interrupted", file=sys.stderr)
        return 130
