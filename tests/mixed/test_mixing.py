"""A stage whose replicas span two types beats every plan whose stages use one type each."""

from __future__ import annotations

import pytest

from hetopt import solve
from hetopt.mixed.bruteforce import plans
from hetopt.mixed.problem import GIB, GpuGroup, MixedInstance, TpTables, evaluate


def _instance() -> MixedInstance:
    """One A and one B, two layers, b = 2, M = 4, no gradients, no hand-over.

    A: 0.5 s per layer for one sample, 1.0 for two; B: 0.6 and 1.2. One stage of 1×A y1 +
    1×B y1 runs at max(1.0, 1.2) = 1.2 s: T = 4 · 1.2 = 4.8. Without mixing the best is
    the pipeline A (layer 0, y2: 1.0 s) → B (layer 1, y2: 1.2 s): T = 2.2 + 3 · 1.2 = 5.8.
    """
    def group(name, per_sample):
        return GpuGroup(name, 1, 10 * GIB, GIB, (TpTables(1, ((per_sample,) * 2, (2 * per_sample,) * 2), (GIB, GIB),
                                                            ((GIB, GIB), (GIB, GIB))),))

    return MixedInstance("mixing", 4, 2, 2, (0.0, 0.0), 0.0, GIB, (group("A", 0.5), group("B", 0.6)))


def test_single_type_plans_are_slower():
    inst = _instance()
    single = [evaluate(inst, p) for p in plans(inst) if all(len(st.members) == 1 for st in p.stages)]
    assert min(ev.objective for ev in single if ev.feasible) == pytest.approx(5.8)


@pytest.mark.parametrize("method", ["dp", "milp", "bruteforce"])
def test_every_method_mixes(method):
    r = solve(_instance(), method)
    assert r.objective == pytest.approx(4.8)
    (stage,) = r.solution.stages
    assert {m.gpu for m in stage.members} == {0, 1}
