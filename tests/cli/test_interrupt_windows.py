"""A Ctrl-C at every moment of a CP-SAT call is honoured (issue 46).

The race of issue 46 (a library caller's Ctrl-C that did nothing for up to the whole time
limit, or an interpreter that exited under a running search) is made deterministic here: each
test puts the interrupt at one chosen point of :func:`hetopt.backends.solve_cpsat` by hooking
that point in a child process, instead of sending it after a wall-clock second. Each test
failed before the fix of its window:

- *before the search begins*: ``CpSolver.stop_search`` did nothing until ``solve`` had made
  its wrapper, so the stop was lost and the search ran on;
- *during the search*: ``Thread.join`` interrupted by ``KeyboardInterrupt`` marks the running
  thread as ended in CPython 3.11, so the call raised while the search still ran, and the
  process then died at exit ("terminate called without an active exception") or hung;
- *inside Thread.start*: the interrupt escaped before the watch began;
- *a requested stop* (the command line's first Ctrl-C) before the search begins was lost the
  same way as the first.

The child reports whether the search had ended when the call raised or returned, and how long
the search ran: the limit is 30 s, and a stop that is honoured ends it in milliseconds (the
checks allow 10 s, a hang guard, not a timing claim).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli.test_interrupt import default_sigint

ROOT = Path(__file__).resolve().parents[2]
#: Seconds a child may take in all before the test calls it a hang.
HANG_S = 90
#: The search's own limit in the child; a stop that is lost runs it this long.
LIMIT_S = 30
#: A stopped search must have ended well before its limit.
STOPPED_WITHIN_S = 10

# The child: a model CP-SAT does not prove in LIMIT_S, a hook at the chosen point, and a
# report of what happened. ``searches`` counts searches running in C++ (the original solve).
CHILD = textwrap.dedent("""\
    import os, random, signal, sys, threading, time
    from ortools.sat.python import cp_model
    from hetopt import backends, interrupt
    point = sys.argv[1]
    # a library caller's Python: Ctrl-C raises KeyboardInterrupt. A process started with SIGINT
    # ignored (a background job of a non-interactive shell, as a CI script may run pytest)
    # inherits SIG_IGN, and Python then installs no handler: say it here, not by inheritance
    signal.signal(signal.SIGINT, signal.default_int_handler)
    random.seed(1)
    model = cp_model.CpModel()
    x = [model.new_bool_var(f"x{i}") for i in range(300)]
    for _ in range(20):
        w = [random.randint(1000, 100000) for _ in x]
        model.add(sum(a * b for a, b in zip(w, x)) <= sum(w) // 3)
    model.maximize(sum(random.randint(1000, 100000) * b for b in x))

    searching = threading.Event()   # the original solve is running
    ran = {"s": None}               # how long it ran, once it has ended
    stop_called = threading.Event() # the watcher has called stop_search at least once
    original_solve = cp_model.CpSolver.solve

    def interrupt_me():
        if point == "requested-before-search":
            interrupt.request_stop()
        else:
            os.kill(os.getpid(), signal.SIGINT)

    def hooked_solve(self, model, callback=None):
        if point in ("before-search", "requested-before-search"):
            interrupt_me()
            stop_called.wait(5)  # the stop has been tried before the search made its wrapper
        if point == "during-search":
            def first_log(_line, fired=[]):
                if not fired:
                    fired.append(1)
                    interrupt_me()
            self.parameters.log_search_progress = True
            self.parameters.log_to_stdout = False
            self.log_callback = first_log
        searching.set()
        started = time.monotonic()
        try:
            return original_solve(self, model, callback)
        finally:
            ran["s"] = time.monotonic() - started
            searching.clear()

    cp_model.CpSolver.solve = hooked_solve

    def watch(solver):
        original_stop = solver.stop_search
        def stop_search():
            stop_called.set()
            original_stop()
        solver.stop_search = stop_search

    if point == "inside-thread-start":
        original_start = threading.Thread.start
        def start(self):
            original_start(self)
            if self.name == "cp-sat":
                raise KeyboardInterrupt  # as if the signal landed in start()'s wait
        threading.Thread.start = start

    def report(what):
        ended = not searching.is_set() and ran["s"] is not None
        print(what, "ended" if ended else "still-searching", ran["s"] if ended else "", flush=True)

    try:
        if point == "requested-before-search":
            with interrupt.stop_on_interrupt():
                solver, outcome = backends.solve_cpsat(model, time_limit=LIMIT, on_solver=watch)
        else:
            solver, outcome = backends.solve_cpsat(model, time_limit=LIMIT, on_solver=watch)
        report("returned")
    except KeyboardInterrupt:
        report("raised")
    """).replace("LIMIT", str(LIMIT_S))


def _run(point: str) -> tuple[str, float | None]:
    done = subprocess.run([sys.executable, "-c", CHILD, point], capture_output=True, text=True, cwd=ROOT,
                          timeout=HANG_S, env=dict(os.environ, PYTHONPATH=str(ROOT)), preexec_fn=default_sigint)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)  # not killed at exit
    words = done.stdout.split()
    assert len(words) in (2, 3), done.stdout
    return " ".join(words[:2]), (float(words[2]) if len(words) == 3 else None)


@pytest.mark.parametrize("point", ["before-search", "during-search", "inside-thread-start"])
def test_a_library_ctrl_c_raises_only_after_the_search_has_stopped(point):
    what, ran_s = _run(point)
    assert what == "raised ended"
    assert ran_s is None or ran_s < STOPPED_WITHIN_S  # stopped, not run to its limit


def test_a_stop_requested_before_the_search_begins_stops_it():
    what, ran_s = _run("requested-before-search")
    assert what == "returned ended"  # the command line's first Ctrl-C: an answer, at once
    assert ran_s is not None and ran_s < STOPPED_WITHIN_S
