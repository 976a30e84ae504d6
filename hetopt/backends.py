"""Running MILP (PuLP: HiGHS or CBC) and CP-SAT models, with one mapping of their outcomes.

Families build the models; this module only solves them and says what was proven:
whether a solution exists, whether it is optimal, and the best proven bound. It also
writes a built model to a file (``write_model``) so that another solver can run it.

PuLP and OR-Tools are imported inside the functions that use them: the solver layer imports
this module, and ``hetopt solve --method dp`` should not pay for either (about 0.6 s of CPU).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from hetopt.errors import InputError, SolverBug
from hetopt.family import TIME_LIMIT_SLACK_S, Deadline
from hetopt.interrupt import armed, ignore_interrupt, stop_requested
from hetopt.result import Status

if TYPE_CHECKING:
    import pulp
    from ortools.sat.python import cp_model

T = TypeVar("T")

#: Seconds a forked backend may run past the deadline before it is killed; the rest of
#: ``TIME_LIMIT_SLACK_S`` is for reading the plan back, decoding it and ``evaluate``.
BACKEND_GRACE_S = 0.25 * TIME_LIMIT_SLACK_S

#: Seconds between two looks at a running CP-SAT search or a MILP child for Ctrl-C.
WATCH_S = 0.05

#: MILP backends by name; "highs" is the default (may change).
MILP_BACKENDS = ("highs", "cbc")
DEFAULT_MILP_BACKEND = "highs"

#: Share of its time limit after which a CBC run that reports "infeasible" is taken to have
#: been stopped by the limit (PuLP cannot tell the two apart): never a false INFEASIBLE.
CBC_STOPPED_SHARE = 0.9

#: CP-SAT search workers when the caller gives none: one, so that a run is repeatable. With
#: several workers CP-SAT races a portfolio of searches in threads, and which of several
#: equally good optima it returns depends on thread timing. One worker with a fixed seed
#: follows one search path (OR-Tools' ``interleave_search`` makes parallel workers repeatable
#: too, but measured 4-6x slower on this project's models, so it is not used). A run stopped
#: by its time limit stays timing-dependent either way.
DEFAULT_CPSAT_WORKERS = 1

#: CP-SAT's random seed when the caller gives none (any fixed value: the point is that it is
#: fixed, so a run with one worker repeats exactly).
DEFAULT_CPSAT_SEED = 0


#: The model files ``write_model`` writes, by kind of model and file-name ending: the MILP in
#: MPS or CPLEX LP format (PuLP's own writers; HiGHS, CBC, SCIP and Gurobi read both), the
#: CP-SAT model as its ``CpModelProto``, in protobuf text or binary (OR-Tools picks the
#: format by the ending: text when the name ends in "txt").
MODEL_SUFFIXES = {"milp": (".mps", ".lp"), "cpsat": (".pb.txt", ".pb")}


#: Longest wait poll() takes (a C int of milliseconds); past it the wait is unbounded.
MAX_POLL_S = 2_000_000.0


def check_model_path(path: str | os.PathLike[str], kind: str) -> Path:
    """The file a ``kind`` model ("milp" or "cpsat") is written to, checked by its ending.

    Parameters
    ----------
    path
        The file name given as ``write_model``.
    kind
        A key of ``MODEL_SUFFIXES``.

    Returns
    -------
    Path

    Raises
    ------
    InputError
        ``field="write_model"``: "write_model: ..." naming the endings the model can be written with.

    Examples
    --------
    >>> check_model_path("out.mps", "milp").name
    'out.mps'
    >>> check_model_path("out.mps", "cpsat")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: write_model: out.mps: a CP-SAT model is written as .pb.txt (protobuf text) or .pb (binary); .mps and .lp are for the MILP (method milp)
    """
    target = Path(path)
    if target.name.lower().endswith(MODEL_SUFFIXES[kind]):
        return target
    if kind == "cpsat":
        fix = "a CP-SAT model is written as .pb.txt (protobuf text) or .pb (binary); .mps and .lp are for the MILP (method milp)"
    else:
        fix = "a MILP is written as .mps or .lp (CPLEX LP); .pb.txt and .pb are for CP-SAT (method cpsat)"
    raise InputError(f"write_model: {path}: {fix}", field="write_model")


def write_model_file(model: pulp.LpProblem | cp_model.CpModel, path: str | os.PathLike[str], kind: str) -> str:
    """Write a model by the file's ending (see ``check_model_path``): a MILP (``kind="milp"``) as
    MPS or CPLEX LP, with the model's own names of variables and rows (``x_0_3``, ``gpus_0``), so a
    solution read back from another solver maps onto the formulation's symbols; a CP-SAT model
    as its protobuf, text (``.pb.txt``) or binary (``.pb``), its solution hint (the warm start)
    included.

    Returns
    -------
    str
        The path written.

    Raises
    ------
    InputError
        ``field="write_model"``: a wrong ending, or a file that cannot be written.
    """
    target = check_model_path(path, kind)
    if kind == "cpsat":
        if not model.export_to_file(str(target)):
            raise InputError(f"write_model: {path}: cannot write (OR-Tools' export failed)", field="write_model")
        return str(target)
    try:
        if target.name.lower().endswith(".mps"):
            model.writeMPS(str(target))
        else:
            model.writeLP(str(target))
    except OSError as exc:
        raise InputError(f"write_model: {path}: cannot write ({exc.strerror})", field="write_model") from None
    return str(target)


@dataclass(frozen=True)
class Outcome:
    """What a MILP or CP-SAT run proved.

    ``status`` is OPTIMAL, FEASIBLE (solution, not proven), INFEASIBLE (proven) or
    TIME_LIMIT (no solution in time); ``bound`` is the solver's proven objective bound
    in the model's own units, or None when the backend does not report one.
    """

    status: Status
    objective: float | None
    bound: float | None
    stats: dict


@contextlib.contextmanager
def _stdout_to_devnull() -> Iterator[None]:
    """Send the C-level stdout to /dev/null (native libraries print banners there)."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


