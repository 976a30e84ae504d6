"""Seeded random mixed-stage instances (agreement tests, bench) and a hand-checkable one.

Tables are drawn the way a cost model shapes them: a layer's time grows with the share y
(a fixed part plus a per-sample part, with noise so that it is not always linear), shrinks
with the TP degree less than linearly; static memory shrinks with t, activations grow with y.
Memory is drawn so that it binds on some instances (some shares or flights do not fit).
"""

from __future__ import annotations

import numpy as np

from hetopt.mixed.problem import GIB, GpuGroup, MixedInstance, TpTables


def _rising(rows) -> tuple[tuple[float, ...], ...]:
    """Each row raised to the one before it where the noise dipped (the tables do not decrease in y)."""
    out = [tuple(rows[0])]
    for row in rows[1:]:
        out.append(tuple(max(v, lo) for v, lo in zip(row, out[-1])))
    return tuple(out)


def _group(rng: np.random.Generator, g: int, layers: int, b: int, max_count: int) -> GpuGroup:
    speed = float(rng.uniform(0.5, 2.0))  # seconds per sample-layer, relative
    degrees = [1] if rng.random() < 0.5 else [1, 2]
    tables = []
    base = [float(rng.uniform(0.5, 1.5)) for _ in range(layers)]
    for t in degrees:
        time_s = _rising([[speed * base[l] * (0.3 + y) / t ** 0.8 * float(rng.uniform(0.9, 1.1))
                           for l in range(layers)] for y in range(1, b + 1)])
        static = tuple(float(rng.uniform(1.0, 4.0)) * GIB / t for _ in range(layers))
        act = tuple(tuple(0.5 * y * GIB / t for _ in range(layers)) for y in range(1, b + 1))
        tables.append(TpTables(t, time_s, static, act))
    memory = float(rng.uniform(4.0, 12.0)) * GIB
    bandwidth = float(rng.choice([1.0, 4.0, 16.0])) * GIB
    return GpuGroup(f"G{g}", int(rng.integers(0, max_count + 1)), memory, bandwidth, tuple(tables))


def _flat_rows(rng: np.random.Generator, rows, scale: float) -> tuple[tuple[float, ...], ...]:
    """``rows`` rounded to 3 decimals of ``scale`` (milliseconds, or thousandths of a GiB), each
    entry kept equal to the share below it with probability 1/2 (never below it)."""
    out = [[round(v / scale, 3) * scale for v in rows[0]]]
    for row in rows[1:]:
        out.append([lo if rng.random() < 0.5 else max(lo, round(v / scale, 3) * scale) for v, lo in zip(row, out[-1])])
    return tuple(tuple(r) for r in out)


def _plateaus(rng: np.random.Generator, tab: TpTables) -> TpTables:
    """``tab`` with times in whole milliseconds and activations in thousandths of a GiB, each
    flat from one share to the next on about half of the layers: measured tables look like
    this (a kernel that does not slow down for one more sample), and a range's sum then ties
    across shares up to the last bit, where a difference of prefix sums wobbles
    (2.331 + 3.838 − 2.331 = 3.8380000000000005; issue 44)."""
    return TpTables(tab.degree, _flat_rows(rng, tab.time_s, 1.0), tab.static_bytes,
                    _flat_rows(rng, tab.activation_bytes, GIB))


