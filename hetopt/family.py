"""What every problem family provides to the solver layer, and helpers its solvers share.

A family (``allocation``, ``pipeline``, ``islands``) exposes one :class:`Family` value;
``hetopt.solvers`` collects them. Solvers build their `Result` with :func:`conclude`, which
re-checks the solution with the family's ``evaluate`` before anything is returned.

The contract of a family, so the solver layer, the command line and JSON output work
the same for all:

* ``problem.py``: a frozen Instance dataclass with ``name`` and ``problem`` attributes; a
  frozen Solution dataclass with ``to_dict()`` (plain data for JSON), ``rows()`` (a list of
  dicts, one table row each, for the human output) and ``summary()`` (a few lines of text);
  ``evaluate(instance, solution) -> Evaluation``.
* ``__init__.py``: ``FAMILY = Family(...)`` with the method registry, whose entries name
  the solvers by module path (:class:`MethodRef`), so that importing the family imports
  none of them.
* ``hetopt/readers/<family>.py``: ``read_<family>(data, source) -> Instance``, registered in
  ``hetopt.io.READERS``; ``FAMILY`` is registered in ``hetopt.solvers.FAMILIES``.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hetopt.budget import Deadline  # noqa: F401  (re-exported: families import it from here)
from hetopt.errors import SolverBug
from hetopt.result import AGREEMENT_RTOL, Evaluation, Result, Status, relative_gap


@dataclass(frozen=True)
class Family:
    """A problem family as the solver layer sees it.

    Parameters
    ----------
    name
        The ``problem`` key of its instance files.
    instance_type
        The family's frozen Instance dataclass.
    evaluate
        ``evaluate(instance, solution) -> Evaluation``: the single source of truth.
    methods
        Registry: method name -> ``solver(instance, *, keyword options) -> Result``, or a
        :class:`MethodRef` naming it by module path (imported when first used, so that
        ``import hetopt`` does not load OR-Tools, PuLP or networkx; see :func:`resolve_method`).
    auto
        The method ``method="auto"`` runs (may change between releases).
    crosscheck_methods
        ``f(instance) -> list of method names`` run by ``crosscheck`` when none are given
        (it adds the slow reference methods only when the instance is small enough).
    proving
        The methods that can prove optimality (the others are heuristics whose gap is
        reported).
    tolerance
        ``f(instance) -> (rtol, atol)``: how closely proven optima must agree.
    """

    name: str
    instance_type: type
    evaluate: Callable[[Any, Any], Evaluation]
    methods: Mapping[str, Callable[..., Result]]
    auto: str
    crosscheck_methods: Callable[[Any], list[str]]
    proving: frozenset[str]
    tolerance: Callable[[Any], tuple[float, float]] = field(default=lambda _instance: (AGREEMENT_RTOL, 0.0))


@dataclass(frozen=True)
class MethodRef:
    """A registered method named by module path, imported only when it is used.

    Registries refer to their MILP, CP-SAT and other solvers this way so that importing a
    family (and so ``hetopt`` and its command line) does not import every solver's backend:
    ``hetopt solve --method dp`` never needs OR-Tools or PuLP.

    Parameters
    ----------
    target
        ``"package.module:function"``.
    bound
        Keyword options fixed by the registry name, as ``(name, value)`` pairs (``milp-cbc``
        binds ``backend="cbc"``).

    Examples
    --------
    >>> ref = MethodRef("hetopt.allocation.dp:solve_dp")
    >>> ref.load().__name__
    'solve_dp'
    >>> MethodRef("hetopt.allocation.milp:solve_milp", (("backend", "cbc"),)).load().keywords
    {'backend': 'cbc'}
    """

    target: str
    bound: tuple[tuple[str, Any], ...] = ()

    def load(self) -> Callable[..., Result]:
        """Import the module and return the function (a ``functools.partial`` when options are bound)."""
        module, _, name = self.target.partition(":")
        func = getattr(importlib.import_module(module), name)
        return functools.partial(func, **dict(self.bound)) if self.bound else func

    def __call__(self, instance: Any, **options: Any) -> Result:
        """Solve ``instance``, as the function itself would."""
        return self.load()(instance, **options)


def model_methods(package: str) -> dict[str, MethodRef]:
    """The MILP (HiGHS; CBC as ``milp-cbc``) and CP-SAT rooms of a family package, named as
    every family names them (``milp.solve_milp``, ``cpsat.solve_cpsat_model``).

    >>> sorted(model_methods("hetopt.pipeline"))
    ['cpsat', 'milp', 'milp-cbc']
    """
    return {
        "milp": MethodRef(f"{package}.milp:solve_milp"),
        "milp-cbc": MethodRef(f"{package}.milp:solve_milp", (("backend", "cbc"),)),
        "cpsat": MethodRef(f"{package}.cpsat:solve_cpsat_model"),
    }


def lazy_attributes(module: str, lazy: Mapping[str, str] | None = None, *,
                    methods: Mapping[str, Any] | None = None) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports each name of ``lazy`` from its module on first use,
    and each function a :class:`MethodRef` of ``methods`` (the family's registry) names from the
    module it names (a family package keeps ``from hetopt.<family> import solve_milp`` working
    without importing PuLP or OR-Tools when it is imported).

    Examples
    --------
    >>> get = lazy_attributes("x", {"option_count": "hetopt.allocation.options"},
    ...                       methods={"dp": MethodRef("hetopt.allocation.dp:solve_dp")})
    >>> get("solve_dp").__name__, get("option_count").__name__
    ('solve_dp', 'option_count')
    """
    names = {ref.target.partition(":")[2]: ref.target.partition(":")[0]
             for ref in (methods or {}).values() if isinstance(ref, MethodRef)}
    names.update(lazy or {})

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def resolve_method(func: Callable[..., Result] | MethodRef) -> Callable[..., Result]:
    """The callable of a registry entry: a :class:`MethodRef` is imported, a function is itself.

    Examples
    --------
    >>> resolve_method(MethodRef("hetopt.pipeline.dp:solve_dp")).__module__
    'hetopt.pipeline.dp'
    """
    return func.load() if isinstance(func, MethodRef) else func


