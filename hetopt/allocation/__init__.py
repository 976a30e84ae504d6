"""Cephalo's allocation family: per-GPU batch, micro-batch count and training-state share.

Methods (registry names): ``dp`` (exact, fast; ``auto``), ``dp-faithful`` (Cephalo's
recurrence, the reference), ``milp`` (HiGHS; ``milp-cbc`` with CBC), ``cpsat``,
``bruteforce`` (tiny instances). See ``formulations/allocation.md``.
"""

from __future__ import annotations


from hetopt.allocation.problem import (
    AllocationInstance,
    AllocationSolution,
    GpuGroup,
    GpuPlan,
    Latency,
    StatePartition,
    evaluate,
)
from hetopt.family import Family, MethodRef, lazy_attributes, model_methods
from hetopt.result import AGREEMENT_RTOL

#: crosscheck adds ``dp-faithful`` when its table work (cells × options) is at most this:
#: about 4 s here, at the 5.3e8 updates in 0.47 s measured on Cluster A at B = 256.
FAITHFUL_WORK_LIMIT = 4e9

#: crosscheck adds ``bruteforce`` when it would try at most this many combinations.
BRUTEFORCE_LIMIT = 200_000

#: crosscheck adds ``milp`` and ``cpsat`` when the instance has at most this many options
#: (before pruning): Cluster B at B = 1024 has about 10^4 and both prove it in a fraction of
#: a second; at B = 65,536 (6·10^5) neither finishes in minutes without a time limit.
MODEL_OPTIONS_LIMIT = 100_000

#: The methods by module path, imported when first used (``hetopt.family.MethodRef``): the
#: MILP and CP-SAT modules bring PuLP and OR-Tools, which ``solve --method dp`` never needs.
METHODS = {
    "dp": MethodRef("hetopt.allocation.dp:solve_dp"),
    "dp-faithful": MethodRef("hetopt.allocation.dp_faithful:solve_dp_faithful"),
    **model_methods("hetopt.allocation"),
    "bruteforce": MethodRef("hetopt.allocation.bruteforce:solve_bruteforce"),
}

#: Names this package exported before its registry became lazy besides the methods' functions
#: (``lazy_attributes`` takes those from METHODS), and their modules; they are imported on first
#: access (``from hetopt.allocation import solve_milp`` keeps working).
_LAZY = {
    "plan_count": "hetopt.allocation.bruteforce",
    "TIME_QUANTUM_S": "hetopt.allocation.cpsat",
    "faithful_work": "hetopt.allocation.dp_faithful",
    "option_count": "hetopt.allocation.options",
}


__getattr__ = lazy_attributes(__name__, _LAZY, methods=METHODS)


def crosscheck_methods(instance: AllocationInstance) -> list[str]:
    """dp; milp, cpsat, dp-faithful and bruteforce when the instance is small enough for each."""
    from hetopt.allocation.bruteforce import plan_count
    from hetopt.allocation.dp_faithful import faithful_work
    from hetopt.allocation.options import option_count

    methods = ["dp"]
    if option_count(instance) <= MODEL_OPTIONS_LIMIT:
        methods += ["milp", "cpsat"]
    if faithful_work(instance) <= FAITHFUL_WORK_LIMIT:
        methods.append("dp-faithful")
    if plan_count(instance) <= BRUTEFORCE_LIMIT:
        methods.append("bruteforce")
    return methods


def tolerance(instance: AllocationInstance) -> tuple[float, float]:
    """Relative 1e-9, plus CP-SAT's scaling error q in absolute terms."""
    from hetopt.allocation.cpsat import TIME_QUANTUM_S

    return AGREEMENT_RTOL, TIME_QUANTUM_S


FAMILY = Family(
    name="allocation", instance_type=AllocationInstance, evaluate=evaluate, methods=METHODS, auto="dp",
    crosscheck_methods=crosscheck_methods, proving=frozenset(METHODS), tolerance=tolerance,
)

__all__ = [
    "FAMILY",
    "METHODS",
    "AllocationInstance",
    "AllocationSolution",
    "GpuGroup",
    "GpuPlan",
    "Latency",
    "StatePartition",
    "evaluate",
]
