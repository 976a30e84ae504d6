"""Replicas instances built from a shipped cluster and the planner's cost model.

``hetopt generate replicas`` rewrites ``instances/replicas/datacenter-*.toml``: the
cluster's islands (the islands family's optimum, as ``hetopt plan`` finds them) are cut into
equal units of ``UNIT_NODES`` nodes (an island of fewer nodes is one unit of its own size);
units of one GPU type, node size and internal bandwidth form a shape. A candidate pipeline
runs the whole model on k units of one shape (k in ``UNITS_PER_PIPELINE``): the planner's
built-in parallelizer (``best_single_island_plan``) gives its stages, so
T(n) = Σ stage times + (n − 1)·slowest stage, i.e. ``fill_s`` and ``per_microbatch_s``.
Within a shape the slowest unit's GPU figures are used, so every unit can run every
candidate of its shape in the time stated.

The cross-replica sync: each GPU of a replica all-reduces its share of the gradients of its
stage (2 bytes per parameter of the stage's layers, divided over tensor and data
parallelism) with its counterparts in the other replicas, over its share of its node's
link to the rest of the cluster (the slowest link between two islands, divided by the GPUs
of a node). Figures: ``formulations/replicas.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from hetopt import solvers
from hetopt.costmodel import GRADIENT_BYTES
from hetopt.generate.toml import dumps
from hetopt.planner.builtin import best_single_island_plan
from hetopt.planner.cluster import Cluster, load_cluster
from hetopt.planner.compose import island_specs
from hetopt.planner.parallelizer import IslandSpec
from hetopt.planner.plan import as_model
from hetopt.replicas.problem import GBPS, Candidate, IslandShape, ReplicasInstance
from hetopt.replicas.synthetic import random_instance
from hetopt.units import GIB
from hetopt.workload import ModelConfig, layer_parameters

#: Nodes per unit a large island is cut into: 8 nodes of 8 GPUs (64 GPUs) hold GPT-3 175B
#: in one pipeline (tp4 pp16 on H100), and a 48-61-node island then gives 6-7 replicas.
UNIT_NODES = 8
#: Units one candidate pipeline may span (1 to 8 units: 64 to 512 GPUs of one type).
UNITS_PER_PIPELINE = (1, 2, 3, 4, 6, 8)
#: The micro-batch size of every candidate (samples); N = global batch / it.
MICROBATCH_SIZE = 1


@dataclass(frozen=True)
class Setting:
    """One generated instance."""

    name: str
    cluster: str
    model: str
    global_batch: int


SETTINGS = (Setting("datacenter-512-gpt3-175b-b1536", "datacenter-512-nodes", "gpt3-175b", 1536),)

#: The seeded random instances shipped beside it (``hetopt.replicas.synthetic``): seed and
#: the generator's sizes (shapes, most islands per shape, candidates, N).
RANDOM = (
    (1, {"shapes": 3, "max_count": 4, "candidates": 6, "microbatches": 16}),
    (2, {"shapes": 4, "max_count": 6, "candidates": 12, "microbatches": 64}),
    (3, {"shapes": 5, "max_count": 8, "candidates": 24, "microbatches": 256}),
)


@dataclass
class _Shape:
    gpu: str
    gpus_per_node: int
    unit_nodes: int
    inter_bandwidth: float
    count: int
    spec: IslandSpec  # the slowest unit's figures
    first_node: int  # a node of the shape (all of a shape's nodes share their network links)

    @property
    def name(self) -> str:
        return f"{self.gpu}-{self.unit_nodes}x{self.gpus_per_node}"


def unit_shapes(cluster: Cluster) -> list[_Shape]:
    """The cluster's islands cut into units and grouped into shapes (largest count first)."""
    islands = solvers.solve(cluster.islands)
    index = cluster.islands.index
    members = [[index[n] for n in isl.nodes] for isl in islands.solution.islands]
    shapes: dict[tuple, _Shape] = {}
    for group, spec in zip(members, island_specs(cluster, members)):
        unit = UNIT_NODES if spec.nodes >= UNIT_NODES else spec.nodes
        units = spec.nodes // unit
        unit_spec = replace(spec, nodes=unit, name=f"{spec.gpu.name}-{unit}x{spec.gpus_per_node}",
                            inter_bandwidth=spec.inter_bandwidth if unit > 1 else 0.0)
        key = (spec.gpu.name, spec.gpus_per_node, unit, unit_spec.inter_bandwidth)
        if key not in shapes:
            shapes[key] = _Shape(spec.gpu.name, spec.gpus_per_node, unit, unit_spec.inter_bandwidth, 0, unit_spec,
                                 group[0])
        shape = shapes[key]
        shape.count += units
        if spec.gpu.fp16_flops < shape.spec.gpu.fp16_flops:  # keep the slowest unit's GPU
            shape.spec = replace(shape.spec, gpu=spec.gpu)
    return sorted(shapes.values(), key=lambda s: (-s.count, s.name))


