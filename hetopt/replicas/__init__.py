"""Data parallelism across heterogeneous pipelines: choose replicas and split the batch.

Methods (registry names): ``dp`` (exact; ``auto``), ``milp`` (HiGHS; ``milp-cbc`` with CBC),
``cpsat``, ``bruteforce`` (tiny instances), ``greedy`` (proves nothing). See
``formulations/replicas.md``.
"""

from __future__ import annotations

from hetopt.family import Family, MethodRef, model_methods
from hetopt.replicas.problem import (
    Candidate,
    IslandShape,
    Replica,
    ReplicasInstance,
    ReplicasSolution,
    evaluate,
)
from hetopt.result import AGREEMENT_RTOL

#: crosscheck adds ``bruteforce`` when it would try at most this many plans.
BRUTEFORCE_LIMIT = 200_000

#: crosscheck adds ``milp`` when the instance has at most this many replica slots: the
#: shipped random instances (up to 34 slots) are proven in well under a second, while on the
#: datacenter instance (109 slots) the MILP's LP bound stays weak (formulations/replicas.md)
#: and HiGHS needs about two minutes of branching to prove it (dp: 0.1 s). ``cpsat`` (the count
#: model) is added whenever the models' size limits hold: it proves the datacenter instance.
#: Named explicitly (``--methods dp,milp,cpsat``) they run on any instance.
MODEL_SLOTS_LIMIT = 64

#: The methods by module path, imported when first used (``hetopt.family.MethodRef``): the
#: MILP and CP-SAT modules bring PuLP and OR-Tools, which ``solve --method dp`` never needs.
METHODS = {
    "dp": MethodRef("hetopt.replicas.dp:solve_dp"),
    **model_methods("hetopt.replicas"),
    "bruteforce": MethodRef("hetopt.replicas.bruteforce:solve_bruteforce"),
    "greedy": MethodRef("hetopt.replicas.heuristic:solve_greedy"),
}


def crosscheck_methods(instance: ReplicasInstance) -> list[str]:
    """dp and greedy; cpsat within the models' size limits; milp and bruteforce when the
    instance is small enough for them."""
    from hetopt.replicas.bruteforce import MAX_PLANS, plan_count
    from hetopt.replicas.limits import model_limit_hit, slot_count
    from hetopt.replicas.problem import infeasible_reason

    methods = ["dp"]
    if infeasible_reason(instance) is not None or slot_count(instance) <= MODEL_SLOTS_LIMIT:
        methods += ["milp", "cpsat"]
    elif model_limit_hit(instance) is None:
        methods.append("cpsat")
    methods.append("greedy")
    if plan_count(instance) <= min(BRUTEFORCE_LIMIT, MAX_PLANS):
        methods.append("bruteforce")
    return methods


def tolerance(instance: ReplicasInstance) -> tuple[float, float]:
    """Relative 1e-9, plus CP-SAT's scaling error q·(N + 1) in absolute terms (see cpsat.py)."""
    from hetopt.replicas.model import quantum

    return AGREEMENT_RTOL, quantum(instance) * (instance.microbatches + 1)


FAMILY = Family(
    name="replicas", instance_type=ReplicasInstance, evaluate=evaluate, methods=METHODS, auto="dp",
    crosscheck_methods=crosscheck_methods, proving=frozenset(METHODS) - {"greedy"}, tolerance=tolerance,
)

__all__ = [
    "FAMILY",
    "METHODS",
    "Candidate",
    "IslandShape",
    "Replica",
    "ReplicasInstance",
    "ReplicasSolution",
    "evaluate",
]
