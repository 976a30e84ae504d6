"""One definition of each shared constant and helper (issue 9, "The code")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "hetopt"

#: A name bound at module level (``NAME = ...``) or a function defined (``def name(``).
DEFINITIONS = {
    "GIB": (r"^GIB\s*=", "hetopt/units.py"),
    "BACKWARD_PER_FORWARD": (r"^BACKWARD_PER_FORWARD\s*=", "hetopt/costmodel/flops.py"),
    "TRAINING_PER_FORWARD": (r"^TRAINING_PER_FORWARD\s*=", "hetopt/costmodel/flops.py"),
    "divisors": (r"^def _?divisors\(", "hetopt/planner/parallelizer.py"),
    "MEMORY_RTOL": (r"^MEMORY_RTOL\s*=", "hetopt/units.py"),
    "CLOCK_EVERY": (r"^CLOCK_EVERY\s*=", "hetopt/budget.py"),
    "MAX_GLOBAL_BATCH": (r"^MAX_GLOBAL_BATCH\s*=", "hetopt/checks.py"),
    "MAX_SEQ": (r"^MAX_SEQ\s*=", "hetopt/checks.py"),
    "check_time_limit": (r"^def check_time_limit\(", "hetopt/budget.py"),
}


def _sources() -> dict[str, str]:
    return {p.relative_to(PACKAGE.parent).as_posix(): p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py")}


@pytest.mark.parametrize("name", sorted(DEFINITIONS))
def test_defined_once(name):
    pattern, home = DEFINITIONS[name]
    where = sorted(path for path, text in _sources().items() if re.search(pattern, text, flags=re.M))
    assert where == [home]


def test_training_per_forward_is_forward_plus_backward():
    from hetopt import costmodel

    assert costmodel.TRAINING_PER_FORWARD == 1.0 + costmodel.BACKWARD_PER_FORWARD


def test_the_families_share_the_one_gib():
    from hetopt import hardware, units
    from hetopt.allocation import problem as allocation
    from hetopt.islands import problem as islands
    from hetopt.pipeline import problem as pipeline

    assert all(m.GIB is units.GIB for m in (hardware, allocation, islands, pipeline))


def test_only_the_catalog_module_locates_the_instances():
    # the instances path is hetopt.catalog.instances_dir(); nothing else derives it from __file__
    # (the catalog does, only for a checkout that was never installed)
    where = sorted(path for path, text in _sources().items() if "Path(__file__)" in text or ".parents[" in text)
    assert where == ["hetopt/catalog.py"]
