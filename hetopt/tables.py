"""One table style for every command: rich tables on screen, Markdown when asked (``--markdown``).

Rows are dicts, one key per column, in order. Numbers are right-aligned and never cut or
wrapped; text columns fold onto a second line when the terminal is narrow, so no line runs
past its width and no name is cut ("V100-SXM2-32GB", not "V100-SXM2-3…").

rich alone shrinks the widest columns first, whatever they hold, and then cuts words
("hall-│0-pod"); :func:`fit` gives every column at least its longest word (a header may
break after an underscore or a hyphen: ``usd_per_`` / ``iteration``), and :func:`print_table`
prints a table that cannot fit that way as one wrapped line per row instead.

Examples
--------
>>> rows = [{"method": "dp", "objective": 1.5, "agree": True}, {"method": "milp", "objective": None, "agree": False}]
>>> print("\\n".join(markdown_lines(rows)))
| method | objective | agree |
|---|--:|---|
| dp | 1.5 | yes |
| milp | - | no |
>>> [c.justify for c in rows_table(rows).columns]
['left', 'right', 'left']
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table


def cell(value: Any, digits: int = 6) -> str:
    """A value as a table shows it: ``-`` for None, yes/no, ``digits`` significant digits.

    >>> cell(None), cell(True), cell(2 / 3), cell("x")
    ('-', 'yes', '0.666667', 'x')
    """
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def _numeric(rows: list[dict], key: str) -> bool:
    """Right-aligned: a column of numbers (``wall_s`` is one even when shown as fixed-point text)."""
    return key == "wall_s" or any(isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool) for r in rows)


def styled_table(title: str | None = None, caption: str | None = None) -> Table:
    """An empty table in the one style; add its columns with :func:`add_column`."""
    return Table(title=title, caption=caption, title_justify="left", caption_justify="left",
                 show_edge=False, header_style="bold")


def add_column(table: Table, name: str, *, numeric: bool) -> None:
    """A column: numbers right-aligned and never wrapped or cut; text folds when the terminal is narrow."""
    table.add_column(name, justify="right" if numeric else "left", no_wrap=numeric, overflow="fold")


def rows_table(rows: list[dict], title: str | None = None, caption: str | None = None, *, digits: int = 6) -> Table:
    """A rich table of ``rows`` (the columns of the first row), floats to ``digits`` significant digits."""
    table = styled_table(title, caption)
    if not rows:
        return table
    for key in rows[0]:
        add_column(table, str(key), numeric=_numeric(rows, key))
    for row in rows:
        table.add_row(*(cell(row.get(k), digits) for k in rows[0]))
    return table


def show(out: Console, rows: list[dict], *, title: str | None = None, caption: str | None = None, digits: int = 6,
         markdown: bool = False) -> None:
    """``rows`` on ``out`` in the one style, or as Markdown (``--markdown``): a ``## title``
    heading, the caption, the table."""
    if markdown:
        print("\n".join(([f"## {title}"] if title else []) + ([caption] if caption else [])
                        + markdown_lines(rows, digits=digits)))
    else:
        print_table(out, rows_table(rows, title, caption, digits=digits))


def markdown_lines(rows: list[dict], *, digits: int = 6) -> list[str]:
    """``rows`` as a Markdown table (numbers right-aligned), one string per line."""
    if not rows:
        return []
    keys = list(rows[0])
    lines = ["| " + " | ".join(map(str, keys)) + " |",
             "|" + "".join("--:|" if _numeric(rows, k) else "---|" for k in keys)]
    lines += ["| " + " | ".join(cell(r.get(k), digits) for k in keys) + " |" for r in rows]
    return lines


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun, singular for one: ``counted(1, "stage")`` is "1 stage".

    >>> counted(1, "micro-batch"), counted(96, "micro-batch"), counted(2, "stage"), counted(1_500, "GPU")
    ('1 micro-batch', '96 micro-batches', '2 stages', '1,500 GPUs')
    """
    if n == 1:
        return f"1 {noun}"
    return f"{n:,} {plural or (noun + 'es' if noun.endswith(('ch', 'sh', 's', 'x')) else noun + 's')}"


#: Where a header may break onto a second line: after a space, an underscore or a hyphen
#: (``usd_per_iteration`` reads as ``usd_per_`` / ``iteration``); names in cells break at spaces only.
_HEADER_BREAK = re.compile(r"(?<=[ _-])")


def _header_parts(header: str) -> list[str]:
    return [part for part in _HEADER_BREAK.split(header) if part.strip()]


def _flow_header(header: str, width: int) -> str:
    """``header`` on as few lines of at most ``width`` as its break points allow."""
    lines: list[str] = []
    for part in _header_parts(header):
        if lines and len(lines[-1]) + len(part.rstrip()) <= width:
            lines[-1] += part
        else:
            lines.append(part)
    return "\n".join(line.rstrip() for line in lines)


