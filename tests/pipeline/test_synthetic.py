"""The synthetic option generator: its hardware is the catalogs', and the committed files are its output."""

from __future__ import annotations

import dataclasses
import math

import pytest

import hetopt
from hetopt.cli import main
from hetopt.hardware import load_gpus
from hetopt import shapes as machines
from hetopt.shapes import Shape
from hetopt.pipeline.synthetic import (
    ELEMENT_BYTES, TINY, NodeIsland, Workload, build_instance, island_options, shipped_instances, synthetic_islands, to_toml,
)
from hetopt.pipeline.problem import GIB

from .conftest import INSTANCES


def test_shipped_files_are_what_the_generator_writes():
    for inst in shipped_instances():
        assert (INSTANCES / f"{inst.name}.toml").read_text(encoding="utf-8") == to_toml(inst), inst.name


def test_hetopt_generate_pipeline_synthetic_writes_exactly_those_files(tmp_path, capsys):
    assert main(["generate", "pipeline-synthetic", "--out", str(tmp_path)]) == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(f"{inst.name}.toml" for inst in shipped_instances())
    assert not any(name.startswith("planner-") or name == "tiny.toml" for name in written)  # not its files
    for name in written:
        assert (tmp_path / name).read_text(encoding="utf-8") == (INSTANCES / name).read_text(encoding="utf-8"), name


@pytest.mark.parametrize("efficiency", [None, 0.5])
def test_compute_time_is_peak_times_the_catalogs_efficiency(efficiency):
    """On a one-GPU island every layout is one stage, t = d = 1: forward = k·m·F / (P·e), with
    P and e the catalog's (changed here to show the generator reads them, not a table of its own)."""
    gpus = load_gpus()
    t4 = gpus["T4"] if efficiency is None else dataclasses.replace(gpus["T4"], efficiency=efficiency)
    one = NodeIsland("t4-1", Shape.from_catalog("T4", "T4", 1, 32.0, "test", catalog=gpus), 1)
    work = Workload(TINY, microbatch_size=4, microbatches=8)
    options = island_options(one, 0, work, roles=False, gpu=t4)
    assert {o.layers for o in options} == set(range(1, TINY.layers + 1))
    for o in options:
        (stage,) = o.stages
        expected = o.layers * work.microbatch_size * TINY.layer_flops / (t4.training_flops * t4.efficiency)
        assert math.isclose(stage.forward_s, expected, rel_tol=1e-12), o.layers


def test_islands_are_the_catalog_shapes_and_gpus():
    gpus = load_gpus()
    specs = synthetic_islands()
    # every island's node is a shape of hetopt.shapes, its GPU a catalog entry
    catalog_shapes = {v for v in vars(machines).values() if isinstance(v, Shape)}
    assert all(sp.shape in catalog_shapes and sp.gpu in gpus for sp in specs)
    assert len({sp.gpu for sp in specs}) == len(specs) == 8
    inst = build_instance("t", Workload(TINY, 4, 8), specs, roles=False)
    for sp, isl in zip(specs, inst.islands):
        assert (isl.gpus, isl.memory_bytes) == (sp.shape.gpus, gpus[sp.gpu].memory_bytes), sp.name


def test_links_cross_the_slower_nic_of_the_catalog_shapes():
    """Tangram C1's T4 and V100 VMs: the link takes the NC24s_v3's NIC (slower than the T4 VM's)."""
    inst = hetopt.load(INSTANCES / "tangram-gpt3-6.7b-t4x16-v100x16.toml")
    slower = min(machines.NC64AS_T4_V3.nic_gbps, machines.NC24S_V3.nic_gbps) * 1e9 / 8
    m, s, h = 8, 2048, 4096  # the file's micro-batch, sequence and hidden size
    assert math.isclose(inst.link_s[0][1], 2 * m * s * h * ELEMENT_BYTES / slower, rel_tol=1e-12)
    assert [isl.memory_bytes / GIB for isl in inst.islands] == [machines.NC64AS_T4_V3.memory_gib, machines.NC24S_V3.memory_gib]


def test_an_island_needs_a_shape_read_from_the_catalog():
    by_hand = Shape("X", 4, 1.0, 1.0, 1.0, 1.0, "typed by hand")
    with pytest.raises(ValueError, match="names no GPU catalog entry"):
        NodeIsland("x", by_hand, 1)
