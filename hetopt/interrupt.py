"""Ctrl-C as a request to stop: the work stops at its next clock check and reports what it has.

A library call answers Ctrl-C as Python does: ``KeyboardInterrupt`` reaches the caller, and no
solver turns it into an answer (CP-SAT's own SIGINT handler, which would, is switched off in
:func:`hetopt.backends.solve_cpsat`). A command line wants more: the rows a benchmark
finished, the best plan found so far. Inside :func:`stop_on_interrupt` the first Ctrl-C only
*requests* a stop. Every :class:`hetopt.budget.Deadline` then reads as expired, so each method
stops where it would at its time limit and returns its best answer (FEASIBLE with a bound, or
TIME_LIMIT), a running CP-SAT search is stopped by the thread that watches it
(:func:`hetopt.backends.solve_cpsat` looks every 50 ms), and the caller prints what it has and
exits 130. A second Ctrl-C raises
``KeyboardInterrupt`` at once.

Examples
--------
>>> stop_requested()
False
>>> with stop_on_interrupt():
...     request_stop()
...     stop_requested()
True
>>> stop_requested()  # each ``with`` starts afresh
False
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

_state = {"requested": False, "armed": False}


#: How an answer cut short by Ctrl-C begins its reason (its own reason, which speaks of the
#: time limit, follows: the work stopped exactly as it stops at its limit).
STOPPED_BY_USER = "stopped by Ctrl-C (handled as the time limit): "


def stop_requested() -> bool:
    """Whether a stop was requested (a first Ctrl-C inside :func:`stop_on_interrupt`)."""
    return _state["requested"]


def armed() -> bool:
    """Whether Ctrl-C requests a stop (inside :func:`stop_on_interrupt`) rather than raising."""
    return _state["armed"]


def request_stop() -> None:
    """Request a stop, as the first Ctrl-C does.

    Only a flag is set (a signal handler must not wait on a lock a solver's thread may hold);
    whoever waits on work reads it: every :class:`hetopt.budget.Deadline`, the CP-SAT watcher,
    the MILP child's parent, the planner's pool.
    """
    _state["requested"] = True


@contextlib.contextmanager
def stop_on_interrupt() -> Iterator[None]:
    """Within the block, a first Ctrl-C requests a stop and a second raises ``KeyboardInterrupt``.

    Off the main thread nothing is installed (Python delivers signals to the main thread only)
    and Ctrl-C raises as usual.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(_signum, _frame) -> None:
        if _state["requested"]:
            raise KeyboardInterrupt
        request_stop()

    previous = signal.signal(signal.SIGINT, handle)
    _state.update(requested=False, armed=True)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _state.update(requested=False, armed=False)


def ignore_interrupt() -> None:
    """Ignore Ctrl-C in this process: for worker processes, whose parent decides when to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
