"""``hetopt plan`` as a person at a terminal sees it (issue 44, items 7, 8 and 10).

Each plan runs in a child process whose stdout is a pseudo-terminal of a given width (the
window size is set on the terminal, as a terminal emulator does, and ``COLUMNS`` agrees):

* at 80 columns no line is wider than the terminal and no island or GPU name is cut (the
  datacenter's layout header took 10 rows and its names broke mid-word: "hall-│0-pod");
* the pruning counters print with ``--verbose`` only;
* counts read as English ("1 pipeline micro-batch", not "1 pipeline micro-batches");
* ``--objective cost`` lists every island of the cluster, not only the chosen set's;
* Ctrl-C at any phase of the datacenter plan exits 130, says "stopped by Ctrl-C", and no
  longer claims a time limit that was never set. The waits are hang guards, not timing
  assertions; the times the issue asks for (1.5 s) are measured and reported separately.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from .conftest import HANG_S, ROOT, Screen, on_terminal

#: The hang guard of a Ctrl-C in the datacenter plan: the issue asks for 1.5 s (measured: see
#: docs/cli.md); 10 s leaves room for a loaded machine and still fails the 8.6-19 s it took.
STOP_GUARD_S = 10.0

DATACENTER = ["plan", "--cluster", "datacenter-512-nodes", "--model", "gpt3-175b", "--global-batch", "1536"]
SMALL = ["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "128", "--workers", "1"]
PRICED = ["plan", "--cluster", "sailor-a4v4", "--model", "gpt3-1.3b", "--global-batch", "32", "--objective", "cost",
          "--workers", "1"]


def _names(argv: list[str]) -> tuple[list[str], list[str]]:
    """The island and GPU names of the plan (from its JSON, off a terminal), and every name
    it may print: those and the islands' member nodes."""
    doc = json.loads(subprocess.run([sys.executable, "-m", "hetopt", *argv, "--json"], capture_output=True, text=True,
                                    cwd=ROOT, timeout=HANG_S, check=True).stdout)
    names = {i["name"] for i in doc["islands"]} | {i["gpu"] for i in doc["islands"]}
    names |= {s["island"] for s in doc["stages"]} | {s["gpu"] for s in doc["stages"]}
    for row in (doc.get("cost_search") or {}).get("sets", []):
        names |= set(row["islands"]) | set(row["gpus"])
    return sorted(names), sorted(names | {m for i in doc["islands"] for m in i["members"]})


#: What may stand around a name in a line: table rules, punctuation and spaces.
_BETWEEN = re.compile(r"[\s│┃━╇─,;:()\[\]]+")


def cut_names(lines: list[str], names: list[str]) -> list[str]:
    """Lines holding a piece of a name broken at the end of a line or a table cell (a proper
    prefix of a name standing alone), e.g. "hall-0-pod" of "hall-0-pod-0-r0-n0+47"."""
    bad = []
    for line in lines:
        # only where a break happens: the last word of the line and of each table cell (a name
        # written in passing, "the A100 sustains ...", is a word, not a piece)
        ends = [cell.split()[-1] for cell in re.split(r"[│┃]", line) if cell.split()]
        for end in ends:
            pieces = [p for p in _BETWEEN.split(end) if p]
            token = pieces[-1] if pieces else ""
            if len(token) >= 3 and token not in names and any(n.startswith(token) and len(n) > len(token)
                                                                for n in names if "-" in n or "+" in n):
                bad.append(line)
                break
    return bad


def assert_fits(screen: Screen, columns: int, names: tuple[list[str], list[str]]) -> None:
    names, known = names
    widest = max(screen.lines, key=len)
    assert len(widest) <= columns, f"{len(widest)} columns: {widest!r}"
    assert "…" not in screen.text
    assert not cut_names(screen.lines, known), cut_names(screen.lines, known)[:5]
    missing = [n for n in names if n not in screen.text]
    assert not missing, f"names never printed whole: {missing}"


