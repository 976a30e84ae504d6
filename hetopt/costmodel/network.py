"""Links and collectives: link efficiencies, ring latency, TP, pipeline hand-over and data-parallel traffic.

Part of the cost model (:mod:`hetopt.costmodel`); every formula, constant and source is in
``formulations/costmodel.md``. SI units: FLOPs, bytes, seconds, bytes/s.
"""

from __future__ import annotations

from dataclasses import dataclass

from hetopt.hardware import GpuType
from hetopt.workload import ACTIVATION_BYTES, ModelConfig
from hetopt.costmodel.precision import FP32_GRADIENT_BYTES, GRADIENT_BYTES, WEIGHT_BYTES, element_bytes, gradient_bytes
from hetopt.costmodel.memory import ZERO_STAGES
from hetopt.costmodel.nccl import Fabric, collective_s


#: Megatron tensor parallelism all-reduces the layer's activations twice per pass (after
#: the attention output projection and after the second MLP matmul; in backward the two
#: matching input-gradient all-reduces). Sequence parallelism replaces each by a
#: reduce-scatter + all-gather pair of the same volume.
TP_ALLREDUCES_PER_PASS = 2

#: The vocabulary-parallel embedding all-reduces its output once in forward; the
#: column-parallel output head all-reduces its input gradient once in backward.
EMBEDDING_TP_ALLREDUCES = 1

HEAD_TP_ALLREDUCES = 1


# ----------------------------------------------------------------------- collectives

#: What NCCL achieves per link, over the link's datasheet figure per direction: its topology
#: model's bandwidths (NVIDIA/nccl, src/graph/topo.h: ``SMxx_NVLINK_BW`` per NVLink link by
#: GPU generation, ``PCI_BW`` 12 GB/s for PCIe 3.0 x16, ``NET_BW`` 12 GB/s for 100 Gb/s),
#: which its tuner uses to pick algorithms, divided by the datasheet per-link figures
#: (NVLink1 20, NVLink2–4 25, NVLink5 50 GB/s per link per direction; PCIe 3.0 x16 15.75 GB/s;
#: 100 Gb/s = 12.5 GB/s). Protocol headers, flow control and the copy engines' gaps are why a
#: link never carries its signalling rate. NCCL's older tuner capped A100 rings at 235 GB/s
#: of 300 (0.78), the same figure within 2%.
LINK_EFFICIENCY = {
    "NVLink1": 18.0 / 20.0,
    "NVLink2": 20.0 / 25.0,
    "NVLink3": 20.0 / 25.0,
    "NVLink4": 20.6 / 25.0,
    "NVLink5": 40.1 / 50.0,
    "PCIe": 12.0 / 15.75,
    "network": 12.0 / 12.5,
}

#: What NCCL achieves between two GPUs of a node that have no peer-to-peer path over PCIe, over
#: the PCIe link's datasheet figure per direction: its SHM transport copies through host memory
#: (each byte crosses the GPU's PCIe link into a host buffer and out of it again, both
#: directions at once through the CPU's memory). Measured: an all-reduce at 3.9 GB/s of bus
#: bandwidth between two GPUs on PCIe 3.0 x16 with ``NCCL_P2P_DISABLE=1`` (NVIDIA/nccl issue
#: #384, NCCL 2.4.8; the maintainer's reply: bidirectional traffic through the CPU), over
#: 15.75 GB/s. Cloud VMs of PCIe GPUs expose no peer-to-peer between them (e.g. AWS's g6 and
#: g4dn; llm-d-incubation/llm-d-infra PR #181: "AWS g6 series does not have NVLink/NVSwitch or
#: PCIe P2P"), and GeForce drivers disable it; AMP's authors describe their g4dn.12xlarge nodes'
#: GPU link as no faster than their 50 Gb/s network (DachengLi1/AMP ``src/homogeneous.py``).
SHM_EFFICIENCY = 3.9 / 15.75

