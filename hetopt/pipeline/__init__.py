"""Tangram's pipeline composition: which islands, in which order, with which partial plans.

Methods (registry names): ``dp`` (bottleneck enumeration around an exact DP; ``auto``),
``milp`` (HiGHS; ``milp-cbc`` with CBC), ``cpsat``, ``bruteforce`` (tiny instances),
``greedy`` (a baseline, proves nothing). ``simulate_1f1b`` checks the cost formula.
See ``formulations/pipeline.md``.
"""

from __future__ import annotations

from functools import partial

from hetopt.family import Family
from hetopt.pipeline.bruteforce import MAX_PLANS, plan_count, solve_bruteforce
from hetopt.pipeline.cpsat import error_bound, solve_cpsat_model
from hetopt.pipeline.dp import solve_dp
from hetopt.pipeline.heuristic import solve_greedy
from hetopt.pipeline.milp import solve_milp
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

METHODS = {
    "dp": solve_dp,
    "milp": solve_milp,
    "milp-cbc": partial(solve_milp, backend="cbc"),
    "cpsat": solve_cpsat_model,
    "bruteforce": solve_bruteforce,
    "greedy": solve_greedy,
}


def crosscheck_methods(instance: PipelineInstance) -> list[str]:
    """dp, milp and cpsat; plus bruteforce when the instance is tiny."""
    methods = ["dp", "milp", "cpsat"]
    if plan_count(instance, BRUTEFORCE_LIMIT + 1) <= BRUTEFORCE_LIMIT:
        methods.append("bruteforce")
    return methods


def tolerance(instance: PipelineInstance) -> tuple[float, float]:
    """Relative 1e-9, plus CP-SAT's scaling error q·(2·islands + M) in absolute terms."""
    return AGREEMENT_RTOL, error_bound(instance)


FAMILY = Family(
    name="pipeline",
    instance_type=PipelineInstance,
    evaluate=evaluate,
    methods=METHODS,
    auto="dp",
    crosscheck_methods=crosscheck_methods,
    proving=frozenset({"dp", "milp", "milp-cbc", "cpsat", "bruteforce"}),
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
