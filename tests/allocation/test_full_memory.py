"""Allocation at exactly full memory (issue 29): (III) holds with its rounding slack, and the
state split must then still be a split: finite shares summing to 1 within every GPU's limit."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest

from hetopt import solve
from hetopt.allocation.problem import AllocationSolution, evaluate
from hetopt.allocation.state import lp_partition
from hetopt.errors import InputError
from hetopt.result import Status

from .conftest import random_instance


def full(seed: int, over: float):
    """``random_instance(seed)`` with one sample per GPU and the training state filling the rest
    of memory exactly, or ``over`` samples of activations beyond it (inside (III)'s slack)."""
    inst = random_instance(seed)
    n = inst.num_gpus
    capacity = sum(g.count * inst.memory_fraction * g.memory_bytes for g in inst.groups)
    base = sum(g.count * g.memory_base_bytes for g in inst.groups)
    state = capacity - base - n * inst.activation_bytes_per_sample * (1 - over)
    return dataclasses.replace(inst, state_bytes=state, global_batch=n, name=f"full-{seed}")


# seeds whose split divided 0 by 0 before: NaN shares that evaluate accepted
@pytest.mark.parametrize(("seed", "over"), [(4, 0.0), (7, 0.0), (10, 0.0), (11, 5e-10), (14, 5e-10), (11, 9e-10)])
@pytest.mark.parametrize("method", ["dp", "milp", "cpsat"])
def test_a_cluster_filled_exactly_gets_a_finite_split(seed, over, method):
    inst = full(seed, over)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 0/0 on the way
        r = solve(inst, method)
    assert r.status is Status.OPTIMAL, r.reason
    shares = [g.state_share for g in r.solution.gpus]
    assert all(math.isfinite(x) for x in shares) and math.isclose(sum(shares), 1.0, rel_tol=1e-9)
    assert evaluate(inst, r.solution).feasible


def test_limits_a_hair_under_the_state_fill_every_gpu_to_its_limit():
    used = np.array([2.0, 2.0])
    usable = np.array([6.0, 6.0])
    shares, u = lp_partition(used, np.array([8.0, 8.0]), usable, 8.0 * (1 + 1e-12))
    assert shares.tolist() == [0.5, 0.5] and u == pytest.approx(0.75)
    with pytest.raises(ValueError, match="no state split fits"):
        lp_partition(used, np.array([8.0, 8.0]), usable, 9.0)


def test_evaluate_rejects_a_share_that_is_not_a_number():
    inst = full(4, 0.0)
    r = solve(inst, "dp")
    gpus = list(r.solution.gpus)
    gpus[0] = dataclasses.replace(gpus[0], state_share=float("nan"))
    ev = evaluate(inst, dataclasses.replace(r.solution, gpus=tuple(gpus)))
    assert not ev.feasible and any("not a number" in v for v in ev.violations)


def test_dp_checks_its_options_by_name():
    inst = full(4, 0.0)
    with pytest.raises(InputError, match="bracket: must be True or False"):
        solve(inst, "dp", bracket="no")
    with pytest.raises(InputError, match="orientation: must be one of forward, deficit"):
        solve(inst, "dp", orientation="sideways")