#: What NCCL achieves over an Ethernet network without RDMA, where its socket transport runs
#: over TCP, as a share of the wire speed: "not ... more than 60% of wire speed over 32 Gbps
#: networks" even with large messages (NVIDIA/nccl issue #209, nccl-tests over TCP; a single
#: flow's pace, times the sockets NCCL opens, is what a ring step gets: the maintainer's reply
#: in NVIDIA/nccl-tests issue #83). RDMA networks (InfiniBand, RoCE, EFA) keep NCCL's own
#: figure, ``LINK_EFFICIENCY["network"]``.
TCP_EFFICIENCY = 0.6

#: Transports of a node's network: NCCL's socket transport over TCP, or RDMA verbs.
TRANSPORTS = ("tcp", "rdma")

#: Per-node network bandwidth, bytes/s, from which a network whose transport is not given is
#: taken to be RDMA: 100 Gb/s and more is InfiniBand or RoCE in the clusters this project
#: models (DGX-class nodes, HPC systems); below it, the Ethernet of cloud VMs and of
#: commodity clusters (AWS ENA, GCP gVNIC, 10-50 GbE), which NCCL reaches through sockets.
RDMA_MIN_BANDWIDTH = 100e9 / 8


def is_rdma(bandwidth: float, transport: str | None = None) -> bool:
    """Whether NCCL crosses a node's network of ``bandwidth`` bytes/s with RDMA (``transport``
    "rdma"), not its socket transport over TCP ("tcp"); ``transport`` None: RDMA from
    :data:`RDMA_MIN_BANDWIDTH` up, TCP sockets below.

    Examples
    --------
    >>> is_rdma(200e9 / 8), is_rdma(50e9 / 8), is_rdma(50e9 / 8, "rdma")
    (True, False, True)
    """
    if transport is None:
        return bandwidth >= RDMA_MIN_BANDWIDTH * (1.0 - 1e-9)
    return transport == "rdma"


def network_efficiency(bandwidth: float, transport: str | None = None) -> float:
    """The share of a node's network bandwidth (bytes/s) that NCCL achieves over ``transport``
    (:func:`is_rdma`: RDMA or TCP sockets).

    Examples
    --------
    >>> network_efficiency(200e9 / 8), network_efficiency(50e9 / 8), network_efficiency(50e9 / 8, "rdma")
    (0.96, 0.6, 0.96)
    """
    return LINK_EFFICIENCY["network"] if is_rdma(bandwidth, transport) else TCP_EFFICIENCY


def intra_link_efficiency(link: str, peer_to_peer: bool | None = None) -> float:
    """The share of a node's GPU link that NCCL achieves, with or without peer-to-peer.

    ``peer_to_peer`` None takes the catalog's default by link: NVLink-class links (and xGMI)
    are peer-to-peer; a PCIe link is not (:data:`SHM_EFFICIENCY`: traffic through host
    memory, as in cloud VMs and on GeForce cards), unless the cluster says ``p2p = true`` (a
    bare-metal server whose PCIe switch passes peer-to-peer traffic).

    Examples
    --------
    >>> intra_link_efficiency("NVLink3"), round(intra_link_efficiency("PCIe 3.0 x16"), 4)
    (0.8, 0.2476)
    >>> intra_link_efficiency("PCIe 3.0 x16", True) == LINK_EFFICIENCY["PCIe"]
    True
    """
    pcie = link.lower().startswith("pcie")
    if pcie and not peer_to_peer:
        return SHM_EFFICIENCY
    return link_efficiency(link)


def link_efficiency(link: str) -> float:
    """The share of a link's datasheet bandwidth that collectives and transfers achieve.

    ``link`` is a GPU catalog's ``intra_link`` ("NVLink3", "PCIe 4.0 x16", "NVLink bridge",
    "xGMI") or "network". A link NCCL's model does not name (AMD xGMI, a bridge) keeps its
    datasheet figure: there is no measurement to take its share from.

    Examples
    --------
    >>> link_efficiency("NVLink3"), link_efficiency("PCIe 4.0 x16") == LINK_EFFICIENCY["PCIe"]
    (0.8, True)
    >>> link_efficiency("xGMI")
    1.0
    """
    if link in LINK_EFFICIENCY:
        return LINK_EFFICIENCY[link]
    if link.lower().startswith("pcie"):
        return LINK_EFFICIENCY["PCIe"]
    return 1.0


