"""Seeded fuzz test of the readers and solvers through the command line.

Each case mutates one of the shipped tiny instances (overflowing, tiny, NaN and infinite
numbers, negative and zero values, huge lists, empty tables, wrong types, a wrong family
key, wrong nesting, missing keys), writes it as TOML and runs ``hetopt solve FILE --json
--time-limit 5`` in-process with every method of the family. Every run must end in one of
the documented ways: exit 2 with exactly one ``hetopt: ...`` line on stderr (or, for a
method that declines, its DECLINED result), or exit 0/1/3 with one JSON Result whose
objective is finite whenever a solution is reported; never an uncaught exception, never
exit 4 (internal error). The proven answers of different methods on one accepted file must
not contradict each other. All failures of a family are collected and reported together.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import random
import tomllib
from pathlib import Path

import pytest

from hetopt import solvers
from hetopt.cli import main
from hetopt.errors import InputError
from hetopt.io import load

ROOT = Path(__file__).resolve().parents[1]

#: The seed of the whole test: the same cases on every run.
SEED = 20261201

#: Cases per family (about 200 in all); each runs every method of the family on an accepted file.
CASES = {"allocation": 70, "pipeline": 65, "islands": 65, "replicas": 40}

#: The shipped instances the cases mutate.
BASES = {
    "allocation": ["allocation/tiny-2gpu.toml", "allocation/tiny-uneven.toml", "allocation/tiny-infeasible.toml"],
    "pipeline": ["pipeline/tiny.toml", "pipeline/tiny-t4-v100.toml"],
    "islands": ["islands/tiny.toml", "islands/tiny-switch.toml", "islands/tiny-ring-8.toml"],
    "replicas": ["replicas/tiny.toml", "replicas/tiny-infeasible.toml", "replicas/random-1.toml"],
}

#: Seconds per method run (the CLI's --time-limit).
TIME_LIMIT_S = 5

#: Replacement values of a leaf: overflowing, denormal, non-finite, signs, zero, huge
#: integers, wrong types and wrong nesting.
EXTREMES = [
    1e308, -1e308, 1e-308, 1e-300, 5e-324, math.nan, math.inf, -math.inf, 0, 0.0, -1, -0.5,
    1e25, 1e15, 1e12, 1e10, 2**63 - 1, -(2**63), 10**18, 2**31, "text", "", True, [], {}, [1, 2], [[1]],
    {"a": 1},
]


def toml_value(v) -> str:
    """TOML text of a value; tables inline, so any nesting stays one expression."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def to_toml(data: dict) -> str:
    return "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in data.items())


