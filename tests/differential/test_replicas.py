"""Differential test of the replicas family (issue 29): 1,000 seeded random instances, every
exact method against an optimum and a checker written here from formulations/replicas.md,
not from the family's code (no evaluate, no split, no ring helper).

The formulation: choose a multiset M of candidates with Σ_{c∈M} u_{c,s} ≤ a_s for every shape
s, give each replica n_r ≥ 1 micro-batches with Σ n_r = N, and minimize
max_r (f_r + (n_r − 1)·p_r) + max_r ring(g_r, R, w_r), R = |M|, where
ring(g, R, w) = 2(R − 1)/R · g/w + RING_BASE + 2(R − 1)·α_hop for R ≥ 2 and 0 for R = 1.
"""

from __future__ import annotations

import itertools
import math

import pytest

from hetopt import solve
from hetopt.costmodel import RING_BASE_LATENCY_S  # a physical constant the formulation names
from hetopt.replicas import tolerance
from hetopt.replicas.synthetic import random_instance
from hetopt.result import Status

SEEDS = range(1000)
CHUNKS = 10
#: Every exact method, the models in both formulations: the count model (copies counted per
#: candidate, the default) and the slot model (one slot per copy), so that the aggregated
#: formulation is checked against the per-copy one on every seed (equal optima).
METHODS = (("dp", {}), ("milp", {}), ("milp", {"formulation": "slots"}), ("cpsat", {}),
           ("cpsat", {"formulation": "slots"}))


def ring(g: float, replicas: int, w: float, hop: float) -> float:
    if replicas <= 1:
        return 0.0
    # the launch latency is paid at any hop latency (issue 44: the objective is continuous at 0)
    return 2.0 * (replicas - 1) / replicas * g / w + RING_BASE_LATENCY_S + 2 * (replicas - 1) * hop


def objective(inst, replicas: list[tuple[int, int]]) -> float:
    """The formulation's iteration time of (candidate, micro-batches) per replica; inf if infeasible."""
    if not replicas or sum(n for _, n in replicas) != inst.microbatches or any(n < 1 for _, n in replicas):
        return math.inf
    for s, shape in enumerate(inst.shapes):
        if sum(inst.candidates[c].uses[s] for c, _ in replicas) > shape.count:
            return math.inf
    cands = inst.candidates
    slowest = max(cands[c].fill_s + (n - 1) * cands[c].per_microbatch_s for c, n in replicas)
    sync = max(ring(cands[c].gradient_bytes, len(replicas), cands[c].bandwidth, inst.hop_latency_s) for c, _ in replicas)
    return slowest + sync


def best_split(inst, members: tuple[int, ...]) -> float:
    """min over splits of max_r T_r(n_r): every composition of N into len(members) parts ≥ 1."""
    n, k = inst.microbatches, len(members)
    best = math.inf
    for cuts in itertools.combinations(range(1, n), k - 1):
        parts = [b - a for a, b in zip((0, *cuts), (*cuts, n))]
        c = inst.candidates
        best = min(best, max(c[m].fill_s + (p - 1) * c[m].per_microbatch_s for m, p in zip(members, parts)))
    return best


def brute_optimum(inst) -> float:
    """The least objective over every multiset (size ≤ N) that fits the islands, inf if none."""
    cands, n = inst.candidates, inst.microbatches
    best = math.inf
    for size in range(1, n + 1):
        fits_any = False
        for members in itertools.combinations_with_replacement(range(len(cands)), size):
            if any(sum(cands[c].uses[s] for c in members) > sh.count for s, sh in enumerate(inst.shapes)):
                continue
            fits_any = True
            sync = max(ring(cands[c].gradient_bytes, size, cands[c].bandwidth, inst.hop_latency_s) for c in members)
            if sync >= best:
                continue
            best = min(best, best_split(inst, members) + sync)
        if not fits_any:
            break  # a larger multiset contains a smaller one that already did not fit
    return best


def instance(seed: int):
    shapes, count, cands, n = [(2, 3, 4, 6), (3, 2, 5, 7), (1, 4, 3, 8), (2, 2, 6, 5)][seed % 4]
    return random_instance(10_000 + seed, shapes=shapes, max_count=count, candidates=cands, microbatches=n)


#: Seconds per method run, a hang guard: stopped, an answer must still be honest. (CP-SAT's
#: slot model did not prove seed 673 within minutes until its time took only its slots'
#: values, issue 44; every method now proves every seed.)
LIMIT_S = 10.0
#: Most answers per chunk of 100 seeds allowed to stop unproven (FEASIBLE); more is a regression.
MAX_UNPROVEN = 0


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_exact_methods_match_an_independent_optimum(chunk):
    unproven = []
    for seed in SEEDS[chunk::CHUNKS]:
        inst = instance(seed)
        truth = brute_optimum(inst)
        rtol, atol = tolerance(inst)
        optima = {}
        for method, options in METHODS:
            r = solve(inst, method, time_limit=LIMIT_S, **options)
            method = f"{method}/{options.get('formulation', 'default')}"
            if math.isinf(truth):
                assert r.status is Status.INFEASIBLE, (seed, method, r.status, r.reason)
                continue
            assert r.status in (Status.OPTIMAL, Status.FEASIBLE), (seed, method, r.status, r.reason)
            plan = [(rep.candidate, rep.microbatches) for rep in r.solution.replicas]
            mine = objective(inst, plan)
            assert math.isfinite(mine), (seed, method, plan)
            # the plan is worth what the method says
            assert math.isclose(mine, r.objective, rel_tol=rtol, abs_tol=atol), (seed, method, mine, r.objective)
            if r.status is Status.OPTIMAL:  # and nothing is better
                assert math.isclose(mine, truth, rel_tol=rtol, abs_tol=atol), (seed, method, mine, truth)
                optima[method] = r.objective
            else:  # stopped: its bound and its plan must bracket the optimum
                unproven.append((seed, method))
                assert mine >= truth - atol - rtol * truth, (seed, method, mine, truth)
                assert r.bound is None or r.bound <= truth + atol + rtol * truth, (seed, method, r.bound, truth)
        # the count and slot formulations prove the same optimum (copies counted or named)
        for model in ("milp", "cpsat"):
            if f"{model}/default" in optima and f"{model}/slots" in optima:
                assert math.isclose(optima[f"{model}/default"], optima[f"{model}/slots"], rel_tol=rtol, abs_tol=atol)
    assert len(unproven) <= MAX_UNPROVEN, unproven