def network_link(cluster: Cluster, node: int) -> float:
    """A node's share of the network for the cross-replica ring, bytes/s.

    The slowest link from ``node`` to any node whose own best link is at least as fast as
    ``node``'s (its ring neighbours are no worse connected than itself): the core share
    between halls for most nodes, the node's own NIC for a slow one.
    """
    inter = cluster.islands.inter
    best = inter.max(axis=1)
    peers = (best >= best[node]) & (np.arange(len(inter)) != node)
    return float(inter[node, peers].min()) if peers.any() else float(best[node])


def build_instance(setting: Setting) -> ReplicasInstance:
    """The replicas instance of one setting (see the module docstring)."""
    cluster = load_cluster(setting.cluster)
    cfg: ModelConfig = as_model(setting.model)
    n_total = setting.global_batch // MICROBATCH_SIZE
    shapes = unit_shapes(cluster)
    kept, candidates = [], []
    for shape in shapes:
        mine = []
        link = network_link(cluster, shape.first_node)
        for k in UNITS_PER_PIPELINE:
            if k > shape.count:
                break
            # units of one pipeline may sit in different islands: past one unit, the links
            # between its nodes are taken at the node's cross-island figure
            inside = shape.inter_bandwidth if k == 1 else min(shape.inter_bandwidth or link, link)
            spec = replace(shape.spec, nodes=k * shape.unit_nodes, name=f"{shape.name}*{k}",
                           inter_bandwidth=inside if k * shape.unit_nodes > 1 else 0.0)
            plan = best_single_island_plan(cfg, spec, microbatch_size=MICROBATCH_SIZE, microbatches=n_total)
            if plan is None:
                continue
            stage_params = max(st.layers for st in plan.stages) * layer_parameters(cfg)
            per_gpu_bytes = GRADIENT_BYTES * stage_params / (plan.tp * plan.dp)
            mine.append((k, Candidate(
                name=f"{shape.name}*{k}",
                uses=(),  # filled below, once the shapes kept are known
                fill_s=plan.total_time_s,
                per_microbatch_s=plan.max_time_s,
                gradient_bytes=per_gpu_bytes,
                bandwidth=link / shape.gpus_per_node,
                stages=f"{plan.layout}, {len(plan.stages)} stages on {plan.gpus} GPUs",
            )))
        if mine:
            kept.append(shape)
            candidates.append(mine)
    shape_list = tuple(IslandShape(s.name, s.count, s.gpu, s.unit_nodes * s.gpus_per_node) for s in kept)
    cand_list = []
    for i, mine in enumerate(candidates):
        for k, cand in mine:
            uses = tuple(k if j == i else 0 for j in range(len(kept)))
            cand_list.append(replace(cand, uses=uses))
    return ReplicasInstance(setting.name, n_total, shape_list, tuple(cand_list))


def instance_data(instance: ReplicasInstance, description: str) -> dict:
    """The TOML data of an instance (files use GiB and Gb/s)."""
    return {
        "problem": "replicas",
        "name": instance.name,
        "description": description,
        "microbatches": instance.microbatches,
        "hop_latency_s": instance.hop_latency_s,
        "shape": [{"name": s.name, "count": s.count, "gpu": s.gpu or None, "gpus": s.gpus} for s in instance.shapes],
        "candidate": [
            {
                "name": c.name,
                "fill_s": c.fill_s,
                "per_microbatch_s": c.per_microbatch_s,
                "gradient_gib": c.gradient_bytes / GIB,
                "bandwidth_gbps": c.bandwidth / GBPS,
                "stages": c.stages or None,  # None: not written
                "uses": {s.name: u for s, u in zip(instance.shapes, c.uses) if u},
            }
            for c in instance.candidates
        ],
    }


def random_text(seed: int, sizes: dict) -> str:
    """The TOML text of one shipped random instance."""
    instance = random_instance(seed, **sizes)
    description = f"seeded random instance (hetopt.replicas.synthetic.random_instance({seed}, {sizes}))"
    return dumps(instance_data(instance, description),
                 header="Generated by `hetopt generate replicas`; do not edit by hand.")


def write(folder: Path) -> list[Path]:
    """Write every setting's instance and the random ones into ``folder``; returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for seed, sizes in RANDOM:
        path = folder / f"random-{seed}.toml"
        path.write_text(random_text(seed, sizes), encoding="utf-8")
        out.append(path)
    for st in SETTINGS:
        instance = build_instance(st)
        description = (
            f"{st.cluster}'s islands cut into units of {UNIT_NODES} nodes; {st.model}, global batch "
            f"{st.global_batch} in micro-batches of {MICROBATCH_SIZE}; candidates from the built-in "
            "parallelizer on the cost model (hetopt generate replicas)."
        )
        path = folder / f"{st.name}.toml"
        path.write_text(dumps(instance_data(instance, description),
                              header="Generated by `hetopt generate replicas`; do not edit by hand."), encoding="utf-8")
        out.append(path)
    return out
