"""NCCL's own cost model of a collective: the algorithm and protocol its tuner picks by message size.

Part of the cost model (:mod:`hetopt.costmodel`, the network's subject; :mod:`~hetopt.costmodel.network`
uses it). Every constant is NCCL's (NVIDIA/nccl ``src/graph/tuning.cc``, ``ncclTopoTuneModel`` and
``ncclTopoGetAlgoTime``, as of the 2026 master; the latencies as NCCL 2.18 recalibrated them) and
the formulas are in ``formulations/costmodel.md`` ("NCCL's algorithms and protocols"). SI units:
bytes, seconds, bytes/s; NCCL's own tables are in microseconds and GB/s and converted here once.

NCCL prices each collective as ``latency + bytes / bandwidth`` for every enabled pair of algorithm
(ring; tree for all-reduce) and protocol (LL: 8-byte lines with a flag, lowest latency, half the
bandwidth; LL128: 128-byte lines, NVLink only by default; Simple: full bandwidth, highest latency)
and runs the fastest. Small messages (a TP all-reduce of a few MB at micro-batch 1) go LL or LL128,
large ones Simple. Not modelled: NVLS and NVLS-tree (Hopper NVSwitch all-reduce), CollNet (SHARP
switches), PAT (one GPU a node), the per-channel bandwidth caps (binding only with few channels),
and RCCL's tuner on AMD GPUs (their collectives stay the Simple ring).
"""

from __future__ import annotations

import functools

import math
from dataclasses import dataclass

from hetopt.hardware import GIGA

#: NCCL's algorithms and protocols in its tables' order (``NCCL_ALGO_TREE``, ``NCCL_ALGO_RING``;
#: ``NCCL_PROTO_LL``, ``NCCL_PROTO_LL128``, ``NCCL_PROTO_SIMPLE``).
ALGORITHMS = ("tree", "ring")
PROTOCOLS = ("LL", "LL128", "Simple")
#: Collectives priced: the ring runs all three, the tree only all-reduce (tuning.cc skips it for the others).
COLLECTIVES = ("allreduce", "allgather", "reducescatter")

#: ``baseLatencies``: the launch latency of one collective, µs, per algorithm and protocol.
BASE_LATENCY_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
#: ``hwLatencies``: the latency of one step, µs, by the hardware the step crosses (NVLink,
#: PCIe, the network), per algorithm and protocol.
HW_LATENCY_US = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
    "pcie": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7)},
    "network": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)},
}
#: ``llMaxBws``, GB/s: the LL protocol's bandwidth cap. Rows by compute capability on one node
#: (Volta, Ampere, Hopper, Blackwell); across nodes by the host CPU (row 0 Intel and others,
#: row 1 AMD); columns 1, 2 and 4 or more nodes.
LL_MAX_BW_GBS = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))
#: The row of ``LL_MAX_BW_GBS`` (NCCL's compute-capability index) of each GPU generation of the
#: catalog's ``arch``: before Ampere Volta's, Ada Ampere's (compute capability 8.9 ≥ 8.0).
ARCH_ROW = {"pascal": 0, "volta": 0, "turing": 0, "ampere": 1, "ada": 1, "hopper": 2, "blackwell": 3}
#: Generations without LL128 (compute capability below 7.0: tuning.cc disables it there).
NO_LL128 = ("pascal",)

#: Bandwidth of each protocol as a share of the Simple protocol's bus bandwidth (tuning.cc's
#: "model refinements"): ring LL half, ring LL128 120/128 of the line less headers (0.92), the
#: tree's all-reduce 0.92, the tree's LL 1/3.8, the tree's LL128 7/9 on one node and 120/128
#: across nodes.
RING_LL_SHARE = 0.5
RING_LL128_SHARE = 0.92
TREE_SHARE = 0.92
TREE_LL_SHARE = 1.0 / 3.8
TREE_LL128_SHARE_ONE_NODE = 7.0 / 9.0
TREE_LL128_SHARE = 120.0 / 128.0
#: A tree all-reduce's algorithm bandwidth is half its bus bandwidth (tuning.cc: ``ratio = .5``
#: for every algorithm but the ring and NVLS).
TREE_ALGORITHM_RATIO = 0.5
#: ``treeCorrectionFactor``: the tree's bandwidth at messages of 64 B · 2^i, i = 0..23, by protocol
#: ("Trees are not perfectly sticking to the model for medium sizes").
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
)
#: The ring Simple all-reduce across nodes waits for its pipeline to fill: its latency × 1.4 from
#: Ampere on (1.9 before) once a channel's share of a rank holds 64 bytes (``ncclTopoGetAlgoTime``,
#: "plateau effect of ring"). The channels are not modelled: the condition is taken at NCCL's
#: most channels, ``MAX_CHANNELS``.
RING_PLATEAU = (1.9, 1.4)
PLATEAU_BYTES = 64
MAX_CHANNELS = 32
#: The network proxy's post overhead, µs, by host CPU vendor (``getNetOverhead``), × 3 for the
#: Simple protocol: the least latency of every step of a ring that spans nodes.
NET_OVERHEAD_US = {"amd": 2.0}
DEFAULT_NET_OVERHEAD_US = 1.0
SIMPLE_NET_OVERHEAD_FACTOR = 3

