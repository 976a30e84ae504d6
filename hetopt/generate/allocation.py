"""Cephalo's two clusters as allocation instances, twice: from the analytic model and from
Cephalo's measured profiles. ``hetopt generate allocation`` (or ``python -m
hetopt.generate.allocation``) rewrites ``instances/allocation/cephalo-*.toml``.

The analytic instances come from the instance builder ``hetopt/builders/allocation.py``
(shared with the planner's FSDP alternative); the formulas and every constant are in
``formulations/allocation.md`` ("Instances").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hetopt.allocation.problem import GpuGroup
from hetopt.builders.allocation import (
    ACCUMULATION_OVERHEAD_S,
    COMM_BUFFERS_BYTES,
    UNEVEN_SHARD_OVERHEAD,
    analytic_allocation,
    fsdp_collective_s,
    sequence_length,
)
from hetopt.catalog import instances_dir
from hetopt.errors import InputError
from hetopt.generate.profiles import default_profiles_dir, layer_profile, load_latencies, load_memory
from hetopt.generate.toml import dumps
from hetopt.hardware import load_gpus
from hetopt.units import GIB
from hetopt.workload import STATE_BYTES_PER_PARAMETER, ModelConfig, load_model, parameters

#: Cephalo's usable memory fraction (its optimizer's assumption, from the profiles' README).
CEPHALO_MEMORY_FRACTION = 0.75
#: GPU capacities (GiB) Cephalo's optimizer uses for its measured runs (profiles README).
CEPHALO_CAPACITY_GIB = {"a6000": 47.99, "l4": 22.5, "p40": 22.5, "t4": 15.0, "v100x16": 16.0, "a10g": 22.49, "p100": 12.0}


@dataclass(frozen=True)
class CephaloCluster:
    """GPU groups (catalog name, Cephalo profile key, count) and the inter-machine network."""

    key: str
    groups: tuple[tuple[str, str, int], ...]
    network_gbps: float
    memory_profile: str  # the cluster key in model_memory.json
    note: str


CLUSTERS = {
    "a": CephaloCluster(
        "a",
        (("L4", "l4", 2), ("A6000", "a6000", 1), ("P40", "p40", 3), ("P100-PCIe-12GB", "p100", 2)),
        50.0,
        "paper",
        "Cephalo Cluster A: machine 1 = 2xL4, 1xA6000, 1xP40; machine 2 = 2xP40, 2xP100; 50 Gb/s between them",
    ),
    "b": CephaloCluster(
        "b",
        (("V100-SXM2-16GB", "v100x16", 16), ("A10G", "a10g", 16), ("T4", "t4", 32)),
        100.0,
        "aws-16gpu",
        "Cephalo Cluster B: 2x p3.16xlarge (8 V100-16GB), 2x g5.48xlarge (8 A10G), 4x g4dn.metal (8 T4); 100 Gb/s",
    ),
}

#: (cluster, Cephalo's profiled model, our model shape, global batches, sequence length)
PAPER_INSTANCES = (
    ("a", "deepspeedgpt_2.7b", "gpt3-2.7b", (128, 256), 512),
    ("a", "deepspeedllama_3b", "llama-3.2-3b", (128, 256), 512),
    ("a", "deepspeedvit_g", "vit-g-14", (128, 256), 512),
    ("b", "deepspeedgpt_6.7b", "gpt3-6.7b", (512, 1024), 512),
    ("b", "deepspeedllama_7b", "llama-2-7b", (512, 1024), 512),
)


def group_data(group: GpuGroup) -> dict:
    """One [[gpu]] table (GiB and seconds) for a group."""
    return {
        "type": group.type,
        "memory_gib": group.memory_bytes / GIB,
        "memory_base_gib": group.memory_base_bytes / GIB,
        "forward_s": list(group.forward.table),
        "backward_s": list(group.backward.table),
        "forward_slope_s": group.forward.slope,
        "forward_intercept_s": group.forward.intercept,
        "backward_slope_s": group.backward.slope,
        "backward_intercept_s": group.backward.intercept,
        "count": group.count,
    }


def analytic_instance(cluster: CephaloCluster, cfg: ModelConfig, shape: str, batch: int, seq: int, gpus: dict) -> dict:
    """The TOML data of one analytic instance."""
    name = f"cephalo-{cluster.key}-{shape}-b{batch}-analytic"
    inst = analytic_allocation(name, [(gpus[g], count) for g, _, count in cluster.groups], cfg, batch, seq, cluster.network_gbps)
    seq = sequence_length(cfg, seq)
    params = parameters(cfg)
    return {
        "problem": "allocation",
        "name": name,
        "description": f"{cluster.note}. {cfg.name} ({params / 1e9:.2f}B parameters), sequence {seq}, "
        f"global batch {batch}; latencies and memory from the analytic model (formulations/allocation.md).",
        "source": "hetopt generate allocation (analytic)",
        "global_batch": batch,
        "memory_fraction": inst.memory_fraction,
        "activation_gib_per_sample": inst.activation_bytes_per_sample / GIB,
        "state_gib": inst.state_bytes / GIB,
        "accumulation_overhead_s": inst.accumulation_overhead_s,
        "allgather_s": inst.allgather_s,
        "reducescatter_s": inst.reducescatter_s,
        "uneven_shard_overhead": inst.uneven_shard_overhead,
        "layers": inst.layers,
        "gpu": [group_data(g) for g in inst.groups],
    }


def _curve(points: list[float], m: int) -> float:
    """Cephalo's compute-memory curve (GiB): the measured points, then the last points' line."""
    if m <= len(points):
        return points[m - 1]
    slope = points[-1] - points[-2]
    return points[-1] + slope * (m - len(points))


def _largest(points: list[float], limit_gib: float, upper: int = 1 << 16) -> int:
    m = 0
    while m < upper and _curve(points, m + 1) <= limit_gib:
        m += 1
    return m


def measured_instance(cluster: CephaloCluster, profiled: str, cfg: ModelConfig, shape: str, batch: int, seq: int, folder: Path) -> dict:
    """The TOML data of one instance built from Cephalo's measurements."""
    latencies, memory = load_latencies(folder), load_memory(folder)
    keys = [key for _, key, _ in cluster.groups]
    dtype = "float16" if all(layer_profile(latencies, profiled, k, seq, "float16") for k in keys) else "float32"
    mem = memory[cluster.memory_profile][profiled]
    curves = mem["profiled_compute_memory"]
    points = curves.get(dtype) or next(iter(curves.values()))
    params = mem["parameters"]
    n = sum(c for _, _, c in cluster.groups)
    state_gib = STATE_BYTES_PER_PARAMETER * params / GIB
    activation = points[-1] - points[-2]  # Cephalo's linear extension
    base = COMM_BUFFERS_BYTES / GIB + points[-1] - activation * len(points)
    comm = fsdp_collective_s(params, n, cluster.network_gbps)
    groups = []
    for name, key, count in cluster.groups:
        prof = layer_profile(latencies, profiled, key, seq, dtype)
        if prof is None:
            raise ValueError(f"no {dtype} profile of {profiled} on {key} at sequence {seq}")
        capacity = CEPHALO_CAPACITY_GIB[key]
        usable = CEPHALO_MEMORY_FRACTION * capacity - COMM_BUFFERS_BYTES / GIB
        linear_max = int((CEPHALO_MEMORY_FRACTION * capacity - base) / activation + 1e-9)
        table = {
            "type": name,
            "count": count,
            "memory_gib": capacity,
            "memory_base_gib": base,
            "forward_s": [cfg.layers * x for x in prof.forward_table],
            "backward_s": [cfg.layers * x for x in prof.backward_table],
            "forward_slope_s": cfg.layers * prof.forward_line[0],
            "forward_intercept_s": cfg.layers * prof.forward_line[1],
            "backward_slope_s": cfg.layers * prof.backward_line[0],
            "backward_intercept_s": cfg.layers * prof.backward_line[1],
            "even_shard_max_microbatch": _largest(points, usable - state_gib / n),
            "source": f"cephalo-profiles {profiled}/{key}/{seq}/{dtype} x {cfg.layers} layers",
        }
        curve_max = _largest(points, usable)
        if curve_max < linear_max:  # the measured curve is tighter than its line: keep it
            table["max_microbatch"] = curve_max
        groups.append(table)
    return {
        "problem": "allocation",
        "name": f"cephalo-{cluster.key}-{shape}-b{batch}-measured",
        "description": f"{cluster.note}. Cephalo's measured {profiled} layer ({dtype}, sequence {seq}) x "
        f"{cfg.layers} layers ({cfg.name} depth), {params / 1e9:.2f}B parameters, global batch {batch}; "
        "memory from the measured compute-memory curve, Cephalo's 75% usable memory and 2 GiB buffers.",
        "source": "hetopt generate allocation (measured); data: Cephalo's profiles, MIT licence (c) the Cephalo authors",
        "global_batch": batch,
        "memory_fraction": CEPHALO_MEMORY_FRACTION,
        "activation_gib_per_sample": activation,
        "state_gib": state_gib,
        "accumulation_overhead_s": ACCUMULATION_OVERHEAD_S,
        "allgather_s": comm,
        "reducescatter_s": comm,
        "uneven_shard_overhead": UNEVEN_SHARD_OVERHEAD,
        "layers": cfg.layers,
        "gpu": groups,
    }


