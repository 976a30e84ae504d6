"""Tangram's GPU islands: partition a cluster's nodes into the fewest homogeneous, close islands.

Methods (registry names): ``exact`` (``auto``: dp, else cpsat), ``dp`` (dendrogram DP when
bandwidths are ultrametric, else subset DP on small clusters, else DECLINED),
``dp-dendrogram``, ``dp-subsets``, ``cpsat``, ``milp`` (HiGHS; ``milp-cbc`` with CBC),
``bruteforce`` (tiny clusters), ``greedy`` (Tangram's procedure, a heuristic). See
``formulations/islands.md``.
"""

from __future__ import annotations

from functools import partial

from hetopt.family import Family
from hetopt.islands.bruteforce import BRUTEFORCE_MAX_NODES, solve_bruteforce
from hetopt.islands.cpsat import solve_cpsat_model
from hetopt.islands.dp import solve_dp, solve_dp_dendrogram, solve_dp_subsets
from hetopt.islands.exact import solve_exact
from hetopt.islands.heuristic import solve_greedy
from hetopt.islands.milp import solve_milp
from hetopt.islands.problem import Island, IslandsInstance, IslandsSolution, Node, Tolerance, evaluate
from hetopt.islands.subsets import SUBSET_MAX_NODES

#: crosscheck runs the assignment models (cpsat, milp) up to this many nodes: beyond it
#: their n × K slot variables make them minutes-long, and the DP is the only exact answer.
MODEL_MAX_NODES = 128

#: crosscheck adds the subset DP next to the dendrogram DP up to this many nodes (2^16
#: masks: well under a second), so the two DPs check each other.
SUBSET_CROSSCHECK_NODES = 16

METHODS = {
    "exact": solve_exact,
    "dp": solve_dp,
    "dp-dendrogram": solve_dp_dendrogram,
    "dp-subsets": solve_dp_subsets,
    "cpsat": solve_cpsat_model,
    "milp": solve_milp,
    "milp-cbc": partial(solve_milp, backend="cbc"),
    "bruteforce": solve_bruteforce,
    "greedy": solve_greedy,
}


def crosscheck_methods(instance: IslandsInstance) -> list[str]:
    """dp, cpsat and milp (up to ``MODEL_MAX_NODES``), dp-subsets and bruteforce when small, greedy."""
    n = instance.num_nodes
    methods = ["dp"]
    if n <= MODEL_MAX_NODES:
        methods += ["cpsat", "milp"]
    if n <= min(SUBSET_CROSSCHECK_NODES, SUBSET_MAX_NODES):
        methods.append("dp-subsets")
    if n <= BRUTEFORCE_MAX_NODES:
        methods.append("bruteforce")
    methods.append("greedy")
    return methods


FAMILY = Family(
    name="islands",
    instance_type=IslandsInstance,
    evaluate=evaluate,
    methods=METHODS,
    auto="exact",
    crosscheck_methods=crosscheck_methods,
    proving=frozenset(METHODS) - {"greedy"},
)

__all__ = ["FAMILY", "METHODS", "Island", "IslandsInstance", "IslandsSolution", "Node", "Tolerance", "evaluate"]
