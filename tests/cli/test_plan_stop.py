"""A plan stops where it cannot look at a clock (issue 44 item 8): building the composition's instance.

Building the datacenter's instance checks every option of every plan (1.5 s on an idle
machine, 12 s at a load of 9) and looked at no clock, so a Ctrl-C or a time limit waited for
it. ``planner.search.within`` runs it in a thread the planner stops waiting for. Here the build
is made slow on purpose (a sleep before the real one) on a small cluster; the waits are hang
guards, not timing assertions.
"""

from __future__ import annotations

import threading
import time

import pytest

import hetopt
from hetopt.budget import Deadline
from hetopt.interrupt import request_stop, stop_on_interrupt
from hetopt.result import Status

#: The search module ``hetopt.plan`` runs (a doctest run may import the file a second time under
#: another name, so not ``sys.modules``): the names its functions look up, patched below.
SEARCH = hetopt.plan.__globals__["search_sizes"].__globals__
#: How long the slowed build sleeps, and how long a stopped plan may take before it counts as
#: having waited for the build (a hang guard with a wide margin either way).
SLOW_BUILD_S = 60.0
HANG_S = 30.0


@pytest.fixture
def slow_build(monkeypatch):
    """The composition's instance takes ``SLOW_BUILD_S`` longer to build; returns an event set
    once a build has started."""
    started = threading.Event()
    real = SEARCH["pipeline_instance"]

    def slow(*args, **kwargs):
        started.set()
        time.sleep(SLOW_BUILD_S)
        return real(*args, **kwargs)

    monkeypatch.setitem(SEARCH, "pipeline_instance", slow)
    return started


def test_within_returns_none_at_the_deadline_and_raises_what_the_work_raises():
    t0 = time.monotonic()
    within = SEARCH["within"]
    assert within(Deadline(0.2), lambda: time.sleep(SLOW_BUILD_S)) is None
    assert time.monotonic() - t0 < HANG_S
    with pytest.raises(ZeroDivisionError):
        within(Deadline(10.0), lambda: 1 / 0)
    assert within(Deadline(10.0), lambda: "built") == "built"


def test_a_time_limit_is_kept_while_the_instance_is_built(slow_build):
    t0 = time.monotonic()
    p = hetopt.plan("tangram-c2", "gpt3-1.3b", global_batch=32, microbatch_size=4, alternatives=False, time_limit=8.0)
    assert time.monotonic() - t0 < HANG_S
    assert slow_build.is_set() and p.status is Status.TIME_LIMIT


def test_ctrl_c_while_the_instance_is_built_stops_the_plan(slow_build):
    threading.Thread(target=lambda: slow_build.wait(HANG_S) and request_stop(), daemon=True).start()
    t0 = time.monotonic()
    with stop_on_interrupt():
        p = hetopt.plan("tangram-c2", "gpt3-1.3b", global_batch=32, microbatch_size=4, alternatives=False)
    assert time.monotonic() - t0 < HANG_S
    assert p.status is Status.TIME_LIMIT and p.reason.startswith("stopped by Ctrl-C"), p.reason
    assert "time limit" not in p.reason
