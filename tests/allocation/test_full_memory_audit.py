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
    assert r.status in (Status.OPTIMAL, Status.INFEASIBLE), r.reason
    if r.status is Status.OPTIMAL:
        assert evaluate(inst, r.solution).feasible


def test_the_command_line_does_not_call_it_bad_input(tmp_path, capsys):
    path = tmp_path / "full.toml"
    path.write_text(AUDIT, encoding="utf-8")
    assert main(["solve", str(path)]) in (0, 1)
    assert "no state split fits" not in capsys.readouterr().err
