"""Write the shipped islands instances: ``hetopt generate islands [--out DIR]``.

Rewrites every file in ``instances/islands/`` (``--out`` defaults to that folder under the
current directory; run it from the repository root). The output is deterministic: the
synthetic clusters use fixed seeds. Figures and their sources are in
:mod:`hetopt.shapes`; each file repeats the sources it uses in its header.

Instances
---------
* ``tangram-c1/c2/c3``: Tangram's Azure clusters (its Table 3).
* ``cephalo-cluster-a/b``: Cephalo's two clusters.
* ``synthetic-64-nodes-2-pods``: 512 GPUs of 4 generations, profiled rates with a 3% jitter,
  2 pods of 4 racks (switch tree).
* ``datacenter-512-nodes``: 512 nodes, 4056 GPUs in service (some nodes run 4 of 8), in 2 halls × 4 pods × 8 racks × 8 nodes (switch tree).
* ``flat-64-one-switch``: 64 nodes of 4 generations on one switch (one wide dendrogram level).
* ``geo-2-regions``: two regions of 16 nodes joined by a 10 Gb/s WAN link.
* ``ring-24-nontree``: 24 nodes on a ring, bandwidth falling with hop distance: not
  ultrametric, so the dendrogram DP must decline (and 24 nodes are too many for the
  subset DP).
* ``tiny*``: small files for tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from hetopt.generate.toml import dumps
from hetopt import shapes as cat
from hetopt.shapes import Shape

#: How the synthetic switch trees state uplinks: e(n, n') is a bottleneck over the path, so
#: an uplink's ``gbps`` is the share one node can count on when every node below it talks
#: at once (the uplink's capacity over the nodes below it), not the uplink's capacity,
#: which is always larger than any NIC and would never be the bottleneck.
UPLINK_NOTE = "uplink gbps = per-node share of the uplink's capacity"

#: Relative standard deviation of profiled compute rates around the datasheet (3%): node
#: to node variation of measured matmul throughput (clocks, thermals, power caps).
PROFILE_JITTER = 0.03


# --- building blocks -----------------------------------------------------------------------
def node(name: str, shape: Shape, **extra) -> dict:
    """One ``[[node]]`` table from a shape; ``extra`` overrides or adds keys."""
    out = {
        "name": name,
        "gpu": shape.gpu,
        "gpus": shape.gpus,
        "tflops": shape.tflops,
        "memory_gib": shape.memory_gib,
        "intra_gbs": shape.intra_gbs,
    }
    out.update(extra)
    return out


def spec(name: str, description: str, nodes: list[dict], network: dict, source: str) -> dict:
    """A whole instance (default tolerances, written out so the file says them)."""
    return {
        "problem": "islands",
        "name": name,
        "description": description,
        "source": source,
        "tolerance": {"compute": 0.1, "memory": 0.1, "intra": 0.1},
        "node": nodes,
        "network": network,
    }


def sources(*shapes: Shape) -> list[str]:
    """Header lines citing the shapes used."""
    return ["Figures (see hetopt/shapes.py):"] + [f"  {s.source}" for s in dict.fromkeys(shapes)]


# --- Tangram and Cephalo clusters -------------------------------------------------------------
def tangram_c1() -> tuple[dict, list[str]]:
    """C1: 4 × NC64as_T4_v3 (4×T4) + 4 × NC24rs_v3 (4×V100-16GB), pairs-and-groups network."""
    nodes = [node(f"t4-{i}", cat.NC64AS_T4_V3, vm="NC64as_T4_v3") for i in range(4)]
    nodes += [node(f"v100-{i}", cat.NC24S_V3, vm="NC24rs_v3") for i in range(4)]
    network = {
        "default_gbps": min(cat.NC64AS_T4_V3.nic_gbps, cat.NC24S_V3.nic_gbps),
        "note": "Ethernet between two VMs runs at the slower NIC; the V100 VMs also share InfiniBand",
        "group": [
            {"name": "t4-ethernet", "nodes": [f"t4-{i}" for i in range(4)], "gbps": cat.NC64AS_T4_V3.nic_gbps},
            {"name": "v100-infiniband", "nodes": [f"v100-{i}" for i in range(4)], "gbps": cat.NC24RS_V3_IB_GBPS},
        ],
    }
    header = ["Tangram C1 (its Table 3): T4 4x4 + V100-16GB 4x4, Azure, one region."] + sources(cat.NC64AS_T4_V3, cat.NC24S_V3)
    header.append(f"  ⚠ NC24rs_v3 InfiniBand generation not stated by [AZ]: {cat.NC24RS_V3_IB_GBPS:g} Gb/s EDR assumed")
    return spec("tangram-c1", "Tangram C1: 4 T4 VMs and 4 V100-16GB VMs", nodes, network, "Tangram, Table 3"), header


def tangram_c2() -> tuple[dict, list[str]]:
    """C2: 2 × NC96ads_A100_v4 (4×A100-80GB) + 4 × NC80adis_H100_v5 (2×H100 NVL), 80 Gb/s."""
    nodes = [node(f"a100-{i}", cat.NC96ADS_A100_V4, vm="NC96ads_A100_v4") for i in range(2)]
    nodes += [node(f"h100nvl-{i}", cat.NC80ADIS_H100_V5, vm="NC80adis_H100_v5") for i in range(4)]
    network = {"default_gbps": 80.0, "note": "both VM sizes have 80 Gb/s Ethernet [AZ]"}
    header = ["Tangram C2 (its Table 3): A100-80GB 2x4 + H100 NVL 4x2, Azure, one region."] + sources(cat.NC96ADS_A100_V4, cat.NC80ADIS_H100_V5)
    return spec("tangram-c2", "Tangram C2: 2 A100-80GB VMs and 4 H100 NVL VMs", nodes, network, "Tangram, Table 3"), header


def tangram_c3() -> tuple[dict, list[str]]:
    """C3: one VM each of 4×T4, 4×V100-16GB, 8×V100-32GB, 4×A100-80GB; a switch with each VM's NIC."""
    vms = [("t4", cat.NC64AS_T4_V3, "NC64as_T4_v3", cat.NC64AS_T4_V3.nic_gbps),
           ("v100-16gb", cat.NC24S_V3, "NC24s_v3", cat.NC24S_V3.nic_gbps),
           ("v100-32gb", cat.ND40RS_V2, "ND40rs_v2", 24.0),
           ("a100-80gb", cat.NC96ADS_A100_V4, "NC96ads_A100_v4", cat.NC96ADS_A100_V4.nic_gbps)]
    nodes = [node(name, shape, vm=vm, switch="region", switch_gbps=nic) for name, shape, vm, nic in vms]
    network = {"note": "one region switch; each VM reaches it through its Ethernet NIC",
               "switch": [{"name": "region"}]}
    header = ["Tangram C3 (its Table 3): one VM each of T4 x4, V100-16GB x4, V100-32GB x8, A100-80GB x4."]
    header += sources(*(v[1] for v in vms))
    header.append("  ⚠ ND40rs_v2's InfiniBand has no peer here; its Ethernet is taken as 24 Gb/s like NCv3")
    return spec("tangram-c3", "Tangram C3: four VMs of four GPU types", nodes, network, "Tangram, Table 3"), header


