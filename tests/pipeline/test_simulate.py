"""The 1F1B simulator: the (S + M − 1)·t identity, schedule sanity, and where the formula is off."""

from __future__ import annotations

import numpy as np
import pytest

from hetopt.pipeline.simulate import one_f_one_b_order, simulate_1f1b


@pytest.mark.parametrize("stages", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("microbatches", [1, 2, 4, 7, 16])
@pytest.mark.parametrize("fwd,bwd", [(1.0, 2.0), (0.5, 0.5), (0.25, 1.0)])
def test_uniform_pipelines_with_free_links_take_s_plus_m_minus_1_times_t(stages, microbatches, fwd, bwd):
    sim = simulate_1f1b([fwd] * stages, [bwd] * stages, [0.0] * stages, microbatches)
    assert sim.makespan_s == (stages + microbatches - 1) * (fwd + bwd)
    # every stage is idle exactly the pipeline bubble (S − 1)·t
    assert all(idle == (stages - 1) * (fwd + bwd) for idle in sim.idle_s)


def test_orders_hold_every_operation_once_and_respect_1f1b_in_flight():
    for S, M in ((4, 2), (4, 8), (1, 3)):
        for s in range(S):
            order = one_f_one_b_order(s, S, M)
            assert sorted(order) == sorted([("F", m) for m in range(M)] + [("B", m) for m in range(M)])
            live = peak = 0
            for kind, _ in order:
                live += 1 if kind == "F" else -1
                peak = max(peak, live)
            assert peak == min(S - s, M)  # the in-flight count the memory rule uses


def test_makespan_lower_bounds_hold_on_random_pipelines():
    rng = np.random.default_rng(0)
    for _ in range(40):
        S, M = int(rng.integers(1, 7)), int(rng.integers(1, 12))
        f, b = rng.uniform(0.1, 1.0, S), rng.uniform(0.1, 2.0, S)
        links = rng.choice([0.0, 0.3], S)
        sim = simulate_1f1b(f.tolist(), b.tolist(), links.tolist(), M)
        t = f + b
        # a stage is busy M·t_s; one micro-batch must cross every stage and link both ways
        assert sim.makespan_s >= M * t.max() - 1e-9
        assert sim.makespan_s >= t.sum() + links[:-1].sum() - 1e-9
        assert min(sim.idle_s) >= -1e-9


def _analytic(f, b, links, M):
    t = [x + y for x, y in zip(f, b)]
    return sum(t) + sum(links) + (M - 1) * max(max(t), max(links, default=0.0))


def test_link_latency_makes_the_formula_underestimate():
    # uniform stages, one link of round trip c between stages 1 and 2: the steady 1F1B
    # state waits for gradients to come back over it, beyond what the formula charges
    f, b, M = [1.0] * 4, [2.0] * 4, 16
    links = [0.0, 1.0, 0.0, 0.0]
    sim = simulate_1f1b(f, b, links, M)
    assert sim.makespan_s > _analytic(f, b, [1.0], M)


def test_a_link_slower_than_every_stage_is_charged_twice_by_the_formula():
    # the formula charges (M − 1)·c for a link; full-duplex channels carry c/2 each way,
    # so when the link is the bottleneck the formula overestimates
    f, b, M = [0.1, 0.1], [0.2, 0.2], 32
    links = [2.0, 0.0]
    sim = simulate_1f1b(f, b, links, M)
    assert sim.makespan_s < _analytic(f, b, [2.0], M)


def test_unbalanced_stages_move_the_formula_both_ways():
    # free links; the slowest stage decides the formula's (M − 1)·max t, but not the schedule
    M = 8
    slow_last = simulate_1f1b([0.2, 0.2, 0.6], [0.4, 0.4, 1.2], [0.0] * 3, M)
    slow_first = simulate_1f1b([0.6, 0.2, 0.2], [1.2, 0.4, 0.4], [0.0] * 3, M)
    assert slow_last.makespan_s == pytest.approx(_analytic([0.2, 0.2, 0.6], [0.4, 0.4, 1.2], [], M), rel=1e-12)
    assert slow_first.makespan_s < _analytic([0.6, 0.2, 0.2], [1.2, 0.4, 0.4], [], M) - 1.0
    # a stage with a short forward and a long backward behind a slower-forward stage: under
    f, b = [0.5, 1.0, 0.1, 0.2], [0.5, 0.5, 2.0, 0.1]
    assert simulate_1f1b(f, b, [0.0] * 4, 6).makespan_s > _analytic(f, b, [], 6) + 0.5


def _reference_simulation(forward_s, backward_s, link_after_s, M):
    """The former O(S·M)-memory event sweep, kept as an oracle for the queue-based one."""
    S = len(forward_s)
    orders = [one_f_one_b_order(s, S, M) for s in range(S)]
    f_end = [[-1.0] * M for _ in range(S)]
    b_end = [[-1.0] * M for _ in range(S)]
    f_arrive = [[-1.0] * M for _ in range(S)]
    b_arrive = [[-1.0] * M for _ in range(S)]
    free, fch, bch = [0.0] * S, [0.0] * S, [0.0] * S
    nxt, nf, nb = [0] * S, [0] * S, [0] * S
    remaining = 2 * S * M + 2 * (S - 1) * M
    while remaining:
        for s in range(S):
            while nxt[s] < len(orders[s]):
                kind, m = orders[s][nxt[s]]
                if kind == "F":
                    ready = 0.0 if s == 0 else f_arrive[s - 1][m]
                    if ready < 0:
                        break
                    f_end[s][m] = free[s] = max(ready, free[s]) + forward_s[s]
                else:
                    ready = f_end[s][m] if s == S - 1 else b_arrive[s][m]
                    if ready < 0:
                        break
                    b_end[s][m] = free[s] = max(ready, free[s]) + backward_s[s]
                nxt[s] += 1
                remaining -= 1
            if s == S - 1:
                continue
            half = link_after_s[s] / 2.0
            while nf[s] < M and f_end[s][nf[s]] >= 0:
                f_arrive[s][nf[s]] = fch[s] = max(f_end[s][nf[s]], fch[s]) + half
                nf[s] += 1
                remaining -= 1
            while nb[s] < M and b_end[s + 1][nb[s]] >= 0:
                b_arrive[s][nb[s]] = bch[s] = max(b_end[s + 1][nb[s]], bch[s]) + half
                nb[s] += 1
                remaining -= 1
    return max(max(row) for row in b_end)


def test_queue_based_simulation_equals_the_full_event_table():
    rng = np.random.default_rng(1)
    for _ in range(60):
        S, M = int(rng.integers(1, 9)), int(rng.integers(1, 20))
        f, b = rng.uniform(0.05, 1.0, S).tolist(), rng.uniform(0.05, 2.0, S).tolist()
        links = rng.choice([0.0, 0.1, 0.7], S).tolist()
        assert simulate_1f1b(f, b, links, M).makespan_s == _reference_simulation(f, b, links, M)


def test_a_simulation_too_large_declines_with_its_limit():
    from hetopt.errors import InputError
    from hetopt.pipeline.simulate import MAX_SIMULATED_OPERATIONS

    with pytest.raises(InputError, match=f"{MAX_SIMULATED_OPERATIONS:,}"):
        simulate_1f1b([0.1] * 1024, [0.2] * 1024, [0.0] * 1024, 65_536)


def test_1024_stages_and_65536_microbatches_solve_without_memory_error():
    """Issue 9: the simulator raised MemoryError on this pipeline, which the reader accepts and dp solves."""
    import hetopt
    from hetopt.pipeline.problem import GIB, PipelineIsland, PipelineInstance, PipelineOption, StagePlan
    from hetopt.result import Status

    stage = StagePlan(1, 0.001, 0.002, 0.0, 0.0)
    inst = PipelineInstance("deep", 1024, 65_536, (PipelineIsland("a", 1024, 80 * GIB),),
                            (PipelineOption(0, 1024, (stage,) * 1024),), ((0.0,),))
    r = hetopt.solve(inst, "dp")
    assert r.status is Status.OPTIMAL
    assert r.objective == pytest.approx((1024 + 65_536 - 1) * 0.003, rel=1e-9)
    assert "simulation skipped" in r.solution.simulation_note and "250,000" in r.solution.simulation_note
    assert "simulation skipped" in r.solution.summary()[-1]
    assert r.solution.to_dict()["simulated_s"] is None
