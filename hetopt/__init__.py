"""hetopt: exact, cross-checked solvers for planning LLM training on heterogeneous GPU clusters.

Examples
--------
>>> import hetopt
>>> "allocation" in hetopt.FAMILIES
True
>>> hetopt.plan is hetopt.planner.plan  # the planner, loaded on first use
True
"""

from hetopt.errors import InputError, SolverBug
from hetopt.io import load, loads
from hetopt.jsonout import result_to_dict
from hetopt.result import CrossCheck, Evaluation, Result, Status
from hetopt.solvers import FAMILIES, crosscheck, family, methods, solve

__version__ = "0.1.0"

#: The planner's names, imported on first use: the solver layer alone loads no cost model.
_PLANNER = {"plan": "hetopt.planner.plan", "PlanRequest": "hetopt.planner.request", "HeteroPlan": "hetopt.planner.answer"}


def __getattr__(name: str):
    if name in _PLANNER:
        import importlib

        return getattr(importlib.import_module(_PLANNER[name]), name)
    raise AttributeError(f"module 'hetopt' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names with the planner's, which load on first use (PEP 562): ``dir(hetopt)``
    and tab completion list ``plan``, ``PlanRequest`` and ``HeteroPlan`` before they are loaded."""
    return sorted(set(globals()) | set(_PLANNER))


__all__ = [
    "FAMILIES",
    "HeteroPlan",
    "CrossCheck",
    "Evaluation",
    "InputError",
    "PlanRequest",
    "Result",
    "SolverBug",
    "Status",
    "crosscheck",
    "family",
    "load",
    "loads",
    "methods",
    "plan",
    "result_to_dict",
    "solve",
]
