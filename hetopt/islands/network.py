"""Resolving the three ways of giving inter-node bandwidth into one symmetric matrix e.

* pairs and groups: a default for every pair, raised to the largest group both nodes
  share, replaced by an explicit link where one is given (link > group > default);
* a switch tree: nodes attach to switches, switches to parents; e(n, n') is the widest-path
  (bottleneck) bandwidth between them, found with networkx;
* either way, two nodes on the same machine talk over the machine's host link (PCIe
  through the host), which replaces the network figure for that pair.

The inputs here are already validated (``hetopt.readers.islands`` names the bad key);
the functions only compute. Bandwidths keep whatever unit the caller uses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import networkx as nx

#: Host link between two GPU types of one machine when neither the file nor the machine
#: says otherwise, in Gb/s: PCIe 3.0 x16 carries 15.75 GB/s per direction ≈ 126 Gb/s,
#: rounded to 128; GPUs of two types in one box reach each other through the host's PCIe
#: root complex, and Gen3 is the slowest slot generation of the clusters shipped here.
DEFAULT_HOST_GBPS = 128.0


def matrix_from_pairs(
    names: Sequence[str],
    *,
    default: float | None,
    groups: Sequence[tuple[Sequence[str], float]] = (),
    links: Sequence[tuple[str, str, float]] = (),
) -> np.ndarray:
    """e from a default, groups (max over the groups a pair shares) and explicit links.

    Pairs no rule covers get NaN (the reader refuses such files when there is no default).

    Examples
    --------
    >>> e = matrix_from_pairs(["a", "b", "c"], default=10.0, groups=[(["a", "b"], 40.0)], links=[("b", "c", 25.0)])
    >>> e.tolist()
    [[0.0, 40.0, 10.0], [40.0, 0.0, 25.0], [10.0, 25.0, 0.0]]
    """
    index = {name: i for i, name in enumerate(names)}
    n = len(names)
    e = np.full((n, n), np.nan if default is None else float(default))
    for members, gbps in groups:
        idx = np.array([index[m] for m in members])
        block = e[np.ix_(idx, idx)]
        e[np.ix_(idx, idx)] = np.where(np.isnan(block), gbps, np.fmax(block, gbps))
    for a, b, gbps in links:
        e[index[a], index[b]] = e[index[b], index[a]] = gbps
    np.fill_diagonal(e, 0.0)
    return e


def switch_graph(switches: Mapping[str, tuple[str | None, float | None]]) -> nx.Graph:
    """The switch tree as an undirected networkx graph, edge attribute ``gbps``.

    ``switches`` maps a switch name to (parent or None, uplink bandwidth or None).
    """
    import networkx as nx  # here: reading a file without a switch tree must not pay for networkx

    graph = nx.Graph()
    graph.add_nodes_from(switches)
    for name, (parent, gbps) in switches.items():
        if parent is not None:
            graph.add_edge(name, parent, gbps=gbps)
    return graph


def switch_cycle(switches: Mapping[str, tuple[str | None, float | None]]) -> list[str] | None:
    """A cycle of parent links (as a list of switch names), or None when there is none."""
    import networkx as nx

    directed = nx.DiGraph((name, parent) for name, (parent, _) in switches.items() if parent is not None)
    try:
        cycle = nx.find_cycle(directed)
    except nx.NetworkXNoCycle:
        return None
    return [a for a, _ in cycle] + [cycle[0][0]]


def widest_paths(graph: nx.Graph) -> dict[str, dict[str, float]]:
    """Bottleneck bandwidth between every two switches of a tree (inf from a switch to itself).

    In a tree the widest path is the only path, so one breadth-first pass from each
    switch carries the running minimum along.
    """
    import networkx as nx

    out: dict[str, dict[str, float]] = {}
    for source in graph:
        best = {source: np.inf}
        for u, v in nx.bfs_edges(graph, source):
            best[v] = min(best[u], graph.edges[u, v]["gbps"])
        out[source] = best
    return out


def matrix_from_switch_tree(
    names: Sequence[str],
    attach: Sequence[tuple[str, float]],
    switches: Mapping[str, tuple[str | None, float | None]],
) -> np.ndarray:
    """e(n, n') = min(link of n, link of n', widest path between their switches).

    Parameters
    ----------
    attach
        Per node: (its switch, its link bandwidth to that switch).
    switches
        Switch name -> (parent or None for the root, uplink bandwidth or None).

    Examples
    --------
    >>> sw = {"root": (None, None), "r1": ("root", 100.0), "r2": ("root", 100.0)}
    >>> e = matrix_from_switch_tree(["a", "b", "c"], [("r1", 400.0), ("r1", 400.0), ("r2", 400.0)], sw)
    >>> e.tolist()
    [[0.0, 400.0, 100.0], [400.0, 0.0, 100.0], [100.0, 100.0, 0.0]]
    """
    graph = switch_graph(switches)
    paths = widest_paths(graph)
    order = list(switches)
    pos = {s: i for i, s in enumerate(order)}
    between = np.array([[paths[a].get(b, 0.0) for b in order] for a in order])
    sw = np.array([pos[s] for s, _ in attach])
    link = np.array([g for _, g in attach], dtype=float)
    e = np.minimum(np.minimum(link[:, None], link[None, :]), between[np.ix_(sw, sw)])
    np.fill_diagonal(e, 0.0)
    return e


def apply_host_links(e: np.ndarray, machines: Sequence[str], host_gbps: Mapping[str, float], default: float) -> np.ndarray:
    """Replace e for every pair of nodes on the same machine by that machine's host link.

    Examples
    --------
    >>> e = np.full((3, 3), 50.0)
    >>> apply_host_links(e, ["m1", "m1", "m2"], {}, 128.0)[0].tolist()
    [0.0, 128.0, 50.0]
    """
    e = e.copy()
    labels = np.array(machines, dtype=object)
    for machine in dict.fromkeys(machines):
        idx = np.flatnonzero(labels == machine)
        if len(idx) > 1:
            e[np.ix_(idx, idx)] = host_gbps.get(machine, default)
    np.fill_diagonal(e, 0.0)
    return e
