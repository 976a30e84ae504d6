"""Typed, validated access to TOML data, with errors that name the file, the key path and the fix.

Every reader goes through :class:`Fields`, so every message has one shape::

    instances/allocation/x.toml: gpu[2].memory_gib: must be > 0 (got -4.0)
"""

from __future__ import annotations

import contextlib
import difflib
import math
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from hetopt.errors import InputError

_MISSING = object()


@contextlib.contextmanager
def located(source: str) -> Iterator[None]:
    """Prefix the InputErrors raised inside with the file name.

    Instance constructors validate themselves and raise ``InputError("key.path: problem
    (fix)")`` without knowing where the data came from; a reader builds them inside
    ``with located(source):`` so a file's errors name the file too.

    Examples
    --------
    >>> with located("x.toml"):
    ...     raise InputError("gpu[0].count: must be >= 1 (got 0)")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: x.toml: gpu[0].count: must be >= 1 (got 0)
    """
    try:
        yield
    except InputError as exc:
        if exc.source is not None:  # it names its file already
            raise
        raise InputError(f"{source}: {exc}", field=exc.field, source=source) from None


class Fields:
    """One TOML table being read.

    Parameters
    ----------
    data
        The table.
    source
        The file name shown in messages.
    path
        The key path of this table inside the file ("" at the top, "gpu[2]" below).

    Examples
    --------
    >>> f = Fields({"count": 0}, "x.toml")
    >>> f.integer("count", minimum=1)
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: x.toml: count: must be >= 1 (got 0)
    """

    def __init__(self, data: dict[str, Any], source: str, path: str = "") -> None:
        self.data = data
        self.source = source
        self.path = path

    # -- messages -------------------------------------------------------------------------
    def key(self, name: str) -> str:
        """The full key path of ``name``."""
        return f"{self.path}.{name}" if self.path else name

    def error(self, name: str | None, message: str) -> InputError:
        """An InputError for key ``name`` (None: this table itself)."""
        where = self.key(name) if name is not None else (self.path or "(top level)")
        return InputError(f"{self.source}: {where}: {message}", source=self.source)

    def reject_unknown(self, allowed: Iterable[str]) -> None:
        """Refuse keys this table does not define (a typo must not be silently ignored)."""
        allowed = list(allowed)
        for name in self.data:
            if name not in allowed:
                close = difflib.get_close_matches(name, allowed, n=1)
                hint = f"did you mean '{close[0]}'?" if close else "known keys: " + ", ".join(sorted(allowed))
                raise self.error(name, f"unknown key ({hint})")

    # -- scalars --------------------------------------------------------------------------
    def _default(self, name: str, default: Any) -> Any:
        if default is _MISSING:
            raise self.error(name, "missing (this key is required)")
        return default

    def number(
        self,
        name: str,
        default: Any = _MISSING,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
        positive: bool = False,
    ) -> Any:
        """A finite float (ints accepted); ``default`` when absent (may be None)."""
        if name not in self.data:
            return self._default(name, default)
        value = self.data[name]
        return self._check_number(name, value, minimum, maximum, positive)

    def _check_number(self, name: str, value: Any, minimum, maximum, positive) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(name, f"must be a number (got {value!r})")
        value = float(value)
        if not math.isfinite(value):
            raise self.error(name, f"must be finite (got {value})")
        if positive and value <= 0:
            raise self.error(name, f"must be > 0 (got {value})")
        return self._check_range(name, value, minimum, maximum)

    def _check_range(self, name: str, value: Any, minimum: Any, maximum: Any, beyond: str = "") -> Any:
        """``value`` when within ``minimum`` and ``maximum`` (each None for no bound); ``beyond`` is
        added to the message of a value above ``maximum``."""
        if minimum is not None and value < minimum:
            raise self.error(name, f"must be >= {minimum} (got {value})")
        if maximum is not None and value > maximum:
            raise self.error(name, f"must be <= {maximum} (got {value}){beyond}")
        return value

    def si(self, name: str, scale: float, unit: str, default: Any = _MISSING, *, positive: bool = False) -> Any:
        """A finite number given in ``unit`` (the unit its key names: GiB, Gb/s, ...), returned
        times ``scale`` (SI per ``unit``: ``units.GIB``, ``units.GBPS``); ``default`` (already
        SI) when absent.

        The one conversion of a file's figure. A figure whose SI value overflows a float is
        refused here, as written: past this point the instance would see inf and could not say
        what the file held (issue 44). Ranges are the instance's to check.

        Examples
        --------
        >>> Fields({"memory_gib": 2}, "x.toml").si("memory_gib", 2.0**30, "GiB")
        2147483648.0
        >>> Fields({"memory_gib": 1e300}, "x.toml").si("memory_gib", 2.0**30, "GiB")
        Traceback (most recent call last):
        ...
        hetopt.errors.InputError: x.toml: memory_gib: must be a number of GiB within ±1.67e+299, the most a float holds once converted (got 1e+300)
        """
        if name not in self.data:
            return self._default(name, default)
        return self._to_si(name, self._check_number(name, self.data[name], None, None, positive), scale, unit)

    def si_numbers(self, name: str, scale: float, unit: str, default: Any = _MISSING, *, max_len: int = 100_000) -> Any:
        """A list of finite numbers in ``unit``, times ``scale`` (:meth:`si`, entry by entry)."""
        values = self.numbers(name, default, max_len=max_len)
        if name not in self.data:
            return values
        return tuple(self._to_si(f"{name}[{i}]", v, scale, unit) for i, v in enumerate(values))

    def _to_si(self, name: str, value: float, scale: float, unit: str) -> float:
        converted = value * scale
        if not math.isfinite(converted):
            raise self.error(name, f"must be a number of {unit} within ±{sys.float_info.max / scale:.3g}, the most a "
                                   f"float holds once converted (got {value:.12g})")
        return converted

    def integer(self, name: str, default: Any = _MISSING, *, minimum: int | None = None, maximum: int | None = None) -> Any:
        """An int; ``default`` when absent (may be None)."""
        if name not in self.data:
            return self._default(name, default)
        value = self.data[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(name, f"must be a whole number (got {value!r})")
        return self._check_range(name, value, minimum, maximum, "; larger values are outside what hetopt plans")

    def boolean(self, name: str, default: Any = _MISSING) -> Any:
        """true or false; ``default`` when absent."""
        if name not in self.data:
            return self._default(name, default)
        value = self.data[name]
        if not isinstance(value, bool):
            raise self.error(name, f"must be true or false (got {value!r})")
        return value

    def string(self, name: str, default: Any = _MISSING, *, choices: Iterable[str] | None = None) -> Any:
        """A non-empty string; ``default`` when absent."""
        if name not in self.data:
            return self._default(name, default)
        value = self.data[name]
        if not isinstance(value, str) or not value:
            raise self.error(name, f"must be a non-empty string (got {value!r})")
        if choices is not None:
            choices = list(choices)
            if value not in choices:
                raise self.error(name, f"unknown value {value!r} (known: {', '.join(choices)})")
        return value

    def numbers(self, name: str, default: Any = _MISSING, *, positive: bool = False, max_len: int = 100_000) -> Any:
        """A list of finite floats."""
        if name not in self.data:
            return self._default(name, default)
        value = self.data[name]
        if not isinstance(value, list):
            raise self.error(name, f"must be a list of numbers (got {value!r})")
        if len(value) > max_len:
            raise self.error(name, f"has {len(value)} entries, more than the limit of {max_len}")
        return tuple(self._check_number(f"{name}[{i}]", v, None, None, positive) for i, v in enumerate(value))

    def strings(self, name: str, default: Any = _MISSING) -> Any:
        """A list of non-empty strings."""
        if name not in self.data:
            return self._default(name, default)
        value = self.data[name]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.error(name, f"must be a list of names (got {value!r})")
        return tuple(value)

    # -- nested tables --------------------------------------------------------------------
    def table(self, name: str, *, required: bool = False) -> Fields:
        """A sub-table (an empty one when absent and not required)."""
        if name not in self.data:
            if required:
                raise self.error(name, "missing (this table is required)")
            return Fields({}, self.source, self.key(name))
        value = self.data[name]
        if not isinstance(value, dict):
            raise self.error(name, f"must be a table, [{self.key(name)}] (got {value!r})")
        return Fields(value, self.source, self.key(name))

    def tables(self, name: str, *, required: bool = False, max_len: int = 100_000) -> list[Fields]:
        """An array of tables, [[name]]."""
        if name not in self.data:
            if required:
                raise self.error(name, f"missing: give at least one [[{self.key(name)}]] table")
            return []
        value = self.data[name]
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.error(name, f"must be an array of tables, [[{self.key(name)}]]")
        if required and not value:
            raise self.error(name, f"is empty: give at least one [[{self.key(name)}]] table")
        if len(value) > max_len:
            raise self.error(name, f"has {len(value)} entries, more than the limit of {max_len}")
        return [Fields(v, self.source, f"{self.key(name)}[{i}]") for i, v in enumerate(value)]