def cephalo_a() -> tuple[dict, list[str]]:
    """Cluster A: machine 1 = 2×L4, 1×A6000, 1×P40; machine 2 = 2×P40, 2×P100; 50 Gb/s between."""
    nodes = [
        node("m1-l4", cat.L4_PAIR, machine="machine-1"),
        node("m1-a6000", cat.A6000_ONE, machine="machine-1"),
        node("m1-p40", cat.P40_ONE, machine="machine-1"),
        node("m2-p40", cat.P40_PAIR, machine="machine-2"),
        node("m2-p100", cat.P100_PAIR, machine="machine-2"),
    ]
    network = {
        "default_gbps": cat.CLUSTER_A_GBPS,
        "note": "nodes of one machine talk over its PCIe 3.0 x16 host link (P40 and P100 are Gen3 cards)",
        "machine": [{"name": "machine-1", "host_gbps": 128.0}, {"name": "machine-2", "host_gbps": 128.0}],
    }
    header = ["Cephalo Cluster A: two workstations with mixed GPUs, 50 Gb/s between them."]
    header += sources(cat.L4_PAIR, cat.A6000_ONE, cat.P40_ONE, cat.P100_PAIR)
    header.append("  host link: PCIe 3.0 x16, 15.75 GB/s per direction ≈ 128 Gb/s")
    return spec("cephalo-cluster-a", "Cephalo Cluster A: 2 machines, 4 GPU types", nodes, network, "Cephalo, cluster A"), header


