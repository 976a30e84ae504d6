"""Shared helpers of the CLI tests: a command run on a pseudo-terminal, as a person sees it."""

from __future__ import annotations

import codecs
import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: Seconds a child may run, or take to end after its Ctrl-C, before the test calls it a hang.
HANG_S = 300
STOP_HANG_S = 30


@dataclass
class Screen:
    """What a child wrote to its terminal: the exit code, the text (escape codes removed) and
    stderr; ``stopped_after_s``: seconds from the Ctrl-C to the child's end (None: none sent)."""

    code: int
    text: str
    err: str
    stopped_after_s: float | None = None
    chunks: list[tuple[float, str]] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        """The lines as the terminal shows them (a carriage return starts the line again)."""
        return [part for line in self.text.split("\n") for part in line.split("\r")]


def on_terminal(argv: list[str], columns: int = 80, *, interrupt_when: str | None = None,
                interrupt_after_s: float | None = None) -> Screen:
    """Run ``hetopt argv`` on a pseudo-terminal ``columns`` wide; send SIGINT (a terminal's
    Ctrl-C) once ``interrupt_when`` appears on the screen or ``interrupt_after_s`` seconds pass."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = dict(os.environ, COLUMNS=str(columns), LINES="40", TERM="xterm")
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "hetopt", *argv], stdout=follower, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, cwd=ROOT, env=env)
    os.close(follower)
    chunks: list[tuple[float, str]] = []
    seen, sent = "", None
    decoder = codecs.getincrementaldecoder("utf-8")("replace")  # a character may span two reads
    try:
        while True:
            now = time.monotonic()
            assert now - started < HANG_S, f"hetopt {' '.join(argv)}: still running after {HANG_S} s"
            if sent is not None:
                assert now - sent < STOP_HANG_S, f"still running {STOP_HANG_S} s after Ctrl-C"
            ready, _, _ = select.select([leader], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                text = ANSI.sub("", decoder.decode(chunk))
                chunks.append((now - started, text))
                seen = (seen + text)[-4000:]
            due = (interrupt_when is not None and interrupt_when in seen) or (
                interrupt_after_s is not None and now - started >= interrupt_after_s)
            if sent is None and due and proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                sent = time.monotonic()
    finally:
        os.close(leader)
    code = proc.wait(timeout=STOP_HANG_S)
    ended = time.monotonic()
    err = proc.stderr.read().decode("utf-8", "replace")
    return Screen(code, "".join(t for _, t in chunks), err, None if sent is None else ended - sent, chunks)
