"""Differential suites (``pytest -m slow``): each family's exact methods against a brute force
and a checker written from ``formulations/<family>.md``, on 1,000 seeded instances."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from pathlib import Path

from hetopt import solve
from hetopt.result import Status


def seeded_generator(family: str):
    """``tests/<family>/conftest.py``'s seeded ``random_instance`` (loaded by path: tests/ is no package)."""
    path = Path(__file__).resolve().parents[1] / family / "conftest.py"
    spec = importlib.util.spec_from_file_location(f"{family}_instances", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.random_instance


def assert_methods_agree(inst, truth: float, price: Callable, methods: tuple[str | tuple[str, dict], ...],
                         tolerance: tuple[float, float], seed: int) -> list[float | None]:
    """Every method in ``methods`` (a name, or a name and its options) proves ``truth`` on
    ``inst`` (INFEASIBLE when it is inf), and the plan it returns costs what it reports under
    ``price``, the suite's own checker (inf when a rule of the formulation breaks). Returns
    their objectives (None where INFEASIBLE)."""
    rtol, atol = tolerance
    found: list[float | None] = []
    for method in methods:
        name, options = (method, {}) if isinstance(method, str) else method
        r = solve(inst, name, time_limit=30, **options)
        if math.isinf(truth):
            assert r.status is Status.INFEASIBLE, (seed, method, r.status, r.reason)
            found.append(None)
            continue
        assert r.status is Status.OPTIMAL, (seed, method, r.status, r.reason)
        mine = price(r.solution)
        assert math.isfinite(mine), (seed, method)
        assert math.isclose(mine, r.objective, rel_tol=rtol, abs_tol=atol), (seed, method, mine, r.objective)
        assert math.isclose(mine, truth, rel_tol=rtol, abs_tol=atol), (seed, method, mine, truth)
        found.append(r.objective)
    return found
