"""The greedy proves nothing: finding no pipeline is DECLINED (exit 2, "use dp"), never ERROR or INFEASIBLE.

Issue 9: the greedy answered ERROR (exit 1, the code of "proven infeasible") on 85 of 491
feasible random instances.
"""

from __future__ import annotations

import math

import hetopt
from hetopt.commands.common import EXIT_INFEASIBLE, exit_code as _exit_code
from hetopt.result import Status

from .conftest import random_instance

#: Seeds of random_instance; on these the greedy misses the pipeline dp finds on some.
SEEDS = range(120)


def test_greedy_on_seeded_random_feasible_instances():
    declined = 0
    for seed in SEEDS:
        inst = random_instance(seed)
        exact = hetopt.solve(inst, "dp")
        r = hetopt.solve(inst, "greedy")
        assert r.status in (Status.FEASIBLE, Status.DECLINED), (seed, r.status, r.reason)
        assert _exit_code(r) != EXIT_INFEASIBLE or exact.status is Status.INFEASIBLE
        if r.status is Status.FEASIBLE:
            assert exact.status is Status.OPTIMAL
            assert r.objective >= exact.objective * (1 - 1e-9) or math.isclose(r.objective, exact.objective, rel_tol=1e-9)
        else:
            declined += 1
            assert "use dp" in r.reason and _exit_code(r) == 2
    assert declined > 0  # the seeds include instances the greedy cannot do (the case under test)
