"""Reading ``problem = "islands"`` files into an :class:`IslandsInstance`.

Files use TFLOPs, GiB, GB/s (intra-node) and Gb/s (network); the instance uses FLOP/s,
bytes and bytes/s (converted here, once). The network is given either as pairs and groups
with a default, or as a switch tree (``[[network.switch]]`` plus ``switch`` and
``switch_gbps`` on every node); see ``hetopt.islands.network`` for how e is resolved.
"""

from __future__ import annotations

import numpy as np

from hetopt.islands.network import (
    DEFAULT_HOST_GBPS,
    apply_host_links,
    matrix_from_pairs,
    matrix_from_switch_tree,
    switch_cycle,
)
from hetopt.islands.problem import (
    DEFAULT_TOLERANCE,
    GBPS,
    GBS,
    GIB,
    MAX_GBPS,
    MAX_NODES,
    MIN_GBPS,
    TFLOPS,
    IslandsInstance,
    Node,
    Tolerance,
    check_nodes,
)
from hetopt.readers.fields import Fields, located

# The accepted ranges of node figures and tolerances are checked once, by the instance's
# constructor (``hetopt.islands.problem``), whose InputErrors name the same key paths;
# this reader checks the file's shape, types and the network keys the matrix is built from.

TOP_KEYS = ("problem", "name", "description", "source", "tolerance", "node", "network")
TOLERANCE_KEYS = ("compute", "memory", "intra")
NODE_KEYS = ("name", "machine", "gpu", "gpus", "tflops", "memory_gib", "intra_gbs", "switch", "switch_gbps", "vm", "source", "note")
NETWORK_KEYS = ("default_gbps", "host_gbps", "link", "group", "switch", "machine", "source", "note")
LINK_KEYS = ("a", "b", "gbps", "source", "note")
GROUP_KEYS = ("name", "nodes", "gbps", "source", "note")
SWITCH_KEYS = ("name", "parent", "gbps", "source", "note")
MACHINE_KEYS = ("name", "host_gbps", "source", "note")


def _gbps(f: Fields, key: str, *default: float | None) -> float | None:
    """A bandwidth in Gb/s in [``MIN_GBPS``, ``MAX_GBPS``]; ``default`` (if given) when absent."""
    return f.number(key, *default, minimum=MIN_GBPS, maximum=MAX_GBPS)


def _nodes(top: Fields) -> tuple[list[Node], list[Fields]]:
    tables = top.tables("node", required=True, max_len=MAX_NODES)
    nodes = []
    for f in tables:
        f.reject_unknown(NODE_KEYS)
        name = f.string("name")
        nodes.append(
            Node(
                name=name,
                machine=f.string("machine", name),
                gpu=f.string("gpu"),
                gpus=f.integer("gpus"),
                flops=f.si("tflops", TFLOPS, "TFLOP/s"),
                memory_bytes=f.si("memory_gib", GIB, "GiB"),
                intra_bytes_s=f.si("intra_gbs", GBS, "GB/s"),
            )
        )
    return nodes, tables


def _known(f: Fields, key: str, name: str, known: dict, what: str) -> None:
    if name not in known:
        sample = ", ".join(list(known)[:5]) + (", ..." if len(known) > 5 else "")
        raise f.error(key, f"unknown {what} {name!r} (known: {sample})")


def _pairs_matrix(net: Fields, nodes: list[Node], index: dict):
    names = [n.name for n in nodes]
    default = _gbps(net, "default_gbps", None)
    groups = []
    for g in net.tables("group"):
        g.reject_unknown(GROUP_KEYS)
        members = g.strings("nodes")
        if len(members) < 2:
            raise g.error("nodes", "a group needs at least two nodes")
        for j, m in enumerate(members):
            _known(g, f"nodes[{j}]", m, index, "node")
        if len(set(members)) != len(members):
            raise g.error("nodes", "lists a node twice")
        groups.append((members, _gbps(g, "gbps")))
    links, seen = [], {}
    for link in net.tables("link"):
        link.reject_unknown(LINK_KEYS)
        a, b = link.string("a"), link.string("b")
        _known(link, "a", a, index, "node")
        _known(link, "b", b, index, "node")
        if a == b:
            raise link.error("b", f"a link joins two different nodes (both are {a!r})")
        pair = frozenset((a, b))
        if pair in seen:
            raise link.error("a", f"the pair {a!r}–{b!r} is already given at {seen[pair]}")
        seen[pair] = link.path
        links.append((a, b, _gbps(link, "gbps")))
    e = matrix_from_pairs(names, default=default, groups=groups, links=links)
    return e


