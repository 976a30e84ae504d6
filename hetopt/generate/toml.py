"""A small TOML writer for generated instance files (tomllib only reads).

It writes what generators produce: scalars, lists of numbers or strings, and arrays of
tables, top-level keys first.
"""

from __future__ import annotations

import json
import math


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"TOML has no {v}")
        return repr(round(v, 12)) if abs(v) >= 1e-6 or v == 0 else repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def dumps(data: dict, *, header: str = "") -> str:
    """TOML text for ``data``.

    Examples
    --------
    >>> print(dumps({"a": 1, "t": [{"b": [1.5, 2.0]}]}), end="")
    a = 1
    <BLANKLINE>
    [[t]]
    b = [1.5, 2.0]
    """
    lines = [f"# {header}", ""] if header else []
    tables = {k: v for k, v in data.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)}
    for k, v in data.items():
        if k not in tables and v is not None:
            lines.append(f"{k} = {_value(v)}")
    for k, items in tables.items():
        for item in items:
            lines.append("")
            lines.append(f"[[{k}]]")
            for kk, vv in item.items():
                if vv is not None:
                    lines.append(f"{kk} = {_value(vv)}")
    return "\n".join(lines) + "\n"