@cache
def silence_highs_banner() -> None:
    """HiGHS prints its banner on the first ``Highs()`` of a process; take it off stdout.

    ``hetopt solve --json`` must print exactly one JSON document.
    """
    import highspy

    with _stdout_to_devnull():
        highspy.Highs()


def milp_available(backend: str) -> bool:
    """Whether a MILP backend ("highs" or "cbc") can run here.

    Examples
    --------
    >>> milp_available("nonexistent")
    False
    """
    import pulp

    if backend == "highs":
        return pulp.HiGHS().available()
    if backend == "cbc":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return bool(pulp.PULP_CBC_CMD(msg=False).available())
    return False


def _check_backend(backend: str) -> None:
    if backend not in MILP_BACKENDS:
        raise InputError(f"unknown MILP backend {backend!r} (known: {', '.join(MILP_BACKENDS)})", field="backend")


def solve_pulp(
    prob: pulp.LpProblem,
    *,
    backend: str = DEFAULT_MILP_BACKEND,
    time_limit: float | None = None,
    threads: int | None = None,
) -> Outcome:
    """Solve a PuLP minimization problem and report what was proven.

    Parameters
    ----------
    prob
        A minimization problem.
    backend
        "highs" (default, may change) or "cbc".
    time_limit
        Seconds, or None for no limit.
    threads
        Solver threads, or None for the backend's default.

    Returns
    -------
    Outcome
        The bound is HiGHS's MIP dual bound; CBC through PuLP reports none (None).

    Raises
    ------
    ValueError
        For an unknown backend name.
    """
    import pulp

    _check_backend(backend)
    limit = None if time_limit is None else max(float(time_limit), 0.01)
    if backend == "highs":
        silence_highs_banner()
        solver = pulp.HiGHS(msg=False, timeLimit=limit, threads=threads, mip_rel_gap=0.0, mip_abs_gap=0.0)
        started = time.perf_counter()
        prob.solve(solver)
        import highspy

        if prob.solverModel.getModelStatus() == highspy.HighsModelStatus.kSolveError:
            # HiGHS 1.16's presolve can post-solve a point that breaks a row and then report a
            # solve error (a 99-column pipeline model of the differential suite, issue 43: it
            # read as a time limit); the same model solves without presolve
            left = None if limit is None else max(limit - (time.perf_counter() - started), 0.01)
            prob.solve(pulp.HiGHS(msg=False, timeLimit=left, threads=threads, mip_rel_gap=0.0, mip_abs_gap=0.0,
                                  presolve="off"))
        outcome = _highs_outcome(prob)
        # HiGHS keeps its worker threads alive after a solve. A process that forks later (a
        # MILP with a deadline runs in a forked child, solve_pulp_by) copies none of them but
        # may copy a lock one of them held, and the child's solve then waits forever (seen
        # once in a full test run). So end them here and wait for them: a fork finds none.
        highspy.Highs.resetGlobalScheduler(True)
        return outcome
    with warnings.catch_warnings():  # PuLP 3.x announces the bundled CBC's removal in 4.0; we pin <4
        warnings.simplefilter("ignore", DeprecationWarning)
        solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=limit, threads=threads, gapRel=0.0, gapAbs=0.0)
    started = time.perf_counter()
    prob.solve(solver)
    outcome = _cbc_outcome(prob)
    if outcome.status is Status.INFEASIBLE and limit is not None and time.perf_counter() - started >= CBC_STOPPED_SHARE * limit:
        # CBC stopped by its time limit before any solution reads through PuLP as
        # "infeasible": an answer that took the whole limit proves nothing
        return Outcome(Status.TIME_LIMIT, None, None, outcome.stats)
    return outcome


