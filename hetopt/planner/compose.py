"""Composing partial plans into a pipeline through the pipeline family.

The planner's islands, the parallelizer's partial plans and the cost model's link times
become a :class:`hetopt.pipeline.problem.PipelineInstance`; the pipeline family's exact
``dp`` composes it. ``restricted_instance`` keeps only given slice lengths per island: the
uniform and compute-proportional baselines are compositions with fixed layer counts.
"""

from __future__ import annotations

import contextlib
import math

from collections.abc import Sequence

import numpy as np

from hetopt import costmodel as cm
from hetopt.errors import InputError
from hetopt.pipeline.problem import MAX_MICROBATCHES, BelowResolution, MIN_TIME_S, PipelineInstance, PipelineOption
from hetopt.planner.parallelizer import divisors as _all_divisors
from hetopt.planner.cluster import Cluster
from hetopt.planner.parallelizer import IslandSpec, PartialPlan, Parallelizer
from hetopt.workload import ModelConfig


def uncomposable_microbatch_sizes(global_batch: int, microbatch_size: int | None) -> list[int]:
    """The divisors of the global batch that :func:`microbatch_candidates` leaves out because
    they cut it into more micro-batches than the pipeline family composes (none when a size is
    given: that one is checked there).

    Examples
    --------
    >>> uncomposable_microbatch_sizes(262144, None)
    [1, 2]
    """
    if microbatch_size is not None:
        return []
    return [m for m in _all_divisors(global_batch) if global_batch // m > MAX_MICROBATCHES]


def microbatch_candidates(global_batch: int, microbatch_size: int | None) -> list[int]:
    """The micro-batch sizes to plan for: the one given, or every divisor of the global batch,
    powers of two first (ascending), then the others (ascending).

    Every divisor, because a data-parallel degree d needs d | m and practitioners run any d
    the GPU count allows (Megatron's 2,520-sample batch on 2,520 GPUs runs d = 9). The
    planner skips a size whose lower bound (:func:`pipeline_lower_bound`) cannot beat the
    best plan found, so the order puts the likely fast sizes first. Sizes that would cut the
    batch into more micro-batches than the pipeline family composes
    (``hetopt.pipeline.problem.MAX_MICROBATCHES``) are not candidates: no pipeline of them can
    be composed, so leaving them out loses no plan the planner could have returned.

    Raises
    ------
    InputError
        When ``microbatch_size`` does not divide the global batch, or cuts it into more
        micro-batches than the pipeline family composes (``field`` names the argument).

    Examples
    --------
    >>> microbatch_candidates(24, None)
    [1, 2, 4, 8, 3, 6, 12, 24]
    >>> microbatch_candidates(131072, None)[:3]  # 131,072 micro-batches of 1 is past the limit
    [2, 4, 8]
    """
    if microbatch_size is not None:
        if microbatch_size < 1 or global_batch % microbatch_size:
            divisors = _all_divisors(global_batch)[:8]
            raise InputError(
                f"microbatch_size {microbatch_size}: must divide the global batch {global_batch} "
                f"(try one of {', '.join(str(d) for d in divisors)})", field="microbatch_size"
            )
        if global_batch // microbatch_size > MAX_MICROBATCHES:
            least = next(m for m in _all_divisors(global_batch) if global_batch // m <= MAX_MICROBATCHES)
            raise InputError(
                f"microbatch_size {microbatch_size}: cuts the global batch {global_batch} into "
                f"{global_batch // microbatch_size} micro-batches, more than the {MAX_MICROBATCHES} a pipeline "
                f"composes (give at least {least})", field="microbatch_size"
            )
        return [microbatch_size]
    every = [m for m in _all_divisors(global_batch) if global_batch // m <= MAX_MICROBATCHES]
    powers = [m for m in every if m & (m - 1) == 0]
    return powers + [m for m in every if m & (m - 1)]


def pipeline_lower_bound(work_flops: float, island_flops: Sequence[float], microbatches: int) -> float:
    """A lower bound on the 1F1B iteration time of every plan with ``microbatches`` micro-batches.

    ``work_flops`` is the iteration's training FLOPs (no recomputation), ``island_flops`` each
    island's peak × GEMM-efficiency asymptote: no stage of this cost model runs faster. With
    M micro-batches and island i computing for u_i seconds per micro-batch, every plan has
    T ≥ Σ u_i + (M − 1)·max u_i and Σ u_i·F_i ≥ W/M. The least such T over u ≥ 0 is
    min over k of (M − 1 + k)·(W/M)/(F_1 + … + F_k), islands by F descending
    (formulations/costmodel.md, "The planner on top").

    Examples
    --------
    >>> pipeline_lower_bound(100.0, [10.0], 4)  # one island: the ideal, whatever M
    10.0
    >>> pipeline_lower_bound(100.0, [10.0, 10.0], 1)  # one micro-batch cannot use two islands at once
    10.0
    >>> pipeline_lower_bound(100.0, [10.0, 10.0], 100)  # many: close to the ideal W / ΣF
    5.05
    """
    if microbatches < 1 or work_flops < 0 or not island_flops or min(island_flops) <= 0:
        raise ValueError("need M >= 1, W >= 0 and positive island FLOP/s")
    per = work_flops / microbatches
    best, total = math.inf, 0.0
    for k, f in enumerate(sorted(island_flops, reverse=True), start=1):
        total += f
        best = min(best, (microbatches - 1 + k) * per / total)
    return best


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
                       intra_bandwidth=nodes[0].intra_bytes_s, p2p=_island_p2p(cluster, group),
                       transport=nodes_transport(cluster, group), memory=_island_memory(nodes, gpu))
        )
    return specs


def _island_memory(nodes: Sequence, gpu) -> float | None:
    """The island's memory per GPU: its nodes' least ``memory_gib`` (the cluster file's, whose default is
    the catalog's); None when that is the catalog's figure, so the island's key stays as before."""
    least = min(n.memory_bytes for n in nodes)
    return None if least == gpu.memory_bytes else float(least)


def _island_p2p(cluster: Cluster, group: list[int]) -> bool | None:
    """The island's ``p2p``: its nodes' common key; False if any node says false (its collectives
    run at the slowest node's pace); None when no node gives it."""
    given = [cluster.node_p2p(k) for k in group]
    if False in given:
        return False
    return True if given and all(given) else None


def nodes_transport(cluster: Cluster, nodes: Sequence[int]) -> str | None:
    """How NCCL crosses the network between ``nodes``: "tcp" if any of them says so (a ring or
    a transfer runs at its slowest end), "rdma" if all do, None (by bandwidth) otherwise."""
    given = [cluster.node_transport(k) for k in nodes]
    if "tcp" in given:
        return "tcp"
    return "rdma" if given and all(t == "rdma" for t in given) else None


def link_matrix(cluster: Cluster, members: Sequence[Sequence[int]], cfg: ModelConfig, seq: int, microbatch_size: int,
                element_bytes: int = cm.ACTIVATION_BYTES) -> tuple[tuple[float, ...], ...]:
    """c(i, j): one micro-batch's activations and gradients between islands i and j.

    A block boundary is one point-to-point transfer, which a runtime places on the best
    connected pair of nodes: the widest link between the two islands. ``element_bytes`` per
    activation element (:func:`job_element_bytes`).
    """
    inter = cluster.islands.inter
    n = len(members)
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            bw = float(max(inter[a, b] for a in members[i] for b in members[j]))
            achieved = bw * cm.network_efficiency(bw, nodes_transport(cluster, [*members[i], *members[j]]))
            out[i, j] = out[j, i] = cm.pipeline_link_s(cfg, seq, microbatch_size, achieved, element_bytes)
    return tuple(tuple(float(x) for x in row) for row in out)


def job_element_bytes(parallelizer: Parallelizer) -> int:
    """Bytes per activation element of the job a parallelizer prices: its precision's
    (``cm.element_bytes``), 16 bits when it names none yet."""
    return cm.element_bytes(parallelizer.running.precision or cm.DEFAULT_PRECISION)


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
    with below_resolution(cfg):
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


@contextlib.contextmanager
def below_resolution(cfg: ModelConfig):
    """Name the model when the cost model prices a stage or link of it below the pipeline
    family's 1 µs resolution (``MIN_TIME_S``: a sequence of one token, a model a few units
    wide), which the solvers cannot represent; the family's own message names only its
    internal key."""
    try:
        yield
    except BelowResolution as exc:
        raise InputError(f"model {cfg.name}: the cost model prices a stage or a link of it below {MIN_TIME_S:g} s at "
                         f"this sequence length, which the solvers do not represent ({exc}); plan a longer sequence "
                         "(--seq) or a larger model") from None


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
