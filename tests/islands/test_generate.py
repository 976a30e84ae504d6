"""The node shapes take their GPU figures from the GPU catalog, and the cluster files agree."""

from __future__ import annotations

import dataclasses

import pytest

from hetopt.errors import InputError
from hetopt.generate.clusters import CLUSTERS, cluster_data
from hetopt.hardware import load_gpus
from hetopt import shapes as cat

SHAPES = {name: value for name, value in vars(cat).items() if isinstance(value, cat.Shape)}


def test_every_shape_is_read_from_a_catalog_entry():
    gpus = load_gpus()
    assert len(SHAPES) >= 18
    for name, shape in SHAPES.items():
        # a shape typed by hand (catalog_gpu None) would be a second copy of the figures
        assert shape.catalog_gpu in gpus, name
        assert shape_figures(shape) == catalog_figures(gpus[shape.catalog_gpu]), name


def test_a_shape_follows_a_changed_catalog():
    gpus = load_gpus()
    changed = {**gpus, "T4": dataclasses.replace(gpus["T4"], training_flops=70e12, memory_bytes=15 * 2**30,
                                                  intra_bandwidth=8e9)}
    shape = cat.Shape.from_catalog("T4", "T4", 4, 32.0, "test", catalog=changed)
    assert (shape.tflops, shape.memory_gib, shape.intra_gbs) == (70.0, 15.0, 8.0)
    assert (shape.gpu, shape.gpus, shape.nic_gbps, shape.catalog_gpu) == ("T4", 4, 32.0, "T4")


def test_an_unknown_catalog_gpu_is_an_input_error():
    with pytest.raises(InputError, match="unknown GPU type 'T5'.*give one of: .*T4"):
        cat.Shape.from_catalog("T5", "T5", 4, 32.0, "test", catalog=load_gpus())


@pytest.mark.parametrize("cluster", list(CLUSTERS))
def test_cluster_files_name_the_gpu_behind_each_islands_node(cluster):
    """Node by node, the catalog entry a cluster file names has the figures of the islands
    instance's node (built from a shape), so the planner and the islands family see one machine."""
    gpus = load_gpus()
    build, _, keeps_figures = CLUSTERS[cluster]
    islands_nodes = build()[0]["node"]
    cluster_nodes = cluster_data(cluster)[0]["node"]
    assert [n["name"] for n in islands_nodes] == [n["name"] for n in cluster_nodes]
    for isl, node in zip(islands_nodes, cluster_nodes):
        entry = catalog_figures(gpus[node["gpu"]])
        stated = (isl["tflops"], isl["memory_gib"], isl["intra_gbs"])
        if keeps_figures:  # profiled per-node rates: the file keeps them, only memory and links are the catalog's
            assert (node["memory_gib"], node["intra_gbs"]) == stated[1:] == entry[1:], (cluster, node["name"])
        else:
            assert stated == entry, (cluster, node["name"], node["gpu"])


def catalog_figures(entry) -> tuple[float, float, float]:
    """tflops, memory_gib, intra_gbs of a catalog entry, in the units of instance files."""
    return entry.training_flops / 1e12, entry.memory_bytes / 2**30, entry.intra_bandwidth / 1e9


def shape_figures(shape: cat.Shape) -> tuple[float, float, float]:
    return shape.tflops, shape.memory_gib, shape.intra_gbs
