"""Cephalo's alternative to a pipeline: FSDP over every GPU, each with its own batch.

The cluster's GPUs become allocation groups (one per catalog type), their latency and
memory come from the same analytic cost model the allocation generator uses, and the
allocation family's exact ``dp`` plans them. The FSDP collectives run a ring over all GPUs,
so they move at what NCCL achieves on the slowest link between two nodes.
"""

from __future__ import annotations

import numpy as np

from hetopt import costmodel as cm
from hetopt import solvers
from hetopt.allocation.problem import AllocationInstance
from hetopt.builders.allocation import analytic_allocation
from hetopt.costmodel.running import Running
from hetopt.planner.cluster import Cluster
from hetopt.planner.compose import nodes_transport
from hetopt.result import Result
from hetopt.units import BITS_PER_BYTE
from hetopt.workload import ModelConfig



def ring_bandwidth_gbps(cluster: Cluster) -> float:
    """What NCCL achieves on the slowest link a ring over every GPU crosses, Gb/s: between
    nodes (over TCP or RDMA, ``cm.network_efficiency``), or inside the one node (peer to peer
    or through host memory, ``cm.intra_link_efficiency``), as the pipeline's stages are priced."""
    inter = cluster.islands.inter
    n = inter.shape[0]
    if n == 1:
        node = cluster.islands.nodes[0]
        share = cm.intra_link_efficiency(cluster.gpu_types[0].intra_link, cluster.node_p2p(0))
        return node.intra_bytes_s * share * BITS_PER_BYTE / 1e9
    slowest = float(inter[~np.eye(n, dtype=bool)].min())
    achieved = slowest * cm.network_efficiency(slowest, nodes_transport(cluster, range(n)))
    return achieved * BITS_PER_BYTE / 1e9


def fsdp_instance(cluster: Cluster, cfg: ModelConfig, global_batch: int, seq: int,
                  running: Running | None = None) -> AllocationInstance:
    """The allocation instance of FSDP on the whole cluster, run as ``running`` says (the plan's:
    its precision, TF32 where allowed, its gradient reduction; None: the hardware's 16 bits)."""
    counts: dict[str, int] = {}
    types = {}
    for node, gpu in zip(cluster.islands.nodes, cluster.gpu_types):
        counts[gpu.name] = counts.get(gpu.name, 0) + node.gpus
        types[gpu.name] = gpu
    groups = [(types[name], counts[name]) for name in counts]
    return analytic_allocation(
        f"{cluster.name}-{cfg.name}-fsdp", groups, cfg, global_batch, seq, ring_bandwidth_gbps(cluster), running
    )


def plan_fsdp(cluster: Cluster, cfg: ModelConfig, global_batch: int, seq: int, *, time_limit: float | None = None,
              running: Running | None = None) -> Result:
    """Cephalo's plan for the cluster and model (allocation ``dp``, exact), run as ``running`` says."""
    return solvers.solve(fsdp_instance(cluster, cfg, global_batch, seq, running), "dp", time_limit=time_limit)


#: The running settings the allocation model does not express, with the value it assumes: its
#: time is max(AG, F) + max(AG + RS, F + G), the collectives always overlapped, and affine in the
#: batch, with no host's floor (formulations/allocation.md). A plan run otherwise prices its FSDP
#: alternative without them, and its row says so.
ALLOCATION_ASSUMES = {"overlap": True, "host": "torch2"}


def ignored(running: Running) -> tuple[str, ...]:
    """The ``--runtime`` keys of ``running`` the FSDP alternative is priced without.

    >>> ignored(Running()), ignored(Running(overlap=False, host="torch1"))
    ((), ('overlap', 'host'))
    """
    from hetopt.costmodel.running import KEYS

    return tuple(k.text for k in KEYS if k.field in ALLOCATION_ASSUMES and getattr(running, k.field) != ALLOCATION_ASSUMES[k.field])