#: NCCL's own latency model for the ring algorithm with its Simple protocol (NVIDIA/nccl,
#: src/graph/tuning.cc, ``baseLatencies`` and ``hwLatencies``, as recalibrated in NCCL 2.18):
#: a fixed launch latency per collective plus a latency per ring step, by the link the step
#: crosses. Seconds.
RING_BASE_LATENCY_S = 8.4e-6

HOP_LATENCY_S = {"nvlink": 3.4e-6, "pcie": 5.7e-6, "network": 14.0e-6}


#: The network proxy's cost of posting one step's send or receive, by host CPU vendor
#: (tuning.cc, ``getNetOverhead``: 2 µs on AMD x86 hosts, 1 µs on Intel and on every other
#: host). Seconds.
NET_POST_OVERHEAD_S = {"amd": 2.0e-6, "intel": 1.0e-6}

#: The overhead NCCL assumes for a host it does not name (Intel, Arm, unknown). Seconds.
DEFAULT_NET_POST_OVERHEAD_S = 1.0e-6

#: The Simple protocol posts three times per step (tuning.cc: ``netOverhead *= 3``).
SIMPLE_POST_FACTOR = 3


def ring_step_floor_s(host_cpu: str = "") -> float:
    """The least latency of any step of a ring that spans nodes, seconds.

    A ring over several nodes advances in lock step with its network proxy, so even its
    steps inside a node cannot be faster than the proxy posting them: NCCL's tuner charges
    every step of an inter-node ring at least 3 × the host's post overhead ("inter-node
    rings still have to launch nsteps * net overhead", tuning.cc, since NCCL 2.18). That is
    6 µs on AMD hosts (DGX A100), 3 µs on Intel hosts, above NVLink's 3.4 µs per step on
    the first.

    Examples
    --------
    >>> round(ring_step_floor_s("amd") * 1e6, 1), round(ring_step_floor_s("intel") * 1e6, 1), round(ring_step_floor_s() * 1e6, 1)
    (6.0, 3.0, 3.0)
    """
    return SIMPLE_POST_FACTOR * NET_POST_OVERHEAD_S.get(host_cpu, DEFAULT_NET_POST_OVERHEAD_S)


def intra_hardware(gpu: GpuType) -> str:
    """The hardware a step inside a node crosses, as NCCL's tuner names it: "nvlink" for
    NVLink-class links (and AMD's xGMI), "pcie" otherwise (the catalog's ``intra_link``)."""
    link = gpu.intra_link.lower()
    return "nvlink" if ("nvlink" in link or "xgmi" in link) else "pcie"


def intra_hop_latency_s(gpu: GpuType) -> float:
    """Per-step ring latency inside a node: NVLink-class links or PCIe (the catalog's ``intra_link``)."""
    return HOP_LATENCY_S[intra_hardware(gpu)]


def fabric(gpu: GpuType, gpus: int, nodes: int = 1, *, rdma: bool = True) -> Fabric:
    """What NCCL's tuner reads of ``gpus`` GPUs of type ``gpu`` on ``nodes`` nodes
    (:class:`~hetopt.costmodel.nccl.Fabric`): the link a step inside a node crosses, the GPU's
    generation and host CPU, and whether LL128 is enabled: NVLink inside the node and, across
    nodes, a GPUDirect RDMA network (``rdma``: :func:`is_rdma`; NCCL enables LL128 only up to a
    NIC on the GPU's own PCIe switch, which sockets over TCP are not).

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> gpus = load_gpus()
    >>> fabric(gpus["A100-SXM4-80GB"], 8)
    Fabric(gpus=8, nodes=1, link='nvlink', arch='ampere', host_cpu='amd', ll128=True)
    >>> fabric(gpus["T4"], 4).ll128, fabric(gpus["A100-SXM4-80GB"], 16, 2, rdma=False).ll128
    (False, False)
    """
    link = intra_hardware(gpu)
    return Fabric(gpus, max(1, nodes), link, gpu.arch, gpu.host_cpu, link == "nvlink" and (nodes <= 1 or rdma))


