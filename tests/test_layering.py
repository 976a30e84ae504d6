"""The import arrows of CONVENTIONS §1 that issue 9 fixed: builders below the planner, generators above."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "hetopt"


def _imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports (anywhere in the file)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def _imports(folder: str) -> dict[str, set[str]]:
    """Module path -> every ``hetopt.*`` module it imports (anywhere in the file)."""
    return {path.relative_to(PACKAGE.parent).as_posix(): {n for n in _imports_of(path) if n.startswith("hetopt")}
            for path in (PACKAGE / folder).rglob("*.py")}


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


# ---- issue 24: the planner's boundary --------------------------------------------------------

SOURCES = sorted(PACKAGE.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def test_only_the_command_line_parses_arguments():
    """argparse lives in cli.py alone: the library speaks fields, the command line flags."""
    users = [_rel(p) for p in SOURCES if "argparse" in _imports_of(p) and _rel(p) != "hetopt/cli.py"]
    assert users == []


#: Calls that build a library error from their first argument.
ERROR_BUILDERS = {"InputError", "UnsupportedLayout", "BelowResolution", "layout_error", "runtime_error", "TooLarge"}


def _leading_text(node: ast.expr) -> str:
    """The literal start of a string or f-string argument ('' when it starts with a value)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    return ""


def test_no_library_message_starts_with_a_flag():
    """A library error names its field ("layout tp=3: ..."); the command line (cli.py, which
    parses, and commands/, which runs each command) maps fields to flags."""
    offending = []
    for path in SOURCES:
        if _rel(path) == "hetopt/cli.py" or _rel(path).startswith("hetopt/commands/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and node.args:
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                if name in ERROR_BUILDERS and _leading_text(node.args[0]).startswith("--"):
                    offending.append(f"{_rel(path)}:{node.lineno}")
    assert offending == []


#: The one place that reads an exception's text: matplotlib's overflow error has no type of its own.
TEXT_MATCH_ALLOWED = {"hetopt/draw/__init__.py"}


def test_no_control_flow_on_the_text_of_an_error():
    """Errors are told apart by type or ``field``, never by what their message says."""
    offending = []
    for path in SOURCES:
        if _rel(path) in TEXT_MATCH_ALLOWED:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for handler in (n for n in ast.walk(tree) if isinstance(n, ast.ExceptHandler) and n.name):
            for node in ast.walk(handler):
                text_of_exc = (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str"
                               and len(node.args) == 1 and isinstance(node.args[0], ast.Name)
                               and node.args[0].id == handler.name)
                if not text_of_exc:
                    continue
                for parent in ast.walk(handler):
                    tests = (isinstance(parent, ast.Compare) and node in [parent.left, *parent.comparators]
                             and any(isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops))
                    method = (isinstance(parent, ast.Attribute) and parent.value is node
                              and parent.attr in ("startswith", "endswith", "partition", "removeprefix", "replace"))
                    if tests or method:
                        offending.append(f"{_rel(path)}:{parent.lineno}")
    assert offending == []


#: Names that every module of a kind defines for itself (a protocol, not a shared constant), and
#: per-method figures that happen to be equal today.
PER_MODULE = {
    "ACCEPTS", "NEEDS_MODEL", "HINT",  # each exporter's own
    "FAMILY", "METHODS", "TOP_KEYS", "_LAZY", "BRUTEFORCE_LIMIT", "MAX_PLANS",  # each family's own
    "BAR", "FRAME_IN", "ROW_IN",  # each picture's own layout
    "INF",  # np.inf under a short name in a table-filling loop
    "MAX_GPUS", "MAX_LAYERS", "MAX_TIME_S", "MAX_MICROBATCHES", "MAX_DP_CELLS",  # each family's accepted ranges
    "STEPS_PER_CLOCK",  # each loop's own multiple of budget.CLOCK_EVERY
    "LOAD_S", "LOAD_S_PER_OPTION", "LOAD_S_PER_SLOT", "TIME_QUANTUM_S",  # each model's measured allowance
}


def test_a_shared_constant_is_defined_once():
    """The same name with the same value in two modules is one rule written twice: import it."""
    seen: dict[tuple[str, str], list[str]] = {}
    for path in SOURCES:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                name = node.targets[0].id
                if name.isupper() and name not in PER_MODULE:
                    seen.setdefault((name, ast.unparse(node.value)), []).append(_rel(path))
    assert {k: v for k, v in seen.items() if len(v) > 1} == {}


#: The longest function the planner may hold (lines, docstring included): its steps are named
#: functions, each of which a reader takes in at once.
LONGEST_PLANNER_FUNCTION = 100


def test_no_planner_function_is_longer_than_a_page():
    long = [f"{_rel(path)}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path in sorted((PACKAGE / "planner").glob("*.py"))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > LONGEST_PLANNER_FUNCTION]
    assert long == []
