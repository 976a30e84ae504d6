"""Cluster files (``instances/clusters/*.toml``): nodes by catalog GPU name, and their network.

A cluster file is an islands instance without ``problem`` whose nodes name a GPU type of
``instances/gpus.toml``; the catalog supplies each node's ``tflops`` (the type's
``training_tflops``), ``memory_gib`` and ``intra_gbs`` unless the node states its own (as
the synthetic clusters do with per-node profiled rates). ``tolerance`` and ``network`` keep
the islands family's keys (pairs with a default, groups, or a switch tree)::

    name = "tangram-c1"
    [[node]]
    name = "t4-0"
    gpu = "T4"          # a catalog name
    gpus = 4
    [network]
    default_gbps = 24.0
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from hetopt.catalog import instances_dir
from hetopt.costmodel import TRANSPORTS
from hetopt.errors import InputError
from hetopt.hardware import GIGA, TERA, GpuType, load_gpus
from hetopt.hardware import gpu as find_gpu
from hetopt.units import GIB
from hetopt.files import read_toml
from hetopt.readers.islands import read_islands
from hetopt.islands.problem import IslandsInstance


@dataclass(frozen=True)
class Cluster:
    """A cluster: its islands-family instance and each node's catalog GPU type."""

    name: str
    islands: IslandsInstance
    gpu_types: tuple[GpuType, ...]  # per node, in file order
    source: str
    #: US dollars per GPU-hour by GPU type: the catalog's ``usd_per_hour``, given or overridden by
    #: the file's ``[price] usd_per_gpu_hour`` table (a type with neither is not in it)
    prices: dict[str, float] = field(default_factory=dict, compare=False)
    #: per node, in file order: its GPUs reach each other peer to peer (the node's ``p2p`` key;
    #: None, or an empty tuple for every node: the catalog's default by link,
    #: ``costmodel.intra_link_efficiency``)
    p2p: tuple[bool | None, ...] = field(default=(), compare=False)
    #: per node: how NCCL crosses its network, "tcp" or "rdma" (the node's ``transport`` key; None,
    #: or an empty tuple for every node: by the node's bandwidth, ``costmodel.network_efficiency``)
    transport: tuple[str | None, ...] = field(default=(), compare=False)

    def node_p2p(self, k: int) -> bool | None:
        """Node ``k``'s ``p2p`` key (None: not given)."""
        return self.p2p[k] if self.p2p else None

    def node_transport(self, k: int) -> str | None:
        """Node ``k``'s ``transport`` key (None: not given)."""
        return self.transport[k] if self.transport else None

    @property
    def gpus(self) -> int:
        """All GPUs of the cluster."""
        return sum(n.gpus for n in self.islands.nodes)

    def subset(self, names: list[str], *, name: str | None = None) -> Cluster:
        """The cluster of the named nodes only (same links between them).

        Examples
        --------
        >>> load_cluster("tangram-c1").subset(["t4-0", "v100-0"]).gpus
        8
        """
        index = self.islands.index
        unknown = [n for n in names if n not in index]
        if unknown:
            raise InputError(f"{self.source}: no node {unknown[0]!r} (known: {', '.join(index)})")
        keep = [index[n] for n in names]
        inter = self.islands.inter[np.ix_(keep, keep)]
        islands = replace(
            self.islands,
            name=name or f"{self.name}-subset",
            nodes=tuple(self.islands.nodes[k] for k in keep),
            bandwidth=tuple(tuple(float(x) for x in row) for row in inter),
        )
        return Cluster(islands.name, islands, tuple(self.gpu_types[k] for k in keep), self.source, dict(self.prices),
                       tuple(self.node_p2p(k) for k in keep) if self.p2p else (),
                       tuple(self.node_transport(k) for k in keep) if self.transport else ())


def clusters_dir() -> Path:
    """The shipped cluster files, ``instances/clusters``."""
    return instances_dir() / "clusters"


def _spelling(name: str) -> str:
    """A name without case, dashes, underscores and spaces: "GPT-3 175B" and "gpt3-175b" meet."""
    return "".join(ch for ch in name.lower() if ch.isalnum() or ch == ".")


def resolve(name_or_path: str, folder: Path, kind: str) -> Path:
    """A file path, or a name looked up as ``folder/<name>.toml`` (in any case, with or without
    dashes and spaces, when that names one file).

    Examples
    --------
    >>> from hetopt.catalog import instances_dir
    >>> resolve("GPT-3 175B", instances_dir() / "models", "model").name, resolve("llama3-70b", instances_dir() / "models", "model").name
    ('gpt3-175b.toml', 'llama-3-70b.toml')

    Raises
    ------
    InputError
        Naming the known names when neither exists.
    """
    path = Path(name_or_path)
    if path.exists():
        return path
    candidate = folder / f"{name_or_path}.toml"
    if candidate.exists():
        return candidate
    # the same name spelled another way: case, dashes, spaces ("GPT-3 175B", "llama3-70b")
    same = [p for p in folder.glob("*.toml") if _spelling(p.stem) == _spelling(str(name_or_path))]
    if len(same) == 1:
        return same[0]
    known = ", ".join(sorted(p.stem for p in folder.glob("*.toml")))
    raise InputError(f"{name_or_path}: unknown {kind} (give a file, or one of: {known})")


