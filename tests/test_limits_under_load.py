"""Time limits hold on a busy machine (issue 28): load 4 is three CPU burners on two cores.

The MILP methods run in a forked child killed at the deadline; every other method and the
planner rely on checking the clock between units of work. Under load each unit takes two to
three times longer, so this checks, with three burners running, that the clock checks still
keep each call within ``time_limit + TIME_LIMIT_SLACK_S``: the 100,000-GPU allocation (which
took 4.45 s under a 2 s limit at load 5.6 before its plan was built from shared per-kind
objects), the pipeline dp on 2^16 usage states, the MILP, CP-SAT and the planner.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

import hetopt
from hetopt.family import TIME_LIMIT_SLACK_S

ROOT = Path(__file__).resolve().parents[1]
LIMIT_S = 2.0
#: Three burners beside the test on two cores: load about 4 (the issue's "load 4").
BURNERS = 3


def _burn() -> None:
    while True:
        pass


@pytest.fixture(scope="module")
def busy_machine():
    ctx = multiprocessing.get_context("fork")
    burners = [ctx.Process(target=_burn, daemon=True) for _ in range(BURNERS)]
    for p in burners:
        p.start()
    time.sleep(0.5)
    try:
        yield os.getloadavg()[0]
    finally:
        for p in burners:
            p.kill()
            p.join()


def _allocation_of_100000_gpus(tmp_path: Path):
    from tests.allocation.conftest import synthetic_toml

    text = synthetic_toml(global_batch=300000, activation_gib=0.5, state_gib=100000.0, collective_s=0.05,
                          groups=[(25000, 16.0 + 8 * g) for g in range(4)], forward_s=0.01, slowdown=0.37)
    path = tmp_path / "many.toml"
    path.write_text(text)
    return hetopt.load(path)


def _sixteen_islands(_tmp_path: Path):
    from hetopt.pipeline.scaling import scaling_instance

    return scaling_instance(16, 64)


def _scale_16x128(_tmp_path: Path):
    return hetopt.load(ROOT / "instances" / "pipeline" / "scale-16x128.toml")


CALLS = [
    (_allocation_of_100000_gpus, "dp"),
    (_sixteen_islands, "dp"),
    (_scale_16x128, "milp"),
    (_scale_16x128, "cpsat"),
]


@pytest.mark.parametrize("make, method", CALLS, ids=[f"{m.__name__.strip('_')}-{k}" for m, k in CALLS])
def test_a_method_keeps_its_limit_at_load_4(busy_machine, tmp_path, make, method):
    instance = make(tmp_path)
    start = time.perf_counter()
    result = hetopt.solve(instance, method, time_limit=LIMIT_S)
    wall = time.perf_counter() - start
    assert wall <= LIMIT_S + TIME_LIMIT_SLACK_S, (wall, result.status, result.reason, busy_machine)


def test_the_planner_keeps_its_limit_at_load_4(busy_machine):
    start = time.perf_counter()
    p = hetopt.plan("tangram-c1", "gpt3-6.7b", global_batch=128, time_limit=LIMIT_S)
    wall = time.perf_counter() - start
    assert wall <= LIMIT_S + TIME_LIMIT_SLACK_S, (wall, p.status, p.reason, busy_machine)