def _paths(node, prefix=()):
    """Every (path, value) below node, containers included."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield (*prefix, k), v
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield (*prefix, i), v
            yield from _paths(v, (*prefix, i))


def _set(data, path, value):
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _delete(data, path):
    node = data
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]


def _label(path) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path).replace(".[", "[")


def mutate(data: dict, rng: random.Random, family: str) -> str:
    """Apply one random mutation to ``data`` in place; return what it did."""
    paths = [(p, v) for p, v in _paths(data) if p != ("problem",)]
    leaves = [(p, v) for p, v in paths
              if not isinstance(v, (dict, list)) or (isinstance(v, list) and v and not isinstance(v[0], dict))]
    containers = [(p, v) for p, v in paths if isinstance(v, (dict, list)) and v]
    numbers = [(p, v) for p, v in paths if isinstance(v, (int, float)) and not isinstance(v, bool)]
    kind = rng.choice(["extreme", "extreme", "extreme", "number", "number", "scale", "scale", "delete", "empty",
                       "family", "nesting", "huge-list", "duplicate"])
    if kind == "extreme" and leaves:
        path, _ = rng.choice(leaves)
        value = rng.choice(EXTREMES)
        _set(data, path, copy.deepcopy(value))
        return f"{_label(path)} = {toml_value(value)}"
    if kind == "number" and numbers:
        path, _ = rng.choice(numbers)
        value = rng.choice([1e308, math.nan, math.inf, -1, 0, 1e-300, 1e25, 2**63 - 1, -(2**63)])
        _set(data, path, value)
        return f"{_label(path)} = {toml_value(value)}"
    if kind == "scale" and numbers:
        factor = rng.choice([1e10, 1e-10, 1e300, -1.0, 1e3, 1e6, 1e-3])
        chosen = rng.sample(numbers, k=min(len(numbers), rng.randint(1, 6)))
        for path, value in chosen:
            _set(data, path, value * factor)
        return f"{len(chosen)} numbers x {factor:g} ({', '.join(_label(p) for p, _ in chosen)})"
    if kind == "delete" and paths:
        path, _ = rng.choice(paths)
        _delete(data, path)
        return f"delete {_label(path)}"
    if kind == "empty" and containers:
        path, value = rng.choice(containers)
        _set(data, path, type(value)())
        return f"{_label(path)} emptied"
    if kind == "family":
        value = rng.choice([f for f in ("allocation", "pipeline", "islands") if f != family] + [1, ["allocation"], "Allocation"])
        data["problem"] = value
        return f"problem = {toml_value(value)}"
    if kind == "nesting" and containers:
        path, value = rng.choice(containers)
        if isinstance(value, list):
            _set(data, path, value[0])
            return f"{_label(path)} = its first element (a list made a single value)"
        _set(data, path, [value, value])
        return f"{_label(path)} = [it, it] (a table made a list)"
    if kind == "huge-list" and leaves:
        lists = [(p, v) for p, v in leaves if isinstance(v, list) and v]
        if lists:
            path, value = rng.choice(lists)
            _set(data, path, value + [value[-1]] * 5000)
            return f"{_label(path)} grown to {len(value) + 5000} entries"
    if kind == "duplicate":
        tables = [(p, v) for p, v in paths if isinstance(v, list) and v and isinstance(v[0], dict)]
        if tables:
            path, value = rng.choice(tables)
            _set(data, path, value * rng.choice([2, 40]))
            return f"{_label(path)} repeated to {len(_get(data, path))} tables"
    path, _ = rng.choice(leaves)
    _set(data, path, math.nan)
    return f"{_label(path)} = nan"


def _get(data, path):
    node = data
    for key in path:
        node = node[key]
    return node


def cases(family: str) -> list[tuple[str, str, str]]:
    """(case id, what was mutated, TOML text) for a family, from the fixed seed."""
    rng = random.Random(f"{SEED}-{family}")
    out = []
    for i in range(CASES[family]):
        base = rng.choice(BASES[family])
        data = tomllib.loads((ROOT / "instances" / base).read_text(encoding="utf-8"))
        what = [mutate(data, rng, family) for _ in range(rng.choice([1, 1, 1, 2]))]
        out.append((f"{family}-{i:03d}", f"{base}: {'; '.join(what)}", to_toml(data)))
    return out


def run_cli(argv: list[str]) -> tuple[int | str, str, list[str]]:
    """(exit code or the uncaught exception, stdout, stderr lines) of one in-process run."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
        except BaseException as exc:  # noqa: BLE001 - exactly what the test looks for
            code = f"uncaught {type(exc).__name__}: {exc}"
    return code, out.getvalue(), err.getvalue().splitlines()


def check_run(code, stdout: str, stderr: list[str]) -> tuple[str | None, dict | None]:
    """(what is wrong or None, the JSON Result when one was printed)."""
    if isinstance(code, str):
        return code, None
    errors = [line for line in stderr if "warning" not in line.lower()]
    if code == 2 and not stdout:
        if len(errors) != 1 or not errors[0].startswith("hetopt: "):
            return f"exit 2 with {len(errors)} stderr lines: {' | '.join(errors)[:300]}", None
        return None, None
    if code not in (0, 1, 2, 3):
        return f"exit {code}: {' | '.join(errors)[:300]}", None
    try:
        doc = json.loads(stdout)
    except json.JSONDecodeError:
        return f"exit {code} without one JSON document on stdout: {stdout[:200]!r}", None
    status = doc.get("status")
    if code == 2 and status != "DECLINED":
        return f"exit 2 with status {status}", doc
    if status in ("OPTIMAL", "FEASIBLE"):
        objective = doc.get("objective")
        if not isinstance(objective, (int, float)) or not math.isfinite(objective):
            return f"{status} with a non-finite objective ({objective!r})", doc
    return None, doc