def paper_instances(profiles: Path | None = None) -> dict[str, dict]:
    """Every paper instance, analytic and measured: file name -> TOML data."""
    folder = profiles or default_profiles_dir()
    gpus = load_gpus()
    models_dir = instances_dir() / "models"
    out = {}
    for cluster_key, profiled, shape, batches, seq in PAPER_INSTANCES:
        cluster = CLUSTERS[cluster_key]
        cfg = load_model(models_dir / f"{shape}.toml")
        for batch in batches:
            for data in (
                analytic_instance(cluster, cfg, shape, batch, seq, gpus),
                measured_instance(cluster, profiled, cfg, shape, batch, seq, folder),
            ):
                out[data["name"] + ".toml"] = data
    return out


def write(folder: Path, profiles: Path | None = None) -> list[Path]:
    """Write the paper instances into ``folder``; returns the paths written.

    Every instance is read back by the family's reader first, and nothing is written when
    one is refused: profiles whose lines give negative times would otherwise write files
    that ``hetopt solve`` rejects.

    Raises
    ------
    InputError
        A profile file missing or malformed, or an instance from it that the reader refuses.
    """
    from hetopt.io import loads

    texts = {name: dumps(data, header="Generated by `hetopt generate allocation`; do not edit by hand.")
             for name, data in paper_instances(profiles).items()}
    for name, text in texts.items():
        try:
            loads(text, source=name)
        except InputError as exc:
            raise InputError(f"profiles {profiles or default_profiles_dir()}: gives an instance the reader refuses "
                             f"({exc})", field="profiles") from None
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in texts.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
