"""Tangram's pipeline composition: which islands, in which order, with which partial plans.

Methods (registry names): ``dp`` (a branch and bound over bottleneck thresholds around an exact DP; ``auto``),
``milp`` (HiGHS; ``milp-cbc`` with CBC), ``cpsat``, ``bruteforce`` (tiny instances),
``greedy`` (a baseline, proves nothing). ``simulate_1f1b`` checks the cost formula.
See ``formulations/pipeline.md``.
"""

from __future__ import annotations


from hetopt.family import Family, MethodRef, lazy_attributes, model_methods
from hetopt.pipeline.bruteforce import MAX_PLANS
from hetopt.pipeline.plan import blocks_from_choices, build_solution
from hetopt.pipeline.problem import (
    Block,
    PipelineIsland,
    PipelineInstance,
    PipelineOption,
    PipelineSolution,
    StagePlan,
    evaluate,
)
from hetopt.pipeline.simulate import Simulation, simulate_1f1b
from hetopt.result import AGREEMENT_RTOL

#: crosscheck adds ``bruteforce`` when it would evaluate at most this many tilings (about 1 s at ~0.35 ms each).
BRUTEFORCE_LIMIT = 3_000

#: The methods by module path, imported when first used (``hetopt.family.MethodRef``): the
#: MILP and CP-SAT modules bring PuLP and OR-Tools, which ``solve --method dp`` never needs.
METHODS = {
    "dp": MethodRef("hetopt.pipeline.dp:solve_dp"),
    **model_methods("hetopt.pipeline"),
    "bruteforce": MethodRef("hetopt.pipeline.bruteforce:solve_bruteforce"),
    "greedy": MethodRef("hetopt.pipeline.heuristic:solve_greedy"),
}

#: Names this package exported before its registry became lazy besides the methods' functions
#: (``lazy_attributes`` takes those from METHODS), and their modules; they are imported on first
#: access (``from hetopt.pipeline import solve_milp`` keeps working).
_LAZY = {
    "plan_count": "hetopt.pipeline.bruteforce",
    "error_bound": "hetopt.pipeline.cpsat",
}


__getattr__ = lazy_attributes(__name__, _LAZY, methods=METHODS)


def crosscheck_methods(instance: PipelineInstance) -> list[str]:
    """dp, milp and cpsat; plus bruteforce when the instance is tiny."""
    from hetopt.pipeline.bruteforce import plan_count

    methods = ["dp", "milp", "cpsat"]
    if plan_count(instance, BRUTEFORCE_LIMIT + 1) <= BRUTEFORCE_LIMIT:
        methods.append("bruteforce")
    return methods


def tolerance(instance: PipelineInstance) -> tuple[float, float]:
    """Relative 1e-9, plus CP-SAT's scaling error q·(2·islands + M) in absolute terms."""
    from hetopt.pipeline.cpsat import error_bound

    return AGREEMENT_RTOL, error_bound(instance)


FAMILY = Family(
    name="pipeline", instance_type=PipelineInstance, evaluate=evaluate, methods=METHODS, auto="dp",
    crosscheck_methods=crosscheck_methods, proving=frozenset({"dp", "milp", "milp-cbc", "cpsat", "bruteforce"}),
    tolerance=tolerance,
)

__all__ = [
    "FAMILY",
    "MAX_PLANS",
    "METHODS",
    "Block",
    "PipelineIsland",
    "PipelineInstance",
    "PipelineOption",
    "PipelineSolution",
    "Simulation",
    "StagePlan",
    "blocks_from_choices",
    "build_solution",
    "evaluate",
    "simulate_1f1b",
]
