"""Input and output files: TOML and JSON read, a file to write checked; each failure one line
naming the file and the fix.

The bottom of the input side: the catalogs (``hardware.py``, ``workload.py``), the planner's
cluster files, the published measurements and the instance files (``hetopt.io``) are all read
here, with the same size limit and the same messages.
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from pathlib import Path
from typing import Any

from hetopt.errors import InputError

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


def writable_file(path: str, flag: str, example: str, suffixes: tuple[str, ...] = (), kind: str = "") -> Path:
    """``path`` checked before any work as a file to write: not a folder, in an existing folder,
    writable; with ``suffixes``, one of them (``kind`` names what is written so).

    ``flag`` names the option in messages; ``example`` is a file name to suggest.

    Raises
    ------
    InputError
        A folder or a path ending in a separator, another suffix, a missing folder, or a place
        that cannot be written.

    Examples
    --------
    >>> writable_file("p.pdf", "-o", "picture.svg", (".svg", ".png"), "a picture")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: -o p.pdf: a picture is written as .svg or .png (e.g. p.svg)
    """
    target = Path(path)
    if path.endswith(("/", os.sep)) or target.is_dir():
        raise InputError(f"{flag} {path}: is a folder; give a file name (e.g. {os.path.join(path, example)})")
    if suffixes and target.suffix.lower() not in suffixes:
        stem = target.stem or Path(example).stem
        raise InputError(f"{flag} {path}: {kind} is written as {' or '.join(suffixes)} (e.g. {stem}{suffixes[0]})")
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"{flag} {path}: no folder {folder} (create it first)")
    if target.exists() and not os.access(target, os.W_OK) or not target.exists() and not os.access(folder, os.W_OK):
        raise InputError(f"{flag} {path}: not writable (permission denied)")
    return target


__all__ = ["MAX_FILE_BYTES", "check_size", "read_json", "read_toml", "too_deep", "writable_file"]


def toml_value(v: Any, *, digits: int | None = None) -> str:
    """One TOML value as text: a boolean, a whole number, a finite float, a string, a list of these.

    Parameters
    ----------
    v
        The value (a tuple is written as a list).
    digits
        Floats of magnitude 1e-6 or more rounded to this many decimals (generated files: no
        ``0.30000000000000004``); None writes every float exactly as it reads back.

    Raises
    ------
    ValueError
        A NaN or infinite float (TOML files hold finite numbers only).
    TypeError
        Any other type.

    Examples
    --------
    >>> print(toml_value([True, 3, 0.1 + 0.2, "a"], digits=12))
    [true, 3, 0.3, "a"]
    >>> print(toml_value(0.1 + 0.2))
    0.30000000000000004
    """
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"TOML has no {v} (a file holds finite numbers only)")
        return repr(round(v, digits)) if digits is not None and (abs(v) >= 1e-6 or v == 0) else repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x, digits=digits) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")
