"""Seeded random clusters for tests and experiments (small, with borderline profiles).

Profiles are drawn from short palettes whose neighbors sit just inside or just outside the
default 10% tolerance, so conditions 1-2 bind in every way; bandwidths come from a random
switch tree (ultrametric), a random matrix over a few levels (usually not ultrametric), or
a switch tree with machines whose host link is slower than their switch link.
"""

from __future__ import annotations

import numpy as np

from hetopt.islands.network import apply_host_links, matrix_from_switch_tree
from hetopt.islands.problem import GBPS, GBS, GIB, TFLOPS, IslandsInstance, Node, Tolerance

#: Palettes: neighbors 5-12% apart around the 10% tolerance.
GPU_COUNTS = (4, 8)
TFLOPS_PALETTE = (100.0, 105.0, 112.0, 125.0)
MEMORY_PALETTE = (40.0, 43.0, 48.0, 80.0)
INTRA_PALETTE = (16.0, 17.5, 32.0)
LEVELS_GBPS = (25.0, 50.0, 100.0, 200.0, 400.0)

#: Kinds of networks :func:`random_cluster` draws.
NETWORKS = ("tree", "matrix", "machines")


def random_cluster(seed: int, nodes: int, *, network: str | None = None, profiles: int = 3) -> IslandsInstance:
    """A random cluster of ``nodes`` nodes drawn from ``profiles`` palette profiles.

    Parameters
    ----------
    network
        "tree", "matrix" or "machines" (default: drawn from the seed).

    Examples
    --------
    >>> random_cluster(1, 5, network="tree").num_nodes
    5
    """
    rng = np.random.default_rng(seed)
    network = network or NETWORKS[int(rng.integers(len(NETWORKS)))]
    palette = [
        (
            int(rng.choice(GPU_COUNTS)),
            float(rng.choice(TFLOPS_PALETTE)),
            float(rng.choice(MEMORY_PALETTE)),
            float(rng.choice(INTRA_PALETTE)),
        )
        for _ in range(profiles)
    ]
    machines = [f"m{i}" for i in range(nodes)]
    if network == "machines":  # pair some nodes onto shared machines
        for i in range(1, nodes):
            if rng.random() < 0.4:
                machines[i] = machines[i - 1]
    out = []
    for i in range(nodes):
        g, c, m, b = palette[int(rng.integers(profiles))]
        out.append(Node(f"n{i}", machines[i], f"P{g}-{c:g}", g, c * TFLOPS, m * GIB, b * GBS))
    if network == "matrix":
        e = rng.choice(LEVELS_GBPS, size=(nodes, nodes))
        e = np.triu(e, 1)
        e = e + e.T
    else:
        switches: dict[str, tuple[str | None, float | None]] = {"s0": (None, None)}
        for s in range(1, max(1, nodes // 2)):
            switches[f"s{s}"] = (f"s{int(rng.integers(s))}", float(rng.choice(LEVELS_GBPS)))
        names = list(switches)
        attach = [(names[int(rng.integers(len(names)))], float(rng.choice(LEVELS_GBPS))) for _ in range(nodes)]
        e = matrix_from_switch_tree([n.name for n in out], attach, switches)
        if network == "machines":
            e = apply_host_links(e, machines, {}, float(rng.choice(LEVELS_GBPS)))
    return IslandsInstance(
        name=f"random-{network}-{nodes}-{seed}",
        nodes=tuple(out),
        bandwidth=tuple(tuple(float(x) * GBPS for x in row) for row in e.tolist()),
        tolerance=Tolerance(),
        network=network,
    )
