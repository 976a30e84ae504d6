"""The exact best split against every even split and against every per-replica split, on random layouts."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest

from hetopt.mixed.bruteforce import _share_multisets
from hetopt.mixed.problem import Member, member_fits, member_time_s
from hetopt.mixed.stages import _range_tables, best_split, layouts, stage_options
from hetopt.mixed.synthetic import random_instance

RANGES = ((0, 1, 1), (0, 3, 1), (1, 3, 2))


def _slowest(inst, first, end, g, k, shares, flight):
    """The slowest of the replicas holding ``shares``; inf when one does not fit."""
    if not all(member_fits(inst, first, end, g, k, y, flight) for y in shares):
        return math.inf
    return max(member_time_s(inst, first, end, g, k, y) for y in shares)


def _every_even_split(inst, first, end, layout, flight):
    """min over samples n_g (r_g ≤ n_g, Σ = b) of the slowest replica, each type spread evenly."""
    b, best = inst.microbatch_size, math.inf
    for samples in itertools.product(*(range(m[3], b + 1) for m in layout)):
        if sum(samples) == b:
            best = min(best, max(_slowest(inst, first, end, g, k, Member(g, t, r, n).shares, flight)
                                 for (g, k, t, r), n in zip(layout, samples)))
    return best


def _every_per_replica_split(inst, first, end, layout, flight):
    """min over every share of every replica (no even spreading) of the slowest replica."""
    b, best = inst.microbatch_size, math.inf
    per_type = [[(n, _slowest(inst, first, end, g, k, ys, flight)) for n in range(r, b + 1)
                 for ys in _share_multisets(r, n, b)] for g, k, t, r in layout]
    for combo in itertools.product(*per_type):
        if sum(n for n, _ in combo) == b:
            best = min(best, max(c for _, c in combo))
    return best


@pytest.mark.parametrize("seed", range(30))
def test_best_split_is_the_least_slowest_member(seed):
    inst = random_instance(seed, types=3, microbatch_size=5, max_count=3)
    checked = 0
    for layout in layouts(inst):
        for first, end, flight in RANGES:
            truth = _every_even_split(inst, first, end, layout, flight)
            got = best_split(inst, first, end, layout, flight)
            if truth == math.inf:
                assert got is None
                continue
            checked += 1
            assert got is not None and got[0] == truth
            # the samples returned achieve it and add up to b
            assert sum(got[1]) == inst.microbatch_size and all(n >= m[3] for m, n in zip(layout, got[1]))
            assert max(_slowest(inst, first, end, g, k, Member(g, t, r, n).shares, flight)
                       for (g, k, t, r), n in zip(layout, got[1])) == truth
    assert checked > 0 or sum(g.count for g in inst.gpus) <= 1


@pytest.mark.parametrize("seed", range(30))
def test_even_spreading_loses_nothing_against_per_replica_shares(seed):
    """The claim of formulations/mixed.md ("Why counts suffice") on the split: with tables that do
    not decrease in y, the best even split equals the best split where every replica has its own share."""
    inst = random_instance(seed, types=2, microbatch_size=6, max_count=4)
    checked = 0
    for layout in layouts(inst):
        if max(m[3] for m in layout) < 2:
            continue  # one replica per type: nothing to spread
        for first, end, flight in RANGES:
            truth = _every_per_replica_split(inst, first, end, layout, flight)
            got = best_split(inst, first, end, layout, flight)
            assert (got is None) == (truth == math.inf)
            if got is not None:
                checked += 1
                assert got[0] == truth
    assert checked > 0 or sum(g.count for g in inst.gpus) <= 2


def test_uneven_spreading_is_needed():
    """3 samples on 2 replicas of one type: only an uneven split (2 + 1) exists, so the even-count
    model must allow shares that differ by one (a share per type would find no split)."""
    inst = random_instance(1, types=1, microbatch_size=3, max_count=4, microbatches=1)
    inst = dataclasses.replace(inst, gpus=(dataclasses.replace(inst.gpus[0], count=2, memory_bytes=1e12,
                                                               tp=inst.gpus[0].tp[:1]),))
    got = best_split(inst, 0, 1, ((0, 0, inst.gpus[0].tp[0].degree, 2),), 1)
    assert got is not None and got[1] == (3,) and Member(0, 1, 2, 3).shares == (1, 2)
    assert got[0] == member_time_s(inst, 0, 1, 0, 0, 2)


@pytest.mark.parametrize("seed", range(10))
def test_stage_options_price_every_layout_with_its_best_split(seed):
    """The numpy pricing of ``stage_options`` against ``best_split`` one layout at a time: for every
    units vector the fastest layout's time, and nothing dominated kept."""
    from hetopt.mixed.problem import stage_time_s

    inst = random_instance(seed, types=2, microbatch_size=4, max_count=4)
    for first, end, flight in RANGES:
        best = {}
        for layout in layouts(inst):
            split = best_split(inst, first, end, layout, flight)
            if split is None:
                continue
            t = stage_time_s(inst, first, end, [(g, d, r) for g, _k, d, r in layout], split[0])
            use = [0] * inst.num_types
            for g, _k, d, r in layout:
                use[g] = r * d // inst.gpus[g].unit
            best[tuple(use)] = min(best.get(tuple(use), math.inf), t)
        got = {use: t for use, t, _m in stage_options(inst, first, end, flight)}
        for use, t in got.items():
            assert t == pytest.approx(best[use], rel=1e-12)
        for use, t in best.items():  # every layout left out is matched by a kept one
            assert any(all(a <= b for a, b in zip(u, use)) and gt <= t * (1 + 1e-12) for u, gt in got.items())
    assert _range_tables(inst, 0, 1, 1)