#: NCCL's tables are in µs: seconds per µs.
MICRO = 1e-6


@dataclass(frozen=True)
class Fabric:
    """What NCCL's tuner reads of the GPUs one collective spans.

    ``gpus`` ranks on ``nodes`` nodes (``gpus / nodes`` a node); ``link`` the hardware of a step
    inside a node ("nvlink" for NVLink-class and xGMI links, "pcie" otherwise, peer-to-peer or
    through host memory); ``arch`` the GPU generation (the catalog's ``arch``; "" or an AMD part:
    NCCL's tuner is not applied and the collective is the ring with the Simple protocol);
    ``host_cpu`` the host's CPU vendor (the network proxy's overhead, the LL cap across nodes);
    ``ll128`` whether the LL128 protocol is enabled (tuning.cc: NVLink inside the node and, across
    nodes, a GPUDirect RDMA network; not before Volta).
    """

    gpus: int
    nodes: int = 1
    link: str = "nvlink"
    arch: str = ""
    host_cpu: str = ""
    ll128: bool = True

    @property
    def tuned(self) -> bool:
        """Whether NCCL's tuner applies (an NVIDIA generation it has a row for)."""
        return self.arch in ARCH_ROW


def _steps(collective: str, gpus: int, nodes: int) -> tuple[int, int]:
    """(steps of the ring, of them across nodes): 2(p − 1) and 2(n − 1) for all-reduce, p − 1 and
    n − 1 for all-gather and reduce-scatter (tuning.cc's ``nsteps`` and ``nInterSteps``)."""
    if collective == "allreduce":
        return 2 * (gpus - 1), 2 * (nodes - 1)
    return gpus - 1, nodes - 1


def latency_s(collective: str, algorithm: str, protocol: str, fabric: Fabric) -> float:
    """NCCL's latency of one collective with ``algorithm`` and ``protocol`` on ``fabric``, seconds.

    Ring: base + (steps inside nodes) × the link's step latency + (steps across nodes) × the
    network's, a step inside a node no faster than the network proxy's post overhead when the
    ring spans nodes. Tree (all-reduce): base + 2 × ((GPUs a node − 1) × the link's step latency
    + log2(nodes) × the network's).

    Examples
    --------
    >>> f = Fabric(8, 1, "nvlink", "ampere")
    >>> [round(latency_s("allreduce", "ring", p, f) * 1e6, 1) for p in PROTOCOLS]  # 14 NVLink steps
    [15.0, 40.6, 56.0]
    """
    p = PROTOCOLS.index(protocol)
    ppn = fabric.gpus // max(1, fabric.nodes)
    base = BASE_LATENCY_US[algorithm][p]
    intra = HW_LATENCY_US[fabric.link][algorithm][p]
    # with one GPU a node the steps are all the network's, at the tree's figure (tuning.cc)
    inter = HW_LATENCY_US["network"]["tree" if ppn == 1 else algorithm][p]
    if algorithm == "tree":
        return (base + 2.0 * ((ppn - 1) * intra + int(math.log2(max(1, fabric.nodes))) * inter)) * MICRO
    steps, inter_steps = _steps(collective, fabric.gpus, fabric.nodes)
    if fabric.nodes > 1:
        overhead = NET_OVERHEAD_US.get(fabric.host_cpu, DEFAULT_NET_OVERHEAD_US)
        intra = max(intra, overhead * (SIMPLE_NET_OVERHEAD_FACTOR if protocol == "Simple" else 1.0))
    return (base + (steps - inter_steps) * intra + inter_steps * inter) * MICRO


def bus_bandwidth(algorithm: str, protocol: str, bandwidth: float, fabric: Fabric, nbytes: float) -> float:
    """The bus bandwidth (bytes/s) of ``algorithm`` with ``protocol``, from the Simple ring's
    ``bandwidth`` (what the links achieve, :func:`~hetopt.costmodel.network.link_efficiency`).

    Examples
    --------
    >>> f = Fabric(8, 1, "nvlink", "ampere")
    >>> [round(bus_bandwidth("ring", p, 240e9, f, 2**21) / 1e9, 1) for p in PROTOCOLS]
    [87.7, 220.8, 240.0]
    """
    p = PROTOCOLS.index(protocol)
    if algorithm == "ring" and protocol != "LL":
        return (RING_LL128_SHARE if protocol == "LL128" else 1.0) * bandwidth
    column = fabric.nodes - 1 if fabric.nodes <= 2 else 2
    row = ARCH_ROW[fabric.arch] if fabric.nodes == 1 else (1 if fabric.host_cpu == "amd" else 0)
    ll_max = LL_MAX_BW_GBS[row][column] * GIGA
    if algorithm == "ring":
        return min(ll_max, RING_LL_SHARE * bandwidth)
    tree = TREE_SHARE * bandwidth
    tree = (min(tree * TREE_LL_SHARE, ll_max),
            tree * (TREE_LL128_SHARE_ONE_NODE if fabric.nodes == 1 else TREE_LL128_SHARE), tree)[p]
    size = int(math.log2(nbytes / 64)) if nbytes >= 64 else -1
    if 0 <= size < len(TREE_CORRECTION[p]) - 1:  # NCCL corrects sizes below 2^23 · 64 bytes
        tree *= TREE_CORRECTION[p][size]
    return tree


