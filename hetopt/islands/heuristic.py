"""Tangram's greedy island procedure, made safe: every merge is checked against all three conditions.

1. Split the nodes by GPU count, then by compute, then by memory: each split sorts a group
   by the quantity and cuts a new group where it leaves [first, first·(1 + ε)].
2. Split every group the same way by intra-node bandwidth b.
3. Inside each group, agglomerative clustering on inter-node bandwidth
   (``scipy.cluster.hierarchy.linkage``, single linkage on distance 1/e, which merges along
   widest paths like the proximity condition reads them), replayed bottom-up: at each merge
   the linkage cluster becomes one island if that is valid *in the whole cluster*; if not,
   its islands are merged pairwise, largest first, while the unions stay valid.

The paper cuts the dendrogram instead; a cut can give an island that breaks proximity
(a faster link to a node of another group, split off in steps 1-2), so here a merge that
would break a condition is refused and the two sides stay separate islands. Singletons are
valid, so the answer always is. It is a heuristic: crosscheck reports its gap.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hetopt.family import Deadline, conclude
from hetopt.islands.problem import IslandsInstance, build_solution, evaluate, is_valid_island, within
from hetopt.result import Result


def _window_split(nodes: Sequence[int], values: np.ndarray, eps: float) -> list[list[int]]:
    """Sort ``nodes`` by ``values`` and cut a new group where a value leaves [first, first·(1 + ε)]."""
    groups: list[list[int]] = []
    for i in sorted(nodes, key=lambda i: (values[i], i)):
        if groups and within(values[i] / values[groups[-1][0]], eps):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def homogeneous_groups(instance: IslandsInstance) -> list[list[int]]:
    """Steps 1 and 2: split by GPU count, then compute, then memory, then intra-node bandwidth.

    Each split is a one-dimensional sweep, so every group meets conditions 1 and 2.
    """
    tol = instance.tolerance
    g = instance.attribute("gpus")
    groups = [np.flatnonzero(g == count).tolist() for count in sorted(set(g.tolist()))]
    for attr, eps in (("flops", tol.compute), ("memory_bytes", tol.memory), ("intra_bytes_s", tol.intra)):
        values = instance.attribute(attr)
        groups = [part for group in groups for part in _window_split(group, values, eps)]
    return groups


def _cluster_group(instance: IslandsInstance, group: list[int], deadline: Deadline) -> tuple[list[list[int]], bool]:
    """Step 3 for one group: replay single-linkage merges while islands stay valid.

    Returns the islands and whether the replay finished; when the deadline passes it stops
    merging and returns the islands it holds (each valid, together a partition of the group).
    """
    from scipy.cluster.hierarchy import linkage  # here: ``import hetopt`` should not load SciPy

    if len(group) == 1:
        return [group], True
    sub = instance.inter[np.ix_(group, group)]
    distance = 1.0 / sub[np.triu_indices(len(group), 1)]
    steps = linkage(distance, method="single")
    parts: dict[int, list[list[int]]] = {i: [[node]] for i, node in enumerate(group)}
    finished = True
    for k, (left, right, _, _) in enumerate(steps):
        if deadline.expired():
            finished = False
            break
        islands = parts.pop(int(left)) + parts.pop(int(right))
        whole = [node for island in islands for node in island]
        if len(islands) > 1 and is_valid_island(instance, whole):  # the dendrogram's cluster itself
            parts[len(group) + k] = [whole]
            continue
        islands.sort(key=len, reverse=True)
        merged: list[list[int]] = []
        for island in islands:  # greedy: join the first (largest) island that stays valid
            for target in merged:
                if deadline.expired():  # stop merging; what is held stays valid
                    finished = False
                    break
                if is_valid_island(instance, target + island):
                    target.extend(island)
                    break
            else:
                merged.append(list(island))
                continue
            if not finished:
                merged.append(list(island))
        parts[len(group) + k] = merged
    return [island for islands in parts.values() for island in islands], finished


def greedy_partition(instance: IslandsInstance, deadline: Deadline | None = None) -> tuple[list[list[int]], bool]:
    """The greedy's islands (lists of node indices) and whether it finished before ``deadline``.

    The greedy only ever holds valid islands, so what it returns when the deadline stops it
    is still a valid partition (with more islands than the finished greedy would give).
    """
    deadline = deadline or Deadline(None)
    islands: list[list[int]] = []
    finished = True
    for group in homogeneous_groups(instance):
        if finished:
            part, finished = _cluster_group(instance, group, deadline)
            islands += part
        else:  # out of time: the group's nodes stay single-node islands
            islands += [[node] for node in group]
    return islands, finished


def greedy_islands(instance: IslandsInstance) -> list[list[int]]:
    """The greedy's islands as lists of node indices (no time limit)."""
    return greedy_partition(instance)[0]


def solve_greedy(instance: IslandsInstance, *, time_limit: float | None = None) -> Result:
    """Tangram's procedure (above); FEASIBLE, with no proven bound.

    When ``time_limit`` stops it, it returns the valid islands it holds (single-node islands
    for the groups it did not reach), still FEASIBLE, with ``stats["stopped"]``.

    Returns
    -------
    Result
        ``stats["groups"]``: homogeneous groups after steps 1-2.
    """
    deadline = Deadline(time_limit)
    islands, finished = greedy_partition(instance, deadline)
    stats: dict = {"groups": len(homogeneous_groups(instance))}
    if not finished:
        stats["stopped"] = "time limit reached before the greedy finished merging"
    return conclude(
        problem="islands", method="greedy", instance=instance, solution=build_solution(instance, islands),
        evaluate=evaluate, deadline=deadline, proven_optimal=False, stats=stats
    )
