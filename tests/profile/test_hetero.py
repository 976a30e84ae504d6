"""Heterogeneous published rows: read, refused with one line, and priced (hand-computed on a synthetic profile)."""

from __future__ import annotations

import pytest

from hetopt import costmodel as cm
from hetopt.catalog import instances_dir
from hetopt.errors import InputError
from hetopt.planner.evaluation.published import load_heterogeneous, load_published
from hetopt.profile.format import CollectiveRow, LayerRow, Profile, Provenance
from hetopt.profile.hetero import price_hetero
from hetopt.profile.measured import Measured

MIT = instances_dir() / "published" / "sailor-mit.toml"

SET = """[models.opt]
catalog = "opt-350m"

[clusters.mixed]
nodes_by_gpu = { RTX-3090 = 2, Titan-RTX = 1 }
gpus_per_node = 8
inter_gbps = 10.0

[[measurement]]
id = "two-stages"
model = "opt"
cluster = "mixed"
global_batch = 16
value = 10.0
layout = { b = 2, recompute = "none", zero = 0, overlap = false, flash_attention = false, sequence_parallel = false, precision = "fp32", handover = "deepspeed" }
[[measurement.stage]]
layers = 10
replicas = [{ gpu = "RTX-3090", tp = 8 }]
[[measurement.stage]]
layers = 14
replicas = [{ gpu = "Titan-RTX", tp = 8 }]
"""


def test_the_shipped_mit_runs():
    rows = load_heterogeneous(MIT)
    assert len(rows) == 9 and load_published(MIT) == ()
    assert {r.dp for r in rows} == {1, 2, 3, 4, 6}
    assert all(sum(st.layers for st in r.stages) == 24 for r in rows)


@pytest.mark.parametrize("edit, where", [
    (lambda t: t.replace("layers = 14", "layers = 13"), "measurement[0].stage"),
    (lambda t: t.replace('gpu = "Titan-RTX"', 'gpu = "RTX-2080"'), "stage[1].replicas[0].gpu"),
    (lambda t: t.replace("tp = 8 }]\n[[measurement.stage]]", "tp = 16 }]\n[[measurement.stage]]"), "replicas[0].tp"),
    (lambda t: t.replace("b = 2,", "b = 3,"), "layout.b"),
    (lambda t: t.replace('precision = "fp32"', 'precision = "tf32"'), "layout.precision"),
    (lambda t: t.replace('cluster = "mixed"', 'cluster = "other"'), "measurement[0].cluster"),
])
def test_bad_rows_one_line(tmp_path, edit, where):
    f = tmp_path / "set.toml"
    f.write_text(edit(SET))
    with pytest.raises(InputError) as info:
        load_heterogeneous(f)
    assert where in str(info.value) and "\n" not in str(info.value)


def test_priced_as_the_sum_of_measured_stages(tmp_path):
    """Two stages on two nodes, one replica each: stage times from the profile (whole model covered),
    the hand-overs from its send_recv (the sender pays, DeepSpeed), the closed form over M micro-batches."""
    f = tmp_path / "set.toml"
    f.write_text(SET)
    row = load_heterogeneous(f)[0]
    name = row.model.name
    rows = []
    for gpu, t in (("RTX-3090", 0.01), ("Titan-RTX", 0.02)):
        for part in ("layer", "embedding", "head"):
            rows += [LayerRow(gpu, name, part, 8, b, 2048, "none", "fp32", t * b, 2 * t * b, includes=("tp_collectives",))
                     for b in (1, 4)]
    boundary = cm.boundary_bytes(row.model, 2048, 2, 4)
    net = [CollectiveRow(g, "send_recv", "inter", 2, n, n / 1e9) for g in ("RTX-3090", "Titan-RTX")
           for n in (boundary / 2, boundary * 2)]
    m = Measured.of(Profile(Provenance("t", "t"), layers=tuple(rows), collectives=tuple(net)))
    price = price_hetero(row, m)
    M = 16 // 2
    # the step over the GPU's TP-8 shard (not linear in it: its fused kernels' fixed time, issue 41)
    step0 = cm.optimizer_step_s(price_params(row, 0) / 8, row.stages[0].replicas[0].gpu, element_bytes=4) / M
    step1 = cm.optimizer_step_s(price_params(row, 1) / 8, row.stages[1].replicas[0].gpu, element_bytes=4) / M
    send = boundary / 1e9  # log-log between two points of a constant bandwidth: exact
    t0 = 3 * 0.01 * 2 * (10 + 1) + step0 + send
    t1 = 3 * 0.02 * 2 * (14 + 1) + step1 + send
    assert price.iteration_time_s == pytest.approx(t0 + t1 + (M - 1) * max(t0, t1), rel=1e-9)
    assert {"compute", "handover", "tp_collectives"} <= set(price.profile_terms)
    assert price.reduction_s == 0.0


def price_params(row, i):
    cfg = row.model
    first = sum(st.layers for st in row.stages[:i])
    n = sum(cm.layer_parameters(cfg, k) for k in range(first, first + row.stages[i].layers))
    return n + (cm.input_embedding_parameters(cfg) if i == 0 else cm.head_parameters(cfg, with_embedding=False))


def test_without_a_profile_the_analytic_model_prices_it():
    row = load_heterogeneous(MIT)[4]
    a = price_hetero(row, None)
    assert a.profile_terms == () and "compute" in a.analytic_terms and a.iteration_time_s > 0