def solve_pulp_by(
    prob: pulp.LpProblem,
    deadline: Deadline | None,
    read: Callable[[], T],
    *,
    backend: str = DEFAULT_MILP_BACKEND,
    time_limit: float | None = None,
    threads: int | None = None,
) -> tuple[Outcome, T | None] | None:
    """Solve ``prob`` and read its values, stopped for sure by ``deadline``.

    HiGHS checks its clock only between steps: its presolve probing and MIP set-up ran 5 to
    14 s past a 2 s limit. With a deadline the backend therefore runs in a forked child,
    killed ``BACKEND_GRACE_S`` after the deadline; the child is a fork, so the model is not
    copied, and only the outcome and ``read()`` come back through a pipe. Without a
    deadline, or where a child cannot be started (a daemonic Dask worker, no fork), it
    solves here.

    Parameters
    ----------
    deadline
        When the call must be over (None: no limit).
    read
        ``read() -> values``, called after a solve that found a solution (in the child).
    time_limit
        The backend's own limit (default: what is left of ``deadline``).

    Returns
    -------
    (Outcome, values or None), or None when the child had to be stopped at the deadline.

    Raises
    ------
    RuntimeError
        When the child fails or ends without an answer.
    """
    limit = time_limit if time_limit is not None else (None if deadline is None else deadline.remaining())

    def run() -> tuple[Outcome, T | None]:
        outcome = solve_pulp(prob, backend=backend, time_limit=limit, threads=threads)
        return outcome, (read() if outcome.status.has_solution else None)

    import multiprocessing  # here: only a MILP with a deadline forks, and ``import hetopt`` should not pay for it

    if deadline is None and armed():  # no limit, but a Ctrl-C must still stop the solve
        deadline = Deadline(None)
    if deadline is None or multiprocessing.current_process().daemon or "fork" not in multiprocessing.get_all_start_methods():
        return run()
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def child() -> None:
        os.setpgrp()  # its own process group: a CBC subprocess it starts is stopped with it
        ignore_interrupt()  # and out of the terminal's: the parent hears Ctrl-C and stops it
        try:
            if backend == "highs":
                # HiGHS's worker threads are not copied by fork: drop the parent's scheduler
                # (if it ran HiGHS before) without waiting for them, or the solve waits forever
                import highspy

                highspy.Highs.resetGlobalScheduler(False)
            send.send(("ok", run()))
        except BaseException as exc:  # noqa: BLE001  (the parent re-raises it)
            send.send(("error", repr(exc)))

    proc = ctx.Process(target=child, daemon=True)
    for stream in (sys.stdout, sys.stderr):  # or the child could write the parent's buffered text again
        stream.flush()
    try:
        proc.start()  # inside: a Ctrl-C that lands in start() still stops the child (finally)
        send.close()
        if _answered(receive, deadline):
            try:
                kind, answer = receive.recv()
            except EOFError:  # the child died without a word
                raise RuntimeError(f"the {backend} child process ended without an answer (exit code {proc.exitcode})") from None
            if kind == "error":
                raise RuntimeError(f"{backend} failed in its child process: {answer}")
            return answer
        return None
    finally:
        if proc.pid is not None:  # None: the Ctrl-C came before the fork
            if proc.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # the child and a CBC it started
                proc.kill()  # the child itself, should it not have made its group yet
            proc.join()
        receive.close()


