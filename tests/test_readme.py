"""The README runs as printed: its Python blocks, and every command of its tour with the lines
it says the command prints (as doctests do for code).

A ``console`` block holds ``$ hetopt ...`` commands, each followed by lines of its output. A
shown line must match a line of the real output, in order, with ``...`` standing for any text
(a wall time, the rest of a long row); a line that is only ``...`` stands for any lines.
Trailing spaces do not count. Commands run in a scratch folder that sees ``instances/``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _commands() -> list[tuple[str, list[str]]]:
    """(command, shown output lines) for every ``$`` line of the README's console blocks."""
    found = []
    for block in re.findall(r"```console\n(.*?)```", README, flags=re.S):
        for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, *shown = chunk.rstrip("\n").split("\n")
            found.append((command, [line.rstrip() for line in shown]))
    return found


def _pattern(line: str) -> re.Pattern:
    return re.compile(".*".join(re.escape(part) for part in line.split("...")))


def _matches(shown: list[str], printed: list[str]) -> str | None:
    """None when every shown line matches a printed line, in order; else the first that does not."""
    at = 0
    for line in shown:
        if line == "...":
            continue
        pattern = _pattern(line)
        while at < len(printed) and not pattern.fullmatch(printed[at]):
            at += 1
        if at == len(printed):
            return line
        at += 1
    return None


COMMANDS = _commands()


def test_the_tour_has_commands():
    assert len(COMMANDS) >= 6 and all(c.startswith("hetopt ") for c, _ in COMMANDS)


@pytest.mark.parametrize("command, shown", COMMANDS, ids=[c.split()[1] + f"-{i}" for i, (c, _) in enumerate(COMMANDS)])
def test_a_readme_command_prints_what_the_readme_shows(command, shown, tmp_path):
    (tmp_path / "instances").symlink_to(ROOT / "instances")
    argv = shlex.split(command)
    done = subprocess.run([sys.executable, "-m", "hetopt", *argv[1:]], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    printed = [line.rstrip() for line in done.stdout.splitlines()]
    missing = _matches(shown, printed)
    assert missing is None, f"the README shows {missing!r}; the command printed:\n" + "\n".join(printed)


def test_the_readme_is_short():
    """At most about 3,000 words (issue 28): the rest lives in docs/."""
    assert len(README.split()) <= 3000


def test_readme_python_blocks_run(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert blocks, "the README shows the Python API"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert "OPTIMAL" in out and "status OPTIMAL, bound" in out


def test_readme_names_the_commands_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'python -m pip install -e ".[test,runtimes]"' in README and 'pip install --quiet -e ".[test,runtimes]"' in ci
    assert "python -m pytest" in README and "python -m pytest" in ci
    assert os.access(ROOT / ".ci" / "run", os.X_OK)


def test_every_relative_link_of_the_readme_and_docs_exists():
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            assert (page.parent / target).exists(), (page.name, target)
