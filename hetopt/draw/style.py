"""What every picture shares: size, colours, reading the result's fields, saving.

Every artist a test counts carries a ``gid`` (the SVG element's ``id``), named after what
it shows (``stage-3-forward``, ``batch-2-0``, ``island-1``, ``alternative-cephalo-fsdp``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from hetopt.errors import InputError

#: Width of every picture, inches: 1,000 px at ``DPI``, wide enough for a 20-lane legend and
#: labels at ``FONT_PT`` without overlap, narrow enough for a README column.
WIDTH_IN = 10.0
#: Pixels per inch of PNG output (SVG is scalable: its size is in points, 72 per inch).
DPI = 100
#: Tallest picture, inches: a 128-stage pipeline or a 512-node cluster still fits a screen
#: scrolled once or twice; beyond it lanes and rows get thinner instead of the image taller.
MAX_HEIGHT_IN = 30.0
#: Base font size, points: readable at 1,000 px wide.
FONT_PT = 9.0

#: Forward, backward and idle time in the Gantt chart; highlight for bottlenecks and "this plan".
FORWARD = "#4C72B0"
BACKWARD = "#DD8452"
IDLE = "#E8E8E8"
HIGHLIGHT = "#C44E52"
#: One colour per island or GPU type, in order of first appearance (matplotlib's tab10,
#: colour-blind-safe enough for up to 10 groups; it repeats beyond).
PALETTE = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
           "#ff7f0e", "#d62728")

#: Settings in force while a picture is built and saved (``matplotlib.rc_context``, so the
#: caller's own settings are untouched). Saved pictures repeat byte for byte: SVG text stays text (small, searchable) and the SVG
#: ids and metadata do not depend on the run.
RC = {"svg.fonttype": "none", "svg.hashsalt": "hetopt", "font.size": FONT_PT}


def colours(names: list[str]) -> dict[str, str]:
    """A colour per distinct name, in order of first appearance.

    Examples
    --------
    >>> colours(["a", "b", "a"])
    {'a': '#1f77b4', 'b': '#2ca02c'}
    """
    out: dict[str, str] = {}
    for name in names:
        out.setdefault(name, PALETTE[len(out) % len(PALETTE)])
    return out


def figure(height_in: float) -> Figure:
    """A figure ``WIDTH_IN`` wide and ``height_in`` tall (capped at ``MAX_HEIGHT_IN``), laid out
    by matplotlib's constrained layout so that labels are not clipped.

    Examples
    --------
    >>> figure(3.0).get_size_inches().tolist()
    [10.0, 3.0]
    """
    fig = Figure(figsize=(WIDTH_IN, min(height_in, MAX_HEIGHT_IN)), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)  # the Agg canvas, never a screen (SVG files switch to the SVG canvas when saved)
    return fig


def save(fig: Figure, path: Path, fmt: str) -> tuple[int, int]:
    """Write ``fig`` as ``fmt`` ("svg" or "png"); returns its (width, height) in px (SVG: pt).

    The figure's size is kept as set (no tight bounding box), so a picture's size depends
    only on its content's count of lanes or rows.
    """
    metadata: dict[str, Any] = {"Date": None} if fmt == "svg" else {}
    try:
        fig.savefig(path, format=fmt, dpi=DPI, metadata=metadata)
    except OSError as exc:
        raise InputError(f"{path}: cannot write ({exc.strerror or exc})") from None
    width_in, height_in = fig.get_size_inches()
    per_inch = 72 if fmt == "svg" else DPI
    return round(width_in * per_inch), round(height_in * per_inch)


def seconds(value: float) -> str:
    """A time for labels, in s, ms or µs as its size asks.

    Examples
    --------
    >>> seconds(7.1564), seconds(0.075), seconds(2.5e-5)
    ('7.16 s', '75 ms', '25 µs')
    """
    if value >= 1.0:
        return f"{value:.3g} s"
    if value >= 1e-3:
        return f"{value * 1e3:.3g} ms"
    return f"{value * 1e6:.3g} µs"


class Doc:
    """Typed access to a result document's fields, with one-line errors naming the key path.

    Examples
    --------
    >>> Doc({"solution": {"stages": [{"time_s": "x"}]}}, "r.json").table("solution").tables("stages")[0].number("time_s")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: r.json: solution.stages[0].time_s: must be a number (got 'x')
    """

    def __init__(self, data: dict, source: str, path: str = "") -> None:
        self.data, self.source, self.path = data, source, path

    def _key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def error(self, name: str, problem: str) -> InputError:
        """An InputError for key ``name``: ``source: key.path: problem``."""
        return InputError(f"{self.source}: {self._key(name)}: {problem}", source=self.source)

    def _get(self, name: str, optional: bool) -> Any:
        if name not in self.data or self.data[name] is None:
            if optional:
                return None
            raise self.error(name, "missing (give a result of hetopt solve --json or plan --json from this version)")
        return self.data[name]

    def number(self, name: str, *, optional: bool = False) -> Any:
        """A finite number (None when ``optional`` and absent or null)."""
        value = self._get(name, optional)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.error(name, f"must be a number (got {value!r})")
        return value

    def integer(self, name: str, *, minimum: int = 0, optional: bool = False) -> Any:
        """A whole number >= ``minimum`` (None when ``optional`` and absent or null)."""
        value = self._get(name, optional)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(name, f"must be a whole number >= {minimum} (got {value!r})")
        return value

    def text(self, name: str, *, optional: bool = False) -> Any:
        """A string (numbers are shown as text: islands may be named by index)."""
        value = self._get(name, optional)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise self.error(name, f"must be a name (got {value!r})")
        return str(value)

    def table(self, name: str) -> Doc:
        """A nested object."""
        value = self._get(name, False)
        if not isinstance(value, dict):
            raise self.error(name, f"must be an object (got {value!r})")
        return Doc(value, self.source, self._key(name))

    def tables(self, name: str, *, required: bool = True) -> list[Doc]:
        """A list of objects (non-empty when ``required``)."""
        value = self._get(name, not required)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.error(name, "must be a list of objects")
        if required and not value:
            raise self.error(name, "is empty: there is nothing to draw")
        return [Doc(v, self.source, f"{self._key(name)}[{i}]") for i, v in enumerate(value)]

    def texts(self, name: str) -> list[str]:
        """A list of names."""
        value = self._get(name, False)
        if not isinstance(value, list) or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
            raise self.error(name, f"must be a list of names (got {value!r})")
        return [str(v) for v in value]

#: Fraction of a row a bar of the plan picture fills (its islands' and its mixed stages' rows).
PLAN_BAR = 0.7
#: A stage is outlined as the slowest when within this relative tolerance of the slowest time.
SLOWEST_RTOL = 1e-9
