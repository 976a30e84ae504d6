"""Tables on a narrow terminal (issue 44 item 7): no line past the width, no word cut.

rich alone shrinks the widest columns first whatever they hold, and then cuts words
("hall-│0-pod"). ``tables.print_table`` fits a table so that every column keeps its longest
word, or prints it one line per row. Checked on seeded random tables of names, numbers and
long headers at random widths, against the rendered text.
"""

from __future__ import annotations

import random
import re

import pytest
from rich.console import Console

from hetopt.tables import add_column, fit, print_table, styled_table


def _random_table(rng: random.Random):
    """A table of 2-8 columns: names with hyphens and plus signs, sentences, numbers; headers
    with underscores."""
    columns = rng.randint(2, 8)
    kinds = [rng.choice(["name", "text", "number"]) for _ in range(columns)]
    headers = [rng.choice(["island", "usd_per_iteration", "memory_gib", "in flight", "layout", "x", "iteration_s"])
               + f"{k}" for k in range(columns)]
    table = styled_table(rng.choice([None, "a title that may be long enough to wrap on a narrow terminal"]))
    for header, kind in zip(headers, kinds):
        add_column(table, header, numeric=kind == "number")
    words = []
    for _ in range(rng.randint(1, 6)):
        row = []
        for kind in kinds:
            if kind == "number":
                cell = f"{rng.uniform(0, 1e4):.4g}"
            elif kind == "name":
                cell = f"hall-{rng.randint(0, 9)}-pod-{rng.randint(0, 9)}-r{rng.randint(0, 9)}-n{rng.randint(0, 999)}+{rng.randint(1, 99)}"
            else:
                cell = " ".join(rng.choice(["tp4", "pp12", "dp16", "none", "zero1", "sp", "H100-SXM5", "B200"])
                                for _ in range(rng.randint(1, 7)))
            row.append(cell)
            words += cell.split()
        table.add_row(*row)
    return table, words, headers


@pytest.mark.parametrize("seed", range(60))
def test_no_line_past_the_width_and_no_word_cut(seed):
    rng = random.Random(seed)
    table, words, _ = _random_table(rng)
    width = rng.randint(40, 140)
    console = Console(width=width, record=True, color_system=None)
    print_table(console, table)
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width, text
    cells = {piece for line in lines for piece in re.split(r"[\s│┃━╇;]+", line) if piece}
    for word in words:  # each word whole somewhere (a record's last word may carry its ";")
        assert word in cells or f"{word};" in text, (word, text)


def test_a_fitted_table_keeps_each_columns_longest_word():
    table = styled_table()
    add_column(table, "island", numeric=False)
    add_column(table, "layout", numeric=False)
    add_column(table, "usd_per_iteration", numeric=True)
    table.add_row("hall-1-pod-0-r0-n256+47", "tp2 pp12 vpp2 dp16 none zero1 sp", "0.0107")
    console = Console(width=60)
    assert fit(table, console)
    widths = [c.width for c in table.columns]
    assert sum(widths) + 8 == 60  # the room is used: 3 columns' padding and 2 rules take 8
    assert widths[0] == len("hall-1-pod-0-r0-n256+47") and widths[2] == len("iteration")  # the header breaks first
    assert table.columns[2].header == "usd_per_\niteration"


def test_rich_alone_cuts_the_words_these_tables_keep():
    """The check above fails on rich's own layout (what ``hetopt plan`` printed before)."""
    cut = 0
    for seed in range(60):
        rng = random.Random(seed)
        table, words, _ = _random_table(rng)
        console = Console(width=rng.randint(40, 140), record=True, color_system=None)
        console.print(table)
        cells = {p for line in console.export_text().splitlines() for p in re.split(r"[\s│┃━╇;]+", line) if p}
        cut += any(word not in cells for word in words)
    assert cut > 10