def cephalo_b() -> tuple[dict, list[str]]:
    """Cluster B: 2 × g5.48xlarge, 2 × p3.16xlarge, 4 × g4dn.metal; one switch, each VM at its NIC."""
    vms = [("g5", cat.G5_48XLARGE, "g5.48xlarge", 2), ("p3", cat.P3_16XLARGE, "p3.16xlarge", 2), ("g4dn", cat.G4DN_METAL, "g4dn.metal", 4)]
    nodes = [node(f"{p}-{i}", s, vm=vm, switch="vpc", switch_gbps=s.nic_gbps) for p, s, vm, k in vms for i in range(k)]
    network = {"note": "one VPC switch; a VM's NIC bounds its links (Cephalo quotes 100 Gb/s)", "switch": [{"name": "vpc"}]}
    header = ["Cephalo Cluster B: 8 AWS VMs."] + sources(*(v[1] for v in vms))
    return spec("cephalo-cluster-b", "Cephalo Cluster B: 2 g5.48xlarge, 2 p3.16xlarge, 4 g4dn.metal", nodes, network, "Cephalo, cluster B"), header


# --- synthetic clusters ----------------------------------------------------------------------
def _profiled(shape: Shape, rng: np.random.Generator, jitter: float = PROFILE_JITTER) -> float:
    return round(shape.tflops * (1.0 + jitter * float(rng.standard_normal())), 1)


def _tree(name: str, description: str, layout, switches: list[dict], rng, header: list[str], jitter=PROFILE_JITTER):
    """Nodes from ``layout`` = [(leaf switch, [(shape, count, overrides)...])...]."""
    nodes, shapes, count = [], [], 0
    for leaf, members in layout:
        for shape, k, over in members:
            for _ in range(k):
                extra = {"tflops": _profiled(shape, rng, jitter), "switch": leaf, "switch_gbps": shape.nic_gbps}
                extra.update(over)
                nodes.append(node(f"{leaf}-n{count}", shape, **extra))
                shapes.append(shape)
                count += 1
    network = {"switch": switches}
    return spec(name, description, nodes, network, "synthetic (hetopt.islands.generate)"), header + sources(*shapes)


def synthetic_64() -> tuple[dict, list[str]]:
    """64 nodes × 8 GPUs of 4 generations, 2 pods × 4 racks, profiled rates with 3% jitter."""
    rng = np.random.default_rng(64)
    h, a8, a4, v = cat.H100_NODE, cat.A100_80_NODE, cat.A100_40_NODE, cat.V100_SXM2_NODE
    racks = {
        "p0-r0": [(h, 8, {})], "p0-r1": [(h, 4, {}), (a8, 4, {})], "p0-r2": [(a8, 8, {})], "p0-r3": [(a4, 8, {})],
        "p1-r0": [(a4, 4, {}), (v, 4, {})], "p1-r1": [(v, 8, {})], "p1-r2": [(h, 8, {})], "p1-r3": [(a8, 4, {}), (a4, 4, {})],
    }
    switches = [{"name": "spine"}, {"name": "pod-0", "parent": "spine", "gbps": 800.0}, {"name": "pod-1", "parent": "spine", "gbps": 800.0}]
    switches += [{"name": r, "parent": f"pod-{r[1]}", "gbps": 1600.0} for r in racks]
    header = ["Synthetic: 64 nodes (512 GPUs) of 4 generations over 2 pods of 4 racks.",
              f"tflops are profiled rates: datasheet x (1 + {PROFILE_JITTER:g} N(0,1)), seed 64.",
              "Links: node NIC to its rack switch; per-node shares of the uplinks: racks to pods 1600 Gb/s,",
              "pods to the spine 800 Gb/s (see UPLINK_NOTE in the generator)."]
    return _tree("synthetic-64-nodes-2-pods", "512 GPUs, 4 generations, 2 pods", list(racks.items()), switches, rng, header)


