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