def ring_latency_s(steps: int, hop_latency_s: float) -> float:
    """α of a ring collective of ``steps`` steps: the launch latency plus one hop latency a step.

    0 when ``hop_latency_s`` is 0 (the bandwidth-only model).

    Examples
    --------
    >>> round(ring_latency_s(7, HOP_LATENCY_S["network"]) * 1e6, 1)
    106.4
    """
    if steps <= 0 or hop_latency_s <= 0:
        return 0.0
    return RING_BASE_LATENCY_S + steps * hop_latency_s


def ring_hop_latency_s(gpus: int, nodes: int, intra_hop_s: float, inter_hop_s: float, step_floor_s: float = 0.0) -> float:
    """The mean per-step latency of a ring of ``gpus`` GPUs over ``nodes`` nodes.

    NCCL orders a ring node by node, so of its p − 1 links n − 1 cross the network and the
    rest stay inside a node; every collective's steps walk those links in turn, a share
    (n − 1)/(p − 1) of them at the network's latency (NCCL's tuning.cc: ``nInterSteps``
    steps at the network figure, the others at the intra-node figure). When the ring spans
    nodes, an intra-node step costs at least ``step_floor_s`` (:func:`ring_step_floor_s`,
    the network proxy's posting).

    Examples
    --------
    >>> ring_hop_latency_s(8, 1, 3.4e-6, 14e-6) == 3.4e-6, ring_hop_latency_s(2, 2, 3.4e-6, 14e-6) == 14e-6
    (True, True)
    >>> round(ring_hop_latency_s(16, 2, 3.4e-6, 14e-6) * 1e6, 3)
    4.107
    >>> round(ring_hop_latency_s(16, 2, 3.4e-6, 14e-6, step_floor_s=6e-6) * 1e6, 3)
    6.533
    """
    if gpus <= 1:
        return intra_hop_s
    inter = min(max(nodes, 1), gpus) - 1
    intra = max(intra_hop_s, step_floor_s) if inter > 0 else intra_hop_s
    return ((gpus - 1 - inter) * intra + inter * inter_hop_s) / (gpus - 1)


def ring_allreduce_s(nbytes: float, gpus: int, bandwidth: float, hop_latency_s: float = 0.0) -> float:
    """Ring all-reduce of ``nbytes`` over ``gpus`` GPUs: 2·(p − 1)/p · n / w + α (0 for one GPU).

    α = ``ring_latency_s(2·(p − 1), hop_latency_s)``: a reduce-scatter and an all-gather of
    p − 1 steps each.

    Examples
    --------
    >>> ring_allreduce_s(1e9, 4, 1e10)
    0.15
    """
    if gpus <= 1:
        return 0.0
    return 2.0 * (gpus - 1) / gpus * nbytes / bandwidth + ring_latency_s(2 * (gpus - 1), hop_latency_s)


def ring_allgather_s(nbytes: float, gpus: int, bandwidth: float, hop_latency_s: float = 0.0) -> float:
    """Ring all-gather (or reduce-scatter) of ``nbytes`` in total: (p − 1)/p · n / w + α(p − 1 steps)."""
    if gpus <= 1:
        return 0.0
    return (gpus - 1) / gpus * nbytes / bandwidth + ring_latency_s(gpus - 1, hop_latency_s)


ring_reduce_scatter_s = ring_allgather_s


def boundary_bytes(cfg: ModelConfig, seq: int, samples: float, element_bytes: int = ACTIVATION_BYTES) -> float:
    """Bytes of a layer's output for ``samples`` samples: 2·s·b·h (what TP all-reduces and p2p
    sends); 4·s·b·h in fp32 and tf32 (``element_bytes`` 4).

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 1024, 16, 4096, 0, 1024)
    >>> boundary_bytes(gpt, 1024, 2), boundary_bytes(gpt, 1024, 2, element_bytes=4)
    (4194304, 8388608)
    """
    return element_bytes * seq * samples * cfg.hidden