def fit(table: Table, console: Console, width: int | None = None) -> bool:
    """Give the columns of ``table`` widths so that it is at most ``width`` (default: the
    console's) columns wide without breaking a word of any cell; False when even every
    column at its longest word is too wide (the table is then left as it was).

    A table that fits as it is is left alone. Otherwise headers break first (one more line
    for the whole table), after a space, an underscore or a hyphen; then, if still too wide,
    cells wrap at spaces, the widest columns first (as rich shares the room), each column
    keeping at least its longest word (numbers and other unwrapped columns their longest line).

    Examples
    --------
    >>> def example():
    ...     table = styled_table()
    ...     add_column(table, "island", numeric=False); add_column(table, "usd_per_iteration", numeric=True)
    ...     table.add_row("hall-0-pod-0-r0-n0+47 and more words", "0.125")
    ...     return table
    >>> table, console = example(), Console(width=80)
    >>> fit(table, console, 35), [c.width for c in table.columns], table.columns[1].header
    (True, [21, 9], 'usd_per_\\niteration')
    >>> fit(example(), console, 34)  # 21 + 9 and the rules do not fit
    False
    >>> fit(styled_table(), console, 10)  # no columns: nothing to fit
    True
    """
    width = console.width if width is None else width
    options = console.options.update_width(max(width, 1000))
    columns = table.columns
    heads, lows, highs = [], [], []  # the header's longest part; the cells' longest word and line
    for column in columns:
        cells = [Measurement.get(console, options, console.render_str(c) if isinstance(c, str) else c)
                 for c in column.cells]
        heads.append(max((len(p.strip()) for p in _header_parts(str(column.header))), default=0))
        highs.append(max((m.maximum for m in cells), default=0))
        lows.append(highs[-1] if column.no_wrap else max((m.minimum for m in cells), default=0))
    whole = [max(len(str(c.header)), h) for c, h in zip(columns, highs)]
    rules = Measurement.get(console, options, table).maximum - sum(whole)  # padding and separators
    room = width - rules
    if sum(whole) <= room:
        return True
    low = [max(h, lo) for h, lo in zip(heads, lows)]
    if sum(low) > room:
        return False
    high = [max(h, hi) for h, hi in zip(heads, highs)]  # headers broken, cells whole
    if sum(high) <= room:
        widths = high
        for k in sorted(range(len(columns)), key=lambda k: whole[k] - high[k]):  # mend the shortest headers first
            widths[k] += min(whole[k] - widths[k], room - sum(widths))
    else:
        # the largest cap c with sum(min(high, max(low, c))) <= room, then one more column each to
        # the widest until the room is used (rich's own order: the widest columns shrink first)
        cap = 0
        while sum(min(h, max(lo, cap + 1)) for lo, h in zip(low, high)) <= room:
            cap += 1
        widths = [min(h, max(lo, cap)) for lo, h in zip(low, high)]
        for k in sorted(range(len(columns)), key=lambda k: -high[k]):
            if sum(widths) < room and widths[k] < high[k]:
                widths[k] += 1
    for column, w in zip(columns, widths):
        column.width = w
        if len(str(column.header)) > w:
            column.header = _flow_header(str(column.header), w)
    return True


def print_table(out: Console, table: Table) -> None:
    """``table`` on ``out``, fitted to its width (:func:`fit`), its title a line above it; a
    table that cannot fit without cutting a word prints one line per row instead, ``header:
    value`` pairs that wrap at spaces like any text.

    Examples
    --------
    >>> table = rows_table([{"island": "hall-0-pod-0-r0-n0+47", "GPU": "H100-SXM5", "GPUs": 384}], "islands")
    >>> console = Console(width=40)  # the table needs 42 columns
    >>> with console.capture() as shot:
    ...     print_table(console, table)
    >>> print("\\n".join(line.rstrip() for line in shot.get().splitlines()))
    islands
     island: hall-0-pod-0-r0-n0+47; GPU:
    H100-SXM5; GPUs: 384
    """
    # the title as a line of its own: rich would wrap it at the table's width, not the terminal's
    if table.title:
        out.print(table.title, highlight=False, markup=False)
        table.title = None
    if fit(table, out):
        out.print(table)
        return
    headers = [" ".join(str(c.header).split()) for c in table.columns]
    for row in zip(*(list(c.cells) for c in table.columns)):
        out.print(" " + "; ".join(f"{h}: {v}" for h, v in zip(headers, row) if str(v).strip()),
                  highlight=False, markup=False)
    if table.caption:
        out.print(table.caption, highlight=False, markup=False)
