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

import dataclasses
import functools
import inspect
import math
import numbers
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from hetopt import allocation, islands, mixed, pipeline, replicas
from hetopt.backends import MILP_BACKENDS
from hetopt.errors import InputError
from hetopt.family import Family, resolve_method
from hetopt.interrupt import STOPPED_BY_USER, stop_requested
from hetopt.result import CrossCheck, Result, Status, objectives_agree, relative_gap

#: Every family, by its ``problem`` key.
FAMILIES: dict[str, Family] = {f.name: f for f in (allocation.FAMILY, pipeline.FAMILY, islands.FAMILY, replicas.FAMILY,
                                                   mixed.FAMILY)}


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


def _family_of_instance(instance: Any) -> Family:
    """The Family of an instance; a problem name or anything else is refused by name."""
    if isinstance(instance, (str, bytes, os.PathLike)):
        raise InputError(f"instance: {instance!r} is a name or a path, not an instance; read a file with "
                         "hetopt.load(path), or build one (e.g. hetopt.allocation.AllocationInstance(...))",
                         field="instance")
    for fam in FAMILIES.values():
        if isinstance(instance, fam.instance_type):
            return fam
    raise InputError(f"instance: got an object of type {type(instance).__name__}, not an instance of any problem family "
                     f"({', '.join(FAMILIES)}); read one with hetopt.load(path)", field="instance")


def _resolve(fam: Family, method: str) -> tuple[str, Any]:
    if not isinstance(method, str):
        raise InputError(f"method: must be a method name such as 'dp' (got {method!r}; known: "
                         f"{', '.join(['auto', *fam.methods])})", field="method")
    name = fam.auto if method == "auto" else method
    if name not in fam.methods:
        raise InputError(f"unknown method {method!r} for {fam.name} (known: {', '.join(['auto', *fam.methods])})", field="method")
    return name, resolve_method(fam.methods[name])


#: The options of the solver layer, common to every family. A method uses those it takes
#: and ignores the others (``backend`` means nothing to ``dp``); any other name is an error.
COMMON_OPTIONS = ("time_limit", "backend", "threads", "seed")

#: Seconds each method of a ``crosscheck`` gets when the caller gives no ``time_limit``
#: (issue 44: a crosscheck without a limit ran a model that could not prove its instance
#: forever). 300 s is the longest a shipped instance's exact method is meant to take (issue
#: 43: MILP and CP-SAT on scale-16x128); a method stopped by it answers FEASIBLE with its
#: bound, or TIME_LIMIT, as under any limit. ``time_limit=`` (``--time-limit``) sets another.
CROSSCHECK_TIME_LIMIT_S = 300.0

#: Deprecated option names and what replaced them (kept for one release).
DEPRECATED_OPTIONS = {"workers": "threads"}

#: Keyword parameters of registered methods that are not options a caller may set (the
#: islands DPs take their own registry name, for their Result).
_INTERNAL_PARAMETERS = frozenset({"method"})

#: More solver threads than this is a typo, not a machine (CP-SAT starts one thread each).
MAX_THREADS = 1024

#: CP-SAT's seed is a 32-bit signed integer; seeds are taken from [0, 2**31).
SEED_LIMIT = 2**31


def _parameters(func: Any) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(func).parameters)


def known_options(fam: Family) -> list[str]:
    """The option names :func:`solve` accepts for a family, sorted.

    The common options (``time_limit``, ``backend``, ``threads``, ``seed``) and the keyword
    options any of the family's methods takes (e.g. ``bracket`` for allocation ``dp``). This
    imports every method of the family (the registry names them by module path).

    Examples
    --------
    >>> known_options(family("allocation"))
    ['backend', 'bracket', 'chunk_entries', 'orientation', 'seed', 'threads', 'time_limit', 'write_model']
    """
    names = set(COMMON_OPTIONS)
    for func in fam.methods.values():
        names |= _keyword_options(resolve_method(func))
    return sorted(names - set(DEPRECATED_OPTIONS))


def _keyword_options(func: Any) -> set[str]:
    """The keyword-only option names of one method."""
    return {name for name, param in _parameters(func).items()
            if param.kind is inspect.Parameter.KEYWORD_ONLY and name not in _INTERNAL_PARAMETERS}


