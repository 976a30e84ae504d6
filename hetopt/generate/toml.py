"""A small TOML writer for generated instance files (tomllib only reads).

It writes what generators produce: scalars, lists of scalars, tables and arrays of
tables (nested to any depth); at each level scalars come first, then tables.
"""

from __future__ import annotations

from hetopt.files import toml_value


#: Decimals a generated file's floats keep (``hetopt.files.toml_value``).
DIGITS = 12


def _is_table_array(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def _body(data: dict, prefix: str, lines: list[str]) -> None:
    for k, v in data.items():
        if v is not None and not isinstance(v, dict) and not _is_table_array(v):
            lines.append(f"{k} = {toml_value(v, digits=DIGITS)}")
    for k, v in data.items():
        name = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            lines += ["", f"[{name}]"]
            _body(v, name, lines)
        elif _is_table_array(v):
            for item in v:
                lines += ["", f"[[{name}]]"]
                _body(item, name, lines)


def dumps(data: dict, *, header: str = "") -> str:
    """TOML text for ``data``.

    Examples
    --------
    >>> print(dumps({"a": 1, "t": [{"b": [1.5, 2.0]}], "n": {"x": "y"}}), end="")
    a = 1
    <BLANKLINE>
    [[t]]
    b = [1.5, 2.0]
    <BLANKLINE>
    [n]
    x = "y"
    """
    lines = ["# " + line for line in header.splitlines()] + [""] if header else []
    _body(data, "", lines)
    return "\n".join(lines) + "\n"
