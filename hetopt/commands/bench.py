"""``hetopt bench``: methods timed over files, folders or suites, rows streamed as each
instance finishes."""

from __future__ import annotations

import csv
import json
import sys

from rich.console import Console

from hetopt.commands.common import (EXIT_INFEASIBLE, EXIT_OK, Args, seconds_text, solver_options)
from hetopt.errors import InputError
from hetopt.interrupt import stop_requested
from hetopt.jsonout import plain
from hetopt.tables import show
from hetopt.terminal import on_terminal, progress


BENCH_FIELDS = ("instance", "method", "status", "objective", "bound", "gap", "wall_s", "agree")


class _BenchOutput:
    """Where ``bench`` puts its rows: CSV and JSON Lines are written as each instance finishes
    (its rows need all its methods, for ``agree``); the table and the JSON document are
    printed at the end, or at Ctrl-C with the rows finished so far."""

    def __init__(self, args: Args, out: Console) -> None:
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
                row["wall_s"] = seconds_text(row["wall_s"])
            show(self.out, table, markdown=self.args.markdown)


def cmd_bench(args: Args, out: Console) -> int:
    from hetopt import bench as benchmod

    options = {k: v for k, v in solver_options(args).items() if k != "time_limit"}
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