#: How far past its ``time_limit`` a method call may return (seconds). Solvers check the
#: clock between units of work (a DP layer, a model-building loop, a backend call) and
#: finish with ``evaluate``; one such unit plus the final check must fit in this slack.
#: The time-limit tests assert ``wall_s <= time_limit + TIME_LIMIT_SLACK_S``.
TIME_LIMIT_SLACK_S = 1.0


def conclude(
    *,
    problem: str,
    method: str,
    instance: Any,
    solution: Any,
    evaluate: Callable[[Any, Any], Evaluation],
    deadline: Deadline,
    proven_optimal: bool,
    bound: float | None = None,
    stats: dict[str, Any] | None = None,
    reason: str = "",
) -> Result:
    """Check a solver's solution with ``evaluate`` and wrap it in a Result.

    Parameters
    ----------
    proven_optimal
        The solver proved optimality; the Result is OPTIMAL with ``bound = objective`` and
        ``gap = 0`` (the solver's own bound is dropped: it can differ by rounding).
    bound
        Otherwise, the best proven lower bound (minimization), or None.
    reason
        Why a FEASIBLE result is not proven optimal. Left empty, it is written here from the
        deadline and the bound, so no FEASIBLE result comes without one.

    Raises
    ------
    SolverBug
        When ``evaluate`` rejects the solution: a solver never returns a wrong answer.
    """
    ev = evaluate(instance, solution)
    if not ev.feasible:
        raise SolverBug(f"{problem}/{method} returned a plan that evaluate rejects: " + "; ".join(ev.violations))
    objective = ev.objective
    if proven_optimal:
        # Proven optimal: the bound is the plan's own value. A solver's bound may differ from
        # the recomputed objective by floating-point rounding of its model (or, for CP-SAT,
        # by the documented time scaling); the agreement checks carry those tolerances.
        status, bound, gap, reason = Status.OPTIMAL, objective, 0.0, ""
    else:
        status = Status.FEASIBLE
        if bound is not None:
            bound = min(bound, objective)
        gap = relative_gap(objective, bound)
        if not reason:
            reason = ("time limit reached before optimality was proven" if deadline.expired()
                      else "optimality not proven")
            reason += "; no lower bound known" if bound is None else f"; gap {gap:.3g} to the proven bound {bound:.6g}"
    return Result(problem=problem, method=method, status=status, objective=objective, bound=bound, gap=gap,
                  solution=solution, wall_s=deadline.elapsed(), stats=dict(stats or {}), reason=reason)


def no_solution(*, problem: str, method: str, status: Status, deadline: Deadline, reason: str, bound: float | None = None,
                stats: dict[str, Any] | None = None) -> Result:
    """A Result without a solution (INFEASIBLE, TIME_LIMIT, DECLINED or ERROR)."""
    return Result(problem=problem, method=method, status=status, bound=bound, wall_s=deadline.elapsed(),
                  stats=dict(stats or {}), reason=reason)


