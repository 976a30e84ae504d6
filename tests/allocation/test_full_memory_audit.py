"""Memory exactly full is an answer, not bad input (issue 44, item 6): the audit's instance,
whose state (8.8e-17 GiB) and one sample fill each GPU to the byte."""

from __future__ import annotations

import pytest

from hetopt import loads, solve
from hetopt.allocation.problem import evaluate
from hetopt.cli import main
from hetopt.result import Status

AUDIT = """
problem = "allocation"
global_batch = 11
activation_gib_per_sample = 0.5
state_gib = 8.83147596003237e-17
memory_fraction = 0.8
accumulation_overhead_s = 0.002
reducescatter_s = 0.3
uneven_shard_overhead = 2.0
layers = 13

[[gpu]]
type = "G0"
count = 3
memory_gib = 1.9083834920509057
memory_base_gib = 1.0267067936407246
forward_slope_s = 0.01
forward_intercept_s = 0.0001
backward_slope_s = 0.015
backward_intercept_s = 0.00015
"""


@pytest.mark.parametrize("method", ["dp", "dp-faithful", "milp", "cpsat", "bruteforce"])
def test_the_audit_instance_is_an_answer_not_bad_input(method):
    inst = loads(AUDIT, source="audit.toml")
    r = solve(inst, method)
    # formulations/allocation.md, "Memory exactly full": evaluate accepts a state of a few bytes
    # on GPUs filled to the byte, so the state split must find it
    assert r.status is Status.OPTIMAL, r.reason
    assert evaluate(inst, r.solution).feasible
    assert sum(g.state_share for g in r.solution.gpus) == pytest.approx(1.0)


def test_the_command_line_does_not_call_it_bad_input(tmp_path, capsys):
    path = tmp_path / "full.toml"
    path.write_text(AUDIT, encoding="utf-8")
    assert main(["solve", str(path)]) == 0
    assert "no state split fits" not in capsys.readouterr().err


def test_gpus_filled_to_the_byte_share_a_state_of_a_few_bytes():
    """The split's room is evaluate's: zero room below φ·C, a tolerance's worth above it."""
    import numpy as np

    from hetopt.allocation.state import lp_partition

    used = np.array([1.5, 1.5, 1.5]) * 2**30
    shares, util = lp_partition(used, used / 0.8, used, 1e-7)
    assert shares.tolist() == pytest.approx([1 / 3] * 3) and util == pytest.approx(0.8)
    with pytest.raises(ValueError, match="no state split fits"):
        lp_partition(used, used / 0.8, used, 16.0)  # the tolerance holds 3 × 1.6 bytes, not 16


def test_a_split_that_fails_after_a_method_is_a_bug_not_bad_input():
    """build_solution is handed choices (II) and (III) admit; if no split fits them it is a
    SolverBug (exit 4), never a ValueError the command line would call bad input (exit 2)."""
    from hetopt.allocation.plan import build_solution
    from hetopt.errors import SolverBug

    inst = loads(AUDIT, source="audit.toml")
    with pytest.raises(SolverBug, match="no state split"):
        build_solution(inst, [(2, 2), (2, 2), (1, 3)])  # two samples where one fills a GPU
