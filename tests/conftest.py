"""Fixtures every family's tests share."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

import hetopt
from hetopt.result import Status


@pytest.fixture
def matches_bruteforce() -> Callable:
    """``matches_bruteforce(instance, methods, tol=lambda method: 0.0, rel_tol=1e-9)``: every
    method gives bruteforce's status and optimum (within ``tol(method)`` absolute), a bound
    not above its objective, a reason when infeasible, and a plan the family's ``evaluate``
    prices at exactly its objective."""

    def check(instance, methods, tol: Callable[[str], float] = lambda method: 0.0, rel_tol: float = 1e-9) -> None:
        oracle = hetopt.solve(instance, "bruteforce")
        assert oracle.status in (Status.OPTIMAL, Status.INFEASIBLE)
        for method in methods:
            result = hetopt.solve(instance, method)
            assert result.status is oracle.status, (method, result.reason, oracle.reason)
            if oracle.status is Status.INFEASIBLE:
                assert result.reason, method
                continue
            assert math.isclose(result.objective, oracle.objective, rel_tol=rel_tol, abs_tol=tol(method)), method
            assert result.bound <= result.objective + 1e-12
            # every returned plan is re-checked: evaluate agrees with the reported objective
            ev = hetopt.family(instance).evaluate(instance, result.solution)
            assert ev.feasible and ev.objective == result.objective

    return check


@pytest.fixture
def solve_refuses(tmp_path, capsys) -> Callable:
    """``solve_refuses(text, key)``: ``hetopt solve`` on a file ``bad.toml`` of ``text`` exits 2
    with one line on stderr that names the file and ``key``."""
    from hetopt.cli import main

    def check(text: str, key: str) -> None:
        path = tmp_path / "bad.toml"
        path.write_text(text, encoding="utf-8")
        assert main(["solve", str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and key in err[0] and str(path) in err[0], err

    return check


def refused(good: str, edit: tuple[str, str], key: str) -> str:
    """The reader's one-line message for the file ``good`` with ``edit`` (old, new) made once,
    which must change it; the message names the file (``bad.toml``) and ``key`` first."""
    from hetopt import loads
    from hetopt.errors import InputError

    text = good.replace(*edit, 1)
    assert text != good, edit
    with pytest.raises(InputError) as err:
        loads(text, source="bad.toml")
    message = str(err.value)
    assert message.startswith(f"bad.toml: {key}: ") and "\n" not in message, message
    return message


@pytest.fixture
def reader_refuses() -> Callable:
    """:func:`refused`, for the families' reader tests."""
    return refused