def tp_layer_comm_s(cfg: ModelConfig, seq: int, samples: float, tp: int, bandwidth: float, hop_latency_s: float = 0.0,
                    element_bytes: int = ACTIVATION_BYTES) -> float:
    """Seconds of Megatron TP communication per layer per pass (forward, or backward), as the
    Simple ring prices it: two ring all-reduces of 2·s·b·h bytes over t GPUs of a node (each with
    its latency α). A stage's TP traffic is priced by NCCL's tuner (:func:`tp_collective_s`).

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 1024, 16, 4096, 0, 1024)
    >>> tp_layer_comm_s(gpt, 1024, 1, 2, 1e9) == 2 * (2 * 1 / 2 * 2 * 1024 * 1024 / 1e9)
    True
    """
    return TP_ALLREDUCES_PER_PASS * ring_allreduce_s(boundary_bytes(cfg, seq, samples, element_bytes), tp, bandwidth,
                                                     hop_latency_s)


def tp_collective_s(nbytes: float, bandwidth: float, fab: Fabric, *, sequence_parallel: bool = False) -> float:
    """Seconds of one of a layer's TP all-reduces of ``nbytes`` (the layer output, 2·s·b·h) over
    the TP group ``fab``, as NCCL's tuner runs it (:func:`~hetopt.costmodel.nccl.collective_s`):
    one all-reduce, or with sequence parallelism the reduce-scatter and the all-gather that
    replace it (the same bytes, two launches and their latencies).

    Examples
    --------
    >>> f = Fabric(8, 1, "nvlink", "ampere")
    >>> round(tp_collective_s(2**21, 240e9, f) * 1e6, 1), round(tp_collective_s(2**21, 240e9, f, sequence_parallel=True) * 1e6, 1)
    (56.8, 63.4)
    """
    if not sequence_parallel:
        return collective_s("allreduce", nbytes, bandwidth, fab)
    return collective_s("reducescatter", nbytes, bandwidth, fab) + collective_s("allgather", nbytes, bandwidth, fab)


def p2p_transfer_s(cfg: ModelConfig, seq: int, samples: float, bandwidth: float, element_bytes: int = ACTIVATION_BYTES) -> float:
    """One micro-batch's boundary activations (or their gradients) over a link: 2·s·b·h / w."""
    return boundary_bytes(cfg, seq, samples, element_bytes) / bandwidth


#: How a pipeline hands a micro-batch's boundary tensor to the next stage (``handover=``):
#: ``split``, each TP rank sends its 1/t share (Megatron-LM's scatter-gather, and every sequence-
#: parallel hand-over), the default; ``deepspeed``, DeepSpeed's pipeline engine with Megatron's
#: GPT pipe module as it ran in 2021 (v0.3.13, ``deepspeed/runtime/pipe/engine.py``): the
#: activations partitioned over the TP group and gathered again on both sides, the gradients
#: sent whole by every TP rank, the attention mask sent with every forward hand-over
#: (formulations/costmodel.md, "Hand-over between inner stages").
HANDOVERS = ("split", "deepspeed")

#: The hand-over of a layout or runtime that does not say.
DEFAULT_HANDOVER = "split"

#: Bytes per element of the (1, 1, s, s) causal attention mask DeepSpeed's pipeline engine sends
#: with every forward hand-over of Megatron's GPT pipe module: a bool tensor cast to fp16 because
#: NCCL cannot send bool (``_exec_send_activations``, v0.3.13; the mask is batch-independent:
#: Megatron's ``get_ltor_masks_and_position_ids`` builds one for the whole micro-batch).
PIPE_MASK_BYTES = 2


def pipe_mask_bytes(seq: int) -> float:
    """Bytes of the causal attention mask DeepSpeed's pipeline engine sends with every forward
    hand-over: ``PIPE_MASK_BYTES`` · s².

    Examples
    --------
    >>> pipe_mask_bytes(1024) == 2 * 1024 * 1024
    True
    """
    return PIPE_MASK_BYTES * seq * seq


