"""dp = milp = bruteforce on seeded random tiny instances, to the family's tolerance."""

from __future__ import annotations

import pytest

from hetopt import solve
from hetopt.mixed import FAMILY
from hetopt.mixed.bruteforce import plan_count
from hetopt.mixed.problem import evaluate
from hetopt.mixed.synthetic import random_instance
from hetopt.result import Status, objectives_agree

#: (layers, types, most GPUs per type, b) of the seeded cases; bruteforce stays below its limit.
SIZES = [(3, 2, 3, 3), (2, 2, 2, 4), (4, 1, 3, 3), (2, 3, 2, 2), (3, 2, 2, 2)]
#: 200 seeded instances; each runs dp, milp and bruteforce.
SEEDS = range(200)


def _instance(seed: int):
    layers, types, count, b = SIZES[seed % len(SIZES)]
    return random_instance(seed, layers=layers, types=types, max_count=count, microbatch_size=b)


def test_the_cases_are_varied():
    """Both outcomes occur, and some optimum uses a stage of two types (else mixing is untested here)."""
    results = [solve(_instance(s), "dp") for s in SEEDS]
    statuses = {r.status for r in results}
    assert statuses == {Status.OPTIMAL, Status.INFEASIBLE}
    mixed = [r for r in results if r.solution and any(len(st.members) > 1 for st in r.solution.stages)]
    multi = [r for r in results if r.solution and len(r.solution.stages) > 1]
    assert len(mixed) >= 10 and len(multi) >= 10


@pytest.mark.parametrize("seed", SEEDS)
def test_exact_methods_agree_with_bruteforce(seed):
    inst = _instance(seed)
    assert plan_count(inst) <= 500_000
    results = {m: solve(inst, m) for m in ("bruteforce", "dp", "milp")}
    truth = results["bruteforce"]
    assert truth.status in (Status.OPTIMAL, Status.INFEASIBLE)
    rtol, atol = FAMILY.tolerance(inst)
    for method in ("dp", "milp"):
        r = results[method]
        assert r.status is truth.status, (method, r.reason)
        if truth.status is Status.OPTIMAL:
            assert objectives_agree(r.objective, truth.objective, rtol=rtol, atol=atol), (method, r.objective,
                                                                                           truth.objective)
            assert evaluate(inst, r.solution).feasible
