"""The shipped instances: the exact methods agree on each (the datacenter's models run with a limit)."""

from __future__ import annotations

import pytest

from hetopt import crosscheck, load
from hetopt.result import Status

from .conftest import INSTANCES

SMALL = ["tiny", "tiny-infeasible", "random-1", "random-2", "random-3"]


@pytest.mark.parametrize("name", SMALL)
def test_dp_milp_cpsat_agree(name):
    check = crosscheck(load(INSTANCES / f"{name}.toml"), ["dp", "milp", "cpsat", "greedy"])
    assert check.agree is True, check.disagreement
    assert check.compared == 3


def test_datacenter_models_never_contradict_the_dp():
    check = crosscheck(load(INSTANCES / "datacenter-512-gpt3-175b-b1536.toml"), ["dp", "milp", "cpsat"], time_limit=3)
    assert check.agree is not False, check.disagreement
    assert check.results[0].status is Status.OPTIMAL