def contradictions(family: str, instance, docs: dict[str, dict]) -> list[str]:
    """Proven answers that disagree between methods (as crosscheck's rule, on the JSON docs)."""
    fam = solvers.family(family)
    rtol, atol = fam.tolerance(instance)
    optima = {m: d["objective"] for m, d in docs.items() if d.get("status") == "OPTIMAL" and m in fam.proving}
    problems = []
    if optima:
        first, value = next(iter(optima.items()))
        for m, v in optima.items():
            if not math.isclose(v, value, rel_tol=max(rtol, 1e-9), abs_tol=atol):
                problems.append(f"{first} finds {value!r} but {m} finds {v!r}")
    infeasible = [m for m, d in docs.items() if d.get("status") == "INFEASIBLE"]
    solved = [m for m, d in docs.items() if d.get("status") in ("OPTIMAL", "FEASIBLE")]
    if infeasible and solved:
        problems.append(f"{', '.join(infeasible)} prove infeasibility but {', '.join(solved)} found a plan")
    return problems


@pytest.mark.parametrize("family", sorted(CASES))
def test_malformed_and_extreme_files_end_in_a_documented_way(family, tmp_path):
    failures = []
    methods = list(solvers.family(family).methods)
    for case, what, text in cases(family):
        path = tmp_path / f"{case}.toml"
        path.write_text(text, encoding="utf-8")
        try:
            instance = load(path)
        except InputError:
            instance = None  # rejected by the reader: one run shows how the CLI says it
        except Exception as exc:  # noqa: BLE001 - the CLI run below reports it
            instance = None
            failures.append(f"{case} [{what}] hetopt.load: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        docs = {}
        for method in methods if instance is not None else ["auto"]:
            code, stdout, stderr = run_cli(["solve", str(path), "--json", "--time-limit", str(TIME_LIMIT_S), "--method", method])
            problem, doc = check_run(code, stdout, stderr)
            if problem is not None:
                failures.append(f"{case} [{what}] {method}: {problem}")
            elif doc is not None:
                docs[method] = doc
        if instance is not None:
            failures.extend(f"{case} [{what}]: {p}" for p in contradictions(family, instance, docs))
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures)


def _one_line_exit_2(argv: list[str], capsys, needle: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


def test_inputs_nested_past_the_parsers_are_refused_in_one_line(tmp_path, capsys):
    """tomllib and json recurse once a level: a file nested hundreds deep raised
    RecursionError (exit 4) in every reader; now it is malformed input (found by fuzzing)."""
    deep_toml = tmp_path / "deep.toml"
    deep_toml.write_text('problem = "allocation"\nfoo = ' + "[" * 1000 + "]" * 1000 + "\n")
    deep_json = tmp_path / "deep.json"
    deep_json.write_text('{"stages": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _one_line_exit_2(["solve", str(deep_toml)], capsys, "nested too deeply")
    _one_line_exit_2(["plan", "--cluster", "cephalo-a", "--model", str(deep_toml), "--global-batch", "8"], capsys, "nested too deeply")
    _one_line_exit_2(["draw", str(deep_json), "-o", str(tmp_path / "x.svg")], capsys, "nested too deeply")
    _one_line_exit_2(["export", str(deep_json), "--to", "megatron"], capsys, "nested too deeply")


def test_generate_refuses_an_output_it_cannot_write_and_a_profile_of_the_wrong_shape(tmp_path, capsys):
    taken = tmp_path / "plan.json"
    taken.write_text("{}")
    _one_line_exit_2(["generate", "clusters", "--out", str(taken)], capsys, "exists and is not a folder")
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    for src in (ROOT / "instances" / "profiles" / "cephalo").glob("*.json"):
        (profiles / src.name).write_text(src.read_text())
    (profiles / "model_latencies.json").write_text("[1, 2]")
    _one_line_exit_2(["generate", "allocation", "--out", str(tmp_path / "out"), "--profiles", str(profiles)], capsys,
                     "not an object keyed by model")
