"""GPUs of a node without peer-to-peer: NCCL's traffic through host memory, priced by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetopt import costmodel as cm
from hetopt.errors import InputError
from hetopt.catalog import instances_dir
from hetopt.hardware import load_gpus
from hetopt.planner.cluster import cluster_from_data, load_cluster
from hetopt.planner.compose import island_specs
from hetopt.planner.parallelizer import IslandSpec
from hetopt.planner.published import load_published
from hetopt.planner.validate import measurement_cluster, price_published

CAT = load_gpus()


def test_a_pcie_node_without_peer_to_peer_runs_at_the_measured_host_memory_share():
    # 3.9 GB/s of bus bandwidth measured through host memory on PCIe 3.0 x16 (15.75 GB/s)
    t4 = IslandSpec("t4", CAT["T4"], nodes=1, gpus_per_node=4)
    assert t4.intra_achieved == pytest.approx(16e9 * 3.9 / 15.75, rel=1e-12)
    with_p2p = IslandSpec("t4", CAT["T4"], nodes=1, gpus_per_node=4, p2p=True)
    assert with_p2p.intra_achieved == pytest.approx(16e9 * 12.0 / 15.75, rel=1e-12)
    # NVLink is peer to peer whatever the key says
    v100 = IslandSpec("v", CAT["V100-SXM2-16GB"], nodes=1, gpus_per_node=4, p2p=False)
    assert v100.intra_achieved == pytest.approx(CAT["V100-SXM2-16GB"].intra_bandwidth * 0.8, rel=1e-12)


def test_a_tensor_parallel_all_reduce_through_host_memory_by_hand():
    # 2 MiB (one micro-batch of 1024 tokens x 1024 wide, 16 bits) over 2 T4s: the ring moves
    # 2 (p - 1) / p = 1 times the bytes at the achieved bandwidth, plus NCCL's ring latency
    t4 = IslandSpec("t4", CAT["T4"], nodes=1, gpus_per_node=2)
    n = 2 * 1024 * 1024
    expected = n / (16e9 * 3.9 / 15.75) + 8.4e-6 + 2 * 5.7e-6
    assert cm.ring_allreduce_s(n, 2, t4.intra_achieved, cm.intra_hop_latency_s(t4.gpu)) == pytest.approx(expected, rel=1e-12)


def _cluster(p2p_values):
    nodes = []
    for i, p in enumerate(p2p_values):
        node = {"name": f"n{i}", "gpu": "T4", "gpus": 4, "switch": "s", "switch_gbps": 50.0}
        if p is not None:
            node["p2p"] = p
        nodes.append(node)
    return cluster_from_data({"name": "c", "node": nodes, "network": {"switch": [{"name": "s"}]}}, "c.toml")


def test_the_cluster_file_key_reaches_the_island():
    assert island_specs(_cluster([None, None]), [[0, 1]])[0].p2p is None
    assert island_specs(_cluster([True, True]), [[0, 1]])[0].p2p is True
    # one node without it holds the island's collectives to its pace
    assert island_specs(_cluster([True, False]), [[0, 1]])[0].p2p is False
    assert _cluster([True, None]).subset(["n0"]).p2p == (True,)


def test_a_bad_p2p_key_names_the_file_the_node_and_the_fix():
    with pytest.raises(InputError, match=r"c\.toml: node\[1\]\.p2p: must be true or false"):
        _cluster([True, "yes"])


def test_shipped_clusters_keep_the_default():
    assert load_cluster("tangram-c1").p2p == ()


def test_a_published_row_with_peer_to_peer_prices_faster_at_tp_2():
    rows = {m.id: m for m in load_published(instances_dir() / "published" / "amp-t4-g4dn.toml")}
    m = rows["amp-t4-t11-tp2pp1dp8b1"]
    assert m.island.p2p is None
    default, _, _ = price_published(m)
    p2p = replace(m, island=replace(m.island, p2p=True))
    faster, _, _ = price_published(p2p)
    assert faster.total_time_s < default.total_time_s
    assert measurement_cluster(p2p).p2p == (True,) * p2p.island.nodes
