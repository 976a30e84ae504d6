"""How a profile prices a term: at measured points exactly, between them by the written rules, never beyond."""

from __future__ import annotations

import math
import random

import pytest

from hetopt.profile.format import CollectiveRow, HostRow, LayerRow, OptimizerRow, Profile, Provenance
from hetopt.profile.measured import Measured

PROV = Provenance("test", "2026-12-05")


def layers(points, **kw):
    base = dict(gpu="A100-SXM4-80GB", model="m", part="layer", tp=1, seq=128, recompute="none", precision="bf16")
    base.update(kw)
    return tuple(LayerRow(microbatch=b, forward_s=f, backward_s=2 * f, **base) for b, f in points)


def ask(m, samples, **kw):
    base = dict(tp=1, seq=128, recompute="none", precision="bf16")
    base.update(kw)
    return m.layer("A100-SXM4-80GB", "M", "layer", samples=samples, **base)


def test_layer_at_between_and_beyond_the_measured_micro_batches():
    m = Measured.of(Profile(PROV, layers=layers([(1, 1.0), (4, 4.0), (8, 6.0)])))
    assert ask(m, 4).forward_s == 4.0 and ask(m, 4).backward_s == 8.0
    assert ask(m, 2).forward_s == pytest.approx(2.0)  # linear between 1 and 4
    assert ask(m, 6).forward_s == pytest.approx(5.0)  # between 4 and 8
    assert ask(m, 0.5) is None and ask(m, 9) is None  # never extrapolated
    assert ask(m, 2, tp=2) is None and ask(m, 2, seq=256) is None and ask(m, 2, precision="fp16") is None


def test_a_model_of_another_shape_is_not_priced():
    rows = tuple(LayerRow("A100-SXM4-80GB", "m", "layer", 1, b, 128, "none", "bf16", 1.0, 2.0, hidden=64) for b in (1, 2))
    m = Measured.of(Profile(PROV, layers=rows))
    assert m.layer("A100-SXM4-80GB", "m", "layer", tp=1, samples=1, seq=128, recompute="none", precision="bf16",
                   hidden=64) is not None
    assert m.layer("A100-SXM4-80GB", "m", "layer", tp=1, samples=1, seq=128, recompute="none", precision="bf16",
                   hidden=128) is None


def test_rows_that_count_different_things_are_not_interpolated_between():
    a = LayerRow("g", "m", "layer", 1, 1, 128, "none", "bf16", 1.0, 2.0)
    b = LayerRow("g", "m", "layer", 1, 4, 128, "none", "bf16", 4.0, 8.0, includes=("tp_collectives",))
    m = Measured.of(Profile(PROV, layers=(a, b)))
    kw = dict(tp=1, seq=128, recompute="none", precision="bf16")
    assert m.layer("g", "m", "layer", samples=2, **kw) is None
    assert m.layer("g", "m", "layer", samples=4, **kw).includes_tp


def test_collectives_log_log_between_sizes():
    rows = (CollectiveRow("g", "all_reduce", "intra", 8, 1e3, 1e-5), CollectiveRow("g", "all_reduce", "intra", 8, 1e6, 1e-3))
    m = Measured.of(Profile(PROV, collectives=rows))
    # a power law through the two points: t = 1e-5 · (n / 1e3)^(2/3)
    assert m.collective_s("g", "all_reduce", "intra", 8, 1e4) == pytest.approx(1e-5 * 10 ** (2 / 3))
    assert m.collective_s("g", "all_reduce", "intra", 8, 1e7) is None
    assert m.collective_s("g", "all_reduce", "intra", 4, 1e4) is None  # no interpolation across group sizes
    assert m.collective_s("g", "all_reduce", "inter", 8, 1e4) is None
    assert m.collective_s("g", "all_reduce", "intra", 1, 1e4) == 0.0  # one rank: no traffic


def test_optimizer_and_host():
    p = Profile(PROV, optimizer=(OptimizerRow("g", "bf16", 1e6, 0.01), OptimizerRow("g", "bf16", 3e6, 0.02)),
                hosts=(HostRow("g", "torch2", 1e-4, 2e-4),))
    m = Measured.of(p)
    assert m.optimizer_s("g", "bf16", 2e6) == pytest.approx(0.015)
    assert m.optimizer_s("g", "bf16", 4e6) is None and m.optimizer_s("g", "fp16", 2e6) is None
    assert m.host_s("g", "torch2") == (1e-4, 2e-4) and m.host_s("g", "torch1") is None


def _brute_layer(points, x):
    """Independent reading of the rule: the segment holding x, linear on it; None outside."""
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[0][1] if len(points) == 1 and x == points[0][0] else None


def _brute_coll(points, n):
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= n <= x1:
            w = (math.log(n) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return math.exp(math.log(y0) + w * (math.log(y1) - math.log(y0)))
    return None


@pytest.mark.parametrize("seed", range(20))
def test_interpolation_against_a_second_reading_on_random_curves(seed):
    rng = random.Random(seed)
    bs = sorted(rng.sample(range(1, 64), rng.randint(1, 6)))
    pts = [(float(b), rng.uniform(0.1, 10.0)) for b in bs]
    m = Measured.of(Profile(PROV, layers=layers(pts)))
    sizes = sorted(rng.sample(range(10, 10 ** 7), rng.randint(2, 6)))
    cpts = [(float(n), rng.uniform(1e-6, 1e-2)) for n in sizes]
    mc = Measured.of(Profile(PROV, collectives=tuple(CollectiveRow("g", "send_recv", "inter", 2, n, t) for n, t in cpts)))
    for _ in range(50):
        x = rng.uniform(0, 70)
        got = ask(m, x)
        want = _brute_layer(pts, x)
        assert (got is None) == (want is None)
        if want is not None:
            assert got.forward_s == pytest.approx(want, rel=1e-12)
        n = rng.uniform(1, 2 * 10 ** 7)
        got, want = mc.collective_s("g", "send_recv", "inter", 2, n), _brute_coll(cpts, n)
        assert (got is None) == (want is None)
        if want is not None:
            assert got == pytest.approx(want, rel=1e-9)