def _switch_matrix(net: Fields, nodes: list[Node], node_tables: list[Fields]):
    for key in ("default_gbps", "link", "group"):
        if key in net.data:
            raise net.error(key, "give either a switch tree ([[network.switch]]) or pairs and groups, not both")
    switches: dict[str, tuple[str | None, float | None]] = {}
    where: dict[str, Fields] = {}
    tables = net.tables("switch", required=True)
    for s in tables:
        s.reject_unknown(SWITCH_KEYS)
        name = s.string("name")
        if name in switches:
            raise s.error("name", f"duplicate switch name {name!r} (also {where[name].path}.name)")
        parent = s.string("parent", None)
        gbps = _gbps(s, "gbps") if parent is not None else None
        if parent is None and "gbps" in s.data:
            raise s.error("gbps", "a root switch has no uplink: remove gbps or give a parent")
        switches[name], where[name] = (parent, gbps), s
    for name, (parent, _) in switches.items():
        if parent is not None:
            _known(where[name], "parent", parent, switches, "switch")
    cycle = switch_cycle(switches)
    if cycle is not None:
        raise where[cycle[0]].error("parent", "the switch tree has a cycle: " + " -> ".join(cycle))
    roots = [name for name, (parent, _) in switches.items() if parent is None]
    if len(roots) != 1:
        raise net.error("switch", f"the switch tree needs exactly one root (no parent); found {len(roots)}: {', '.join(roots)}")
    attach = []
    for f in node_tables:
        switch = f.string("switch")
        _known(f, "switch", switch, switches, "switch")
        attach.append((switch, _gbps(f, "switch_gbps")))
    return matrix_from_switch_tree([n.name for n in nodes], attach, switches)


def read_islands(data: dict, source: str) -> IslandsInstance:
    """Validate an islands file's data and build the instance.

    Raises
    ------
    InputError
        With the file, the key path and the fix.
    """
    with located(source):
        return _read(data, source)


def _read(data: dict, source: str) -> IslandsInstance:
    top = Fields(data, source)
    top.reject_unknown(TOP_KEYS)
    tol = top.table("tolerance")
    tol.reject_unknown(TOLERANCE_KEYS)
    tolerance = Tolerance(*(tol.number(k, DEFAULT_TOLERANCE) for k in TOLERANCE_KEYS))
    nodes, node_tables = _nodes(top)
    check_nodes(nodes)  # before the network keys refer to them by name
    index = {n.name: i for i, n in enumerate(nodes)}
    net = top.table("network")
    net.reject_unknown(NETWORK_KEYS)
    tree = "switch" in net.data or any("switch" in f.data or "switch_gbps" in f.data for f in node_tables)
    if tree:
        e = _switch_matrix(net, nodes, node_tables)
    else:
        e = _pairs_matrix(net, nodes, index)
    host_default = _gbps(net, "host_gbps", DEFAULT_HOST_GBPS)
    machines = {n.machine for n in nodes}
    host: dict[str, float] = {}
    for m in net.tables("machine"):
        m.reject_unknown(MACHINE_KEYS)
        name = m.string("name")
        _known(m, "name", name, dict.fromkeys(sorted(machines)), "machine")
        if name in host:
            raise m.error("name", f"machine {name!r} is listed twice")
        host[name] = _gbps(m, "host_gbps")
    e = apply_host_links(e, [n.machine for n in nodes], host, host_default)
    missing = np.argwhere(np.isnan(e))
    if len(missing):
        i, j = (int(x) for x in missing[0])
        raise net.error(
            "default_gbps",
            f"missing: {len(missing) // 2} node pair(s) have no bandwidth, e.g. {nodes[i].name!r}–{nodes[j].name!r}; "
            "give default_gbps, a [[network.link]] or a [[network.group]]",
        )
    return IslandsInstance(
        name=top.string("name", source),
        nodes=tuple(nodes),
        bandwidth=tuple(map(tuple, (e * GBPS).tolist())),
        tolerance=tolerance,
        network="switch tree" if tree else "pairs",
    )
