"""The bandwidth dendrogram: clusters of e ≥ t for every level t, and the ultrametric test.

e is *ultrametric* when e(a, c) ≥ min(e(a, b), e(b, c)) for all a, b, c. Then, for every
threshold t, "e ≥ t" is an equivalence relation, its classes nest as t falls, and they form
a tree whose internal node C merges its children at level t(C): two nodes in different
children of C are linked at exactly t(C). ``formulations/islands.md`` proves that the
valid islands are then unions of whole children of one node.

Construction: a maximum spanning tree of e (scipy), whose edges taken by falling bandwidth
merge clusters (several merges at the same bandwidth make one multi-way node); then e is
ultrametric exactly when every pair is linked at its clusters' merge level (the subdominant
ultrametric, i.e. the widest-path bandwidth, equals e).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetopt.family import Deadline
from hetopt.islands.subsets import OutOfTime


def _tick(deadline: Deadline | None) -> None:
    if deadline is not None and deadline.expired():
        raise OutOfTime


@dataclass(frozen=True)
class DendrogramCluster:
    """One dendrogram node.

    ``members`` are node indices (sorted); ``children`` are cluster ids (empty for a leaf);
    ``level`` is the bandwidth at which the children merge (inf for a leaf).
    """

    members: tuple[int, ...]
    children: tuple[int, ...]
    level: float


@dataclass(frozen=True)
class Dendrogram:
    """Clusters with children before parents; ``root`` is the last id; leaf i is cluster i."""

    clusters: tuple[DendrogramCluster, ...]

    @property
    def root(self) -> int:
        """The id of the whole cluster."""
        return len(self.clusters) - 1


#: Prim steps between two looks at the clock (each step is one O(n) vector operation).
_STEPS_PER_TICK = 64


def _widest_spanning_tree(e: np.ndarray, deadline: Deadline | None) -> list[tuple[int, int]]:
    """Edges of a maximum-bandwidth spanning tree of the complete graph e (Prim, dense, O(n²)).

    Single linkage depends only on such a tree, and any of them gives the same merge levels.
    Prim on the dense matrix compares bandwidths exactly (no ranks, no sparse conversion) and
    looks at the clock every ``_STEPS_PER_TICK`` steps.
    """
    n = e.shape[0]
    in_tree = np.zeros(n, dtype=bool)
    in_tree[0] = True
    best = e[0].astype(float).copy()  # widest link from the tree to each node
    via = np.zeros(n, dtype=np.intp)  # the tree node that link starts at
    edges = []
    for step in range(n - 1):
        if step % _STEPS_PER_TICK == 0:
            _tick(deadline)
        v = int(np.argmax(np.where(in_tree, -np.inf, best)))
        edges.append((int(via[v]), v))
        in_tree[v] = True
        wider = e[v] > best
        best = np.where(wider, e[v], best)
        via = np.where(wider, v, via)
    return edges


def build(e: np.ndarray, deadline: Deadline | None = None) -> Dendrogram:
    """The multi-way single-linkage dendrogram of bandwidth matrix ``e`` (largest merges first).

    Valid for any symmetric e; it describes e exactly only when e is ultrametric
    (see :func:`ultrametric_violation`). Raises ``OutOfTime`` when ``deadline`` passes
    (checked during the spanning tree and once per bandwidth level).

    Examples
    --------
    >>> e = np.array([[0, 4, 1], [4, 0, 1], [1, 1, 0]], dtype=float)
    >>> d = build(e)
    >>> [(c.members, c.level) for c in d.clusters[3:]]
    [((0, 1), 4.0), ((0, 1, 2), 1.0)]
    """
    n = e.shape[0]
    clusters = [DendrogramCluster((i,), (), np.inf) for i in range(n)]
    if n == 1:
        return Dendrogram(tuple(clusters))
    edges = sorted(_widest_spanning_tree(e, deadline), key=lambda ij: -e[ij[0], ij[1]])
    parent = list(range(n))
    cluster_of = list(range(n))  # union-find root -> its current cluster id

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    start = 0
    while start < len(edges):
        _tick(deadline)
        level = e[edges[start]]
        stop = start
        while stop < len(edges) and e[edges[stop]] == level:
            stop += 1
        merged: dict[int, set[int]] = {}  # new root -> old cluster ids it absorbs
        for a, b in edges[start:stop]:
            ra, rb = find(a), find(b)
            ids = merged.pop(ra, {cluster_of[ra]}) | merged.pop(rb, {cluster_of[rb]})
            parent[rb] = ra
            merged[ra] = ids
        for root, ids in merged.items():
            members = tuple(sorted(m for c in ids for m in clusters[c].members))
            clusters.append(DendrogramCluster(members, tuple(sorted(ids)), float(level)))
            cluster_of[find(root)] = len(clusters) - 1
        start = stop
    return Dendrogram(tuple(clusters))


def merge_levels(d: Dendrogram, n: int, deadline: Deadline | None = None) -> np.ndarray:
    """U(a, b): the level of the smallest cluster holding both a and b (the widest-path bandwidth)."""
    u = np.zeros((n, n))
    members = [np.asarray(c.members, dtype=np.intp) for c in d.clusters]
    for c in d.clusters:
        if not c.children:
            continue
        _tick(deadline)
        for i, child in enumerate(c.children[:-1]):
            rest = np.concatenate([members[other] for other in c.children[i + 1:]])
            idx = members[child]
            u[np.ix_(idx, rest)] = c.level
            u[np.ix_(rest, idx)] = c.level
    return u


#: Violating pairs scanned for a witness triple before giving up on naming one.
WITNESS_SCAN = 10_000


def ultrametric_violation(
    e: np.ndarray, d: Dendrogram | None = None, deadline: Deadline | None = None
) -> tuple[int, int, int] | None:
    """A triple (a, b, c) with e(a, c) < min(e(a, b), e(b, c)), or None when e is ultrametric.

    Raises ``OutOfTime`` when ``deadline`` passes.

    Examples
    --------
    >>> ring = np.array([[0, 3, 1, 3], [3, 0, 3, 1], [1, 3, 0, 3], [3, 1, 3, 0]], dtype=float)
    >>> ultrametric_violation(ring)
    (0, 1, 2)
    >>> ultrametric_violation(np.array([[0, 2, 1], [2, 0, 1], [1, 1, 0]], dtype=float)) is None
    True
    """
    n = e.shape[0]
    if n < 3:
        return None
    u = merge_levels(d if d is not None else build(e, deadline), n, deadline)
    _tick(deadline)
    off = ~np.eye(n, dtype=bool)
    bad = np.argwhere((e < u) & off)
    _tick(deadline)
    if len(bad) == 0:
        return None
    for a, c in bad[:WITNESS_SCAN]:
        via = np.flatnonzero(np.minimum(e[a], e[c]) > e[a, c])
        via = via[(via != a) & (via != c)]
        if len(via):
            return int(a), int(via[0]), int(c)
    a, c = bad[0]
    return int(a), -1, int(c)  # pragma: no cover - some triple violates whenever e != U
