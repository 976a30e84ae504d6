"""Every exact method agrees with bruteforce on seeded random small clusters."""

from __future__ import annotations

import pytest

from hetopt import solve
from hetopt.backends import milp_available
from hetopt.islands.problem import evaluate
from hetopt.islands.randomized import NETWORKS, random_cluster
from hetopt.result import Status

EXACT = ("dp", "dp-subsets", "cpsat", "milp", "exact")
CASES = [(seed, network) for seed in range(12) for network in NETWORKS]


@pytest.mark.parametrize(("seed", "network"), CASES)
def test_exact_methods_equal_bruteforce(seed, network):
    inst = random_cluster(seed, 3 + seed % 6, network=network, profiles=1 + seed % 3)
    oracle = solve(inst, "bruteforce")
    assert oracle.status is Status.OPTIMAL
    for method in EXACT:
        r = solve(inst, method)
        assert r.status is Status.OPTIMAL, (method, r.reason)
        assert r.objective == oracle.objective, method
        assert evaluate(inst, r.solution).feasible
    tree = solve(inst, "dp-dendrogram")
    if network == "tree":  # a switch tree is always ultrametric
        assert tree.status is Status.OPTIMAL and tree.objective == oracle.objective
    else:
        assert tree.status in (Status.OPTIMAL, Status.DECLINED)
        if tree.status is Status.OPTIMAL:
            assert tree.objective == oracle.objective
    greedy = solve(inst, "greedy")
    assert greedy.status is Status.FEASIBLE and greedy.objective >= oracle.objective


@pytest.mark.parametrize("seed", range(4))
def test_larger_clusters_dp_cpsat_milp(seed):
    inst = random_cluster(100 + seed, 12 + seed, network=NETWORKS[seed % 3], profiles=3)
    values = {m: solve(inst, m).objective for m in ("dp", "dp-subsets", "cpsat", "milp")}
    assert len(set(values.values())) == 1, values


@pytest.mark.skipif(not milp_available("cbc"), reason="CBC is not installed")
def test_cbc_backend_agrees():
    inst = random_cluster(7, 8, network="matrix", profiles=2)
    assert solve(inst, "milp-cbc").objective == solve(inst, "dp").objective
