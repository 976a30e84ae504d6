"""hetopt: exact, cross-checked solvers for planning LLM training on heterogeneous GPU clusters.

Examples
--------
>>> import hetopt
>>> "allocation" in hetopt.FAMILIES
True
"""

from hetopt.errors import InputError, SolverBug
from hetopt.io import load, loads, result_to_dict
from hetopt.result import CrossCheck, Evaluation, Result, Status
from hetopt.solvers import FAMILIES, crosscheck, family, methods, solve

__version__ = "0.1.0"

__all__ = [
    "FAMILIES",
    "CrossCheck",
    "Evaluation",
    "InputError",
    "Result",
    "SolverBug",
    "Status",
    "crosscheck",
    "family",
    "load",
    "loads",
    "methods",
    "result_to_dict",
    "solve",
]