def writes_model(instance: Any, method: str) -> bool:
    """Whether a method builds a model it can write to a file (the ``write_model`` option).

    The MILP methods write MPS or LP files, ``cpsat`` its protobuf; the DPs, greedy
    procedures and brute force build no model.

    Raises
    ------
    ValueError
        For an unknown method name (the message lists the valid ones).

    Examples
    --------
    >>> writes_model("allocation", "milp-cbc"), writes_model("allocation", "auto")
    (True, False)
    """
    fam = family(instance)
    return "write_model" in _keyword_options(_resolve(fam, method)[1])


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_options(**options: Any) -> dict[str, Any]:
    """Validate the values of the common options; returns them with None values dropped.

    Names are not checked here (that needs the family, see :func:`solve`); a deprecated
    name is translated (``workers`` -> ``threads``) with a DeprecationWarning.

    Raises
    ------
    ValueError
        One line naming the option, the accepted values and the value given:
        ``time_limit`` must be a finite number of seconds >= 0 (0: return at once with what
        is known, TIME_LIMIT or a first plan), ``backend`` one of
        ``hetopt.backends.MILP_BACKENDS``, ``threads`` an integer in [1, MAX_THREADS],
        ``seed`` an integer in [0, 2**31).

    Examples
    --------
    >>> check_options(time_limit=2, seed=None)
    {'time_limit': 2.0}
    >>> check_options(time_limit=-1)
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: time_limit: must be a finite number of seconds >= 0 (got -1)
    """
    options = dict(options)
    for old, new in DEPRECATED_OPTIONS.items():
        if options.get(old) is not None:
            if options.get(new) is not None:
                raise InputError(f"{old}: deprecated alias of {new}; give only {new}", field=old)
            warnings.warn(f"option {old!r} is deprecated, use {new!r} (same meaning)", DeprecationWarning, stacklevel=3)
            options[new] = options[old]
        options.pop(old, None)
    checked = {k: v for k, v in options.items() if v is not None}
    if "time_limit" in checked:
        t = checked["time_limit"]
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not math.isfinite(t) or t < 0:
            raise InputError(f"time_limit: must be a finite number of seconds >= 0 (got {t!r})", field="time_limit")
        checked["time_limit"] = float(t)
    if "backend" in checked and checked["backend"] not in MILP_BACKENDS:
        raise InputError(f"backend: unknown MILP backend {checked['backend']!r} (known: {', '.join(MILP_BACKENDS)})",
                         field="backend")
    if "threads" in checked:
        n = checked["threads"]
        if not _is_int(n) or not 1 <= n <= MAX_THREADS:
            raise InputError(f"threads: must be an integer from 1 to {MAX_THREADS} (got {n!r})", field="threads")
        checked["threads"] = int(n)
    if "seed" in checked:
        seed = checked["seed"]
        if not _is_int(seed) or not 0 <= seed < SEED_LIMIT:
            raise InputError(f"seed: must be an integer from 0 to {SEED_LIMIT - 1} (got {seed!r})", field="seed")
        checked["seed"] = int(seed)
    return checked