@pytest.mark.parametrize("argv", [SMALL, PRICED], ids=["tangram-c2", "cost"])
def test_a_plan_fits_80_columns_and_cuts_no_name(argv):
    screen = on_terminal(argv, 80)
    assert screen.code == 0, screen.err + screen.text[-2000:]
    assert_fits(screen, 80, _names(argv))


def test_the_datacenter_plan_fits_80_columns_and_cuts_no_name():
    """The issue's case: 30 islands named hall-H-pod-P-rR-nN+K, a 27-stage pipeline. Without
    the alternatives (their lines are checked on the tangram-c2 and cost plans above) and at the
    plan's micro-batch size only: the same islands, stages and reason lines in a fifth of the
    time (the whole plan takes 55 s since every island is composed, issue 43)."""
    argv = [*DATACENTER, "--no-alternatives", "--microbatch-size", "16"]
    screen = on_terminal(argv, 80)
    assert screen.code == 0, screen.err + screen.text[-2000:]
    assert_fits(screen, 80, _names(argv))


def test_pruning_counters_print_with_verbose_only():
    quiet = subprocess.run([sys.executable, "-m", "hetopt", *SMALL], capture_output=True, text=True, cwd=ROOT,
                           timeout=HANG_S)
    loud = subprocess.run([sys.executable, "-m", "hetopt", *SMALL, "--verbose"], capture_output=True, text=True,
                          cwd=ROOT, timeout=HANG_S)
    assert quiet.returncode == loud.returncode == 0, quiet.stderr + loud.stderr
    assert "(slice, island) pairs" not in quiet.stdout and "planning:" in quiet.stdout
    assert loud.stdout.count("(slice, island) pairs") == 8  # one line per micro-batch size 1..128


def test_counts_are_singular_when_one():
    out = subprocess.run([sys.executable, "-m", "hetopt", *SMALL], capture_output=True, text=True, cwd=ROOT,
                         timeout=HANG_S).stdout
    assert "1 pipeline micro-batch of 128 samples" in out, out
    assert not re.search(r"\b1 (pipeline )?(micro-batches|stages|samples|plans|islands|GPUs)\b", out), out


def test_the_cost_objective_lists_every_island():
    """The cheapest plan holds one of sailor-a4v4's two islands; both are listed, the other as unused."""
    out = subprocess.run([sys.executable, "-m", "hetopt", *PRICED], capture_output=True, text=True, cwd=ROOT,
                         timeout=HANG_S).stdout
    islands = out.split("status ")[0]
    assert "a100-0+3" in islands and "v100-0+3" in islands, out


def _stopped_by_ctrl_c(screen: Screen, when: dict) -> None:
    if screen.stopped_after_s is None:  # a fast machine finished first: nothing was stopped
        pytest.skip(f"the plan ended before {when}")
    assert screen.code == 130, screen.err + screen.text[-3000:]
    assert screen.stopped_after_s < STOP_GUARD_S, screen.stopped_after_s
    assert "stopped by Ctrl-C" in screen.text, screen.text[-3000:]
    assert "time limit" not in screen.text, [line for line in screen.lines if "time limit" in line]
    assert "interrupted (Ctrl-C)" in screen.err


@pytest.mark.parametrize("when", [{"interrupt_after_s": 2.0}, {"interrupt_after_s": 20.0}], ids=["at-2s", "at-20s"])
def test_ctrl_c_in_the_datacenter_plan_says_stopped_by_ctrl_c(when):
    _stopped_by_ctrl_c(on_terminal(DATACENTER, 80, **when), when)


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["micro-batch 2: enumeration", "micro-batch 1: composing", "alternatives"])
def test_ctrl_c_in_every_phase_of_the_datacenter_plan(phase):
    """The Ctrl-C sent when the progress line shows the phase (the 20 s above falls in one
    phase or another with the machine's load)."""
    _stopped_by_ctrl_c(on_terminal(DATACENTER, 80, interrupt_when=phase), {"interrupt_when": phase})
