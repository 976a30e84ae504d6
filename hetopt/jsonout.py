"""Results as plain data for JSON: dataclasses, enums, numpy values and tuples made plain.

What ``hetopt ... --json`` prints and ``hetopt draw`` and ``hetopt export`` read back.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any

import numpy as np

from hetopt.result import CrossCheck, Result


def plain(value: Any) -> Any:
    """Plain JSON-ready data from dataclasses, enums, numpy values and tuples.

    Non-finite floats become None (JSON has no inf/nan).

    Examples
    --------
    >>> plain({"a": (1, np.int64(2)), "b": float("inf")})
    {'a': [1, 2], 'b': None}
    """
    if hasattr(value, "to_dict"):
        return plain(value.to_dict())
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def result_to_dict(result: Result) -> dict:
    """A Result as plain data: the fields of Result, ``solution`` as plain data."""
    return plain({f.name: getattr(result, f.name) for f in dataclasses.fields(result)})


def crosscheck_to_dict(check: CrossCheck) -> dict:
    """A CrossCheck as plain data."""
    return plain(
        {
            "problem": check.problem,
            "agree": check.agree,
            "compared": check.compared,
            "tolerance": {"rtol": check.tolerance[0], "atol": check.tolerance[1]},
            "disagreement": check.disagreement,
            "heuristic_gaps": check.heuristic_gaps,
            "results": [result_to_dict(r) for r in check.results],
        }
    )


__all__ = ["crosscheck_to_dict", "plain", "result_to_dict"]
