"""The one template of every MILP and CP-SAT method: build → solve → conclude.

Each family's ``milp.py`` and ``cpsat.py`` start a :class:`~hetopt.budget.Deadline`, presolve
(INFEASIBLE, DECLINED) and build their model; what follows is the same for all eight, and
lives here:

1. the backend's time limit: what is left of the deadline less the model's load allowance
   (loading a model into HiGHS, CBC or CP-SAT and reading it back is not under the backend's
   own clock); nothing left is a stop;
2. the model written to a file when asked (``write_model``), named in ``stats["model_file"]``;
3. the solve: a MILP through :func:`~hetopt.backends.solve_pulp_by` (killed at the deadline),
   a CP-SAT model through :func:`~hetopt.backends.solve_cpsat`, both with ``threads``;
4. the answer: :func:`~hetopt.family.conclude_model` decodes and re-checks a solution with the
   family's ``evaluate``; a stop without one gives the family's known plan (a warm start, the
   greedy) when it has one, else TIME_LIMIT with the bound proven so far.

As cvxpy's ``apply → solve_via_data → invert``: the family owns the model and its decoding,
this module owns the order of the steps and the words of a stop.

Every method takes ``threads`` (CP-SAT's search workers, HiGHS's and CBC's threads);
``workers=`` is its deprecated alias for one release (:func:`threads_alias`).
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hetopt.backends import DEFAULT_MILP_BACKEND, check_model_path, solve_cpsat, solve_pulp_by, write_model_file
from hetopt.budget import Deadline
from hetopt.errors import InputError
from hetopt.family import conclude_model, no_solution
from hetopt.result import Evaluation, Result, Status

#: How a stop's message names each kind of model.
LABELS = {"milp": "the MILP", "cpsat": "CP-SAT"}


@dataclass(kw_only=True)
class BuiltModel:
    """A family's model, built, with what the template needs to solve it and read its answer.

    Attributes
    ----------
    problem, method, instance, evaluate
        The family, the method's name, the instance and the family's ``evaluate``.
    model, kind
        A ``pulp.LpProblem`` (kind ``"milp"``) or a ``cp_model.CpModel`` (``"cpsat"``).
    decode
        ``decode(values) -> solution``: the MILP's ``read()`` result, or the CP-SAT solver.
    read
        MILP only: the values to take from the solved problem, in the solver's process.
    bound
        The proven lower bound to report from the backend's (None: none); by default the
        backend's own.
    floor
        The bound known before the solve, for a stop before the backend answers.
    stats
        The model's figures (variables, options, slots, ...); the backend's are added.
    load_s
        Seconds kept back from the backend's time limit for loading and reading the model.
    infeasible_reason
        The sentence of a proven infeasibility; None when a solution is known to exist (then
        an infeasible outcome is a :class:`~hetopt.errors.SolverBug`).
    known
        ``known(reason, bound, stats) -> Result``: the answer when the solve stops without a
        solution of its own and the family has one (its warm start, a greedy): FEASIBLE.
    deadline
        The method's deadline, started before anything else (its imports included).
    cpsat_parameters
        CP-SAT only: ``SatParameters`` this model wants beside the defaults (name: value), as
        ``linearization_level=2`` for a model whose LP relaxation is tight.
    """

    problem: str
    method: str
    instance: Any
    evaluate: Callable[[Any, Any], Evaluation]
    model: Any
    kind: str
    decode: Callable[[Any], Any]
    read: Callable[[], Any] | None = None
    bound: Callable[[float | None], float | None] = lambda b: b
    floor: float | None = None
    stats: dict = field(default_factory=dict)
    load_s: float = 0.0
    infeasible_reason: str | None = None
    known: Callable[[str, float | None, dict], Result] | None = None
    deadline: Deadline
    cpsat_parameters: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return LABELS[self.kind]

    def stopped(self, reason: str, bound: float | None, stats: dict | None = None) -> Result:
        """The answer of a stop without the backend's solution: the known plan, or TIME_LIMIT."""
        stats = dict(self.stats) if stats is None else stats
        if self.known is not None:
            return self.known(reason, bound, stats)
        return no_solution(problem=self.problem, method=self.method, status=Status.TIME_LIMIT, deadline=self.deadline,
                           bound=bound, reason=reason, stats=stats)


def check_formulation(formulation: str, known: tuple[str, ...]) -> None:
    """Refuse a ``formulation`` that is not one of the family's ``known`` ones, by name.

    Parameters
    ----------
    formulation
        The ``formulation=`` a model method was given.
    known
        The family's formulations (its ``FORMULATIONS``), the default first.

    Raises
    ------
    InputError
        ``formulation`` is not in ``known``.

    Examples
    --------
    >>> check_formulation("slots", ("counts", "slots"))
    >>> check_formulation("rows", ("counts", "slots"))
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: formulation: unknown formulation 'rows' (known: counts, slots)
    """
    if formulation not in known:
        raise InputError(f"formulation: unknown formulation {formulation!r} (known: {', '.join(known)})",
                         field="formulation")