def greedy_answer(*, problem: str, instance: Any, solution: Any, evaluate: Callable[[Any, Any], Evaluation],
                  deadline: Deadline, stopped: str, missed: tuple[Status, str]) -> Result:
    """A greedy method's Result: FEASIBLE with ``solution`` (never proven), or without one.

    Parameters
    ----------
    problem
        The family's name (the method is ``greedy``).
    solution
        The greedy's solution, None when it found none.
    stopped
        The reason when it found none and the deadline had passed.
    missed
        ``(status, reason)`` when it found none in time: DECLINED where a plan may still exist
        (a greedy does not backtrack), INFEASIBLE where none can.

    Returns
    -------
    Result
        FEASIBLE (checked by ``evaluate``, no bound) with a solution; else TIME_LIMIT with
        ``stopped`` or ``missed``'s status and reason.
    """
    if solution is None:
        status, reason = (Status.TIME_LIMIT, stopped) if deadline.expired() else missed
        return no_solution(problem=problem, method="greedy", status=status, deadline=deadline, reason=reason)
    return conclude(problem=problem, method="greedy", instance=instance, solution=solution, evaluate=evaluate,
                    deadline=deadline, proven_optimal=False)


def presolve(*, problem: str, method: str, deadline: Deadline, infeasible: str | None,
             declined: Callable[[], str | None] | None = None) -> Result | None:
    """The answer a method gives before it solves anything, or None to go on.

    Parameters
    ----------
    problem, method
        The Result's family and method names.
    deadline
        The method's deadline (its wall time so far goes into the Result).
    infeasible
        The family's reason the instance has no solution (its ``why_infeasible`` or
        ``infeasible_reason``), None when it may have one.
    declined
        Called only when ``infeasible`` is None: the reason the method declines the instance
        (its size limits), None when it takes it.

    Returns
    -------
    Result or None
        INFEASIBLE with ``infeasible``, else DECLINED with what ``declined`` gave, else None.

    Examples
    --------
    >>> from hetopt.budget import Deadline
    >>> presolve(problem="x", method="dp", deadline=Deadline(None), infeasible="no GPU", declined=lambda: 1 / 0).status
    <Status.INFEASIBLE: 'INFEASIBLE'>
    >>> presolve(problem="x", method="dp", deadline=Deadline(None), infeasible=None, declined=lambda: None) is None
    True
    """
    if infeasible is not None:
        return no_solution(problem=problem, method=method, status=Status.INFEASIBLE, deadline=deadline, reason=infeasible)
    reason = declined() if declined is not None else None
    if reason is not None:
        return no_solution(problem=problem, method=method, status=Status.DECLINED, deadline=deadline, reason=reason)
    return None


def conclude_model(
    *,
    problem: str,
    method: str,
    instance: Any,
    outcome: Any,
    decode: Callable[[], Any],
    evaluate: Callable[[Any, Any], Evaluation],
    deadline: Deadline,
    bound: float | None = None,
    stats: dict[str, Any] | None = None,
    infeasible_reason: str | None = None,
    model: str = "the model",
) -> Result:
    """Turn a MILP or CP-SAT outcome (``hetopt.backends.Outcome``) into a checked Result.

    The one tail every model-based solver shares: a solution is decoded and re-checked by
    :func:`conclude`; a proven infeasibility is INFEASIBLE with ``infeasible_reason``; a run
    stopped without a solution is TIME_LIMIT with the proven bound.

    Parameters
    ----------
    outcome
        What the backend proved (``status``, ``bound``).
    decode
        ``decode() -> solution``, called only when the outcome has a solution.
    bound
        The proven lower bound to report (the caller may tighten or round the backend's);
        defaults to ``outcome.bound``.
    infeasible_reason
        The sentence of an INFEASIBLE result. None means the caller had already proven that
        a solution exists (a presolve or a heuristic found one), so an infeasible outcome
        contradicts it and raises :class:`SolverBug`.
    model
        How messages name the model ("the MILP", "CP-SAT").

    Raises
    ------
    SolverBug
        On an infeasible outcome where a solution is known to exist, or a decoded
        solution that ``evaluate`` rejects.
    """
    bound = outcome.bound if bound is None else bound
    if outcome.status.has_solution:
        return conclude(
            problem=problem, method=method, instance=instance, solution=decode(), evaluate=evaluate, deadline=deadline,
            proven_optimal=outcome.status is Status.OPTIMAL, bound=bound, stats=stats
        )
    if outcome.status is Status.INFEASIBLE:
        if infeasible_reason is None:
            raise SolverBug(f"{problem}/{method}: {model} reports infeasible where a solution is known to exist")
        return no_solution(problem=problem, method=method, status=Status.INFEASIBLE, deadline=deadline,
                           reason=infeasible_reason, stats=stats)
    return no_solution(problem=problem, method=method, status=Status.TIME_LIMIT, deadline=deadline, bound=bound,
                       reason=f"time limit reached before {model} found a solution", stats=stats)
