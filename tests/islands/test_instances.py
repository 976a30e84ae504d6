"""The shipped instances: they load, the exact methods agree on each, and the generator rewrites them."""

from __future__ import annotations

import pytest

from hetopt import crosscheck, load
from hetopt.islands.generate import write
from hetopt.result import Status

from .conftest import INSTANCES

FILES = sorted(INSTANCES.glob("*.toml"))


def test_the_generator_reproduces_the_committed_files(tmp_path):
    assert len(write(tmp_path)) == len(FILES)
    written = sorted(p.name for p in tmp_path.glob("*.toml"))
    assert written == [p.name for p in FILES]
    for p in FILES:
        assert (tmp_path / p.name).read_text() == p.read_text(), p.name


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_crosscheck_agrees(path):
    inst = load(path)
    check = crosscheck(inst, time_limit=60)
    # the 512-node datacenter is beyond CP-SAT and the MILP: dp alone proves it (agree is None)
    assert check.agree is (True if check.compared >= 2 else None), check.disagreement
    proven = [r for r in check.results if r.status is Status.OPTIMAL]
    assert proven, [(r.method, r.status, r.reason) for r in check.results]
    assert "greedy" in check.heuristic_gaps and check.heuristic_gaps["greedy"] >= 0.0
