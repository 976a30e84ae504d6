"""The import arrows of CONVENTIONS §1 that issue 9 fixed: builders below the planner, generators above."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "hetopt"


def _imports(folder: str) -> dict[str, set[str]]:
    """Module path -> every ``hetopt.*`` module it imports (anywhere in the file)."""
    out = {}
    for path in (PACKAGE / folder).rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        out[path.relative_to(PACKAGE.parent).as_posix()] = {n for n in names if n.startswith("hetopt")}
    return out


@pytest.mark.parametrize(("folder", "forbidden"), [
    ("planner", "hetopt.generate"),  # the planner uses instance builders, never file generators
    ("builders", "hetopt.planner"),  # builders sit below the planner
    ("builders", "hetopt.generate"),
    ("replicas", "hetopt.planner"),  # families never use the planner
    ("replicas", "hetopt.generate"),
])
def test_no_import_against_the_arrows(folder, forbidden):
    offending = {path: sorted(n for n in names if n == forbidden or n.startswith(forbidden + "."))
                 for path, names in _imports(folder).items()}
    assert {p: n for p, n in offending.items() if n} == {}
