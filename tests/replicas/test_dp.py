"""The DP's pieces: capacities, the optimal split, declining, infeasibility, its bound."""

from __future__ import annotations

import pytest

from hetopt import solve
from hetopt.costmodel import RING_BASE_LATENCY_S
from hetopt.replicas.dp import solve_dp
from hetopt.replicas.limits import MAX_DP_CELLS
from hetopt.replicas.problem import Candidate, IslandShape, ReplicasInstance, evaluate
from hetopt.replicas.split import Times, optimal_split
from hetopt.result import Status

from .conftest import two_shapes


def test_caps_match_the_time_formula_at_every_value():
    inst = two_shapes(microbatches=50)
    times = Times(inst)
    for c, cand in enumerate(inst.candidates):
        for n in range(1, 51):
            tau = cand.time(n)
            assert times.caps(tau)[c] == n  # T is strictly increasing here
            assert times.caps(tau - 1e-12)[c] == n - 1


def test_caps_with_a_flat_candidate_and_rounding():
    inst = ReplicasInstance("x", 10, (IslandShape("A", 2),),
                            (Candidate("flat", (1,), 0.3, 0.0, 0.0, 1e9), Candidate("tenth", (1,), 0.1, 0.1, 0.0, 1e9)))
    times = Times(inst)
    # T(3) = 0.1 + 2·0.1 = 0.30000000000000004 > 0.3 in floating point: the cap follows the formula
    assert times.caps(0.3).tolist() == [10, 2]
    assert Candidate("t", (1,), 0.1, 0.1, 0.0, 1e9).time(3) > 0.3
    assert times.caps(0.29).tolist() == [0, 2]


def test_optimal_split_by_hand():
    inst = two_shapes()
    pairs, slowest = optimal_split(inst, [0, 1])
    # "a" 4 (2.5 s) and "ab" 2 (3 s) vs "a" 5 (3 s) and "ab" 1 (2 s): both 3 s
    assert slowest == 3.0 and sum(n for _, n in pairs) == 6
    pairs, slowest = optimal_split(inst, [0, 0])
    assert sorted(pairs) == [(0, 3), (0, 3)] and slowest == 2.0


def test_dp_optimum_by_hand():
    # one "a" alone: 3.5; two "a": 2 + 0.1 = 2.1; "a"+"ab": 3 + 0.2; "a"+"a"+"ab" (A has 2, B has 1):
    # 3 replicas of ratio ≤ 0.2: ring 2·(2/3)·0.2 = 0.2667; split 2,2,2 -> max(1.5, 1.5, 3) no:
    # best split a:3,a:2,ab:1 -> max(2, 1.5, 2) = 2 -> 2.2667. So two "a" win at 2.1 (every ring adds
    # NCCL's 8.4 µs launch latency).
    r = solve_dp(two_shapes())
    assert r.status is Status.OPTIMAL
    assert r.objective == pytest.approx(2.1 + RING_BASE_LATENCY_S, rel=1e-12)
    assert sorted((x.candidate, x.microbatches) for x in r.solution.replicas) == [(0, 3), (0, 3)]


def test_fast_network_makes_three_replicas_best():
    fast = two_shapes(candidates=(Candidate("a", (1, 0), 1.0, 0.5, 1e7, 1e10), Candidate("ab", (1, 1), 2.0, 1.0, 2e7, 1e10)))
    r = solve_dp(fast)
    assert r.status is Status.OPTIMAL and len(r.solution.replicas) == 2
    # with B free to use alone as well the third replica appears
    three = two_shapes(candidates=(Candidate("a", (1, 0), 1.0, 0.5, 1e7, 1e10), Candidate("b", (0, 1), 1.0, 0.5, 1e7, 1e10)))
    r = solve_dp(three)
    assert r.status is Status.OPTIMAL and len(r.solution.replicas) == 3
    assert evaluate(three, r.solution).objective == r.objective


def test_infeasible_when_no_candidate_fits():
    inst = two_shapes(shapes=(IslandShape("A", 0), IslandShape("B", 1)))
    for method in ("dp", "milp", "cpsat", "bruteforce", "greedy"):
        r = solve(inst, method)
        assert r.status is Status.INFEASIBLE and r.solution is None and r.reason


def test_dp_declines_a_state_space_above_its_limit():
    # a chain of candidates over neighbouring shapes joins all six in one component: 31^6 states
    shapes = tuple(IslandShape(f"S{s}", 30) for s in range(6))
    cands = tuple(Candidate(f"c{s}", tuple(int(t in (s, s + 1)) for t in range(6)), 1.0, 0.1, 1e9, 1e10)
                  for s in range(5))
    inst = ReplicasInstance("big", 100, shapes, cands)
    r = solve_dp(inst)
    assert r.status is Status.DECLINED and str(MAX_DP_CELLS) in r.reason


def test_optimal_split_matches_every_split_on_random_sets():
    import itertools
    import random

    from hetopt.replicas.synthetic import random_instance

    rng = random.Random(5)
    for seed in range(30):
        inst = random_instance(seed, shapes=2, max_count=4, candidates=4, microbatches=7)
        chosen = [rng.randrange(len(inst.candidates)) for _ in range(rng.randint(1, 3))]
        _, slowest = optimal_split(inst, chosen)
        best = min(
            max(inst.candidates[c].time(n) for c, n in zip(chosen, split))
            for split in itertools.product(range(1, 8), repeat=len(chosen)) if sum(split) == 7
        )
        assert slowest == best


def test_scalar_and_vector_capacities_agree():
    import random

    from hetopt.replicas.split import cap
    from hetopt.replicas.synthetic import random_instance

    rng = random.Random(9)
    inst = random_instance(3, candidates=8, microbatches=1000)
    times = Times(inst)
    for _ in range(500):
        tau = rng.uniform(0.0, 400.0)
        vector = times.caps(tau).tolist()
        scalar = [cap(c.fill_s, c.per_microbatch_s, 1000, tau) for c in inst.candidates]
        assert vector == scalar


def test_components_split_the_state_space_and_agree_with_bruteforce():
    """Candidates on disjoint shapes form separate knapsacks joined over R."""
    from hetopt.replicas.bruteforce import solve_bruteforce
    from hetopt.replicas.dp import components

    shapes = tuple(IslandShape(f"S{s}", 2) for s in range(4))
    cands = (
        Candidate("s0", (1, 0, 0, 0), 1.0, 0.3, 1e8, 1e10),
        Candidate("s01", (1, 1, 0, 0), 0.8, 0.2, 3e8, 1e10),
        Candidate("s2", (0, 0, 1, 0), 1.5, 0.4, 2e8, 1e10),
        Candidate("s3", (0, 0, 0, 1), 1.2, 0.35, 1e8, 1e10),
        Candidate("s3b", (0, 0, 0, 2), 0.9, 0.2, 2e8, 1e10),
    )
    inst = ReplicasInstance("parts", 9, shapes, cands, hop_latency_s=0.0)
    assert components(inst, list(range(5))) == [[0, 1], [2], [3, 4]]
    r, truth = solve_dp(inst), solve_bruteforce(inst)
    assert r.stats["components"] == 3 and r.status is Status.OPTIMAL
    assert r.objective == pytest.approx(truth.objective, rel=1e-12)
    assert len(r.solution.replicas) >= 3  # the optimum spans several components
