"""Differential test of the mixed family (issue 44): 1,000 seeded random instances, every exact
method against an optimum and a checker written here from formulations/mixed.md, not from the
family's code (no evaluate, no best split, no stage pricing, no ring helper).

Half of the instances have tables in milliseconds (and thousandths of a GiB) that stay flat
across shares on about half of the layers (``random_instance(plateaus=True)``): a layer
range's float sums then tie across shares to the last bit, the class of input that broke the
dp when its ranges were differences of prefix sums (issue 44, item 1). This suite sums a range
with ``math.fsum`` (correctly rounded), so it shares no arithmetic with the family either.

The formulation: cut layers 0..L−1 into S contiguous stages; stage s holds per GPU type g
nothing or (t, r, n): r replicas of t GPUs, r·t a multiple of the unit u_g, r ≤ n, Σ_g n = b,
spread evenly (shares ⌊n/r⌋ and ⌈n/r⌉ ≤ Y); Σ_s r·t ≤ N_g; every share fits
m + f_s·a ≤ C·(1 + 10⁻⁹) with f_s = min(S − s, M); c_s = max_g τ(⌈n/r⌉),
σ_s = 2(R − 1)/R · max_g B·min(1, u/t)/w'_g (w' = w_g for one type, else min(w_g, w_×)),
ε_s = max(σ − ω·c, σ/K) (0 when σ = 0), t_s = c_s + ε_s/M and
T = Σ t_s + (S − 1)·λ + (M − 1)·max(max t_s, [S > 1]·λ).
"""

from __future__ import annotations

import itertools
import math

import pytest

from hetopt import solve
from hetopt.mixed import FAMILY
from hetopt.mixed.synthetic import random_instance
from hetopt.result import Status

from . import assert_methods_agree

SEEDS = range(1000)
CHUNKS = 10
METHODS = ("dp", "milp")
#: (layers, types, most GPUs per type, b): small enough for the brute force below.
SIZES = [(3, 2, 3, 3), (2, 2, 2, 4), (4, 1, 3, 3), (2, 3, 2, 2), (3, 2, 2, 2), (2, 1, 3, 3)]
#: the formulation's memory tolerance (constraint 3)
MEMORY_RTOL = 1e-9


def instance(seed: int):
    layers, types, count, b = SIZES[seed % len(SIZES)]
    return random_instance(50_000 + seed, layers=layers, types=types, max_count=count, microbatch_size=b,
                           variety=seed % 4 >= 2, plateaus=seed % 2 == 1)


def _sum(values, first: int, end: int) -> float:
    return math.fsum(values[first:end])


def _fits(inst, grp, tab, first: int, end: int, share: int, flight: int) -> bool:
    if not 1 <= share <= len(tab.time_s):
        return False
    need = _sum(tab.static_bytes, first, end) + flight * _sum(tab.activation_bytes[share - 1], first, end)
    return need <= grp.memory_bytes * (1 + MEMORY_RTOL)