def pipeline_link_s(cfg: ModelConfig, seq: int, microbatch_size: float, bandwidth: float,
                    element_bytes: int = ACTIVATION_BYTES) -> float:
    """Link time c between two pipeline blocks on different islands: activations forward plus gradients back.

    2 × 2·s·m·h / w for a micro-batch of m samples (``formulations/pipeline.md``: c is a round trip).

    Examples
    --------
    >>> gpt = ModelConfig("x", "gpt", 1, 4096, 32, 16384, 50257, 2048)
    >>> pipeline_link_s(gpt, 2048, 8, 12.5e9) == 2 * 2 * 2048 * 8 * 4096 / 12.5e9
    True
    """
    return 2.0 * p2p_transfer_s(cfg, seq, microbatch_size, bandwidth, element_bytes)


@dataclass(frozen=True)
class DataParallelComm:
    """Data-parallel communication of one stage, seconds per micro-batch (amortized).

    ``forward_s`` and ``backward_s`` are added to the stage's per-micro-batch times;
    ``per_iteration_s`` is the once-per-iteration part before amortization over M.
    """

    forward_s: float
    backward_s: float
    per_iteration_s: float


def exposed_s(comm_s: float, compute_s: float, buckets: int) -> float:
    """The part of ``comm_s`` of communication that ``compute_s`` of independent compute cannot hide.

    Runtimes cut data-parallel traffic into buckets (Megatron-Core ``--overlap-grad-reduce``
    and ``--overlap-param-gather``, PyTorch DDP and FSDP, DeepSpeed ZeRO prefetching) and
    run each on a separate stream while the next layer computes: the traffic hides behind
    the compute up to its length, except one bucket, the last reduced (or the first
    gathered), which nothing follows (or precedes). ``buckets`` is the number of such
    pieces (one per layer of the stage here).

    Examples
    --------
    >>> exposed_s(1.0, 0.4, 10), exposed_s(1.0, 5.0, 10), exposed_s(1.0, 5.0, 1)
    (0.6, 0.1, 1.0)
    """
    if comm_s <= 0:
        return 0.0
    return max(comm_s - compute_s, comm_s / max(1, buckets))