def algorithm_time_s(collective: str, algorithm: str, protocol: str, nbytes: float, bandwidth: float,
                     fabric: Fabric) -> float | None:
    """Seconds of one ``collective`` of ``nbytes`` with ``algorithm`` and ``protocol``: NCCL's
    latency + bytes over the algorithm bandwidth (the bus bandwidth × p/steps for the ring, × 1/2
    for the tree). None where NCCL does not offer the pair (the tree for all-gather and reduce-
    scatter, LL128 where it is disabled).

    Examples
    --------
    >>> f = Fabric(8, 1, "nvlink", "ampere")
    >>> round(algorithm_time_s("allreduce", "ring", "Simple", 2**21, 240e9, f) * 1e6, 1)  # today's ring
    71.3
    """
    if algorithm == "tree" and collective != "allreduce":
        return None
    if protocol == "LL128" and not (fabric.ll128 and fabric.arch not in NO_LL128):
        return None
    if fabric.gpus <= 1:
        return 0.0
    busbw = bus_bandwidth(algorithm, protocol, bandwidth, fabric, nbytes)
    steps, _ = _steps(collective, fabric.gpus, fabric.nodes)
    algbw = busbw * (fabric.gpus / steps if algorithm == "ring" else TREE_ALGORITHM_RATIO)
    latency = latency_s(collective, algorithm, protocol, fabric)
    if (fabric.tuned and algorithm == "ring" and protocol == "Simple" and collective == "allreduce" and fabric.nodes > 1
            and nbytes / (MAX_CHANNELS * fabric.gpus) >= PLATEAU_BYTES):
        latency *= RING_PLATEAU[ARCH_ROW[fabric.arch] >= 1]
    return latency + nbytes / algbw


#: The planner asks for the same collectives again and again (one per layout priced, and
#: layouts share their TP and data-parallel groups): a8v24's plan asked 330,000 times for a few
#: thousand distinct ones, a quarter of its time before this cache.
@functools.lru_cache(maxsize=1 << 16)
def choose(collective: str, nbytes: float, bandwidth: float, fabric: Fabric) -> tuple[str, str, float]:
    """(algorithm, protocol, seconds) NCCL's tuner picks for one ``collective`` of ``nbytes``:
    the fastest enabled pair under its own model (ties: the tables' order, tree before ring and LL
    first, as its loop keeps the first minimum). Without a tuner row (``Fabric.tuned`` false) the
    ring with the Simple protocol.

    Examples
    --------
    >>> f = Fabric(8, 1, "nvlink", "ampere")  # a TP all-reduce on a DGX A100
    >>> [choose("allreduce", n, 240e9, f)[:2] for n in (2**16, 2**22, 2**28)]
    [('ring', 'LL'), ('ring', 'LL128'), ('ring', 'Simple')]
    """
    if collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r} (valid: {', '.join(COLLECTIVES)})")
    if not fabric.tuned:
        return "ring", "Simple", algorithm_time_s(collective, "ring", "Simple", nbytes, bandwidth, fabric)
    best = None
    for algorithm in ALGORITHMS:
        for protocol in PROTOCOLS:
            t = algorithm_time_s(collective, algorithm, protocol, nbytes, bandwidth, fabric)
            if t is not None and (best is None or t < best[2]):
                best = (algorithm, protocol, t)
    return best


def collective_s(collective: str, nbytes: float, bandwidth: float, fabric: Fabric) -> float:
    """Seconds NCCL takes for one ``collective`` of ``nbytes`` (all-reduce: the buffer; all-gather
    and reduce-scatter: the whole gathered buffer) over ``fabric``, Simple ring bandwidth
    ``bandwidth`` (bytes/s): :func:`choose`'s time. 0 on one GPU.

    Examples
    --------
    >>> f = Fabric(8, 1, "nvlink", "ampere")
    >>> round(collective_s("allreduce", 2**21, 240e9, f) * 1e6, 1)  # LL, where the Simple ring takes 71.3
    56.8
    """
    if fabric.gpus <= 1 or nbytes <= 0:
        return 0.0
    return choose(collective, nbytes, bandwidth, fabric)[2]


__all__ = ["ALGORITHMS", "ARCH_ROW", "BASE_LATENCY_US", "COLLECTIVES", "Fabric", "HW_LATENCY_US", "LL_MAX_BW_GBS",
           "PROTOCOLS", "TREE_CORRECTION", "algorithm_time_s", "bus_bandwidth", "choose", "collective_s", "latency_s"]
