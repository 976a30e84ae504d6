"""Progress lines (issue 28): shown on a terminal while a command works, never on a pipe.

Each command runs in a child process whose stdout is a pseudo-terminal (``pty``): the
progress line's text must appear there, and the same command into a pipe must print none of
it (a pipe gets exactly the output it got before progress existed).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import ROOT, on_terminal

PIPELINE = ROOT / "instances" / "pipeline"

#: (command, its progress line as first drawn: the description, then the bar)
COMMANDS = [
    (["solve", str(PIPELINE / "tangram-gpt3-13b-a100x4-v100-32x8.toml"), "--method", "dp"],
     "tangram-gpt3-13b-a100x4-v100-32x8 · dp ━"),
    (["crosscheck", str(PIPELINE / "tiny.toml"), "--methods", "dp,bruteforce"], "crosscheck ━"),
    (["bench", str(PIPELINE / "tiny.toml"), "--methods", "dp"], "bench ━"),
    (["validate", "--file", "megatron-sc21"], "validate ━"),
    (["scaling", "--islands", "1,2", "--layers", "8,16"], "scaling ━"),
    (["findings", "--only", "fig9"], "findings ━"),
]


def _on_terminal(argv: list[str], columns: int = 120) -> tuple[int, str]:
    """Exit code and everything written to a terminal ``columns`` wide (escape codes removed)."""
    screen = on_terminal(argv, columns)
    return screen.code, screen.text


@pytest.mark.parametrize("argv, shown", COMMANDS, ids=[c[0][0] for c in COMMANDS])
def test_a_progress_line_on_a_terminal_and_none_on_a_pipe(argv, shown):
    code, screen = _on_terminal(argv)
    assert code == 0, screen[-2000:]
    assert shown in screen, screen[-2000:]
    piped = subprocess.run([sys.executable, "-m", "hetopt", *argv], capture_output=True, text=True, cwd=ROOT,
                           timeout=300)
    assert piped.returncode == 0, piped.stderr
    assert shown not in piped.stdout and "\x1b[" not in piped.stdout


def test_no_line_is_wider_than_the_terminal_and_no_name_is_cut():
    """At 100 columns a plan's tables fold their text and keep their numbers whole (GPU names
    were cut to "A100-PCIe-…" and lines ran to 600 characters)."""
    code, screen = _on_terminal(["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "128",
                                 "--workers", "1"], columns=100)
    assert code == 0, screen[-2000:]
    lines = screen.replace("\r", "\n").split("\n")
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert "…" not in screen  # folded onto a second line, never cut


def test_a_plan_reports_every_phase_with_its_counts():
    """Issue 44: the plan showed "enumeration 0/?" for 13 s and nothing while it composed (the
    bar sat at 225/225 for 45 s). Each phase now reports counts with a known total."""
    import hetopt

    seen: list[tuple[str, int, int]] = []
    hetopt.plan("tangram-c2", "gpt3-1.3b", global_batch=32, on_progress=lambda *call: seen.append(call))
    assert seen[:2] == [("islands", 0, 1), ("islands", 1, 1)] and seen[-2:] == [("alternatives", 0, 1), ("alternatives", 1, 1)]
    assert all(isinstance(total, int) and 0 <= done <= total for _, done, total in seen)
    composed = [call for call in seen if ": composing " in call[0]]
    sizes = [int(phase.split()[1].rstrip(":")) for phase, _, _ in composed]
    assert sizes and sizes == sorted(sizes) and [done for _, done, _ in composed] == sorted({done for _, done, _ in composed})
    for m in sizes:  # each size composed was enumerated first: from 0 of its queries to all of them
        counts = [(done, total) for phase, done, total in seen if phase == f"micro-batch {m}: enumeration"]
        assert counts[0][0] == 0 and counts[-1][0] == counts[-1][1] > 0
        assert seen.index((f"micro-batch {m}: enumeration", *counts[-1])) < seen.index(composed[sizes.index(m)])


def test_the_plan_progress_line_names_its_units_and_never_an_unknown_total():
    code, screen = _on_terminal(["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "32",
                                 "--workers", "1"], columns=80)
    assert code == 0, screen[-2000:]
    assert "micro-batch 1: enumeration" in screen and " queries " in screen
    assert "/?" not in screen  # a count of an unknown total
