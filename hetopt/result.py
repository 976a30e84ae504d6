"""Outcome types shared by every problem family: `Status`, `Evaluation`, `Result`, `CrossCheck`.

This module imports nothing of the project, so every other module may import it.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

#: Relative tolerance under which two proven-optimal objectives are said to agree.
AGREEMENT_RTOL = 1e-9


class Status(str, enum.Enum):
    """How a solve ended.

    The values are the strings printed by the command line and written to JSON.
    """

    OPTIMAL = "OPTIMAL"  #: a solution, proven optimal
    FEASIBLE = "FEASIBLE"  #: a solution, optimality not proven (see ``gap``)
    INFEASIBLE = "INFEASIBLE"  #: proven: no solution exists (see ``reason``)
    TIME_LIMIT = "TIME_LIMIT"  #: the time limit was reached before any solution
    DECLINED = "DECLINED"  #: the method does not apply to this instance (see ``reason``)
    ERROR = "ERROR"  #: the method failed (see ``reason``)

    @property
    def has_solution(self) -> bool:
        """True for OPTIMAL and FEASIBLE."""
        return self in (Status.OPTIMAL, Status.FEASIBLE)

    def __str__(self) -> str:
        """The value, as the command line prints it: ``print(result.status)`` shows ``OPTIMAL``."""
        return self.value


@dataclass(frozen=True)
class Evaluation:
    """What a family's ``evaluate(instance, solution)`` found.

    Parameters
    ----------
    feasible
        True when the solution meets every constraint.
    objective
        The objective recomputed from the solution alone (``math.inf`` if infeasible).
    violations
        One sentence per violated constraint, empty when feasible.
    details
        Family-specific recomputed quantities (per-GPU times, memory use, ...).
    """

    feasible: bool
    objective: float
    violations: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """Return ``(objective - bound) / max(|objective|, 1e-12)``, or None when either is unknown.

    Examples
    --------
    >>> relative_gap(10.0, 8.0)
    0.2
    >>> relative_gap(None, 1.0) is None
    True
    """
    if objective is None or bound is None or not math.isfinite(objective) or not math.isfinite(bound):
        return None
    return max(0.0, (objective - bound) / max(abs(objective), 1e-12))


@dataclass(frozen=True)
class Result:
    """The answer of one method on one instance.

    ``objective`` is always the value recomputed by the family's ``evaluate``, never the
    solver's own claim. ``bound`` is the best proven bound (equal to ``objective`` when the
    status is OPTIMAL, None when the method proves none). ``gap`` is
    ``(objective - bound) / max(|objective|, 1e-12)`` and 0.0 when optimal.
    """

    problem: str
    method: str
    status: Status
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    solution: Any = None
    wall_s: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


def objectives_agree(a: float, b: float, *, rtol: float = AGREEMENT_RTOL, atol: float = 0.0) -> bool:
    """Return True when two objectives agree within ``rtol`` (relative) or ``atol`` (absolute).

    Examples
    --------
    >>> objectives_agree(1.0, 1.0 + 1e-12)
    True
    >>> objectives_agree(1.0, 1.001)
    False
    """
    return math.isclose(a, b, rel_tol=rtol, abs_tol=atol)


@dataclass(frozen=True)
class CrossCheck:
    """Several methods run on the same instance, and whether their answers agree.

    Parameters
    ----------
    problem
        The problem family.
    results
        One Result per method, in the order run.
    agree
        False when the answers contradict each other: two proven optima differ by more than
        the family's tolerance, a proven infeasibility meets a plan found elsewhere, or a
        plan beats a proven bound. Otherwise True when at least two methods proved an
        answer (``compared >= 2``), and None when fewer did: nothing was compared, so
        nothing is claimed.
    tolerance
        ``(rtol, atol)`` used for the agreement test.
    heuristic_gaps
        For each non-proving method with a solution: its relative gap to the best
        proven bound.
    disagreement
        One sentence naming the methods that disagree, empty when they agree.
    compared
        How many methods proved an answer (OPTIMAL from a method that proves optimality,
        or INFEASIBLE): the answers ``agree`` compares.
    """

    problem: str
    results: tuple[Result, ...]
    agree: bool | None
    tolerance: tuple[float, float] = (AGREEMENT_RTOL, 0.0)
    heuristic_gaps: dict[str, float] = field(default_factory=dict)
    disagreement: str = ""
    compared: int = 0