def _answered(receive: Any, deadline: Deadline) -> bool:
    """Wait for the child's answer until ``deadline`` (plus ``BACKEND_GRACE_S``) or a requested
    stop (Ctrl-C: :mod:`hetopt.interrupt`); whether it came."""
    end = time.monotonic() + deadline.remaining() + BACKEND_GRACE_S  # inf without a limit
    while True:
        if stop_requested():
            return receive.poll(0)
        # poll() takes at most 2^31 ms; waiting in slices also sees a stop requested meanwhile
        wait = min(end - time.monotonic(), WATCH_S if armed() else MAX_POLL_S)
        if receive.poll(max(wait, 0.0)):
            return True
        if time.monotonic() >= end:
            return False


def _highs_outcome(prob: pulp.LpProblem) -> Outcome:
    import highspy
    import pulp

    model = prob.solverModel
    info = model.getInfo()
    model_status = model.getModelStatus()
    has_solution = info.primal_solution_status == 2  # 2 = kSolutionStatusFeasible
    objective = pulp.value(prob.objective) if has_solution else None
    bound = info.mip_dual_bound if _finite(info.mip_dual_bound) else None
    stats = {"nodes": int(info.mip_node_count), "backend": "highs"}
    if model_status == highspy.HighsModelStatus.kOptimal:
        return Outcome(Status.OPTIMAL, objective, objective, stats)
    if model_status == highspy.HighsModelStatus.kInfeasible:
        return Outcome(Status.INFEASIBLE, None, None, stats)
    if has_solution:
        return Outcome(Status.FEASIBLE, objective, bound, stats)
    return Outcome(Status.TIME_LIMIT, None, bound, stats)


def _cbc_outcome(prob: pulp.LpProblem) -> Outcome:
    import pulp

    stats = {"backend": "cbc"}
    if prob.status == pulp.LpStatusInfeasible:
        return Outcome(Status.INFEASIBLE, None, None, stats)
    if prob.sol_status == pulp.LpSolutionOptimal and prob.status == pulp.LpStatusOptimal:
        objective = pulp.value(prob.objective)
        return Outcome(Status.OPTIMAL, objective, objective, stats)
    if prob.sol_status == pulp.LpSolutionIntegerFeasible:
        return Outcome(Status.FEASIBLE, pulp.value(prob.objective), None, stats)
    return Outcome(Status.TIME_LIMIT, None, None, stats)


def _finite(x: float) -> bool:
    return x == x and abs(x) < 1e300


def _solve_watched(solver: cp_model.CpSolver, model: cp_model.CpModel) -> int:
    """``solver.solve(model)``, stopped by Ctrl-C at any moment of the call.

    Python runs a signal handler only between bytecodes of the main thread, so a search running
    in C++ on the calling thread would hear Ctrl-C only when it ends (20 s later, under a 20 s
    limit). The search therefore runs in a thread of its own (CP-SAT releases the GIL) while the
    calling thread watches it: a ``KeyboardInterrupt`` stops the search and is raised again once
    the search has ended; a requested stop (:mod:`hetopt.interrupt`) stops it and returns what
    it found.

    Three windows are closed here (issue 46), each with a test in ``tests/cli/test_interrupt.py``:

    - ``CpSolver.stop_search`` does nothing until ``solve`` has made its ``SolveWrapper``, so a
      stop that lands between the thread's start and that moment was lost and the search ran to
      its limit. The watcher therefore repeats ``stop_search`` every ``WATCH_S`` until the search
      has ended, and a search that has not begun when the stop comes never begins.
    - ``Thread.join`` interrupted by ``KeyboardInterrupt`` marks a still-running thread as
      stopped in CPython 3.11 (bpo-45274's fix releases the thread's own lock), so a second
      ``join`` returned at once and the interpreter exited under a running search (``terminate
      called without an active exception``, or a hang). The watcher waits on an event the
      search sets when it ends, never on ``join``.
    - A ``KeyboardInterrupt`` that lands inside ``Thread.start`` left the search running: the
      start is inside the watched block.
    """
    answer: dict[str, Any] = {}
    ended = threading.Event()
    gate = threading.Lock()  # orders "the search begins" against "a stop came first"
    phase = {"now": "waiting"}  # waiting -> searching, or waiting -> cancelled

    def search() -> None:
        try:
            with gate:
                if phase["now"] == "cancelled":
                    return
                phase["now"] = "searching"
            answer["code"] = solver.solve(model)
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            answer["error"] = exc
        finally:
            ended.set()

    def stop_and_wait() -> None:
        """Stop the search, whatever its phase, and return once it can no longer run."""
        with gate:
            if phase["now"] == "waiting":
                phase["now"] = "cancelled"  # it never begins
                return
        while True:
            try:
                solver.stop_search()  # again and again: a no-op before solve() has its wrapper
                if ended.wait(WATCH_S):
                    return
            except KeyboardInterrupt:  # another Ctrl-C: the first is already being raised
                continue

    thread = threading.Thread(target=search, name="cp-sat", daemon=True)
    try:
        thread.start()
        while not ended.wait(WATCH_S):  # returns as soon as the search ends
            if stop_requested():
                solver.stop_search()  # repeated each look, for the same reason as above
    except KeyboardInterrupt:
        stop_and_wait()
        raise
    if "error" in answer:
        raise answer["error"]
    return answer["code"]


