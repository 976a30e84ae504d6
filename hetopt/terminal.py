"""What a person at a terminal sees while a command runs: a progress line, and nothing on a pipe.

Every command that can run longer than about two seconds (solve, crosscheck, bench, plan,
findings, validate, scaling) shows one transient rich progress line while it works, only
when stdout is a terminal: a pipe or a file gets exactly the output it would get without
it.

Examples
--------
>>> from rich.console import Console
>>> with progress(Console(), "bench", total=3, show=False) as bar:  # off a terminal: a no-op
...     bar.advance()
...     bar.describe("tiny.toml")
>>> bar.shown
False
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from rich.console import Console


#: Characters of the progress bar: with a phase's description, "225/225 queries" and the elapsed
#: time the line stays within 80 columns (rich's default of 40 wrapped it there).
BAR_WIDTH = 20


class Bar:
    """The handle a command moves its progress line with (a no-op off a terminal)."""

    def __init__(self, shown: Any = None, task: Any = None) -> None:
        self._progress, self._task = shown, task

    @property
    def shown(self) -> bool:
        """Whether a progress line is on screen."""
        return self._progress is not None

    def advance(self, steps: int = 1) -> None:
        """``steps`` more units of work are done."""
        if self._progress is not None:
            self._progress.advance(self._task, steps)

    def describe(self, text: str) -> None:
        """What is being worked on now."""
        if self._progress is not None:
            self._progress.update(self._task, description=text)

    def update(self, done: int, total: int | None, text: str | None = None, unit: str | None = None) -> None:
        """``done`` of ``total`` units (None: unknown, a spinner), and optionally what is being
        done and what the units are (shown after the count: "57/225 queries")."""
        if self._progress is not None:
            fields = ({} if text is None else {"description": text}) | ({} if unit is None else {"unit": unit})
            self._progress.update(self._task, completed=done, total=total, **fields)


def on_terminal() -> bool:
    """Whether stdout is a terminal (a person watching), not a pipe or a file."""
    return sys.stdout is not None and sys.stdout.isatty()


@contextlib.contextmanager
def progress(out: Console, description: str, total: int | None = None, *, show: bool = True) -> Iterator[Bar]:
    """A transient progress line on ``out`` while the block runs, when ``show`` and stdout is a
    terminal; ``total`` units of work (None: a spinner with the elapsed time)."""
    if not (show and on_terminal()):
        yield Bar()
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=BAR_WIDTH), MofNCompleteColumn(),
               TextColumn("{task.fields[unit]}"), TimeElapsedColumn()]
    with Progress(*columns, console=out, transient=True) as shown:
        yield Bar(shown, shown.add_task(description, total=total, unit=""))
