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


def bound_within_gap(objective: float, gap_limit: float) -> float:
    """The least bound b ≥ objective·(1 − gap_limit) with ``relative_gap(objective, b) <= gap_limit``
    in floating point: what a search stopped by a gap limit must prove (a few ulps above the
    product, whose gap may round just past the limit).

    Examples
    --------
    >>> b = bound_within_gap(1.0222865471317812, 0.05)
    >>> relative_gap(1.0222865471317812, b) <= 0.05 < relative_gap(1.0222865471317812, 1.0222865471317812 * 0.95)
    True
    """
    bound = objective * (1.0 - gap_limit)
    while objective > 0.0 and relative_gap(objective, bound) > gap_limit:
        bound = math.nextafter(bound, math.inf)
    return bound


#: Widest line of a value in a printed summary (``print(result)``); longer ones end in "…".
SUMMARY_WIDTH = 100


def figure(value: Any) -> str:
    """A value as a printed summary shows it: numbers to 6 significant digits, None as "-".

    >>> figure(7.951543210), figure(None), figure(3), figure("dp")
    ('7.95154', '-', '3', 'dp')
    """
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def summary_lines(rows: list[tuple[str, Any]]) -> str:
    """Aligned ``key: value`` lines, keys right-aligned as SciPy's ``OptimizeResult`` prints
    them; a value of several lines continues under the first, each cut at ``SUMMARY_WIDTH``.

    >>> print(summary_lines([("status", "OPTIMAL"), ("objective", 1.5), ("notes", "a\\nb")]))
       status: OPTIMAL
    objective: 1.5
        notes: a
               b
    """
    width = max(len(k) for k, _ in rows)
    out = []
    for key, value in rows:
        lines = str(value).split("\n") or [""]
        for n, line in enumerate(lines):
            if len(line) > SUMMARY_WIDTH:
                line = line[:SUMMARY_WIDTH - 1] + "…"
            out.append(f"{key.rjust(width) if n == 0 else ' ' * width}{': ' if n == 0 else '  '}{line}")
    return "\n".join(out)


def _stats_text(stats: dict[str, Any]) -> str:
    """``key=value`` of the counters that are numbers or short text (nested data left out)."""
    items = [f"{k}={figure(v)}" for k, v in stats.items()
             if isinstance(v, (int, float, str, bool)) and len(figure(v)) <= 40]
    return ", ".join(items)


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

    def __str__(self) -> str:
        """A short aligned summary for ``print(result)``: status, objective, bound, gap, wall
        time, the solution's own summary, the counters and the reason; ``repr`` keeps every
        field for debugging.

        Examples
        --------
        >>> print(Result("mixed", "dp", Status.OPTIMAL, 7.75, 7.75, 0.0, wall_s=0.0123, stats={"states": 12}))
          problem: mixed
           method: dp
           status: OPTIMAL
        objective: 7.75
            bound: 7.75
              gap: 0
           wall_s: 0.0123
            stats: states=12
        >>> print(Result("mixed", "dp", Status.INFEASIBLE, reason="no plan fits"))
        problem: mixed
         method: dp
         status: INFEASIBLE
         wall_s: 0
         reason: no plan fits
        """
        rows: list[tuple[str, Any]] = [("problem", self.problem), ("method", self.method), ("status", self.status)]
        if self.status.has_solution or self.objective is not None:
            rows += [("objective", figure(self.objective)), ("bound", figure(self.bound)), ("gap", figure(self.gap))]
        rows.append(("wall_s", f"{self.wall_s:.3g}"))
        summary = getattr(self.solution, "summary", None)
        if callable(summary):
            rows.append(("solution", "\n".join(summary())))
        stats = _stats_text(self.stats)
        if stats:
            rows.append(("stats", stats))
        if self.reason:
            rows.append(("reason", self.reason))
        return summary_lines(rows)


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

    def __str__(self) -> str:
        """A short aligned summary for ``print(check)``: whether the answers agree, then one
        line per method (status, objective, bound, gap, wall time, reason).

        Examples
        --------
        >>> a = Result("mixed", "dp", Status.OPTIMAL, 7.75, 7.75, 0.0, wall_s=0.01)
        >>> b = Result("mixed", "milp", Status.OPTIMAL, 7.75, 7.75, 0.0, wall_s=0.2)
        >>> print(CrossCheck("mixed", (a, b), True, compared=2))
        problem: mixed
          agree: yes, 2 proven answers (relative 1e-09, absolute 0)
        results: dp    OPTIMAL  objective 7.75  bound 7.75  gap 0  0.01 s
                 milp  OPTIMAL  objective 7.75  bound 7.75  gap 0  0.2 s
        """
        told = {True: "yes", False: "NO", None: "not compared"}[self.agree]
        agree = f"{told}, {self.compared} proven answer{'s' if self.compared != 1 else ''} " \
                f"(relative {self.tolerance[0]:g}, absolute {self.tolerance[1]:g})"
        name_w = max(len(r.method) for r in self.results) if self.results else 0
        status_w = max(len(r.status.value) for r in self.results) if self.results else 0
        lines = []
        for r in self.results:
            line = f"{r.method.ljust(name_w)}  {r.status.value.ljust(status_w)}"
            if r.status.has_solution:
                line += f"  objective {figure(r.objective)}  bound {figure(r.bound)}  gap {figure(r.gap)}"
            line += f"  {r.wall_s:.3g} s"
            if r.reason and not r.status.has_solution:
                line += f"  ({r.reason})"
            lines.append(line)
        rows: list[tuple[str, Any]] = [("problem", self.problem), ("agree", agree)]
        if self.disagreement:
            rows.append(("why", self.disagreement))
        if self.heuristic_gaps:
            rows.append(("heuristic gaps", ", ".join(f"{m} {figure(g)}" for m, g in self.heuristic_gaps.items())))
        rows.append(("results", "\n".join(lines)))
        return summary_lines(rows)
