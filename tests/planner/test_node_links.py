"""How NCCL moves bytes inside a node and between nodes: peer-to-peer or through host memory,
RDMA or TCP sockets, each priced by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetopt import costmodel as cm
from hetopt.errors import InputError
from hetopt.catalog import instances_dir
from hetopt.hardware import load_gpus
from hetopt.planner.cluster import cluster_from_data, load_cluster
from hetopt.planner.compose import island_specs, link_matrix, nodes_transport
from hetopt.planner.parallelizer import IslandSpec
from hetopt.planner.published import load_published
from hetopt.planner.validate import measurement_cluster, price_published
from hetopt.workload import load_model

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


def _cluster(p2p_values, transports=None, gbps=50.0):
    nodes = []
    transports = transports or [None] * len(p2p_values)
    for i, (p, t) in enumerate(zip(p2p_values, transports)):
        node = {"name": f"n{i}", "gpu": "T4", "gpus": 4, "switch": "s", "switch_gbps": gbps}
        if p is not None:
            node["p2p"] = p
        if t is not None:
            node["transport"] = t
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
    # priced with today's host time: the row's own stack (torch1) is host-bound at TP 2 and
    # micro-batch 1, whatever the link
    m = replace(m, layout=m.layout.with_running(host="torch2"), runtime=m.runtime.with_running(host="torch2"))
    default, _, _ = price_published(m)
    p2p = replace(m, island=replace(m.island, p2p=True))
    faster, _, _ = price_published(p2p)
    assert faster.total_time_s < default.total_time_s
    assert measurement_cluster(p2p).p2p == (True,) * p2p.island.nodes


def test_ethernet_below_100_gbps_is_tcp_sockets_and_rdma_keeps_nccls_figure():
    slow = IslandSpec("t4", CAT["T4"], nodes=2, gpus_per_node=4, inter_bandwidth=50e9 / 8)
    assert slow.inter_achieved == pytest.approx(50e9 / 8 * 0.6, rel=1e-12)
    assert replace(slow, transport="rdma").inter_achieved == pytest.approx(50e9 / 8 * 12 / 12.5, rel=1e-12)
    fast = IslandSpec("a", CAT["A100-SXM4-80GB"], nodes=2, gpus_per_node=8, inter_bandwidth=200e9 / 8)
    assert fast.inter_achieved == pytest.approx(200e9 / 8 * 0.96, rel=1e-12)
    assert replace(fast, transport="tcp").inter_achieved == pytest.approx(200e9 / 8 * 0.6, rel=1e-12)
    # exactly 100 Gb/s is RDMA (InfiniBand EDR, RoCE)
    assert cm.network_efficiency(100e9 / 8) == 0.96


def test_the_hand_over_between_islands_crosses_tcp_at_its_share():
    cfg = load_model(instances_dir() / "models" / "gpt3-1.3b.toml")
    c = _cluster([None, None], ["tcp", "rdma"], gbps=200.0)
    links = link_matrix(c, [[0], [1]], cfg, 2048, 4)
    # the link runs at its slower end: TCP at 0.6 of 200 Gb/s
    assert links[0][1] == pytest.approx(cm.pipeline_link_s(cfg, 2048, 4, 200e9 / 8 * 0.6), rel=1e-12)
    both = link_matrix(_cluster([None, None], ["rdma", "rdma"], gbps=200.0), [[0], [1]], cfg, 2048, 4)
    assert both[0][1] == pytest.approx(cm.pipeline_link_s(cfg, 2048, 4, 200e9 / 8 * 0.96), rel=1e-12)


def test_an_island_crosses_its_network_at_its_slowest_nodes_transport():
    assert nodes_transport(_cluster([None, None]), [0, 1]) is None
    assert nodes_transport(_cluster([None, None], ["rdma", "rdma"]), [0, 1]) == "rdma"
    assert nodes_transport(_cluster([None, None], ["rdma", None]), [0, 1]) is None
    assert nodes_transport(_cluster([None, None], ["rdma", "tcp"]), [0, 1]) == "tcp"
    assert island_specs(_cluster([None, None], ["tcp", "tcp"]), [[0, 1]])[0].transport == "tcp"


def test_a_bad_transport_names_the_file_the_node_and_the_fix():
    with pytest.raises(InputError, match=r'c\.toml: node\[0\]\.transport: must be "tcp" or "rdma"'):
        _cluster([None], ["ib"])
