"""Per-range tables that must not wobble (issue 44, item 1).

A range's time was the difference of two prefix sums: 2.331 + 3.838 − 2.331 =
3.8380000000000005 while the next share's row gives 3.838, so the range's table went down as
the share grew, the vectorised and scalar searches of ``mixed/stages.py`` disagreed, and an
assertion fired (exit 4) on a valid instance.
"""

from __future__ import annotations

from hetopt import crosscheck, loads, solve
from hetopt.cli import main
from hetopt.result import Status, objectives_agree

#: The audit's instance: layer 1's times are 1.688, 3.838, 3.838 for shares 1, 2, 3.
AUDIT = """
problem = "mixed"
microbatches = 8
microbatch_size = 3
layers = 2
link_s = 0.0
cross_bandwidth_gbps = 1.0
gradient_gib = [0.0, 0.0]

[[gpu]]
name = "G0"
count = 3
memory_gib = 8.0
bandwidth_gbps = 100.0

[[gpu.tp]]
degree = 1
time_s = [[1.965, 1.688], [2.331, 3.838], [4.19, 3.838]]
static_gib = [0.0, 0.0]
activation_gib = [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]
"""


def test_the_audit_instance_is_optimal_and_dp_equals_milp():
    inst = loads(AUDIT, source="audit.toml")
    dp, milp, brute = (solve(inst, m) for m in ("dp", "milp", "bruteforce"))
    for r in (dp, milp, brute):
        assert r.status is Status.OPTIMAL, (r.method, r.reason)
    assert objectives_agree(dp.objective, milp.objective) and objectives_agree(dp.objective, brute.objective)


def test_crosscheck_reports_dp_beside_milp(tmp_path, capsys):
    inst = loads(AUDIT, source="audit.toml")
    check = crosscheck(inst, ["dp", "milp"])
    assert check.agree and all(r.status is Status.OPTIMAL for r in check.results)
    path = tmp_path / "audit.toml"
    path.write_text(AUDIT, encoding="utf-8")
    assert main(["crosscheck", str(path), "--methods", "dp,milp"]) == 0
    assert "internal error" not in capsys.readouterr().err
