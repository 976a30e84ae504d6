"""Reading instance files and writing results.

``load(path)`` reads one TOML instance file, checks ``problem`` and hands the data to that
family's reader (``hetopt.readers``); every validation message names the file, the key
path and the fix. ``result_to_dict`` turns a Result into plain data for JSON.
"""

from __future__ import annotations

import dataclasses
import json
import enum
import math
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hetopt.errors import InputError
from hetopt.readers.allocation import read_allocation
from hetopt.readers.islands import read_islands
from hetopt.readers.pipeline import read_pipeline
from hetopt.readers.replicas import read_replicas
from hetopt.result import CrossCheck, Result

#: Instance readers by ``problem`` key.
READERS: dict[str, Callable[[dict, str], Any]] = {
    "allocation": read_allocation,
    "islands": read_islands,
    "pipeline": read_pipeline,
    "replicas": read_replicas,
}

#: Largest instance file read (bytes): a bigger file is a mistake, not an instance.
MAX_FILE_BYTES = 64 * 2**20


def too_deep(source: str | Path) -> InputError:
    """The one-line error for an input nested deeper than Python's parsers recurse.

    ``tomllib`` and ``json`` recurse once per nested list or table and raise RecursionError
    some hundreds of levels down; no hetopt input nests more than a few, so such a file is
    refused as malformed.

    Examples
    --------
    >>> str(too_deep("x.json"))
    'x.json: nested too deeply to read (lists or tables hundreds of levels inside each other); no hetopt input nests more than a few levels'
    """
    return InputError(f"{source}: nested too deeply to read (lists or tables hundreds of levels inside each other); "
                      "no hetopt input nests more than a few levels")


def check_size(path: Path, what: str) -> None:
    """Refuse a file above :data:`MAX_FILE_BYTES` before reading it (its parse would take
    memory many times its size).

    Raises
    ------
    InputError
        Naming the file, its size and the limit.
    """
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise InputError(f"{path}: {size} bytes, above the {MAX_FILE_BYTES}-byte limit for {what}")


def read_json(path: str | Path, *, what: str, hint: str) -> Any:
    """Parse a JSON file, turning every failure into a one-line InputError ending in ``hint``.

    ``what`` names the kind of file in the size message (:func:`check_size`); ``hint`` says
    what to give instead ("give the output of hetopt plan --json"). The callers check the
    document's shape.

    Raises
    ------
    InputError
        A folder, a missing or unreadable file, one above :data:`MAX_FILE_BYTES`, text that
        is not JSON (with its line and column), or nesting past the parser (:func:`too_deep`).

    Examples
    --------
    >>> read_json("no-such-file.json", what="a result", hint="give the output of hetopt solve --json")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: no-such-file.json: no such file (give the output of hetopt solve --json)
    """
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{path}: is a folder ({hint})")
    if not p.is_file():
        raise InputError(f"{path}: no such file ({hint})")
    check_size(p, what)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise too_deep(path) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); {hint}") from None


def read_toml(path: str | Path) -> dict:
    """Parse a TOML file, turning every failure into a one-line InputError.

    Raises
    ------
    InputError
        Missing file, unreadable file, too large, or a TOML syntax error (with its line).
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"{path}: no such file (check the path)")
    if p.is_dir():
        raise InputError(f"{path}: is a folder, not an instance file")
    check_size(p, "an instance file")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise too_deep(path) from None


def _file_kind(data: dict) -> str | None:
    """What a file without ``problem`` looks like it is, as the command that reads it.

    Examples
    --------
    >>> _file_kind({"name": "c", "node": [{}]})
    'a cluster file: use `hetopt plan --cluster FILE --model ...`'
    >>> _file_kind({"x": 1}) is None
    True
    """
    if "suite" in data and "instance" in data:
        return "a benchmark suite: use `hetopt bench FILE`"
    if isinstance(data.get("node"), list):
        return "a cluster file: use `hetopt plan --cluster FILE --model ...`"
    if "architecture" in data and "layers" in data:
        return "a model file: use `hetopt plan --model FILE --cluster ...`"
    if isinstance(data.get("gpu"), dict) and all(isinstance(v, dict) for v in data["gpu"].values()):
        return "the GPU catalog: cluster files name its GPUs"
    return None


def problem_of(data: dict, source: str) -> str:
    """The ``problem`` key, checked against the known families.

    Raises
    ------
    InputError
        Missing (saying what the file is when it is a cluster, model, suite or catalog
        file), not a string, or an unknown family.
    """
    problem = data.get("problem")
    if problem is None:
        kind = _file_kind(data)
        if kind is not None:
            raise InputError(f"{source}: problem: missing: this is {kind}, not an instance file "
                             f"(an instance file starts with problem = \"{'|'.join(READERS)}\")")
        raise InputError(f"{source}: problem: missing (start the file with problem = \"{'|'.join(READERS)}\")")
    if not isinstance(problem, str):
        raise InputError(f"{source}: problem: must be a string, one of {', '.join(READERS)} "
                         f"(got {type(problem).__name__} {problem!r:.40})")
    if problem not in READERS:
        raise InputError(f"{source}: problem: unknown problem {problem!r:.60} (known: {', '.join(READERS)})")
    return problem


def load(path: str | Path) -> Any:
    """Read and validate one instance file.

    Parameters
    ----------
    path
        A TOML file with ``problem = "<family>"`` on top.

    Returns
    -------
    The family's Instance (e.g. :class:`hetopt.allocation.AllocationInstance`).

    Raises
    ------
    InputError
        One line naming the file, the key path and the fix.
    """
    data = read_toml(path)
    return READERS[problem_of(data, str(path))](data, str(path))


def loads(text: str, *, source: str = "<string>") -> Any:
    """Like :func:`load`, from TOML text."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{source}: not valid TOML: {exc}") from None
    except RecursionError:
        raise too_deep(source) from None
    return READERS[problem_of(data, source)](data, source)


def plain(value: Any) -> Any:
    """Plain JSON-ready data from dataclasses, enums, numpy values and tuples.

    Non-finite floats become None (JSON has no inf/nan).

    Examples
    --------
    >>> plain({"a": (1, np.int64(2)), "b": float("inf")})
    {'a': [1, 2], 'b': None}
    """
    if hasattr(value, "to_dict"):
        return plain(value.to_dict())
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def result_to_dict(result: Result) -> dict:
    """A Result as plain data: the fields of Result, ``solution`` as plain data."""
    return plain({f.name: getattr(result, f.name) for f in dataclasses.fields(result)})


def crosscheck_to_dict(check: CrossCheck) -> dict:
    """A CrossCheck as plain data."""
    return plain(
        {
            "problem": check.problem,
            "agree": check.agree,
            "compared": check.compared,
            "tolerance": {"rtol": check.tolerance[0], "atol": check.tolerance[1]},
            "disagreement": check.disagreement,
            "heuristic_gaps": check.heuristic_gaps,
            "results": [result_to_dict(r) for r in check.results],
        }
    )