def _accepted(fam: Family, func: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The options ``func`` takes, from checked options (unknown names raise TypeError).

    Every method names the thread count ``threads`` (``hetopt.modelmethod``). An
    option the family knows but this method does not take is ignored (``backend`` for
    ``dp``), and so is one the registry binds (``backend`` for ``milp-cbc``).
    """
    unknown = set(options) - set(COMMON_OPTIONS) - _keyword_options(func)
    if unknown:  # only then the whole family's options: listing them imports every method
        known = known_options(fam)
        unknown = sorted(unknown - set(known))
    if unknown:
        raise TypeError(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                        f"for {fam.name} (known: {', '.join(known)})")
    params = _parameters(func)
    bound = set(func.keywords) if isinstance(func, functools.partial) else set()
    taken = {}
    for name, value in options.items():
        if name in params and name not in bound and name not in _INTERNAL_PARAMETERS:
            taken[name] = value
    return taken


def solve(instance: Any, method: str = "auto", **options: Any) -> Result:
    """Solve an instance with one method.

    Parameters
    ----------
    instance
        Any family's instance (see ``hetopt.load``).
    method
        A registered name, or "auto" (the family's default; the choice may change).
    **options
        ``time_limit`` (seconds, finite and >= 0; None for none), ``backend`` ("highs" or
        "cbc", MILP only), ``threads`` (solver threads: CP-SAT's workers, HiGHS's and CBC's
        threads; by default CP-SAT runs one worker so that runs repeat) and ``seed``
        (CP-SAT, default 0). A method ignores the options of its family it does not take
        (``backend`` for ``dp``, and for ``milp-cbc``, whose name fixes it); ``workers`` is
        a deprecated alias of ``threads``.

    Returns
    -------
    Result
        Checked by the family's ``evaluate``.

    Raises
    ------
    ValueError
        For an unknown method name (the message lists the valid ones) or an option value
        out of range (see :func:`check_options`).
    TypeError
        For an option name no method of the family takes (the message lists the known ones).
    """
    fam = _family_of_instance(instance)
    _, func = _resolve(fam, method)
    result = func(instance, **_accepted(fam, func, check_options(**options)))
    if stop_requested() and result.status in (Status.FEASIBLE, Status.TIME_LIMIT):
        result = dataclasses.replace(result, reason=STOPPED_BY_USER + result.reason)
    return result


def crosscheck(instance: Any, methods: Sequence[str] | None = None, *,
               on_method: Callable[[str], None] | None = None, **options: Any) -> CrossCheck:
    """Run several methods on one instance and check that their answers agree.

    Parameters
    ----------
    instance
        Any family's instance.
    methods
        At least two different method names; by default the family's choice for this
        instance (the fast exact methods, plus the slow references when the instance is
        small enough), which on an instance too large for all but one method is that one
        (``compared`` is then at most 1 and ``agree`` None).
    on_method
        Called with each method's name before it runs (for a progress line).
    **options
        As for :func:`solve`, passed to every method (``time_limit`` applies to each;
        without one each method gets ``CROSSCHECK_TIME_LIMIT_S``).

    Returns
    -------
    CrossCheck
        ``agree`` is False when the answers contradict each other (two proven optima
        differ by more than the family's tolerance, one method proves infeasibility while
        another finds a plan, a plan beats a proven bound); True when at least two methods
        proved an answer and none contradicts another; None when fewer than two proved
        one (``compared``), so there was nothing to compare.

    Raises
    ------
    ValueError
        Fewer than two different methods, or as for :func:`solve`.
    """
    fam = _family_of_instance(instance)
    if isinstance(methods, str) or (methods is not None and not isinstance(methods, Sequence)):
        # a string is a sequence of its characters: "dp" would be the methods "d" and "p"
        raise InputError(f"methods: must be a list of method names such as ['dp', 'milp'] (got {methods!r})",
                         field="methods")
    names = list(methods) if methods is not None else fam.crosscheck_methods(instance)
    resolved = {_resolve(fam, name)[0] for name in names}
    if len(resolved) < 2 and methods is not None:  # the family's own choice may be one method: it says so
        raise ValueError(f"a crosscheck compares at least two different methods (got {', '.join(names) or 'none'}; "
                         f"known: {', '.join(['auto', *fam.methods])})")
    checked = check_options(**options)
    checked.setdefault("time_limit", CROSSCHECK_TIME_LIMIT_S)  # a crosscheck always ends
    results = []
    for name in names:
        if on_method is not None:
            on_method(name)
        results.append(solve(instance, name, **checked))
    return compare(instance, results)


def compare(instance: Any, results: Sequence[Result]) -> CrossCheck:
    """Compare several methods' Results on one instance (the rule of :func:`crosscheck`).

    Parameters
    ----------
    instance
        The instance they solved (for the family's tolerance).
    results
        One Result per method.

    Returns
    -------
    CrossCheck
        See :func:`crosscheck`.
    """
    fam = family(instance)
    results = tuple(results)
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
    compared = sum(r.status in (Status.OPTIMAL, Status.INFEASIBLE) and r.method in fam.proving for r in results)
    return CrossCheck(
        problem=fam.name,
        results=results,
        agree=False if problems else (True if compared >= 2 else None),
        tolerance=(rtol, atol),
        heuristic_gaps=gaps,
        disagreement="; ".join(problems),
        compared=compared,
    )
