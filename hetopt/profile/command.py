"""What ``hetopt profile`` and the ``--profile`` flags do, as library calls (``cli.py`` parses and prints).

Examples
--------
>>> parse_sizes("4KiB,1MiB,64")
(4096, 1048576, 64)
"""

from __future__ import annotations

import re
from pathlib import Path

from hetopt.errors import InputError
from hetopt.profile.format import COLLECTIVES, PARTS, merge, read_profile
from hetopt.profile.measure import Options, Report, Setting, estimate_bytes, settings
from hetopt.profile.measured import Measured

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


def parse_sizes(text: str) -> tuple[int, ...]:
    """Message sizes such as ``4KiB,1MiB`` (binary units), in bytes."""
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        m = re.fullmatch(r"(\d+)\s*([a-zA-Z]*)", part)
        if not m or m.group(2).lower() not in _UNITS:
            raise InputError(f"sizes {text}: {part!r} is not a size (give bytes, or 4KiB, 16MiB, 1GiB)", field="sizes")
        out.append(int(m.group(1)) * _UNITS[m.group(2).lower()])
    if not out or min(out) < 1:
        raise InputError(f"sizes {text}: give one size or more, each >= 1 byte", field="sizes")
    return tuple(out)


def parse_ints(text: str, field: str) -> tuple[int, ...]:
    """Comma-separated whole numbers."""
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(f"{field} {text}: give comma-separated whole numbers, such as 1,2,4", field=field) from None
    if not values:
        raise InputError(f"{field} {text}: give at least one number", field=field)
    return values


def parse_names(text: str, field: str, known: tuple[str, ...]) -> tuple[str, ...]:
    """Comma-separated names, each one of ``known``."""
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise InputError(f"{field} {text}: {', '.join(bad) or 'empty'} (known: {', '.join(known)})", field=field)
    return names


def load_measured(paths: list[str] | None) -> Measured | None:
    """The profiles of ``--profile FILE`` (repeatable) as one lookup; None without any."""
    if not paths:
        return None
    profile = merge([read_profile(Path(p)) for p in paths])
    return Measured.of(profile)


def dry_run_lines(o: Options, out: Path, capacity: float) -> list[str]:
    """One line per setting: what would be measured, what is already in ``out``, what is refused."""
    from hetopt.profile.measure import done_keys, key_of

    done, _ = done_keys(out)
    lines = []
    for st in settings(o):
        state = "measure"
        if key_of(o, st, "intra", o.ranks) in done:
            state = "done"
        elif st.kind == "layer" and estimate_bytes(o, st) > capacity:
            state = f"refused: {estimate_bytes(o, st) / 2 ** 30:.2f} GiB > {capacity / 2 ** 30:.2f} GiB"
        extra = f" over {o.ranks} ranks" if st.kind == "collective" else ""
        lines.append(f"{state:>8}  {st.label()}{extra}")
    return lines


def summary_line(report: Report, out: Path) -> str:
    """The run in one line, with the time it took."""
    refused = f", {len(report.refused)} refused (over memory)" if report.refused else ""
    stop = "stopped by Ctrl-C: " if report.stopped else ""
    return (f"{stop}{report.written} rows measured into {out} in {report.seconds:.1f} s "
            f"({report.skipped} already there{refused}); rerun the same command to resume")


__all__ = ["COLLECTIVES", "PARTS", "Setting", "dry_run_lines", "load_measured", "parse_ints", "parse_names", "parse_sizes",
           "summary_line"]
