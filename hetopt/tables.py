"""One table style for every command: rich tables on screen, Markdown when asked (``--markdown``).

Rows are dicts, one key per column, in order. Numbers are right-aligned and never cut or
wrapped; text columns fold onto a second line when the terminal is narrow, so no line runs
past its width and no name is cut ("V100-SXM2-32GB", not "V100-SXM2-3…").

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

from typing import Any

from rich.console import Console
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
        out.print(rows_table(rows, title, caption, digits=digits))


def markdown_lines(rows: list[dict], *, digits: int = 6) -> list[str]:
    """``rows`` as a Markdown table (numbers right-aligned), one string per line."""
    if not rows:
        return []
    keys = list(rows[0])
    lines = ["| " + " | ".join(map(str, keys)) + " |",
             "|" + "".join("--:|" if _numeric(rows, k) else "---|" for k in keys)]
    lines += ["| " + " | ".join(cell(r.get(k), digits) for k in keys) + " |" for r in rows]
    return lines
