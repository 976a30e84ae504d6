"""Reading Cephalo's measured profiles (``instances/profiles/cephalo``, MIT licence).

The latency file maps ``[model][gpu][sequence][dtype]`` to one transformer layer's latency
in milliseconds as a function of the micro-batch size; see that folder's README.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from hetopt.catalog import instances_dir
from hetopt.errors import InputError

MS = 1e-3


@dataclass(frozen=True)
class LayerProfile:
    """One layer's measured forward and backward latency curves, in seconds.

    ``*_line`` = (slope, intercept) in seconds per sample and seconds; ``*_table[m-1]`` =
    the latency measured at micro-batch m (may be empty).
    """

    forward_line: tuple[float, float]
    backward_line: tuple[float, float]
    forward_table: tuple[float, ...]
    backward_table: tuple[float, ...]


def default_profiles_dir() -> Path:
    """The shipped copy of Cephalo's profiles, ``instances/profiles/cephalo``."""
    return instances_dir() / "profiles" / "cephalo"


def _read_json(path: Path) -> dict:
    """A profile file: a JSON object (keyed by model, then GPU, ...)."""
    from hetopt.files import read_json

    data = read_json(path, what="a profile file", hint="pass the cephalo-profiles folder with --profiles")
    if not isinstance(data, dict):
        raise InputError(f"{path}: a JSON {type(data).__name__}, not an object keyed by model (give Cephalo's profile file)")
    return data


def load_latencies(folder: Path) -> dict:
    """The raw latency file."""
    return _read_json(folder / "model_latencies.json")


def load_memory(folder: Path) -> dict:
    """The raw memory file."""
    return _read_json(folder / "model_memory.json")


def layer_profile(latencies: dict, model: str, gpu: str, seq: int, dtype: str) -> LayerProfile | None:
    """The two-line (optionally tabled) profile, or None when absent or in the old one-line form."""
    where = f"model_latencies.json: {model}.{gpu}.{seq}.{dtype}"
    try:
        entry = latencies.get(model, {}).get(gpu, {}).get(str(seq), {}).get(dtype)
        if entry is None or not isinstance(entry[0], list):
            return None
        (fs, fi), (bs, bi) = entry[0], entry[1]
        ft = tuple(x * MS for x in entry[2]) if len(entry) > 2 else ()
        bt = tuple(x * MS for x in entry[3]) if len(entry) > 3 else ()
        numbers = (fs, fi, bs, bi, *ft, *bt)
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in numbers):
            raise InputError(f"{where}: every latency must be a finite number of ms (got {[x for x in numbers][:6]})")
        return LayerProfile((fs * MS, fi * MS), (bs * MS, bi * MS), ft, bt)
    except InputError:
        raise
    except (AttributeError, TypeError, IndexError, ValueError):  # a level that is not Cephalo's shape
        raise InputError(f"{where}: not Cephalo's form (objects by model, GPU, sequence and dtype, then "
                         "[[forward slope, intercept], [backward slope, intercept], ...] in ms)") from None
