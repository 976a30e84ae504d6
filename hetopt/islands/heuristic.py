"""Tangram's greedy island procedure, made safe: every merge is checked against all three conditions.

1. Split the nodes by GPU count, then by compute and memory: nodes sorted by (c, m), a new
   group whenever c or m would leave the window [first, first·(1 + ε)] of the group.
2. Split every group the same way by intra-node bandwidth b.
3. Inside each group, agglomerative clustering on inter-node bandwidth
   (``scipy.cluster.hierarchy.linkage``, single linkage on distance 1/e, which merges along
   widest paths like the proximity condition reads them), replayed bottom-up: two clusters'
   islands merge when the union is still a valid island *in the whole cluster*.

The paper cuts the dendrogram instead; a cut can give an island that breaks proximity
(a faster link to a node of another group, split off in steps 1-2), so here a merge that
would break a condition is refused and the two sides stay separate islands. Singletons are
valid, so the answer always is. It is a heuristic: crosscheck reports its gap.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.cluster.hierarchy import linkage

from hetopt.family import Deadline, conclude
from hetopt.islands.problem import IslandsInstance, build_solution, evaluate, is_valid_island, within
from hetopt.result import Result


def _window_split(order: Sequence[int], values: Sequence[np.ndarray], eps: Sequence[float]) -> list[list[int]]:
    """Split ``order`` (already sorted) whenever a value leaves its group's max/min window."""
    groups: list[list[int]] = []
    lo = hi = None
    for i in order:
        x = [v[i] for v in values]
        if groups and all(within(max(h, xi) / min(l, xi), e) for l, h, xi, e in zip(lo, hi, x, eps)):
            groups[-1].append(i)
            lo = [min(l, xi) for l, xi in zip(lo, x)]
            hi = [max(h, xi) for h, xi in zip(hi, x)]
        else:
            groups.append([i])
            lo, hi = list(x), list(x)
    return groups


def homogeneous_groups(instance: IslandsInstance) -> list[list[int]]:
    """Steps 1 and 2: groups of node indices meeting conditions 1 and 2."""
    g = instance.attribute("gpus")
    c = instance.attribute("flops")
    m = instance.attribute("memory_bytes")
    b = instance.attribute("intra_bytes_s")
    tol = instance.tolerance
    out = []
    for count in sorted(set(g.tolist())):
        same = sorted(np.flatnonzero(g == count).tolist(), key=lambda i: (c[i], m[i], i))
        for group in _window_split(same, (c, m), (tol.compute, tol.memory)):
            by_intra = sorted(group, key=lambda i: (b[i], i))
            out.extend(_window_split(by_intra, (b,), (tol.intra,)))
    return out


def _cluster_group(instance: IslandsInstance, group: list[int]) -> list[list[int]]:
    """Step 3 for one group: replay single-linkage merges while islands stay valid."""
    if len(group) == 1:
        return [group]
    sub = instance.inter[np.ix_(group, group)]
    distance = 1.0 / sub[np.triu_indices(len(group), 1)]
    steps = linkage(distance, method="single")
    parts: dict[int, list[list[int]]] = {i: [[node]] for i, node in enumerate(group)}
    for k, (left, right, _, _) in enumerate(steps):
        islands = parts.pop(int(left)) + parts.pop(int(right))
        islands.sort(key=len, reverse=True)
        merged: list[list[int]] = []
        for island in islands:  # greedy: join the first (largest) island that stays valid
            for target in merged:
                if is_valid_island(instance, target + island):
                    target.extend(island)
                    break
            else:
                merged.append(list(island))
        parts[len(group) + k] = merged
    return [island for islands in parts.values() for island in islands]


def greedy_islands(instance: IslandsInstance) -> list[list[int]]:
    """The greedy's islands as lists of node indices."""
    return [island for group in homogeneous_groups(instance) for island in _cluster_group(instance, group)]


def solve_greedy(instance: IslandsInstance, *, time_limit: float | None = None) -> Result:
    """Tangram's procedure (above); FEASIBLE, with no proven bound.

    Returns
    -------
    Result
        ``stats["groups"]``: homogeneous groups after steps 1-2.
    """
    deadline = Deadline(time_limit)
    groups = homogeneous_groups(instance)
    islands = [island for group in groups for island in _cluster_group(instance, group)]
    return conclude(
        problem="islands",
        method="greedy",
        instance=instance,
        solution=build_solution(instance, islands),
        evaluate=evaluate,
        deadline=deadline,
        proven_optimal=False,
        stats={"groups": len(groups)},
    )