def stage_time(inst, first: int, end: int, flight: int, members) -> float:
    """t_s of members ((g, t, r, n) per type used), or inf when a rule of one stage breaks."""
    if not members or sum(n for *_x, n in members) != inst.microbatch_size:
        return math.inf
    compute = 0.0
    for g, t, r, n in members:
        grp = inst.gpus[g]
        tab = next((x for x in grp.tp if x.degree == t), None)
        if tab is None or r < 1 or not r <= n or (r * t) % grp.unit:
            return math.inf
        shares = {n // r, -(-n // r)}
        if not all(_fits(inst, grp, tab, first, end, y, flight) for y in shares):
            return math.inf
        compute = max(compute, _sum(tab.time_s[-(-n // r) - 1], first, end))
    replicas = sum(r for _g, _t, r, _n in members)
    sync = 0.0
    if replicas > 1:
        nbytes = _sum(inst.gradient_bytes, first, end)
        one_type = len(members) == 1
        sync = 2 * (replicas - 1) / replicas * max(
            nbytes * min(1.0, inst.gpus[g].unit / t)
            / (inst.gpus[g].bandwidth if one_type else min(inst.gpus[g].bandwidth, inst.cross_bandwidth))
            for g, t, _r, _n in members)
    buckets = sum(inst.buckets[first:end]) if inst.buckets else end - first
    exposed = max(sync - inst.overlap * compute, sync / buckets) if sync > 0 else 0.0
    return compute + exposed / inst.microbatches


def cost(inst, solution) -> float:
    """T of a MixedSolution by the formulation; inf when a rule breaks."""
    stages = solution.stages
    if not stages or stages[0].first != 0 or stages[-1].end != inst.layers:
        return math.inf
    if any(a.end != b.first for a, b in zip(stages, stages[1:])) or any(st.first >= st.end for st in stages):
        return math.inf
    S, M = len(stages), inst.microbatches
    used = [0] * inst.num_types
    times = []
    for s, st in enumerate(stages):
        if len({m.gpu for m in st.members}) != len(st.members):
            return math.inf
        members = [(m.gpu, m.degree, m.replicas, m.samples) for m in st.members]
        times.append(stage_time(inst, st.first, st.end, min(S - s, M), members))
        for g, t, r, _n in members:
            used[g] += r * t
    if any(u > grp.count for u, grp in zip(used, inst.gpus)):
        return math.inf
    return closed_form(inst, times)


def closed_form(inst, times: list[float]) -> float:
    link = inst.link_s if len(times) > 1 else 0.0
    return sum(times) + (len(times) - 1) * link + (inst.microbatches - 1) * max(max(times), link)


def _member_sets(inst):
    """Every stage's member set: per type None or (g, t, r, n), r·t ≤ N_g, r ≤ n ≤ b, Σ n = b."""
    b = inst.microbatch_size
    per_type = []
    for g, grp in enumerate(inst.gpus):
        options = [None]
        for tab in grp.tp:
            for r in range(1, grp.count // tab.degree + 1):
                options += [(g, tab.degree, r, n) for n in range(r, b + 1)]
        per_type.append(options)
    return [tuple(m for m in pick if m is not None) for pick in itertools.product(*per_type)
            if sum(m[3] for m in pick if m is not None) == b]


def brute_optimum(inst) -> float:
    """Least T over every cut and every member set per stage (GPU counts checked per plan)."""
    sets = _member_sets(inst)
    L, M = inst.layers, inst.microbatches
    best = math.inf
    for bits in itertools.product((False, True), repeat=L - 1):
        ends = [l + 1 for l, cut in enumerate(bits) if cut] + [L]
        ranges = list(zip([0] + ends[:-1], ends))
        S = len(ranges)
        # per stage: (GPUs per type, t_s) of each member set that passes the stage's rules
        options = []
        for s, (a, e) in enumerate(ranges):
            here = []
            for members in sets:
                t = stage_time(inst, a, e, min(S - s, M), members)
                if t < math.inf:
                    use = [0] * inst.num_types
                    for g, deg, r, _n in members:
                        use[g] += r * deg
                    here.append((use, t))
            options.append(here)
        for combo in itertools.product(*options):
            if all(sum(o[0][g] for o in combo) <= inst.gpus[g].count for g in range(inst.num_types)):
                best = min(best, closed_form(inst, [o[1] for o in combo]))
    return best


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_exact_methods_match_an_independent_optimum(chunk):
    for seed in SEEDS[chunk::CHUNKS]:
        inst = instance(seed)
        assert_methods_agree(inst, brute_optimum(inst), lambda sol: cost(inst, sol), METHODS, FAMILY.tolerance(inst), seed)


def test_the_suite_holds_both_outcomes_and_mixed_stages():
    """Over the first 60 seeds: some optimum infeasible, some with a stage of two types, some
    with several stages (else the suite would test less than it says)."""
    infeasible = mixed = multi = 0
    for seed in range(60):
        inst = instance(seed)
        r = solve(inst, "dp")
        infeasible += r.status is Status.INFEASIBLE
        if r.solution is not None:
            mixed += any(len(st.members) > 1 for st in r.solution.stages)
            multi += len(r.solution.stages) > 1
    assert infeasible >= 3 and mixed >= 3 and multi >= 3, (infeasible, mixed, multi)