def load_cluster(name_or_path: str | Path, catalog: dict[str, GpuType] | None = None) -> Cluster:
    """Read a cluster file (a path, or a name in ``instances/clusters``).

    Examples
    --------
    >>> c = load_cluster("tangram-c3")
    >>> c.gpus, [t.name for t in c.gpu_types]
    (20, ['T4', 'V100-PCIe-16GB', 'V100-SXM2-32GB', 'A100-PCIe-80GB'])

    Raises
    ------
    InputError
        With the file, the key path and the fix (an unknown GPU type lists the known ones).
    """
    path = resolve(str(name_or_path), clusters_dir(), "cluster")
    return cluster_from_data(read_toml(path), str(path), catalog)


def cluster_from_data(data: dict, path: str, catalog: dict[str, GpuType] | None = None) -> Cluster:
    """A cluster from the tables of a cluster file (``path`` names it in errors).

    Examples
    --------
    >>> node = {"gpu": "A100-SXM4-80GB", "gpus": 8, "switch": "ib", "switch_gbps": 1600.0}
    >>> data = {"name": "two-dgx", "node": [dict(node, name="a"), dict(node, name="b")],
    ...         "network": {"switch": [{"name": "ib"}]}}
    >>> cluster_from_data(data, "(built)").gpus
    16
    """
    catalog = load_gpus() if catalog is None else catalog
    if "problem" in data:
        raise InputError(f"{path}: problem: a cluster file has no 'problem' key (it is not an instance)")
    nodes = data.get("node")
    if nodes is not None and not isinstance(nodes, list):
        kind = {"dict": "table", "str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(type(nodes).__name__, "value")
        raise InputError(f"{path}: node: a {kind}, not an array of tables: write each node as a [[node]] table")
    if not nodes:
        raise InputError(f"{path}: node: missing: give at least one [[node]] table")
    types, p2p, transport = [], [], []
    for i, node in enumerate(nodes):
        if not isinstance(node, dict):
            raise InputError(f"{path}: node[{i}]: must be a table")
        # the cost model's keys, not the islands family's (which groups nodes by what they have)
        node = nodes[i] = dict(node)
        p2p.append(node.pop("p2p", None))
        if p2p[-1] is not None and not isinstance(p2p[-1], bool):
            raise InputError(f"{path}: node[{i}].p2p: must be true or false (got {p2p[-1]!r}): true when the node's "
                             "GPUs reach each other peer to peer over PCIe")
        transport.append(node.pop("transport", None))
        if transport[-1] is not None and transport[-1] not in TRANSPORTS:
            raise InputError(f"{path}: node[{i}].transport: must be \"tcp\" or \"rdma\" (got {transport[-1]!r}): how NCCL "
                             "crosses the node's network, sockets or RDMA")
        name = node.get("gpu")
        if not isinstance(name, str):
            raise InputError(f"{path}: node[{i}].gpu: missing or not text: give a GPU type of instances/gpus.toml")
        gpu = find_gpu(catalog, name, where=f"{path}: node[{i}].gpu")
        types.append(gpu)
        node.setdefault("tflops", gpu.training_flops / TERA)
        node.setdefault("memory_gib", gpu.memory_bytes / GIB)
        node.setdefault("intra_gbs", gpu.intra_bandwidth / GIGA)
    prices = _prices(data.get("price"), types, path)
    islands = read_islands({k: v for k, v in data.items() if k != "price"} | {"problem": "islands"}, path)
    return Cluster(name=islands.name, islands=islands, gpu_types=tuple(types), source=path, prices=prices,
                   p2p=tuple(p2p) if any(v is not None for v in p2p) else (),
                   transport=tuple(transport) if any(v is not None for v in transport) else ())


def _prices(table: object, types: list[GpuType], path: str) -> dict[str, float]:
    """US dollars per GPU-hour of the cluster's GPU types: the catalog's, then the file's
    ``[price] usd_per_gpu_hour = { "T4" = 0.35 }`` (each a GPU type of the file, a positive number)."""
    prices = {t.name: t.usd_per_hour for t in types if t.usd_per_hour is not None}
    if table is None:
        return prices
    if not isinstance(table, dict) or set(table) - {"usd_per_gpu_hour", "source", "note"}:
        raise InputError(f"{path}: price: give usd_per_gpu_hour = {{ \"GPU TYPE\" = dollars, ... }} (and source, note)")
    given = table.get("usd_per_gpu_hour", {})
    if not isinstance(given, dict):
        raise InputError(f"{path}: price.usd_per_gpu_hour: a table of GPU type = dollars per GPU-hour")
    names = {t.name for t in types}
    for name, value in given.items():
        if name not in names:
            raise InputError(f"{path}: price.usd_per_gpu_hour.{name}: not a GPU type of this cluster's nodes "
                             f"({', '.join(sorted(names))})")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e6:
            raise InputError(f"{path}: price.usd_per_gpu_hour.{name}: must be a number of dollars in (0, 1e6) (got {value!r})")
        prices[name] = float(value)
    return prices
