"""The wall-clock budget of a call: one rule for a time limit, one clock, shares of what is left.

This is the bottom of the house (it imports nothing of the project but its error type and
:mod:`hetopt.interrupt`): the solver layer, the planner, ``bench`` and every method read their
time limit through :func:`check_time_limit` and spend it through a :class:`Deadline`, which
also reads as expired once a command's Ctrl-C requested a stop.

What a limit means, decided once for the whole project:

* ``None``: no limit.
* a finite number of seconds ``>= 0``; ``0`` means "return at once with what is known": a
  method answers TIME_LIMIT, or FEASIBLE with the first plan it had before any search (the
  greedy plan of a family that builds one first). ``solve``, ``plan`` and ``bench`` all accept
  0 and all exit 3 (TIME_LIMIT) when nothing was found.
* anything else (negative, NaN, infinite, a bool, a string) is bad input.

Examples
--------
>>> check_time_limit(2)
2.0
>>> check_time_limit(None) is None
True
>>> check_time_limit(-1)
Traceback (most recent call last):
...
hetopt.errors.InputError: time_limit: must be a finite number of seconds >= 0 (got -1); leave it out for no limit
>>> d = Deadline(10.0)
>>> 0 < d.seconds_left() <= 10.0 and 0 < d.share(0.5) <= 5.0
True
>>> Deadline(None).seconds_left() is None
True
"""

from __future__ import annotations

import math
import numbers
import time

from hetopt.errors import InputError
from hetopt.interrupt import stop_requested

#: Iterations of a hot loop between two reads of the clock. ``Deadline.expired`` costs about
#: 0.1 µs (``time.perf_counter``), so reading it every 256 iterations costs nothing measurable
#: and keeps every loop whose body takes under ~0.4 ms within 0.1 s of its limit; a loop with
#: a longer body reads the clock on every iteration instead.
CLOCK_EVERY = 256


def check_time_limit(time_limit: object, *, field: str = "time_limit") -> float | None:
    """The one rule for a time limit: None, or a finite number of seconds >= 0.

    Parameters
    ----------
    time_limit
        The value given (seconds), or None for no limit.
    field
        The name to report it under (the caller's parameter name).

    Returns
    -------
    float or None
        The limit in seconds as a float, or None.

    Raises
    ------
    InputError
        One line naming the field, with ``field`` set: not a real number (a bool is not),
        negative, NaN or infinite.
    """
    if time_limit is None:
        return None
    if isinstance(time_limit, bool) or not isinstance(time_limit, numbers.Real) \
            or not math.isfinite(float(time_limit)) or time_limit < 0:
        raise InputError(f"{field}: must be a finite number of seconds >= 0 (got {time_limit!r}); "
                         "leave it out for no limit", field=field)
    return float(time_limit)


class Deadline:
    """A wall-clock budget started at construction.

    Parameters
    ----------
    time_limit
        Seconds from now, or None for no limit (``limit`` is then ``inf``).

    Examples
    --------
    >>> d = Deadline(None)
    >>> d.expired()
    False
    >>> d.remaining() == math.inf
    True
    """

    def __init__(self, time_limit: float | None) -> None:
        self.started = time.perf_counter()
        self.limit = math.inf if time_limit is None else float(time_limit)

    @property
    def limited(self) -> bool:
        """Whether there is a limit at all."""
        return not math.isinf(self.limit)

    def elapsed(self) -> float:
        """Seconds since the start."""
        return time.perf_counter() - self.started

    def remaining(self) -> float:
        """Seconds left (``inf`` without a limit, never negative; 0 once a stop is requested)."""
        if stop_requested():
            return 0.0
        return max(0.0, self.limit - self.elapsed())

    def seconds_left(self) -> float | None:
        """Seconds left as a time limit to pass on: None without a limit, else ``remaining()``."""
        return None if not self.limited else self.remaining()

    def share(self, fraction: float) -> float | None:
        """``fraction`` of what is left, as a time limit to pass on (None without a limit)."""
        return None if not self.limited else fraction * self.remaining()

    def expired(self) -> bool:
        """True once the budget is spent, or a stop was requested (the first Ctrl-C of a
        command: :mod:`hetopt.interrupt`), so every clock check is also an interrupt check."""
        return self.elapsed() >= self.limit or stop_requested()
