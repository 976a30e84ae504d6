"""Cephalo's alternative to a pipeline: FSDP over every GPU, each with its own batch.

The cluster's GPUs become allocation groups (one per catalog type), their latency and
memory come from the same analytic cost model the allocation generator uses, and the
allocation family's exact ``dp`` plans them. The FSDP collectives run a ring over all GPUs,
so they move at the slowest link between two nodes.
"""

from __future__ import annotations

import numpy as np

from hetopt import solvers
from hetopt.allocation.problem import AllocationInstance
from hetopt.builders.allocation import analytic_allocation
from hetopt.planner.cluster import Cluster
from hetopt.result import Result
from hetopt.units import BITS_PER_BYTE
from hetopt.workload import ModelConfig



def ring_bandwidth_gbps(cluster: Cluster) -> float:
    """The slowest link a ring over every GPU crosses, Gb/s: between nodes, or inside the one node."""
    inter = cluster.islands.inter
    n = inter.shape[0]
    if n == 1:
        return cluster.gpu_types[0].intra_bandwidth * BITS_PER_BYTE / 1e9
    off_diagonal = inter[~np.eye(n, dtype=bool)]
    return float(off_diagonal.min()) * BITS_PER_BYTE / 1e9


def fsdp_instance(cluster: Cluster, cfg: ModelConfig, global_batch: int, seq: int) -> AllocationInstance:
    """The allocation instance of FSDP on the whole cluster."""
    counts: dict[str, int] = {}
    types = {}
    for node, gpu in zip(cluster.islands.nodes, cluster.gpu_types):
        counts[gpu.name] = counts.get(gpu.name, 0) + node.gpus
        types[gpu.name] = gpu
    groups = [(types[name], counts[name]) for name in counts]
    return analytic_allocation(
        f"{cluster.name}-{cfg.name}-fsdp", groups, cfg, global_batch, seq, ring_bandwidth_gbps(cluster)
    )


def plan_fsdp(cluster: Cluster, cfg: ModelConfig, global_batch: int, seq: int, *, time_limit: float | None = None) -> Result:
    """Cephalo's plan for the cluster and model (allocation ``dp``, exact)."""
    return solvers.solve(fsdp_instance(cluster, cfg, global_batch, seq), "dp", time_limit=time_limit)
