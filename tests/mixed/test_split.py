"""The exact best split against every split, on random layouts."""

from __future__ import annotations

import itertools
import math

import pytest

from hetopt.mixed.problem import member_fits, member_time_s
from hetopt.mixed.stages import best_split, layouts
from hetopt.mixed.synthetic import random_instance


def _every_split(inst, first, end, layout, flight):
    b = inst.microbatch_size
    best = math.inf
    for shares in itertools.product(*(range(1, b + 1) for _ in layout)):
        if sum(m[3] * y for m, y in zip(layout, shares)) != b:
            continue
        if not all(member_fits(inst, first, end, m[0], m[1], y, flight) for m, y in zip(layout, shares)):
            continue
        best = min(best, max(member_time_s(inst, first, end, m[0], m[1], y) for m, y in zip(layout, shares)))
    return best


@pytest.mark.parametrize("seed", range(30))
def test_best_split_is_the_least_slowest_member(seed):
    inst = random_instance(seed, types=3, microbatch_size=5, max_count=3)
    checked = 0
    for layout in layouts(inst):
        for first, end, flight in ((0, 1, 1), (0, inst.layers, 1), (1, inst.layers, 2)):
            truth = _every_split(inst, first, end, layout, flight)
            got = best_split(inst, first, end, layout, flight)
            if truth == math.inf:
                assert got is None
                continue
            checked += 1
            assert got is not None and got[0] == truth
            # the shares returned achieve it and add up to b
            assert sum(m[3] * y for m, y in zip(layout, got[1])) == inst.microbatch_size
            assert max(member_time_s(inst, first, end, m[0], m[1], y) for m, y in zip(layout, got[1])) == truth
    assert checked > 0 or sum(g.count for g in inst.gpus) <= 1
