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

from .conftest import one_type_file

#: The audit's instance: layer 1's times are 1.688, 3.838, 3.838 for shares 1, 2, 3.
AUDIT = one_type_file(microbatches=8, microbatch_size=3, link_s=0.0, cross_bandwidth_gbps=1.0, gradient_gib=[0.0, 0.0],
                      gpu={"name": "G0", "count": 3, "memory_gib": 8.0, "bandwidth_gbps": 100.0},
                      tp={"degree": 1, "time_s": [[1.965, 1.688], [2.331, 3.838], [4.19, 3.838]], "static_gib": [0.0, 0.0],
                          "activation_gib": [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]})


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


def test_a_ranges_rows_are_the_scalar_sums_float_for_float_and_never_fall():
    """``range_sums`` (numpy, every share) gives ``range_sum``'s floats (what ``evaluate``
    prices), and rows that do not decrease give range sums that do not decrease, on tables of
    decimal times with ties (where prefix-sum differences fell)."""
    import numpy as np

    from hetopt.mixed.problem import range_sum, range_sums

    rng = np.random.default_rng(44)
    for _ in range(200):
        layers, shares = int(rng.integers(1, 9)), int(rng.integers(1, 6))
        rows = [np.round(rng.uniform(0.001, 9.0, layers), 3)]
        for _y in range(1, shares):
            drawn = np.maximum(rows[-1], np.round(rng.uniform(0.001, 9.0, layers), 3))
            rows.append(np.where(rng.random(layers) < 0.5, rows[-1], drawn))
        rows = tuple(tuple(float(v) for v in r) for r in rows)
        for first in range(layers):
            for end in range(first + 1, layers + 1):
                sums = range_sums(rows, first, end)
                assert sums.tolist() == [range_sum(r, first, end) for r in rows]
                assert all(b >= a for a, b in zip(sums, sums[1:]))


def test_the_audit_ranges_no_longer_fall():
    inst = loads(AUDIT, source="audit.toml")
    assert inst.gpus[0].tp[0].range_times(1, 2).tolist() == [1.688, 3.838, 3.838]