def solve_cpsat(
    model: cp_model.CpModel,
    *,
    time_limit: float | None = None,
    threads: int | None = None,
    seed: int | None = DEFAULT_CPSAT_SEED,
    parameters: Mapping[str, object] | None = None,
    on_solver: Callable[[cp_model.CpSolver], None] | None = None,
) -> tuple[cp_model.CpSolver, Outcome]:
    """Solve a CP-SAT minimization model and report what was proven.

    Parameters
    ----------
    time_limit
        Seconds, or None for no limit.
    threads
        Search workers (``hetopt solve --threads``). None: one worker, so that the same
        model gives the same solution on every run (see ``DEFAULT_CPSAT_WORKERS``); more
        workers search in parallel and may return a different one of several equal optima.
    seed
        Random seed (None: ``DEFAULT_CPSAT_SEED``); with one worker, the same seed repeats
        the same search.
    parameters
        More of CP-SAT's ``SatParameters`` by name (e.g. ``{"linearization_level": 2}``), set
        after the ones above.
    on_solver
        Called with the solver before the solve, to set more parameters.

    Returns
    -------
    (CpSolver, Outcome)
        The solver (read values from it) and what was proven, in the model's integer units.

    Raises
    ------
    SolverBug
        When CP-SAT finds the model invalid (e.g. a coefficient out of its integer range):
        the family should have declined the instance or rejected it when reading.
    """
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    if time_limit is not None:
        solver.parameters.max_time_in_seconds = max(float(time_limit), 0.01)
    solver.parameters.num_workers = threads or DEFAULT_CPSAT_WORKERS
    solver.parameters.random_seed = DEFAULT_CPSAT_SEED if seed is None else seed
    # CP-SAT's own SIGINT handler would end the search and return FEASIBLE as if the limit had
    # come: a user's Ctrl-C turned into a normal answer. Ctrl-C is hetopt's (see _solve_watched).
    solver.parameters.catch_sigint_signal = False
    for name, value in (parameters or {}).items():
        setattr(solver.parameters, name, value)
    if on_solver is not None:
        on_solver(solver)
    code = _solve_watched(solver, model)
    stats = {"branches": solver.num_branches, "conflicts": solver.num_conflicts}
    if code == cp_model.OPTIMAL:
        return solver, Outcome(Status.OPTIMAL, solver.objective_value, solver.best_objective_bound, stats)
    if code == cp_model.FEASIBLE:
        return solver, Outcome(Status.FEASIBLE, solver.objective_value, solver.best_objective_bound, stats)
    if code == cp_model.INFEASIBLE:
        return solver, Outcome(Status.INFEASIBLE, None, None, stats)
    if code == cp_model.MODEL_INVALID:  # the family built a model CP-SAT cannot take: a bug, not bad input
        raise SolverBug("CP-SAT rejected the model: " + model.validate())
    return solver, Outcome(Status.TIME_LIMIT, None, None, stats)
