"""The solver layer: methods by name for every problem family, ``solve`` and ``crosscheck``.

Examples
--------
>>> from hetopt.allocation.problem import GIB, AllocationInstance, GpuGroup, Latency
>>> f = Latency((0.010, 0.018, 0.026))
>>> inst = AllocationInstance("x", 8, (GpuGroup("A", 2, 16 * GIB, GIB, f, f),), GIB, 4 * GIB)
>>> solve(inst).status.value
'OPTIMAL'
>>> crosscheck(inst, ["dp", "bruteforce"]).agree
True
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from typing import Any

from hetopt import allocation, islands, pipeline
from hetopt.family import Family
from hetopt.result import CrossCheck, Result, Status, objectives_agree, relative_gap

#: Every family, by its ``problem`` key.
FAMILIES: dict[str, Family] = {f.name: f for f in (allocation.FAMILY, pipeline.FAMILY, islands.FAMILY)}


def family(problem_or_instance: str | Any) -> Family:
    """The Family of a problem name or an instance.

    Raises
    ------
    ValueError
        For an unknown problem or an object that is no known instance.
    """
    if isinstance(problem_or_instance, str):
        if problem_or_instance not in FAMILIES:
            raise ValueError(f"unknown problem {problem_or_instance!r} (known: {', '.join(FAMILIES)})")
        return FAMILIES[problem_or_instance]
    for fam in FAMILIES.values():
        if isinstance(problem_or_instance, fam.instance_type):
            return fam
    raise ValueError(f"{type(problem_or_instance).__name__} is not an instance of any problem family")


def methods(problem: str) -> list[str]:
    """The method names registered for a problem, plus "auto"."""
    return ["auto", *family(problem).methods]


def _resolve(fam: Family, method: str) -> tuple[str, Any]:
    name = fam.auto if method == "auto" else method
    if name not in fam.methods:
        raise ValueError(f"unknown method {method!r} for {fam.name} (known: {', '.join(['auto', *fam.methods])})")
    return name, fam.methods[name]


def _accepted(func: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The options ``func`` takes as keywords (a method ignores the others, e.g. backend for dp)."""
    params = inspect.signature(func).parameters
    return {k: v for k, v in options.items() if k in params and v is not None}


def solve(instance: Any, method: str = "auto", **options: Any) -> Result:
    """Solve an instance with one method.

    Parameters
    ----------
    instance
        Any family's instance (see ``hetopt.load``).
    method
        A registered name, or "auto" (the family's default; the choice may change).
    **options
        ``time_limit`` (seconds), ``backend`` ("highs" or "cbc", MILP only), ``workers`` and
        ``seed`` (CP-SAT); a method ignores the options it does not take.

    Returns
    -------
    Result
        Checked by the family's ``evaluate``.

    Raises
    ------
    ValueError
        For an unknown method name (the message lists the valid ones).
    """
    fam = family(instance)
    _, func = _resolve(fam, method)
    return func(instance, **_accepted(func, options))


def crosscheck(instance: Any, methods: Sequence[str] | None = None, **options: Any) -> CrossCheck:
    """Run several methods on one instance and check that their answers agree.

    Parameters
    ----------
    instance
        Any family's instance.
    methods
        Method names; by default the family's choice for this instance (the fast exact
        methods, plus the slow references when the instance is small enough).
    **options
        As for :func:`solve`, passed to every method (``time_limit`` applies to each).

    Returns
    -------
    CrossCheck
        ``agree`` is False when two proven optima differ by more than the family's
        tolerance, or one method proves infeasibility while another finds a plan.
    """
    fam = family(instance)
    names = list(methods) if methods is not None else fam.crosscheck_methods(instance)
    results = tuple(solve(instance, name, **options) for name in names)
    rtol, atol = fam.tolerance(instance)
    problems: list[str] = []
    optimal = [r for r in results if r.status is Status.OPTIMAL]
    for r in optimal[1:]:
        if not objectives_agree(r.objective, optimal[0].objective, rtol=rtol, atol=atol):
            problems.append(f"{optimal[0].method} finds {optimal[0].objective!r} but {r.method} finds {r.objective!r}")
    infeasible = [r.method for r in results if r.status is Status.INFEASIBLE]
    solved = [r.method for r in results if r.status.has_solution]
    if infeasible and solved:
        problems.append(f"{', '.join(infeasible)} prove infeasibility but {', '.join(solved)} found a plan")
    bounds = [r.bound for r in results if r.bound is not None and r.status is not Status.INFEASIBLE]
    best_bound = max(bounds) if bounds else None
    for r in results:  # a proven bound above a found plan is a contradiction too
        if r.status.has_solution and best_bound is not None and r.objective < best_bound - max(atol, rtol * abs(best_bound)):
            problems.append(f"{r.method}'s plan {r.objective!r} beats a proven bound {best_bound!r}")
    gaps = {}
    for r in results:
        if r.status is Status.FEASIBLE or (r.status.has_solution and r.method not in fam.proving):
            gap = relative_gap(r.objective, best_bound)
            gaps[r.method] = math.nan if gap is None else gap
    return CrossCheck(
        problem=fam.name,
        results=results,
        agree=not problems,
        tolerance=(rtol, atol),
        heuristic_gaps=gaps,
        disagreement="; ".join(problems),
    )
