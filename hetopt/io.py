"""Instance files: which family a file is for, and that family's reader.

``load(path)`` reads one TOML instance file (:mod:`hetopt.files`), checks ``problem`` and hands
the data to that family's reader (``hetopt.readers``); every validation message names the file,
the key path and the fix. Reading files lives in :mod:`hetopt.files` and JSON output in
:mod:`hetopt.jsonout`; their names are re-exported here for code written against the single
module of earlier releases.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hetopt.errors import InputError
from hetopt.files import MAX_FILE_BYTES, check_size, read_json, read_toml, too_deep
from hetopt.jsonout import crosscheck_to_dict, plain, result_to_dict
from hetopt.readers.allocation import read_allocation
from hetopt.readers.islands import read_islands
from hetopt.readers.mixed import read_mixed
from hetopt.readers.pipeline import read_pipeline
from hetopt.readers.replicas import read_replicas

#: Instance readers by ``problem`` key.
READERS: dict[str, Callable[[dict, str], Any]] = {
    "allocation": read_allocation,
    "islands": read_islands,
    "pipeline": read_pipeline,
    "replicas": read_replicas,
    "mixed": read_mixed,
}


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
        One line naming the file, the key path and the fix; or, when ``path`` is not a file
        name at all, one line naming the argument (``field="path"``).

    Examples
    --------
    >>> load(123)
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: path: must be a file name, a str or a pathlib.Path (got int 123); to read TOML text, use hetopt.loads(text)
    """
    if not isinstance(path, (str, os.PathLike)) or isinstance(os.fspath(path), bytes):
        raise InputError(f"path: must be a file name, a str or a pathlib.Path (got {type(path).__name__} {path!r:.40}); "
                         f"to read TOML text, use hetopt.loads(text)", field="path")
    data = read_toml(path)
    return READERS[problem_of(data, str(path))](data, str(path))


def loads(text: str, *, source: str = "<string>") -> Any:
    """Like :func:`load`, from TOML text.

    Examples
    --------
    >>> loads(None)
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: text: must be TOML text, a str (got NoneType None); to read a file, use hetopt.load(path)
    """
    if not isinstance(text, str):
        raise InputError(f"text: must be TOML text, a str (got {type(text).__name__} {text!r:.40}); "
                         f"to read a file, use hetopt.load(path)", field="text")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{source}: not valid TOML: {exc}") from None
    except RecursionError:
        raise too_deep(source) from None
    return READERS[problem_of(data, source)](data, source)


__all__ = ["MAX_FILE_BYTES", "READERS", "check_size", "crosscheck_to_dict", "load", "loads", "plain", "problem_of", "read_json",
           "read_toml", "result_to_dict", "too_deep"]
