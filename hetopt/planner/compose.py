"""Composing partial plans into a pipeline through the pipeline family.

The planner's islands, the parallelizer's partial plans and the cost model's link times
become a :class:`hetopt.pipeline.problem.PipelineInstance`; the pipeline family's exact
``dp`` composes it. ``restricted_instance`` keeps only given slice lengths per island: the
uniform and compute-proportional baselines are compositions with fixed layer counts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hetopt import costmodel as cm
from hetopt.errors import InputError
from hetopt.pipeline.problem import PipelineInstance, PipelineOption
from hetopt.planner.parallelizer import divisors as _all_divisors
from hetopt.planner.cluster import Cluster
from hetopt.planner.parallelizer import IslandSpec, PartialPlan
from hetopt.workload import ModelConfig


#: Micro-batch sizes tried when none is given: powers of two up to this (samples).
MAX_AUTO_MICROBATCH = 16


def microbatch_candidates(global_batch: int, microbatch_size: int | None) -> list[int]:
    """The micro-batch sizes to plan for: the one given, or every power of two up to
    ``MAX_AUTO_MICROBATCH`` that divides the global batch.

    Raises
    ------
    InputError
        When ``microbatch_size`` does not divide the global batch.

    Examples
    --------
    >>> microbatch_candidates(24, None)
    [1, 2, 4, 8]
    """
    if microbatch_size is not None:
        if microbatch_size < 1 or global_batch % microbatch_size:
            divisors = _all_divisors(global_batch)[:8]
            raise InputError(
                f"--microbatch {microbatch_size}: must divide the global batch {global_batch} "
                f"(try one of {', '.join(str(d) for d in divisors)})"
            )
        return [microbatch_size]
    out, m = [], 1
    while m <= min(MAX_AUTO_MICROBATCH, global_batch):
        if global_batch % m == 0:
            out.append(m)
        m *= 2
    return out


def island_specs(cluster: Cluster, members: Sequence[Sequence[int]]) -> list[IslandSpec]:
    """IslandSpecs of the islands (node indices of ``cluster``), named after their first node.

    Inside an island the inter-node bandwidth is its slowest internal link (a collective over
    all its nodes runs at that pace).
    """
    inter = cluster.islands.inter
    specs = []
    for group in members:
        group = list(group)
        nodes = [cluster.islands.nodes[k] for k in group]
        gpu = cluster.gpu_types[group[0]]
        bw = min((inter[a, b] for a in group for b in group if a != b), default=0.0)
        name = nodes[0].name if len(nodes) == 1 else f"{nodes[0].name}+{len(nodes) - 1}"
        specs.append(
            IslandSpec(name, gpu, nodes=len(nodes), gpus_per_node=nodes[0].gpus, inter_bandwidth=float(bw),
                       intra_bandwidth=nodes[0].intra_bytes_s)
        )
    return specs


def link_matrix(cluster: Cluster, members: Sequence[Sequence[int]], cfg: ModelConfig, seq: int, microbatch_size: int) -> tuple[tuple[float, ...], ...]:
    """c(i, j): one micro-batch's activations and gradients between islands i and j.

    A block boundary is one point-to-point transfer, which a runtime places on the best
    connected pair of nodes: the widest link between the two islands.
    """
    inter = cluster.islands.inter
    n = len(members)
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            bw = max(inter[a, b] for a in members[i] for b in members[j])
            out[i, j] = out[j, i] = cm.pipeline_link_s(cfg, seq, microbatch_size, float(bw))
    return tuple(tuple(float(x) for x in row) for row in out)


def pipeline_instance(
    name: str,
    cfg: ModelConfig,
    islands: Sequence[IslandSpec],
    plans: dict[int, list[PartialPlan]],
    links: tuple[tuple[float, ...], ...],
    microbatches: int,
    memory_fraction: float,
) -> tuple[PipelineInstance, list[PartialPlan]]:
    """The composition instance and, per option index, the partial plan behind it.

    Options equal as pipeline options (same island, stages and role) are kept once.
    """
    options: list[PipelineOption] = []
    behind: list[PartialPlan] = []
    seen: set[PipelineOption] = set()
    for i in sorted(plans):
        for plan in plans[i]:
            option = plan.to_option(i)
            if option in seen:
                continue
            seen.add(option)
            options.append(option)
            behind.append(plan)
    instance = PipelineInstance(
        name=name,
        layers=cfg.layers,
        microbatches=microbatches,
        islands=tuple(s.to_island() for s in islands),
        options=tuple(options),
        link_s=links,
        memory_fraction=memory_fraction,
    )
    return instance, behind


def split_layers(weights: Sequence[float], layers: int) -> list[int]:
    """Whole layer counts proportional to ``weights`` summing to ``layers`` (largest remainder).

    Examples
    --------
    >>> split_layers([1, 1, 2], 10)
    [3, 2, 5]
    """
    total = float(sum(weights))
    exact = [w / total * layers for w in weights]
    counts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (exact[i] - counts[i], -i), reverse=True)
    for i in order[: layers - sum(counts)]:
        counts[i] += 1
    return counts
