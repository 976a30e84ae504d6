"""Tangram's GPU islands: nodes, inter-node bandwidth, a partition into islands, and ``evaluate``.

Symbols follow ``formulations/islands.md``: node n has g_n GPUs, per-GPU compute c_n,
per-GPU memory m_n and intra-node bandwidth b_n; e(n, n') is the inter-node bandwidth;
ε_c, ε_m, ε_i are the tolerances. An island I is valid when

1. every node of I has the same g, and max/min of c over I ≤ 1 + ε_c, of m ≤ 1 + ε_m;
2. max/min of b over I ≤ 1 + ε_i;
3. proximity: for n, n' ∈ I (n ≠ n') and every n'' ∉ I, e(n, n') ≥ e(n, n'').

The objective is the number of islands. Units are SI inside (FLOP/s, bytes, bytes/s);
files and printed tables use TFLOPs, GiB, GB/s (intra-node) and Gb/s (network).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from hetopt.errors import InputError
from hetopt.result import Evaluation
from hetopt.units import GBPS, GIB  # noqa: F401  (re-exported: instances are built in GiB and Gb/s)

#: Bytes/s in one GB/s (NVLink and PCIe are quoted in gigabytes per second).
GBS = 1e9
#: FLOP/s in one TFLOP/s.
TFLOPS = 1e12

#: Relative slack of the max/min ≤ 1 + ε tests: 343.2 / 312 is 1.1000000000000001 in
#: floating point and must count as 1.1. Bandwidths are compared exactly (they are copies
#: of the file's figures, never computed sums).
RATIO_RTOL = 1e-9

#: The default tolerance of each spread (Tangram's 10%).
DEFAULT_TOLERANCE = 0.1

# Accepted ranges, checked by the constructors below (``IslandsInstance._validate``) for
# instances read from files and built in code alike; the readers import these names.
# The solvers only compare ratios and bandwidths and count islands (the models' variables
# are all 0/1), so the ranges are about meaning and about keeping every figure the
# methods derive finite: max/min ratios (at most MAX/MIN = 1e11 per quantity) and the
# greedy's linkage distance 1/e (at most 1/MIN_GBPS).

#: Most nodes per instance: e is an n × n matrix (2048² floats = 32 MB), and the largest
#: cluster the papers plan has a few thousand GPUs in a few hundred nodes.
MAX_NODES = 2048
#: Most GPUs in one node (a machine's homogeneous group; today's largest boxes have 8-16,
#: NVL72 racks 72). At least 1: a node without GPUs is not a node of a GPU island.
MAX_GPUS_PER_NODE = 128
#: Largest tolerance ε: 10 means max/min up to 11, beyond any sensible "homogeneous".
#: Smallest 0 (max = min): with ε < 0 not even a single node is a valid island, so no
#: partition would exist.
MAX_TOLERANCE = 10.0
#: Per-GPU compute, TFLOP/s: from 1 MFLOP/s (smaller is a unit mistake) to 1e5 TFLOP/s (a
#: hundred times today's fastest GPU: above is a typo).
MIN_TFLOPS, MAX_TFLOPS = 1e-6, 1e5
#: Per-GPU memory, GiB: from 1 KiB (about 1e-6 GiB) to 1e5 GiB.
MIN_MEMORY_GIB, MAX_MEMORY_GIB = 1e-6, 1e5
#: Intra-node bandwidth, GB/s: from 1 kB/s to 1e5 GB/s (NVLink 5 is 900 GB/s).
MIN_INTRA_GBS, MAX_INTRA_GBS = 1e-6, 1e5
#: Inter-node bandwidth e, Gb/s: from 1 kb/s to 1 Pb/s (faster is a typo, not a network).
#: e must be > 0 (a pair with no link at all is not one cluster) and symmetric (e is
#: the bandwidth between two nodes, the same both ways; proximity compares it exactly).
MIN_GBPS, MAX_GBPS = 1e-6, 1e6


def within(ratio: float, eps: float) -> bool:
    """True when a max/min ``ratio`` is at most ``1 + eps`` (with ``RATIO_RTOL`` slack).

    Examples
    --------
    >>> within(343.2 / 312.0, 0.1), within(1.2, 0.1)
    (True, False)
    """
    return ratio <= (1.0 + eps) * (1.0 + RATIO_RTOL)


def _check_range(key: str, value, low: float, high: float, unit: str, scale: float = 1.0, attr: str = "") -> None:
    """InputError unless ``value / scale`` is a real number in [low, high] (NaN fails)."""
    where = f"{key} ({attr})" if attr else key
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"{where}: must be a number (got {value!r})")
    shown = float(value) / scale
    if not low <= shown <= high:
        raise InputError(f"{where}: must be between {low:g} and {high:g}{unit} (got {shown:g})")


def _check_name(key: str, value) -> None:
    if not isinstance(value, str) or not value:
        raise InputError(f"{key}: must be a non-empty string (got {value!r})")


@dataclass(frozen=True)
class Node:
    """A homogeneous group of ``gpus`` GPUs on one machine.

    Parameters
    ----------
    name
        Unique name.
    machine
        The machine it sits on (a machine with two GPU types is two nodes).
    gpu
        A label, e.g. "A100-80GB".
    gpus
        g_n, the number of GPUs.
    flops
        c_n, per-GPU compute in FLOP/s (datasheet or a profiled rate).
    memory_bytes
        m_n, per-GPU memory.
    intra_bytes_s
        b_n, intra-node GPU-to-GPU bandwidth (per GPU, per direction).
    """

    name: str
    machine: str
    gpu: str
    gpus: int
    flops: float
    memory_bytes: float
    intra_bytes_s: float


@dataclass(frozen=True)
class Tolerance:
    """ε_c, ε_m, ε_i: how far max/min of compute, memory and intra-node bandwidth may exceed 1."""

    compute: float = DEFAULT_TOLERANCE
    memory: float = DEFAULT_TOLERANCE
    intra: float = DEFAULT_TOLERANCE

    def __post_init__(self) -> None:
        for key in ("compute", "memory", "intra"):
            _check_range(f"tolerance.{key}", getattr(self, key), 0.0, MAX_TOLERANCE, "")


def check_nodes(nodes: Sequence[Node]) -> None:
    """Check a node list against the accepted ranges (the first part of ``IslandsInstance``'s checks).

    Readers call it before resolving the network, whose keys refer to node names.

    Raises
    ------
    InputError
        Naming the key path, e.g. ``node[1].name: duplicate node name 'a' (also node[0].name)``.

    Examples
    --------
    >>> check_nodes([Node("a", "a", "A100", 0, 312e12, 80 * GIB, 32e9)])
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: node[0].gpus: must be between 1 and 128 (got 0)
    """
    n = len(nodes)
    if not 1 <= n <= MAX_NODES:
        raise InputError(f"node: must list between 1 and {MAX_NODES} nodes (got {n})")
    seen: dict[str, int] = {}
    for i, node in enumerate(nodes):
        key = f"node[{i}]"
        if not isinstance(node, Node):
            raise InputError(f"{key}: must be a Node (got {type(node).__name__})")
        _check_name(f"{key}.name", node.name)
        if node.name in seen:
            raise InputError(f"{key}.name: duplicate node name {node.name!r} (also node[{seen[node.name]}].name)")
        seen[node.name] = i
        _check_name(f"{key}.machine", node.machine)
        _check_name(f"{key}.gpu", node.gpu)
        if isinstance(node.gpus, bool) or not isinstance(node.gpus, numbers.Integral):
            raise InputError(f"{key}.gpus: must be a whole number (got {node.gpus!r})")
        _check_range(f"{key}.gpus", node.gpus, 1, MAX_GPUS_PER_NODE, "")
        _check_range(f"{key}.tflops", node.flops, MIN_TFLOPS, MAX_TFLOPS, " TFLOP/s", TFLOPS, "Node.flops")
        _check_range(f"{key}.memory_gib", node.memory_bytes, MIN_MEMORY_GIB, MAX_MEMORY_GIB, " GiB", GIB, "Node.memory_bytes")
        _check_range(f"{key}.intra_gbs", node.intra_bytes_s, MIN_INTRA_GBS, MAX_INTRA_GBS, " GB/s", GBS, "Node.intra_bytes_s")


@dataclass(frozen=True)
class IslandsInstance:
    """One islands instance: nodes, the resolved bandwidth matrix e, the tolerances.

    ``bandwidth[i][j]`` is e(n_i, n_j) in bytes/s, symmetric; the diagonal is ignored.
    Build it with ``hetopt.load`` (which resolves pairs, groups or a switch tree into the
    matrix, see :mod:`hetopt.islands.network`) or directly.

    Examples
    --------
    >>> a = Node("a", "a", "A100", 4, 312e12, 80 * GIB, 32e9)
    >>> inst = IslandsInstance("x", (a, Node("b", "b", "A100", 4, 312e12, 80 * GIB, 32e9)), ((0, 1e10), (1e10, 0)))
    >>> inst.num_nodes, bool(inst.compatible[0, 1])
    (2, True)
    """

    name: str
    nodes: tuple[Node, ...]
    bandwidth: tuple[tuple[float, ...], ...] = field(repr=False)
    tolerance: Tolerance = Tolerance()
    network: str = "matrix"

    problem = "islands"

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        self._validate()

    def _validate(self) -> None:
        """The accepted ranges (module constants); InputError naming the file's key path.

        Raises
        ------
        InputError
            ``"node[2].gpus: must be between 1 and 128 (got 0)"`` and the like; readers add
            the file name (``hetopt.readers.fields.located``).
        """
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"name: must be a non-empty string (got {self.name!r})", field="name")
        if not isinstance(self.tolerance, Tolerance):
            raise InputError(f"tolerance: must be a Tolerance (got {self.tolerance!r})")
        check_nodes(self.nodes)
        n = len(self.nodes)
        try:
            e = np.array(self.bandwidth, dtype=float)
        except (TypeError, ValueError):
            raise InputError(f"bandwidth: must be a {n} × {n} matrix of numbers (bytes/s)") from None
        if e.shape != (n, n):
            raise InputError(f"bandwidth: must be a {n} × {n} matrix of numbers (bytes/s), got shape {e.shape}")
        gbps = e / GBPS
        np.fill_diagonal(gbps, MIN_GBPS)  # the diagonal is ignored
        bad = np.argwhere(~((gbps >= MIN_GBPS) & (gbps <= MAX_GBPS)))
        if len(bad):
            i, j = (int(x) for x in bad[0])
            raise InputError(
                f"bandwidth[{i}][{j}] ({self.nodes[i].name}–{self.nodes[j].name}): must be between {MIN_GBPS:g} and "
                f"{MAX_GBPS:g} Gb/s (got {gbps[i, j]:g}); every pair of nodes needs a link"
            )
        bad = np.argwhere(gbps != gbps.T)
        if len(bad):
            i, j = (int(x) for x in bad[0])
            raise InputError(
                f"bandwidth[{i}][{j}] ({self.nodes[i].name}–{self.nodes[j].name}): must be symmetric "
                f"(got {gbps[i, j]:g} Gb/s one way and {gbps[j, i]:g} Gb/s the other)"
            )
        np.fill_diagonal(e, 0.0)
        e.setflags(write=False)
        self.__dict__["inter"] = e  # the cached ``inter``: converting the tuples once is enough

    @property
    def num_nodes(self) -> int:
        """Number of nodes."""
        return len(self.nodes)

    @cached_property
    def inter(self) -> np.ndarray:
        """e as a read-only float array (n × n), diagonal set to 0."""
        e = np.array(self.bandwidth, dtype=float).reshape(self.num_nodes, self.num_nodes)
        np.fill_diagonal(e, 0.0)
        e.setflags(write=False)
        return e

    @cached_property
    def index(self) -> dict[str, int]:
        """Node name -> position."""
        return {node.name: i for i, node in enumerate(self.nodes)}

    @cached_property
    def _attributes(self) -> dict[str, np.ndarray]:
        out = {}
        for name in ("gpus", "flops", "memory_bytes", "intra_bytes_s"):
            values = np.array([getattr(node, name) for node in self.nodes], dtype=float)
            values.setflags(write=False)
            out[name] = values
        return out

    def attribute(self, name: str) -> np.ndarray:
        """One node attribute ("gpus", "flops", "memory_bytes", "intra_bytes_s") as a read-only array."""
        return self._attributes[name]

    @cached_property
    def compatible(self) -> np.ndarray:
        """Pairwise conditions 1 and 2: ``compatible[i, j]`` when {n_i, n_j} may share an island.

        A max/min over a set is the ratio of one pair, so a set meets conditions 1 and 2
        exactly when every pair of its nodes does.
        """
        tol = self.tolerance
        ok = self.attribute("gpus")[:, None] == self.attribute("gpus")[None, :]
        for attr, eps in (("flops", tol.compute), ("memory_bytes", tol.memory), ("intra_bytes_s", tol.intra)):
            v = self.attribute(attr)
            ratio = np.maximum(v[:, None], v[None, :]) / np.minimum(v[:, None], v[None, :])
            ok &= ratio <= (1.0 + eps) * (1.0 + RATIO_RTOL)
        ok.setflags(write=False)
        return ok

    @cached_property
    def profile(self) -> tuple[int, ...]:
        """A profile number per node: nodes with equal (g, c, m, b) share it."""
        keys: dict[tuple, int] = {}
        return tuple(keys.setdefault((n.gpus, n.flops, n.memory_bytes, n.intra_bytes_s), len(keys)) for n in self.nodes)


def proximity_ok(inter: np.ndarray, members: Sequence[int]) -> bool:
    """Condition 3 for the node set ``members`` (indices): every member's slowest link inside
    is at least its fastest link to a node outside.

    Examples
    --------
    >>> e = np.array([[0, 4, 1], [4, 0, 1], [1, 1, 0]], dtype=float)
    >>> proximity_ok(e, [0, 1]), proximity_ok(e, [0, 2])
    (True, False)
    """
    members = np.asarray(members, dtype=np.intp)
    if len(members) <= 1 or len(members) >= inter.shape[0]:
        return True  # a single node, or every node (nothing outside)
    rows = inter[members]  # |I| × n, a copy (a row gather is much faster than np.ix_)
    inside = rows[:, members]
    np.fill_diagonal(inside, np.inf)
    rows[:, members] = -np.inf  # what remains in each row are the links leaving I
    return bool(np.all(inside.min(axis=1) >= rows.max(axis=1)))


def homogeneous(instance: IslandsInstance, members: Sequence[int]) -> bool:
    """Conditions 1 and 2 for the node set ``members`` (indices)."""
    members = np.asarray(members, dtype=int)
    return bool(instance.compatible[np.ix_(members, members)].all())


def is_valid_island(instance: IslandsInstance, members: Sequence[int]) -> bool:
    """All three conditions for the node set ``members`` (indices)."""
    return homogeneous(instance, members) and proximity_ok(instance.inter, members)


@dataclass(frozen=True)
class Island:
    """One island as reported: members and recomputed figures.

    Spreads are max/min ratios (1.0 for a single node); links are in bytes/s, None when
    there is no such link (one node; or no node outside).
    """

    nodes: tuple[str, ...]
    gpus: int
    gpu: str
    compute_spread: float
    memory_spread: float
    intra_spread: float
    slowest_internal_bytes_s: float | None
    fastest_leaving_bytes_s: float | None

    def to_dict(self) -> dict:
        """Plain data (bandwidths in Gb/s)."""
        return {
            "nodes": list(self.nodes),
            "gpus": self.gpus,
            "gpu": self.gpu,
            "compute_spread": self.compute_spread,
            "memory_spread": self.memory_spread,
            "intra_spread": self.intra_spread,
            "slowest_internal_gbps": _gbps(self.slowest_internal_bytes_s),
            "fastest_leaving_gbps": _gbps(self.fastest_leaving_bytes_s),
        }


def _gbps(value: float | None) -> float | None:
    return None if value is None else value / GBPS


def _spread(values: np.ndarray) -> float:
    return float(values.max() / values.min())


def describe_island(instance: IslandsInstance, members: Sequence[int]) -> Island:
    """Recompute an island's figures from its member indices."""
    e = instance.inter
    if len(members) == 1 and instance.num_nodes > 1:  # fast path (the greedy stopped early gives thousands)
        i = int(next(iter(members)))
        node = instance.nodes[i]
        # e > 0 off the diagonal and 0 on it, so the row's maximum is the fastest link out
        return Island((node.name,), int(node.gpus), node.gpu, 1.0, 1.0, 1.0, None, float(e[i].max()))
    idx = np.array(sorted(members), dtype=int)
    slowest = None
    if len(idx) > 1:
        inside = e[np.ix_(idx, idx)][np.triu_indices(len(idx), 1)]
        slowest = float(inside.min())
    outside = np.ones(instance.num_nodes, dtype=bool)
    outside[idx] = False
    fastest = float(e[idx][:, outside].max()) if outside.any() else None
    labels = sorted({instance.nodes[i].gpu for i in idx})
    return Island(
        nodes=tuple(instance.nodes[i].name for i in idx),
        gpus=int(sum(instance.nodes[i].gpus for i in idx)),
        gpu="+".join(labels),
        compute_spread=_spread(instance.attribute("flops")[idx]),
        memory_spread=_spread(instance.attribute("memory_bytes")[idx]),
        intra_spread=_spread(instance.attribute("intra_bytes_s")[idx]),
        slowest_internal_bytes_s=slowest,
        fastest_leaving_bytes_s=fastest,
    )


@dataclass(frozen=True)
class IslandsSolution:
    """A partition of the nodes into islands (only the member names are decisions)."""

    islands: tuple[Island, ...]

    @property
    def num_islands(self) -> int:
        """The objective."""
        return len(self.islands)

    def to_dict(self) -> dict:
        """Plain data for JSON (``solution`` in ``hetopt solve --json``)."""
        return {"num_islands": self.num_islands, "islands": [isl.to_dict() for isl in self.islands]}

    def rows(self) -> list[dict]:
        """One row per island for the human-readable table."""
        return [
            {
                "island": k,
                "gpu": isl.gpu,
                "nodes": len(isl.nodes),
                "gpus": isl.gpus,
                "compute ×": isl.compute_spread,
                "memory ×": isl.memory_spread,
                "intra ×": isl.intra_spread,
                "slowest in Gb/s": _gbps(isl.slowest_internal_bytes_s),
                "fastest out Gb/s": _gbps(isl.fastest_leaving_bytes_s),
                "members": _short(isl.nodes),
            }
            for k, isl in enumerate(self.islands)
        ]

    def summary(self) -> list[str]:
        """A few lines under the table."""
        gpus = sum(isl.gpus for isl in self.islands)
        nodes = sum(len(isl.nodes) for isl in self.islands)
        return [f"{self.num_islands} islands over {nodes} nodes and {gpus} GPUs"]


#: Members shown in the table before eliding (the JSON always lists every member).
SHOWN_MEMBERS = 4


def _short(names: tuple[str, ...]) -> str:
    if len(names) <= SHOWN_MEMBERS:
        return ", ".join(names)
    return ", ".join(names[:SHOWN_MEMBERS - 1]) + f", … ({len(names) - SHOWN_MEMBERS + 1} more), {names[-1]}"


def build_solution(instance: IslandsInstance, groups: Iterable[Iterable[int]]) -> IslandsSolution:
    """An IslandsSolution from groups of node indices, islands ordered by their first node."""
    ordered = sorted((sorted(int(i) for i in g) for g in groups), key=lambda g: g[0] if g else math.inf)
    return IslandsSolution(tuple(describe_island(instance, g) for g in ordered))


def island_violations(instance: IslandsInstance, members: Sequence[int], label: str) -> list[str]:
    """One sentence per condition the island ``members`` breaks."""
    v: list[str] = []
    tol = instance.tolerance
    nodes = [instance.nodes[i] for i in members]
    if len({n.gpus for n in nodes}) > 1:
        v.append(f"(1) {label}: nodes with different GPU counts {sorted({n.gpus for n in nodes})}")
    for attr, eps, what in (("flops", tol.compute, "compute"), ("memory_bytes", tol.memory, "memory")):
        vals = np.array([getattr(n, attr) for n in nodes])
        if not within(_spread(vals), eps):
            v.append(f"(1) {label}: {what} max/min {_spread(vals):.4g} exceeds 1 + {eps:g}")
    intra = np.array([n.intra_bytes_s for n in nodes])
    if not within(_spread(intra), tol.intra):
        v.append(f"(2) {label}: intra-node bandwidth max/min {_spread(intra):.4g} exceeds 1 + {tol.intra:g}")
    if not proximity_ok(instance.inter, members):
        v.append(f"(3) {label}: {_proximity_witness(instance, members)}")
    return v


def _proximity_witness(instance: IslandsInstance, members: Sequence[int]) -> str:
    e = instance.inter
    inside = set(members)
    for n in members:
        weakest = min(members, key=lambda u: math.inf if u == n else e[n, u])
        outsider = max((u for u in range(instance.num_nodes) if u not in inside), key=lambda u: e[n, u])
        if e[n, outsider] > e[n, weakest]:
            name = instance.nodes
            return (
                f"{name[n].name} links to member {name[weakest].name} at {e[n, weakest] / GBPS:g} Gb/s "
                f"but to outsider {name[outsider].name} at {e[n, outsider] / GBPS:g} Gb/s"
            )
    return "proximity fails"  # pragma: no cover - proximity_ok and this scan agree


def evaluate(instance: IslandsInstance, solution: IslandsSolution) -> Evaluation:
    """Check that the islands partition the nodes and are each valid; count them.

    Only the member names are read; every reported figure is recomputed.

    Returns
    -------
    Evaluation
        ``objective`` = number of islands; ``details["islands"]`` the recomputed islands.

    Examples
    --------
    >>> a = Node("a", "a", "A100", 4, 312e12, 80 * GIB, 32e9)
    >>> b = Node("b", "b", "T4", 4, 65e12, 16 * GIB, 16e9)
    >>> inst = IslandsInstance("x", (a, b), ((0, 1e10), (1e10, 0)))
    >>> evaluate(inst, build_solution(inst, [[0], [1]])).objective
    2
    >>> evaluate(inst, build_solution(inst, [[0, 1]])).violations[0][:22]
    '(1) island 0: compute '
    """
    v: list[str] = []
    seen: dict[str, int] = {}
    groups: list[list[int]] = []
    for k, island in enumerate(solution.islands):
        if not island.nodes:
            v.append(f"island {k} is empty")
        members = []
        for name in island.nodes:
            if name not in instance.index:
                v.append(f"island {k}: unknown node {name!r}")
                continue
            if name in seen:
                v.append(f"node {name!r} is in island {seen[name]} and island {k}")
                continue
            seen[name] = k
            members.append(instance.index[name])
        groups.append(members)
    missing = [n.name for n in instance.nodes if n.name not in seen]
    if missing:
        v.append(f"{len(missing)} node(s) in no island, e.g. {missing[0]!r}")
    for k, members in enumerate(groups):
        if members:
            v.extend(island_violations(instance, members, f"island {k}"))
    details = {"islands": [describe_island(instance, g) for g in groups if g]}
    if v:
        return Evaluation(False, math.inf, tuple(v), details)
    return Evaluation(True, len(solution.islands), (), details)
