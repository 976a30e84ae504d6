"""Argument checks by name, for every entry point of the library: the one place their rules live.

Each check takes the value and the name of the argument (``field``), returns the value as the
library uses it, or raises :class:`~hetopt.errors.InputError` with one line that starts with
the field and says what it must be, and with ``field`` set, so the command line can name its
own flag instead (``hetopt.cli``). The ranges a training setting may take are defined here
once (``MAX_GLOBAL_BATCH``, ``MAX_SEQ``) and imported wherever they are checked.

A bool is never a number here (``True`` is an ``int`` in Python, but ``global_batch=True`` is a
mistake), and a string is never a sequence of names (``policies="all"`` would otherwise be
read as the names ``"a"``, ``"l"``, ``"l"``). Imports only ``hetopt.errors``.

Examples
--------
>>> check_int(16, "global_batch", 1, MAX_GLOBAL_BATCH)
16
>>> check_int(True, "global_batch", 1)
Traceback (most recent call last):
...
hetopt.errors.InputError: global_batch: must be a whole number (got True)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

from hetopt.errors import InputError

#: Largest global batch (samples per iteration) the planner, the validation rows and the
#: allocation family accept: 2**20 samples, hundreds of times the batches of published runs
#: (Llama 3 405B: 2,048 sequences of 8,192 tokens), and small enough for loops over a batch's
#: divisors and micro-batch counts to stay cheap.
MAX_GLOBAL_BATCH = 1 << 20
#: Longest sequence (tokens) a plan or a validation row may ask for: 2**20 = 1 M tokens, the
#: longest context published runs train with (context parallelism).
MAX_SEQ = 1 << 20


def check_int(value: object, field: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """A whole number in ``[minimum, maximum]`` (either end may be None: open).

    >>> check_int(3, "tasks", 1)
    3
    >>> check_int(0, "tasks", 1)
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: tasks: must be >= 1 (got 0)
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{field}: must be a whole number (got {value!r})", field=field)
    value = int(value)
    if minimum is not None and maximum is not None and not minimum <= value <= maximum:
        raise InputError(f"{field}: must be between {minimum} and {maximum} (got {value})", field=field)
    if minimum is not None and value < minimum:
        raise InputError(f"{field}: must be >= {minimum} (got {value})", field=field)
    if maximum is not None and value > maximum:
        raise InputError(f"{field}: must be <= {maximum} (got {value})", field=field)
    return value


def check_optional_int(value: object, field: str, minimum: int | None = None, maximum: int | None = None) -> int | None:
    """None (the default is meant), or :func:`check_int`."""
    return None if value is None else check_int(value, field, minimum, maximum)


def check_real(value: object, field: str, minimum: float | None = None) -> float:
    """A finite real number, at least ``minimum`` when given.

    >>> check_real(float("nan"), "imbalance", 1.0)
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: imbalance: must be a finite number (got nan)
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise InputError(f"{field}: must be a finite number (got {value!r})", field=field)
    if minimum is not None and value < minimum:
        raise InputError(f"{field}: must be >= {minimum:g} (got {value!r})", field=field)
    return float(value)


def check_gap_limit(value: object, field: str = "gap_limit") -> float:
    """A relative gap limit (as HiGHS's ``mip_rel_gap``): a finite number in [0, 1).

    >>> check_gap_limit(1.0)
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: gap_limit: must be below 1, a share of the best time such as 0.02 (got 1.0)
    """
    gap = check_real(value, field, 0.0)
    if gap >= 1.0:
        raise InputError(f"{field}: must be below 1, a share of the best time such as 0.02 (got {value!r})", field=field)
    return gap


def check_cutoff(value: object, field: str) -> float:
    """A time a plan must beat: a number of seconds > 0, or inf (no cutoff).

    >>> check_cutoff(math.inf, "cutoff"), check_cutoff(2, "faster_than")
    (inf, 2.0)
    >>> check_cutoff(0.0, "faster_than")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: faster_than: must be a number of seconds > 0, or inf (got 0.0)
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:  # NaN too
        raise InputError(f"{field}: must be a number of seconds > 0, or inf (got {value!r})", field=field)
    return float(value)


def check_bool(value: object, field: str) -> bool:
    """True or False (not a truthy string: ``"no"`` is truthy).

    >>> check_bool("no", "alternatives")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: alternatives: must be True or False (got 'no')
    """
    if not isinstance(value, bool):
        raise InputError(f"{field}: must be True or False (got {value!r})", field=field)
    return value


def check_choice(value: object, field: str, choices: Iterable[str]) -> str:
    """One of ``choices`` (strings).

    >>> check_choice("sideways", "time_model", ("simulated", "closed-form"))
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: time_model: must be one of simulated, closed-form (got 'sideways')
    """
    choices = tuple(choices)
    if not isinstance(value, str) or value not in choices:
        raise InputError(f"{field}: must be one of {', '.join(choices)} (got {value!r})", field=field)
    return value


def check_names(value: object, field: str, known: Iterable[str]) -> tuple[str, ...]:
    """A sequence of names out of ``known`` (a list or tuple; never a bare string), in order.

    >>> check_names(["redundancy"], "policies", ("redundancy", "imbalance"))
    ('redundancy',)
    >>> check_names("all", "policies", ("redundancy", "imbalance"))
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: policies: must be a list or tuple of names out of redundancy, imbalance (got the string 'all')
    """
    known = tuple(known)
    if isinstance(value, str):
        raise InputError(f"{field}: must be a list or tuple of names out of {', '.join(known)} (got the string {value!r})",
                         field=field)
    if not isinstance(value, (list, tuple)):
        raise InputError(f"{field}: must be a list or tuple of names out of {', '.join(known)} (got {value!r})",
                         field=field)
    unknown = [v for v in value if not isinstance(v, str) or v not in known]
    if unknown:
        raise InputError(f"{field}: unknown {', '.join(map(repr, unknown))} (known: {', '.join(known)})", field=field)
    return tuple(value)


__all__ = ["MAX_GLOBAL_BATCH", "MAX_SEQ", "check_bool", "check_choice", "check_int", "check_names",
           "check_optional_int", "check_real"]
