"""Pipeline stages whose data-parallel replicas span GPU types (issue 27, part 2).

Methods (registry names): ``dp`` (exact; ``auto``), ``milp`` (HiGHS; ``milp-cbc`` with CBC),
``bruteforce`` (tiny instances). See ``formulations/mixed.md`` and ``docs/mixed.md``.
"""

from __future__ import annotations

from hetopt.family import Family, MethodRef
from hetopt.mixed.problem import GpuGroup, Member, MixedInstance, MixedSolution, Stage, TpTables, evaluate

#: crosscheck adds ``bruteforce`` when it would try at most this many plans (about 10 s).
BRUTEFORCE_LIMIT = 100_000

#: The methods by module path, imported when first used (``hetopt.family.MethodRef``).
METHODS = {
    "dp": MethodRef("hetopt.mixed.dp:solve_dp"),
    "milp": MethodRef("hetopt.mixed.milp:solve_milp"),
    "milp-cbc": MethodRef("hetopt.mixed.milp:solve_milp", (("backend", "cbc"),)),
    "bruteforce": MethodRef("hetopt.mixed.bruteforce:solve_bruteforce"),
}


def crosscheck_methods(instance: MixedInstance) -> list[str]:
    """dp; milp when its limit holds; bruteforce when the instance is tiny."""
    from hetopt.mixed.bruteforce import plan_count
    from hetopt.mixed.limits import milp_limit_hit

    methods = ["dp"]
    if milp_limit_hit(instance) is None:
        methods.append("milp")
    if plan_count(instance) <= BRUTEFORCE_LIMIT:
        methods.append("bruteforce")
    return methods


FAMILY = Family(
    name="mixed", instance_type=MixedInstance, evaluate=evaluate, methods=METHODS, auto="dp",
    crosscheck_methods=crosscheck_methods, proving=frozenset(METHODS),
)

__all__ = ["FAMILY", "METHODS", "GpuGroup", "Member", "MixedInstance", "MixedSolution", "Stage", "TpTables", "evaluate"]
