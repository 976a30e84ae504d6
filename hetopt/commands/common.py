"""What the commands share: the exit codes, the ``--draw`` picture, wall times in tables.

The command line (:mod:`hetopt.cli`) parses; the modules of this package run one command
each from its parsed arguments (``args``, an ``Args`` read by attribute) and
return its exit code.
"""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console

from hetopt.errors import InputError
from hetopt.result import Result, Status
from hetopt.solvers import check_options

#: Parsed arguments (an ``Args``: argparse lives in :mod:`hetopt.cli` alone), read
#: by attribute.
Args = Any

EXIT_OK, EXIT_INFEASIBLE, EXIT_USAGE, EXIT_TIME_LIMIT, EXIT_INTERNAL = 0, 1, 2, 3, 4
#: Stopped by Ctrl-C (SIGINT): the shell's status of a program killed by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130
#: The reader of stdout went away: the shell's status of a program killed by SIGPIPE (128 + 13).
EXIT_BROKEN_PIPE = 141


#: The exit code of every status, for ``solve``, ``crosscheck`` and ``plan`` alike: a method
#: that declines or fails (ERROR, with its reason) is not a proof of infeasibility.
STATUS_EXIT = {
    Status.OPTIMAL: EXIT_OK, Status.FEASIBLE: EXIT_OK, Status.INFEASIBLE: EXIT_INFEASIBLE,
    Status.TIME_LIMIT: EXIT_TIME_LIMIT, Status.DECLINED: EXIT_USAGE, Status.ERROR: EXIT_USAGE,
}


def exit_code(result: Result) -> int:
    """The exit code of a result's status."""
    return STATUS_EXIT[result.status]


#: Command-line flag of each solver-layer option, for messages.
SOLVER_FLAGS = {"time_limit": "--time-limit", "backend": "--backend", "threads": "--threads", "seed": "--seed"}


def solver_options(args: Args) -> dict[str, Any]:
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
        raise InputError(f"{SOLVER_FLAGS.get(exc.field, exc.field)}: {exc.detail}", field=exc.field) from None



def check_draw(args: Args) -> None:
    """``--draw FILE`` of solve and plan, checked before any work: the file type and the plot extra."""
    if args.draw is not None:
        from hetopt.draw import check_target, require_matplotlib

        check_target(args.draw, "--draw")
        require_matplotlib("--draw")


def draw_picture(args: Args, document: dict, title: str, source: str, has_plan: bool, out: Console) -> None:
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


def seconds_text(value: float) -> str:
    """Wall time for tables: fixed point, never the 6g exponent form ("5.5e-05" reads as 5.5 s)."""
    return f"{value:.3f}"


#: ``hetopt plan``'s flag for each ``PlanRequest`` field whose flag is not ``--`` and the
#: field's name with dashes: the library names fields, the command line its flags.
PLAN_FLAGS = {"policies": "--no-prune"}


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
