"""The audit's replicas reproducers (issue 44, items 2 and 3).

Item 2: CP-SAT could not prove a 3-candidate, 3-micro-batch instance in 20 s (FEASIBLE 1.5,
bound 1.086; dp, milp and bruteforce find 1.33594 in 0.01 s), and ``crosscheck`` without a
limit did not end. Item 3: the objective jumped by the ring's launch latency (8.4 µs)
between ``hop_latency_s = 0`` and ``1e-12``.
"""

from __future__ import annotations

import math

import pytest

from hetopt import crosscheck, solve
from hetopt.costmodel import RING_BASE_LATENCY_S
from hetopt.replicas.problem import GBPS, GIB, Candidate, IslandShape, ReplicasInstance, build_solution, evaluate
from hetopt.replicas.synthetic import random_instance
from hetopt.result import Status

#: A hang guard, not a timing assertion: before the fix CP-SAT ran to any limit unproven.
GUARD_S = 5.0


def audit_instance() -> ReplicasInstance:
    """Issue 44 item 2, as the audit wrote it."""
    shapes = (IslandShape("S0", 3), IslandShape("S1", 1), IslandShape("S2", 2))
    cands = (
        Candidate("c0", (0, 0, 1), 1.0, 0.431, 4 * GIB, 100 * GBPS),
        Candidate("c1", (0, 1, 1), 1.0, 0.25, 0.5 * GIB, 10 * GBPS),
        Candidate("c2", (0, 0, 1), 1.0, 0.25, 1 * GIB, 100 * GBPS),
    )
    return ReplicasInstance("audit-44-2", 3, shapes, cands, hop_latency_s=1.4e-5)


def differential_instance(seed: int) -> ReplicasInstance:
    """The differential suite's instance of a seed (tests/differential/test_replicas.py)."""
    shapes, count, cands, n = [(2, 3, 4, 6), (3, 2, 5, 7), (1, 4, 3, 8), (2, 2, 6, 5)][seed % 4]
    return random_instance(10_000 + seed, shapes=shapes, max_count=count, candidates=cands, microbatches=n)


@pytest.mark.parametrize("method", ["dp", "milp", "cpsat", "bruteforce"])
def test_every_exact_method_proves_the_audit_instance(method):
    r = solve(audit_instance(), method, time_limit=GUARD_S)
    assert r.status is Status.OPTIMAL, (r.status, r.objective, r.bound, r.reason)
    assert r.objective == pytest.approx(1.33593574592, abs=1e-9)
    assert [(x.candidate, x.microbatches) for x in r.solution.replicas] == [(2, 1), (2, 2)]


def test_cpsat_proves_seed_673_of_the_differential_suite():
    # the suite's one recorded CP-SAT failure: FEASIBLE at 5 s on a 7-micro-batch instance
    inst = differential_instance(673)
    dp = solve(inst, "dp")
    r = solve(inst, "cpsat", time_limit=GUARD_S)
    assert r.status is Status.OPTIMAL, (r.status, r.objective, r.bound)
    assert r.objective == pytest.approx(dp.objective, rel=1e-9, abs=1e-9)


def test_crosscheck_without_a_limit_gives_each_method_the_default(monkeypatch):
    import hetopt.solvers as solvers

    seen = []
    real = solvers.solve

    def spy(instance, method="auto", **options):
        seen.append((method, options.get("time_limit")))
        if options.get("time_limit") is None:  # no default: do not hang here, fail below
            options["time_limit"] = 1.0
        return real(instance, method, **options)

    monkeypatch.setattr(solvers, "solve", spy)
    check = crosscheck(audit_instance())
    assert check.agree is True
    assert seen and all(limit == solvers.CROSSCHECK_TIME_LIMIT_S for _, limit in seen), seen
    seen.clear()
    crosscheck(audit_instance(), ["dp", "cpsat"], time_limit=2.0)
    assert [limit for _, limit in seen] == [2.0, 2.0]


def hop_instance(hop: float) -> ReplicasInstance:
    """Issue 44 item 3: one shape ×2, one candidate using 1, N = 2."""
    return ReplicasInstance("hop", 2, (IslandShape("A", 2),),
                            (Candidate("a", (1,), 2.0, 2.0, 1 * GIB, 8 * GBPS),), hop_latency_s=hop)


def test_the_objective_is_continuous_at_zero_hop_latency():
    def two_replicas(hop: float) -> float:
        inst = hop_instance(hop)
        return evaluate(inst, build_solution(inst, [(0, 1), (0, 1)])).objective

    at_zero, just_above = two_replicas(0.0), two_replicas(1e-12)
    # 2 + ring(1 GiB, 2, 1 GB/s) = 2 + 1.073741824; the ring's launch latency is paid at any hop latency
    assert at_zero == pytest.approx(2.0 + 1.073741824 + RING_BASE_LATENCY_S, abs=1e-12)
    assert math.isclose(just_above, at_zero, rel_tol=0, abs_tol=1e-11)
    for method in ("dp", "milp", "cpsat", "bruteforce"):
        r = solve(hop_instance(0.0), method)
        assert r.status is Status.OPTIMAL and r.objective == pytest.approx(at_zero, abs=1e-9), (method, r.objective)
