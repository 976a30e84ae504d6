"""dp = milp = bruteforce on seeded random tiny instances, to the family's tolerance."""

from __future__ import annotations

import math

import pytest

from hetopt import solve
from hetopt.mixed import FAMILY
from hetopt.mixed.bruteforce import per_replica_optimum, plan_count
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
    _dp_and_milp_match_bruteforce(inst)


def _dp_and_milp_match_bruteforce(inst):
    """bruteforce's answer, after checking that dp and milp give its status and optimum and
    plans ``evaluate`` accepts."""
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
    return truth


#: seeded instances with units of 1-2 GPUs, tables cut to fewer rows than b, overlap and buckets
VARIED_SEEDS = range(150)


def _varied(seed: int):
    layers, types, count, b = SIZES[seed % len(SIZES)]
    return random_instance(seed, layers=layers, types=types, max_count=count, microbatch_size=b, variety=True)


@pytest.mark.parametrize("seed", VARIED_SEEDS)
def test_varied_instances_agree_with_bruteforce_and_per_replica_shares(seed):
    """dp = milp = bruteforce (typed counts, even spreading) = the per-replica optimum (every
    replica its own share): the typed counts lose no optimum (formulations/mixed.md)."""
    inst = _varied(seed)
    truth = _dp_and_milp_match_bruteforce(inst)
    per_replica = per_replica_optimum(inst)
    if truth.status is Status.INFEASIBLE:
        assert per_replica == math.inf
    else:
        rtol, atol = FAMILY.tolerance(inst)
        assert objectives_agree(per_replica, truth.objective, rtol=rtol, atol=atol)


def test_varied_cases_use_what_they_vary():
    """Some optimum takes units of 2, some spreads samples unevenly, some stage mixes types."""
    sols = [(inst, r.solution) for inst, r in ((i, solve(i, "dp")) for i in map(_varied, VARIED_SEEDS)) if r.solution]
    members = [(inst, m) for inst, sol in sols for st in sol.stages for m in st.members]
    assert any(inst.gpus[m.gpu].unit == 2 for inst, m in members)
    assert any(m.samples % m.replicas for _inst, m in members)
    assert sum(any(len(st.members) > 1 for st in sol.stages) for _inst, sol in sols) >= 5


@pytest.mark.parametrize("seed", range(60))
def test_even_spreading_matches_per_replica_shares_on_more_replicas(seed):
    """b = 5 on up to 4 GPUs per type (uneven spreads of 2-4 replicas): dp = per-replica optimum."""
    inst = random_instance(seed, layers=2, types=2, max_count=4, microbatch_size=5, variety=seed % 2 == 1)
    r, per_replica = solve(inst, "dp"), per_replica_optimum(inst)
    if r.status is Status.INFEASIBLE:
        assert per_replica == math.inf
    else:
        rtol, atol = FAMILY.tolerance(inst)
        assert r.status is Status.OPTIMAL and objectives_agree(r.objective, per_replica, rtol=rtol, atol=atol)


#: seeded instances whose tables are in milliseconds (thousandths of a GiB) and flat across
#: shares on about half of the layers: the float sums of a layer range tie across shares to the
#: last bit (issue 44: 25 of the first 400 broke the dp built on prefix-sum differences)
PLATEAU_SEEDS = range(160)


def _plateau(seed: int):
    layers, types, count, b = SIZES[seed % len(SIZES)]
    return random_instance(seed, layers=layers, types=types, max_count=count, microbatch_size=b, plateaus=True,
                           variety=seed % 3 == 2)


@pytest.mark.parametrize("seed", PLATEAU_SEEDS)
def test_tables_with_ties_to_the_last_bit_agree_with_bruteforce(seed):
    """dp = milp = bruteforce where a range's sums tie across shares (the dp's threshold search
    needs each range's table non-decreasing in the share, float for float)."""
    _dp_and_milp_match_bruteforce(_plateau(seed))


def test_plateau_cases_tie_and_would_wobble_as_prefix_differences():
    """The plateau instances hold what they are for: range sums that tie across shares, and
    ranges whose prefix-sum differences fall as the share grows (what broke the dp)."""
    from itertools import accumulate

    ties = falls = 0
    for seed in PLATEAU_SEEDS:
        inst = _plateau(seed)
        for grp in inst.gpus:
            for tab in grp.tp:
                prefix = [list(accumulate(row, initial=0.0)) for row in tab.time_s]
                for first in range(inst.layers):
                    for end in range(first + 1, inst.layers + 1):
                        sums = tab.range_times(first, end)
                        assert (sums[1:] >= sums[:-1]).all()
                        ties += int((sums[1:] == sums[:-1]).sum())
                        diffs = [p[end] - p[first] for p in prefix]
                        falls += any(b < a for a, b in zip(diffs, diffs[1:]))
    assert ties >= 100 and falls >= 5, (ties, falls)
