"""The README's Python example runs as printed."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_blocks_run(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "the README shows the Python API"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    assert "OPTIMAL" in capsys.readouterr().out


def test_readme_names_the_commands_ci_runs():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'python -m pip install -e ".[test]"' in text and 'pip install --quiet -e ".[test]"' in ci
    assert "python -m pytest" in text and "python -m pytest" in ci
    assert os.access(ROOT / ".ci" / "run", os.X_OK)
