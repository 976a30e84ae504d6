"""Data-parallel replicas for ``hetopt plan --replicas``: candidate pipelines in, a replicas plan out.

The cluster's islands are cut into equal units of ``UNIT_NODES`` nodes (an island of fewer
nodes is one unit of its own size), so a big island can host several replicas; units of one
GPU type, node size and internal bandwidth form a shape (interchangeable for the replicas
family). A candidate runs the whole model on k units of one shape (k in
``UNITS_PER_PIPELINE``), priced by the built-in parallelizer: T(n) = Σ stage times +
(n − 1)·slowest stage. Within a shape the slowest unit's GPU figures are used, so every
unit can run every candidate of its shape in the time stated. The cross-replica sync: each
GPU all-reduces its share of its stage's gradients with its counterparts in the other
replicas over its share of its node's network link (``network_link``).

The replicas family then picks the replicas and splits the micro-batches exactly *over
these candidates*; as a plan of the cluster it is FEASIBLE with the ideal time as bound
(the candidates are not every way to use the islands). Figures:
``formulations/replicas.md``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np

from hetopt import solvers
from hetopt.costmodel import GRADIENT_BYTES
from hetopt.family import Deadline
from hetopt.planner.parallelizer.builtin import best_single_island_plan
from hetopt.planner.setup.cluster import Cluster
from hetopt.planner.search.compose import island_specs
from hetopt.planner.parallelizer.protocol import IslandSpec
from hetopt.replicas.problem import Candidate, IslandShape, ReplicasInstance
from hetopt.result import Result, Status, relative_gap
from hetopt.tables import counted
from hetopt.workload import ModelConfig, layer_parameters

#: Nodes per unit a large island is cut into: 8 nodes of 8 GPUs (64 GPUs) hold GPT-3 175B
#: in one pipeline (tp4 pp16 on H100), and a 48-61-node island then gives 6-7 units.
UNIT_NODES = 8
#: Units one candidate pipeline may span (64 to 512 GPUs of one type with 8-node units).
UNITS_PER_PIPELINE = (1, 2, 3, 4, 6, 8)


@dataclass
class UnitShape:
    """Units of one GPU type, node size and internal bandwidth (interchangeable)."""

    gpu: str
    gpus_per_node: int
    unit_nodes: int
    inter_bandwidth: float
    count: int
    spec: IslandSpec  # the slowest unit's figures
    first_node: int  # a node of the shape, for its network links
    islands: list[tuple[str, int]] = field(default_factory=list)  # (island, its units), in order
    #: Set by :func:`unit_shapes` when two shapes differ only in their internal bandwidth
    #: (e.g. the pods of a datacenter): the bandwidth then joins the name, which must be unique.
    bandwidth_in_name: bool = False

    @property
    def name(self) -> str:
        """E.g. ``H100-SXM5-8x8``: GPU type, nodes per unit × GPUs per node (and
        ``@400Gbps``, the bandwidth between the unit's nodes, when that alone tells shapes apart)."""
        base = f"{self.gpu}-{self.unit_nodes}x{self.gpus_per_node}"
        return f"{base}@{self.inter_bandwidth * 8 / 1e9:.4g}Gbps" if self.bandwidth_in_name else base


def unit_shapes(cluster: Cluster, members: list[list[int]]) -> list[UnitShape]:
    """The islands (node indices) cut into units and grouped into shapes (largest count first)."""
    shapes: dict[tuple, UnitShape] = {}
    for group, spec in zip(members, island_specs(cluster, members)):
        unit = UNIT_NODES if spec.nodes >= UNIT_NODES else spec.nodes
        unit_spec = replace(spec, nodes=unit, name=f"{spec.gpu.name}-{unit}x{spec.gpus_per_node}",
                            inter_bandwidth=spec.inter_bandwidth if unit > 1 else 0.0)
        key = (spec.gpu.name, spec.gpus_per_node, unit, unit_spec.inter_bandwidth)
        if key not in shapes:
            shapes[key] = UnitShape(spec.gpu.name, spec.gpus_per_node, unit, unit_spec.inter_bandwidth, 0, unit_spec,
                                    group[0])
        shape = shapes[key]
        shape.count += spec.nodes // unit
        shape.islands.append((spec.name, spec.nodes // unit))
        if spec.gpu.fp16_flops < shape.spec.gpu.fp16_flops:  # keep the slowest unit's GPU
            shape.spec = replace(shape.spec, gpu=spec.gpu)
    # shapes are keyed by bandwidth too: where that alone tells two apart, their names say it
    by_name = Counter(s.name for s in shapes.values())
    for shape in shapes.values():
        shape.bandwidth_in_name = by_name[shape.name] > 1
    return sorted(shapes.values(), key=lambda s: (-s.count, s.name))


def network_link(cluster: Cluster, node: int) -> float:
    """A node's share of the network for the cross-replica ring, bytes/s.

    The slowest link from ``node`` to any node whose own best link is at least as fast as
    ``node``'s (its ring neighbours are no worse connected than itself): the core share
    between halls for most nodes of a datacenter, the node's own NIC for a slow one.
    """
    inter = cluster.islands.inter
    best = inter.max(axis=1)
    peers = (best >= best[node]) & (np.arange(len(inter)) != node)
    return float(inter[node, peers].min()) if peers.any() else float(best[node])


def replicas_instance(
    cluster: Cluster, cfg: ModelConfig, members: list[list[int]], *, name: str, global_batch: int,
    microbatch_size: int = 1, seq: int | None = None, deadline: Deadline | None = None,
) -> ReplicasInstance | None:
    """The replicas instance of a cluster's islands (see the module docstring).

    Returns None when no candidate fits (no unit holds the model) or the deadline passes
    before the first candidate.
    """
    n_total = global_batch // microbatch_size
    kept, candidates = [], []
    for shape in unit_shapes(cluster, members):
        mine = []
        # a cluster of one node has no network: one replica at most, whose sync crosses
        # nothing; its GPU links stand in (the family needs a figure, and none is used)
        link = network_link(cluster, shape.first_node) or shape.spec.intra_bandwidth
        for k in UNITS_PER_PIPELINE:
            if k > shape.count or (deadline is not None and deadline.expired()):
                break
            # units of one pipeline may sit in different islands: past one unit, the links
            # between its nodes are taken at the node's cross-island figure
            inside = shape.inter_bandwidth if k == 1 else min(shape.inter_bandwidth or link, link)
            spec = replace(shape.spec, nodes=k * shape.unit_nodes, name=f"{shape.name}*{k}",
                           inter_bandwidth=inside if k * shape.unit_nodes > 1 else 0.0)
            plan = best_single_island_plan(cfg, spec, microbatch_size=microbatch_size, microbatches=n_total, seq=seq)
            if plan is None:
                continue
            stage_params = max(st.layers for st in plan.stages) * layer_parameters(cfg)
            mine.append((k, Candidate(
                name=f"{shape.name}*{k}",
                uses=(),  # filled below, once the shapes kept are known
                fill_s=plan.total_time_s,
                per_microbatch_s=plan.max_time_s,
                gradient_bytes=GRADIENT_BYTES * stage_params / (plan.tp * plan.dp),
                bandwidth=link / shape.gpus_per_node,
                stages=f"{plan.layout}, {counted(len(plan.stages), 'stage')} on {counted(plan.gpus, 'GPU')}",
            )))
        if mine:
            kept.append(shape)
            candidates.append(mine)
    if not kept:
        return None
    shape_list = tuple(IslandShape(s.name, s.count, s.gpu, s.unit_nodes * s.gpus_per_node) for s in kept)
    cand_list = tuple(replace(cand, uses=tuple(k if j == i else 0 for j in range(len(kept))))
                      for i, mine in enumerate(candidates) for k, cand in mine)
    return ReplicasInstance(name, n_total, shape_list, cand_list)


@dataclass(frozen=True)
class ReplicaRow:
    """One replica of the plan, for the report."""

    candidate: str
    units: str
    islands: str  # the units' islands, e.g. "hall-0-pod-1-r0-n64+55 ×4"
    stages: str
    microbatches: int
    samples: int
    time_s: float


@dataclass
class ReplicasPlan:
    """Data-parallel replicas beside the single-pipeline plan (times in seconds)."""

    status: Status
    reason: str = ""
    iteration_time_s: float | None = None
    sync_s: float | None = None
    bound_s: float | None = None  # the ideal time: a lower bound on any plan of the cluster
    gap: float | None = None
    efficiency: float | None = None
    method_status: str = ""  # the replicas family's own status over its candidates
    candidates: int = 0
    shapes: list[dict] = field(default_factory=list)
    replicas: list[ReplicaRow] = field(default_factory=list)
    planning_s: float = 0.0


def plan_replicas(
    cluster: Cluster, cfg: ModelConfig, islands: Result, *, global_batch: int, ideal_s: float,
    microbatch_size: int = 1, seq: int | None = None, deadline: Deadline | None = None,
) -> ReplicasPlan:
    """Candidates from the islands, the replicas family's ``dp`` over them, as a :class:`ReplicasPlan`.

    The status is FEASIBLE with the ideal time as bound whenever a plan is found (the
    candidates are a heuristic choice, so no plan of the cluster is proven optimal), or the
    reason there is none.
    """
    deadline = deadline or Deadline(None)
    if not islands.status.has_solution:
        return ReplicasPlan(Status.ERROR, reason="no islands")
    index = cluster.islands.index
    members = [[index[n] for n in isl.nodes] for isl in islands.solution.islands]
    instance = replicas_instance(cluster, cfg, members, name=f"{cluster.name}-{cfg.name}-replicas",
                                 global_batch=global_batch, microbatch_size=microbatch_size, seq=seq,
                                 deadline=deadline)
    if instance is None:
        return ReplicasPlan(Status.INFEASIBLE if not deadline.expired() else Status.TIME_LIMIT,
                            reason="no unit of any island holds the model" if not deadline.expired()
                            else "time limit reached while pricing the candidates", planning_s=deadline.elapsed())
    result = solvers.solve(instance, "dp", time_limit=deadline.seconds_left())
    out = ReplicasPlan(Status.ERROR, candidates=len(instance.candidates), method_status=result.status.value,
                       shapes=[{"name": s.name, "count": s.count, "gpu": s.gpu, "gpus": s.gpus} for s in instance.shapes],
                       planning_s=deadline.elapsed())
    if not result.status.has_solution:
        out.status, out.reason = result.status, result.reason
        return out
    sol = result.solution
    out.status = Status.FEASIBLE
    out.iteration_time_s = result.objective
    out.sync_s = sol.sync_s
    out.bound_s = ideal_s
    out.gap = relative_gap(result.objective, ideal_s)
    out.efficiency = ideal_s / result.objective
    free = {s.name: list(s.islands) for s in unit_shapes(cluster, members)}
    for r, isl, t in zip(sol.replicas, sol.islands, sol.times):
        cand = instance.candidates[r.candidate]
        where = [_take_units(free[shape.name], u) for shape, u in zip(instance.shapes, cand.uses) if u]
        out.replicas.append(ReplicaRow(cand.name, isl, " + ".join(where), cand.stages, r.microbatches,
                                       r.microbatches * microbatch_size, t))
    return out


def _take_units(free: list[tuple[str, int]], units: int) -> str:
    """Take ``units`` units from the islands in ``free`` (first fit, updated in place), e.g. "a ×3 + b ×1"."""
    taken = []
    for i, (name, left) in enumerate(free):
        if units == 0:
            break
        k = min(left, units)
        if k:
            taken.append(f"{name} ×{k}")
            free[i] = (name, left - k)
            units -= k
    return " + ".join(taken)