def data_parallel_comm(
    parameters: float, dp: int, bandwidth: float, *, zero_stage: int, microbatches: int,
    hop_latency_s: float = 0.0, collectives: int = 1, recompute_gather: bool = False,
    overlap: tuple[float, float] | None = None, buckets: int = 1, gradient_bytes: float = GRADIENT_BYTES,
    weight_bytes: float = WEIGHT_BYTES, fabric: Fabric | None = None,
) -> DataParallelComm:
    """Data-parallel (and ZeRO) traffic of a stage holding ``parameters`` per ring.

    ZeRO 0 and 1: one gradient all-reduce per iteration (stage 1 as reduce-scatter +
    all-gather, same volume), amortized over the M micro-batches. ZeRO 2: a gradient
    reduce-scatter every micro-batch (sharded gradients cannot accumulate locally) and a
    weight all-gather per iteration. ZeRO 3: weights all-gathered in forward and again in
    backward (and once more before a full recomputation, ``recompute_gather``), gradients
    reduce-scattered, every micro-batch, as ``collectives`` separate collectives each (one
    per parameter tensor: each pays the ring latency α).

    ``overlap`` = (forward, backward) compute seconds of one micro-batch of the stage: with
    it, the traffic overlaps compute as a runtime with bucketed, asynchronous collectives
    runs it (:func:`exposed_s`, ``buckets`` pieces): the once-per-iteration gradient
    reduction behind the last micro-batch's backward, the once-per-iteration weight gather
    behind the first micro-batch's forward, ZeRO-3's per-micro-batch gathers and
    reduce-scatters behind the forward and backward they feed. Without it (None) nothing
    overlaps (Megatron-LM 2021 reduced gradients after the backward pass).

    ``gradient_bytes`` per gradient element reduced: ``GRADIENT_BYTES`` (16-bit), or
    ``FP32_GRADIENT_BYTES`` when the runtime reduces in fp32 (the bytes double, the ring does not
    change). ``weight_bytes`` per weight ZeRO gathers: ``WEIGHT_BYTES``, 4 in fp32 and tf32.

    ``fabric``: the data-parallel group as NCCL's tuner sees it (:func:`fabric`); each collective
    then runs the algorithm and protocol NCCL picks for its size (:func:`~hetopt.costmodel.nccl.
    collective_s`, ``bandwidth`` the Simple ring's), ZeRO-3's ``collectives`` each of their share
    of the bytes. None: the ring with the Simple protocol and ``hop_latency_s`` a step.

    Examples
    --------
    >>> c = data_parallel_comm(1e9, 4, 1e10, zero_stage=0, microbatches=8)
    >>> c.per_iteration_s, c.backward_s
    (0.3, 0.0375)
    >>> round(data_parallel_comm(1e9, 4, 1e10, zero_stage=0, microbatches=8, overlap=(0.1, 0.2), buckets=4).backward_s, 9)
    0.0125
    >>> data_parallel_comm(1e9, 4, 1e10, zero_stage=0, microbatches=8, gradient_bytes=FP32_GRADIENT_BYTES).per_iteration_s
    0.6
    """
    if zero_stage not in ZERO_STAGES:
        raise ValueError(f"unknown ZeRO stage {zero_stage!r} (valid: 0, 1, 2, 3)")
    if microbatches < 1:
        raise ValueError(f"micro-batches must be >= 1 (got {microbatches})")
    if collectives < 1:
        raise ValueError(f"collectives must be >= 1 (got {collectives})")
    grads = gradient_bytes * parameters
    weights = weight_bytes * parameters
    if dp <= 1:
        return DataParallelComm(0.0, 0.0, 0.0)
    fwd, bwd = overlap if overlap is not None else (0.0, 0.0)
    buckets = buckets if overlap is not None else 1

    def hidden(comm_s: float, compute_s: float) -> float:
        return exposed_s(comm_s, compute_s, buckets) if overlap is not None else comm_s

    if fabric is not None:  # NCCL's tuner: each collective at the algorithm and protocol it picks

        def allreduce(n: float) -> float:
            return collective_s("allreduce", n, bandwidth, fabric)

        def allgather(n: float) -> float:
            return collective_s("allgather", n, bandwidth, fabric)

        def reduce_scatter(n: float) -> float:
            return collective_s("reducescatter", n, bandwidth, fabric)
    else:

        def allreduce(n: float) -> float:
            return ring_allreduce_s(n, dp, bandwidth, hop_latency_s)

        def allgather(n: float) -> float:
            return ring_allgather_s(n, dp, bandwidth, hop_latency_s)

        def reduce_scatter(n: float) -> float:
            return ring_reduce_scatter_s(n, dp, bandwidth, hop_latency_s)

    if zero_stage <= 1:
        once = allreduce(grads)
        return DataParallelComm(0.0, hidden(once, bwd) / microbatches, once)
    if zero_stage == 2:
        once = allgather(weights)
        scatter = reduce_scatter(grads)
        return DataParallelComm(0.0, hidden(scatter, bwd) + hidden(once, fwd) / microbatches, once)
    # ZeRO-3: the traffic is cut into `collectives` pieces, each paying its own latency
    if fabric is not None:
        gather = collectives * allgather(weights / collectives)
        scatter = collectives * reduce_scatter(grads / collectives)
    else:
        latency = collectives * ring_latency_s(dp - 1, hop_latency_s)
        gather = ring_allgather_s(weights, dp, bandwidth) + latency
        scatter = ring_reduce_scatter_s(grads, dp, bandwidth) + latency
    backward = gather + scatter + (gather if recompute_gather else 0.0)
    return DataParallelComm(hidden(gather, fwd), hidden(backward, bwd), 0.0)