def datacenter_512() -> tuple[dict, list[str]]:
    """512 nodes of 8 GPUs (4056 in service): 2 halls × 4 pods × 8 racks × 8 nodes; a few degraded nodes."""
    rng = np.random.default_rng(512)
    h, a8, a4, v, b = cat.H100_NODE, cat.A100_80_NODE, cat.A100_40_NODE, cat.V100_SXM2_NODE, cat.B200_NODE
    pods = {("hall-0", 0): h, ("hall-0", 1): h, ("hall-0", 2): a8, ("hall-0", 3): a4,
            ("hall-1", 0): b, ("hall-1", 1): h, ("hall-1", 2): v, ("hall-1", 3): None}
    switches = [{"name": "core"}]
    layout = []
    for hall in ("hall-0", "hall-1"):
        switches.append({"name": hall, "parent": "core", "gbps": 400.0})
        for p in range(4):
            pod = f"{hall}-pod-{p}"
            switches.append({"name": pod, "parent": hall, "gbps": 800.0})
            for r in range(8):
                rack = f"{pod}-r{r}"
                switches.append({"name": rack, "parent": pod, "gbps": 1600.0})
                shape = pods[hall, p] or (a4 if r % 2 else a8)
                members = [(shape, 8, {})]
                if (p + r) % 7 == 3:  # a node with 4 of its 8 GPUs out of service
                    members = [(shape, 7, {}), (shape, 1, {"gpus": 4})]
                elif (p * 8 + r) % 11 == 5:  # two power-capped nodes at 85% of the rate
                    members = [(shape, 6, {}), (shape, 2, {"tflops": round(shape.tflops * 0.85, 1)})]
                layout.append((rack, members))
    # the GPUs actually in service (some nodes run 4 of their 8), stated rather than assumed
    gpus = sum(k * over.get("gpus", shape.gpus) for _, members in layout for shape, k, over in members)
    header = [f"Synthetic datacenter: 512 nodes ({gpus} GPUs in service), 2 halls x 4 pods x 8 racks x 8 nodes.",
              "tflops are profiled rates with a 1% jitter (seed 512); some nodes run 4 GPUs, some are power-capped.",
              "Links: NIC to rack; per-node shares of the uplinks: racks to pods 1600, pods to halls 800,",
              "halls to core 400 Gb/s (see UPLINK_NOTE in the generator)."]
    return _tree("datacenter-512-nodes", f"{gpus} GPUs in racks, pods and halls", layout, switches, rng, header, jitter=0.01)


def flat_64() -> tuple[dict, list[str]]:
    """64 nodes of 4 generations on one switch (the widest possible dendrogram level)."""
    rng = np.random.default_rng(6464)
    shapes = [cat.H100_NODE, cat.A100_80_NODE, cat.A100_40_NODE, cat.V100_SXM2_NODE]
    members = [(s, 16, {"switch_gbps": 400.0}) for s in shapes]
    header = ["Synthetic: 64 nodes of 4 generations on one 400 Gb/s switch; profiled rates, 3% jitter (seed 6464)."]
    return _tree("flat-64-one-switch", "64 nodes on one switch", [("switch", members)], [{"name": "switch"}], rng, header)


def geo_2_regions() -> tuple[dict, list[str]]:
    """Two regions of 2 racks each, joined by a 10 Gb/s WAN link."""
    rng = np.random.default_rng(2)
    h, a8, v = cat.H100_NODE, cat.A100_80_NODE, cat.V100_SXM2_NODE
    layout = [("us-r0", [(h, 8, {})]), ("us-r1", [(a8, 8, {})]), ("eu-r0", [(a8, 8, {})]), ("eu-r1", [(a8, 4, {}), (v, 4, {})])]
    switches = [{"name": "wan"}, {"name": "us-east", "parent": "wan", "gbps": 10.0}, {"name": "eu-west", "parent": "wan", "gbps": 10.0}]
    switches += [{"name": r, "parent": "us-east" if r.startswith("us") else "eu-west", "gbps": 1600.0} for r, _ in layout]
    header = ["Synthetic geo-distributed cluster: us-east and eu-west, 16 nodes each, 10 Gb/s WAN between them."]
    return _tree("geo-2-regions", "2 regions joined by a WAN link", layout, switches, rng, header)


#: Ring bandwidth by hop distance (Gb/s): direct neighbors, 2 hops, 3 hops, farther.
RING_GBPS = (400.0, 200.0, 100.0, 50.0)