def start(time_limit: float | None, kind: str, *, write_model: str | os.PathLike[str] | None = None,
          backend: str = DEFAULT_MILP_BACKEND) -> tuple[Deadline, str]:
    """The method's deadline, started first (its imports of PuLP or OR-Tools then count against
    the limit), and the method's name (``milp``, ``milp-cbc``, ``cpsat``); a ``write_model``
    path is checked before any work.

    >>> deadline, method = start(None, "milp", backend="cbc")
    >>> method
    'milp-cbc'
    """
    if write_model is not None:
        check_model_path(write_model, kind)
    method = "cpsat" if kind == "cpsat" else "milp" if backend == DEFAULT_MILP_BACKEND else f"milp-{backend}"
    return Deadline(time_limit), method


def solve_model(
    built: BuiltModel,
    *,
    time_limit: float | None,
    threads: int | None = None,
    seed: int | None = 0,
    backend: str = DEFAULT_MILP_BACKEND,
    write_model: str | os.PathLike[str] | None = None,
) -> Result:
    """Solve a family's built model within ``built.deadline`` and conclude its answer (steps 1-4 above).

    Parameters
    ----------
    time_limit
        The caller's (None: no limit, the backend runs to the end).
    threads, seed, backend
        Solver threads (CP-SAT's search workers, HiGHS's or CBC's threads); CP-SAT's random
        seed; the MILP's backend ("highs" or "cbc").
    write_model
        Write the model, as built for this solve (a CP-SAT warm-start hint included), to this
        file before solving it: ``.mps`` or ``.lp`` for a MILP, ``.pb.txt`` (protobuf text) or
        ``.pb`` (binary) for CP-SAT (``hetopt.backends.MODEL_SUFFIXES``); ``stats["model_file"]``
        names it, and ``stats["cpsat_parameters"]`` the CP-SAT parameters the model is solved
        with beyond the defaults, which the file does not hold. Nothing is written when the
        method stops before its model is built (infeasible by presolve, declined, time limit).
    """
    deadline, stats = built.deadline, dict(built.stats)
    limit = None
    if time_limit is not None:
        limit = deadline.remaining() - built.load_s
        if limit <= 0:
            return built.stopped(f"time limit reached while building {built.label}", built.floor, stats)
    if write_model is not None:
        stats["model_file"] = write_model_file(built.model, write_model, built.kind)
        if built.cpsat_parameters:  # not part of the model file: say what to set when solving it elsewhere
            stats["cpsat_parameters"] = dict(built.cpsat_parameters)
    if built.kind == "milp":
        # with a limit the backend runs in a forked child stopped at the deadline (backends.solve_pulp_by)
        ran = solve_pulp_by(built.model, None if time_limit is None else deadline, built.read, backend=backend,
                            time_limit=limit, threads=threads)
        if ran is None:
            return built.stopped(f"time limit reached before {backend} returned (stopped)", built.floor, stats)
        outcome, values = ran
    else:
        values, outcome = solve_cpsat(built.model, time_limit=limit, threads=threads, seed=seed,
                                      parameters=built.cpsat_parameters)
    stats = dict(outcome.stats, **stats)
    bound = built.bound(outcome.bound)
    if outcome.status is Status.TIME_LIMIT and built.known is not None:
        return built.known(f"time limit reached before {built.label} found a better plan", bound, stats)
    return conclude_model(
        problem=built.problem, method=built.method, instance=built.instance, outcome=outcome,
        decode=lambda: built.decode(values), evaluate=built.evaluate, deadline=deadline, bound=bound, stats=stats,
        infeasible_reason=built.infeasible_reason, model=built.label,
    )


def threads_alias(method: Callable[..., Result]) -> Callable[..., Result]:
    """Let a method take ``workers=`` as the deprecated name of ``threads=`` (one release).

    >>> @threads_alias
    ... def m(instance, *, threads=None):
    ...     return threads
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     m(None, workers=2), caught[0].category.__name__
    (2, 'DeprecationWarning')
    """
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Result:
        if "workers" in kwargs:
            workers = kwargs.pop("workers")
            if kwargs.get("threads") not in (None, workers):
                raise TypeError(f"{method.__name__}() got workers={workers} and threads={kwargs['threads']}: "
                                "give only threads")
            warnings.warn("workers= is deprecated: give threads= (the same meaning)", DeprecationWarning, stacklevel=2)
            kwargs["threads"] = workers
        return method(*args, **kwargs)

    return wrapper


__all__ = ["BuiltModel", "LABELS", "solve_model", "start", "threads_alias"]