def random_instance(seed: int, *, layers: int = 3, types: int = 2, max_count: int = 3, microbatch_size: int = 3,
                    microbatches: int | None = None, variety: bool = False, plateaus: bool = False) -> MixedInstance:
    """A random instance; the same seed gives the same instance.

    With ``variety`` (drawn from a second stream, so the base instance is the same): units of
    1 or 2 GPUs per type (counts rounded up to whole units), tables cut to 1..b rows, an
    overlap ω of 0 or 0.5 and 1-3 buckets per layer. With ``plateaus`` (a third stream): time
    tables in milliseconds, flat across shares on about half of the layers (:func:`_plateaus`),
    the tables whose float sums tie across shares.

    Examples
    --------
    >>> random_instance(3) == random_instance(3), random_instance(3).name
    (True, 'random-3')
    """
    rng = np.random.default_rng(seed)
    groups = tuple(_group(rng, g, layers, microbatch_size, max_count) for g in range(types))
    if sum(g.count for g in groups) == 0:  # keep most instances solvable: one GPU at least
        first = groups[0]
        groups = (GpuGroup(first.name, 1, first.memory_bytes, first.bandwidth, first.tp),) + groups[1:]
    if plateaus:
        flat = np.random.default_rng([seed, 2])
        groups = tuple(GpuGroup(g.name, g.count, g.memory_bytes, g.bandwidth, tuple(_plateaus(flat, t) for t in g.tp))
                       for g in groups)
    m = int(rng.integers(1, 5)) if microbatches is None else microbatches
    grad = tuple(float(rng.uniform(0.1, 2.0)) * GIB for _ in range(layers))
    link = float(rng.choice([0.0, 0.2, 1.0]))
    cross = float(rng.choice([0.5, 2.0])) * GIB
    flat_tag = "-flat" if plateaus else ""
    if not variety:
        return MixedInstance(f"random-{seed}{flat_tag}", m, microbatch_size, layers, grad, link, cross, groups)
    more = np.random.default_rng([seed, 1])
    varied = []
    for grp in groups:
        unit = int(more.integers(1, 3))
        tables = []
        for tab in grp.tp:
            rows = int(more.integers(1, microbatch_size + 1))
            tables.append(TpTables(tab.degree, tab.time_s[:rows], tab.static_bytes, tab.activation_bytes[:rows]))
        varied.append(GpuGroup(grp.name, -(-grp.count // unit) * unit, grp.memory_bytes, grp.bandwidth, tuple(tables),
                               unit))
    overlap = float(more.choice([0.0, 0.5]))
    buckets = tuple(int(k) for k in more.integers(1, 4, size=layers))
    return MixedInstance(f"random-{seed}-varied{flat_tag}", m, microbatch_size, layers, grad, link, cross, tuple(varied),
                         overlap, buckets)


def hand_instance(**overrides) -> MixedInstance:
    """Two layers, one type "A" of 2 GPUs (tp 1), b = 2, M = 4, 1 GiB of gradients per layer at 1 GiB/s.

    time per layer: 1 s for a share of one sample, 1.5 s for two; 1 GiB static and
    1 GiB of activations per sample per layer; 10 GiB per GPU; λ = 0.25 s.
    """
    a = GpuGroup("A", 2, 10 * GIB, GIB, (TpTables(1, ((1.0, 1.0), (1.5, 1.5)), (GIB, GIB),
                                                  ((GIB, GIB), (2 * GIB, 2 * GIB))),))
    fields = dict(name="hand", microbatches=4, microbatch_size=2, layers=2, gradient_bytes=(GIB, GIB), link_s=0.25,
                  cross_bandwidth=GIB, gpus=(a,))
    fields.update(overrides)
    return MixedInstance(**fields)


def two_type_instance(*, layers: int = 8, a100: int = 4, v100: int = 8, microbatch_size: int = 4,
                      microbatches: int = 8) -> MixedInstance:
    """A small A100 + V100 instance shaped like a transformer: equal layers, V100 about 2.5×
    slower per sample and with 16 GiB against 40 GiB, TP degrees 1-2 (A100) and 1-4 (V100).

    A fixed part per micro-batch (0.2 of a sample's time) makes small shares less efficient,
    and TP speeds a replica up by t^0.85 (its communication), as the cost model's prices do.
    """
    def tables(per_sample_s: float, degrees, static_gib: float, act_gib: float) -> tuple[TpTables, ...]:
        return tuple(TpTables(t, tuple(tuple(per_sample_s * (0.2 + y) / t ** 0.85 for _ in range(layers))
                                       for y in range(1, microbatch_size + 1)),
                              tuple(static_gib * GIB / t for _ in range(layers)),
                              tuple(tuple(act_gib * y * GIB / t for _ in range(layers))
                                    for y in range(1, microbatch_size + 1))) for t in degrees)

    groups = (GpuGroup("A100", a100, 40 * GIB, 12.5 * GIB, tables(0.010, (1, 2), 3.0, 0.5)),
              GpuGroup("V100", v100, 16 * GIB, 3.0 * GIB, tables(0.025, (1, 2, 4), 3.0, 0.5)))
    return MixedInstance(f"a100x{a100}-v100x{v100}-l{layers}", microbatches, microbatch_size, layers,
                         tuple(0.4 * GIB for _ in range(layers)), 0.002, 3.0 * GIB, groups)