def _ring(name: str, blocks: Sequence[tuple[Shape, int]], header: list[str]) -> tuple[dict, list[str]]:
    nodes: list[dict] = []
    for shape, k in blocks:
        for _ in range(k):
            nodes.append(node(f"n{len(nodes)}", shape))
    n = len(nodes)
    links = []
    for i in range(n):
        for j in range(i + 1, n):
            hops = min(j - i, n - (j - i))
            if hops <= len(RING_GBPS) - 1:
                links.append({"a": nodes[i]["name"], "b": nodes[j]["name"], "gbps": RING_GBPS[hops - 1]})
    network = {"default_gbps": RING_GBPS[-1], "note": "a ring: bandwidth falls with hop distance (not a tree)", "link": links}
    return spec(name, f"{n} nodes on a ring (not ultrametric)", nodes, network, "synthetic (hetopt.islands.generate)"), header + sources(*(s for s, _ in blocks))


def ring_24() -> tuple[dict, list[str]]:
    """24 nodes on a ring in blocks of 5, 7, 5, 7 alternating H100 and A100-80GB."""
    blocks = [(cat.H100_NODE, 5), (cat.A100_80_NODE, 7), (cat.H100_NODE, 5), (cat.A100_80_NODE, 7)]
    header = ["Synthetic non-tree network: 24 nodes on a ring, 400/200/100 Gb/s at 1/2/3 hops, 50 beyond.",
              "Not ultrametric: the dendrogram DP declines; 24 nodes exceed the subset DP."]
    return _ring("ring-24-nontree", blocks, header)


def tiny() -> tuple[dict, list[str]]:
    """The issue's example: 2 A100 nodes on a 400 Gb/s link, 2 V100 nodes, 100 Gb/s default."""
    a = Shape("A100-80GB", 4, 312.0, 80.0, 64.0, 400.0, "A100-80GB PCIe [LA]")
    v = Shape("V100-16GB", 4, 112.0, 16.0, 16.0, 100.0, "V100-16GB PCIe [NV]")
    nodes = [node("a100-0", a), node("a100-1", a), node("v100-0", v), node("v100-1", v)]
    network = {"default_gbps": 100.0, "link": [{"a": "a100-0", "b": "a100-1", "gbps": 400.0}],
               "group": [{"nodes": ["v100-0", "v100-1"], "gbps": 100.0}]}
    return spec("tiny", "the example of the islands issue", nodes, network, "issue 4"), ["Tiny test instance (pairs and groups)."]


def tiny_switch() -> tuple[dict, list[str]]:
    """6 nodes, 2 racks, two profiles 8% apart in compute (one island if proximity allows)."""
    rng = np.random.default_rng(6)
    a = cat.A100_80_NODE
    layout = [("r0", [(a, 3, {"switch_gbps": 400.0})]), ("r1", [(a, 2, {"switch_gbps": 400.0}), (a, 1, {"switch_gbps": 400.0, "tflops": 290.0})])]
    switches = [{"name": "spine"}, {"name": "r0", "parent": "spine", "gbps": 200.0}, {"name": "r1", "parent": "spine", "gbps": 200.0}]
    return _tree("tiny-switch", "6 nodes on 2 racks", layout, switches, rng, ["Tiny test instance (switch tree)."], jitter=0.0)


def tiny_ring_8() -> tuple[dict, list[str]]:
    """8 nodes on a ring: not ultrametric, small enough for the subset DP and bruteforce."""
    return _ring("tiny-ring-8", [(cat.H100_NODE, 3), (cat.A100_80_NODE, 5)], ["Tiny test instance (ring, not ultrametric)."])


INSTANCES = {
    "tangram-c1": tangram_c1,
    "tangram-c2": tangram_c2,
    "tangram-c3": tangram_c3,
    "cephalo-cluster-a": cephalo_a,
    "cephalo-cluster-b": cephalo_b,
    "synthetic-64-nodes-2-pods": synthetic_64,
    "datacenter-512-nodes": datacenter_512,
    "flat-64-one-switch": flat_64,
    "geo-2-regions": geo_2_regions,
    "ring-24-nontree": ring_24,
    "tiny": tiny,
    "tiny-switch": tiny_switch,
    "tiny-ring-8": tiny_ring_8,
}


def write(folder: str | Path) -> list[Path]:
    """Write every instance of ``INSTANCES`` to ``folder`` (``hetopt generate islands``); the paths written."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, build in INSTANCES.items():
        data, header = build()
        header = [*header, "Written by `hetopt generate islands`; edit the generator, not this file."]
        path = out / f"{name}.toml"
        path.write_text(dumps(data, header="\n".join(header)), encoding="utf-8")
        paths.append(path)
    return paths
