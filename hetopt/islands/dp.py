"""Exact dynamic programs for the fewest islands.

* ``dp-dendrogram``: when e is ultrametric (always for a switch tree without slower host
  links), a DP over the bandwidth dendrogram. Valid islands are exactly the single nodes and
  the unions of at least two whole children of one dendrogram cluster (proof in
  ``formulations/islands.md``), so with F(C) the fewest islands covering cluster C,

      F(leaf) = 1,  F(C) = 1 if C is homogeneous, else
      F(C) = Σ_{D child of C, D not homogeneous} F(D) + cover(homogeneous children of C),

  where cover(H) is the fewest groups of pairwise-compatible children of H (a minimum
  clique cover). Children with the same (g, ranges of c, m, b) are interchangeable and
  always fit in one group, so the cover runs over distinct *profiles*: a 64-node flat
  switch of 4 GPU types is a cover of 4 profiles, not of 64 children.
* ``dp-subsets``: any e, small clusters (``hetopt.islands.subsets``).
* ``dp``: the dendrogram DP when e is ultrametric, else the subset DP when the cluster is
  small enough, else DECLINED with the reason.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from hetopt.family import Deadline, conclude, no_solution
from hetopt.islands import dendrogram as dendro
from hetopt.islands.problem import GBPS, IslandsInstance, build_solution, evaluate, within
from hetopt.islands.subsets import SUBSET_MAX_NODES, NoPartition, OutOfTime, TooLarge, fewest_parts
from hetopt.result import Result, Status

#: Most states the clique-cover DP of one dendrogram cluster may memoize; each state is a
#: set of profiles still to cover. Beyond it the DP declines (a cluster with hundreds of
#: mutually overlapping profiles is not what a real cluster looks like).
COVER_MAX_STATES = 200_000


class Declined(Exception):
    """The DP does not apply; the message is the reason."""


@dataclass(frozen=True)
class Ranges:
    """Condition-1/2 data of a homogeneous set of nodes: g and the (min, max) of c, m, b."""

    gpus: float
    c: tuple[float, float]
    m: tuple[float, float]
    b: tuple[float, float]

    def union(self, other: Ranges) -> Ranges:
        """The ranges of the union (gpus is nan when the counts differ)."""
        return Ranges(
            self.gpus if self.gpus == other.gpus else float("nan"),
            (min(self.c[0], other.c[0]), max(self.c[1], other.c[1])),
            (min(self.m[0], other.m[0]), max(self.m[1], other.m[1])),
            (min(self.b[0], other.b[0]), max(self.b[1], other.b[1])),
        )

    def homogeneous(self, instance: IslandsInstance) -> bool:
        """Conditions 1 and 2 for the set these ranges describe."""
        tol = instance.tolerance
        return (
            self.gpus == self.gpus  # not nan
            and within(self.c[1] / self.c[0], tol.compute)
            and within(self.m[1] / self.m[0], tol.memory)
            and within(self.b[1] / self.b[0], tol.intra)
        )


def _leaf_ranges(instance: IslandsInstance, i: int) -> Ranges:
    n = instance.nodes[i]
    return Ranges(float(n.gpus), (n.flops,) * 2, (n.memory_bytes,) * 2, (n.intra_bytes_s,) * 2)


def min_clique_cover(adjacent: list[int], counters: dict, deadline: Deadline | None = None) -> list[int]:
    """The fewest cliques covering a graph given as neighbor bit masks; cliques as bit masks.

    F(S) = 1 + min over maximal cliques M ∋ low(S) of F(S \\ M): a clique containing low(S)
    lies in a maximal one, and removing more never hurts (F is monotone), so maximal
    cliques suffice; among them only the ones with a maximal trace S ∩ M are tried.

    Examples
    --------
    >>> min_clique_cover([0b010, 0b101, 0b010], {})  # a path a-b-c
    [3, 4]
    """
    import networkx as nx  # here: only non-ultrametric leaves need it, and ``import hetopt`` should not

    k = len(adjacent)
    graph = nx.Graph()
    graph.add_nodes_from(range(k))
    graph.add_edges_from((u, v) for u in range(k) for v in range(u + 1, k) if adjacent[u] >> v & 1)
    cliques = [sum(1 << v for v in c) for c in nx.find_cliques(graph)]
    by_vertex = [[m for m in cliques if m >> v & 1] for v in range(k)]
    memo: dict[int, tuple[int, int]] = {0: (0, 0)}

    def cover(s: int) -> int:
        if s in memo:
            return memo[s][0]
        if len(memo) > COVER_MAX_STATES:
            raise Declined(f"a cluster's profile cover needs more than {COVER_MAX_STATES} states")
        if deadline is not None and deadline.expired():
            raise OutOfTime
        v = (s & -s).bit_length() - 1
        traces = {s & m for m in by_vertex[v]}
        traces = [t for t in traces if not any(t != u and t & u == t for u in traces)]
        best, pick = k + 1, 0
        for t in traces:
            value = 1 + cover(s & ~t)
            if value < best:
                best, pick = value, t
        memo[s] = (best, pick)
        return best

    full = (1 << k) - 1
    cover(full)
    counters["cover_states"] = counters.get("cover_states", 0) + len(memo)
    parts, s = [], full
    while s:
        t = memo[s][1]
        parts.append(t)
        s &= ~t
    return parts


def dendrogram_islands(instance: IslandsInstance, tree: dendro.Dendrogram, deadline: Deadline) -> tuple[list[list[int]], dict]:
    """The optimal islands by the DP over ``tree`` (valid when e is ultrametric), and counters."""
    counters: dict = {"clusters": len(tree.clusters), "widest_level": 0}
    ranges: list[Ranges | None] = []  # None: not homogeneous
    plans: list[list[list[int]]] = []  # per cluster: islands as lists of cluster ids
    for cid, cluster in enumerate(tree.clusters):
        if deadline.expired():
            raise OutOfTime
        if not cluster.children:
            ranges.append(_leaf_ranges(instance, cluster.members[0]))
            plans.append([[cid]])
            continue
        kids = cluster.children
        counters["widest_level"] = max(counters["widest_level"], len(kids))
        whole = ranges[kids[0]]
        for d in kids[1:]:
            whole = None if whole is None or ranges[d] is None else whole.union(ranges[d])
        if whole is not None and whole.homogeneous(instance):
            ranges.append(whole)
            plans.append([[cid]])
            continue
        ranges.append(None)
        plan = [island for d in kids if ranges[d] is None for island in plans[d]]
        profiles: dict[Ranges, list[int]] = defaultdict(list)
        for d in kids:
            if ranges[d] is not None:
                profiles[ranges[d]].append(d)
        types = sorted(profiles, key=lambda r: (r.gpus, r.c, r.m, r.b))
        adjacent = []  # which profiles may share an island: quadratic in the profiles, so under the deadline
        for u in range(len(types)):
            if deadline.expired():
                raise OutOfTime
            adjacent.append(sum(1 << v for v, other in enumerate(types) if v != u and types[u].union(other).homogeneous(instance)))
        for part in min_clique_cover(adjacent, counters, deadline):
            plan.append([d for v, t in enumerate(types) if part >> v & 1 for d in profiles[t]])
        plans.append(plan)
    islands = [[m for c in island for m in tree.clusters[c].members] for island in plans[tree.root]]
    return islands, counters


def _finish(instance: IslandsInstance, method: str, islands: list[list[int]], deadline: Deadline, stats: dict) -> Result:
    return conclude(
        problem="islands", method=method, instance=instance, solution=build_solution(instance, islands),
        evaluate=evaluate, deadline=deadline, proven_optimal=True, stats=stats
    )


def _declined(method: str, deadline: Deadline, reason: str, stats: dict | None = None) -> Result:
    return no_solution(problem="islands", method=method, status=Status.DECLINED, deadline=deadline, reason=reason, stats=stats)


def _timed_out(method: str, deadline: Deadline) -> Result:
    return no_solution(problem="islands", method=method, status=Status.TIME_LIMIT, deadline=deadline, reason="time limit reached during the DP")


def non_ultrametric_reason(instance: IslandsInstance, triple: tuple[int, int, int]) -> str:
    """One sentence naming a triple that breaks e(a, c) ≥ min(e(a, b), e(b, c))."""
    a, b, c = triple
    e, name = instance.inter, [n.name for n in instance.nodes]
    if b < 0:  # pragma: no cover
        return "the bandwidths are not ultrametric (no bandwidth dendrogram describes them)"
    return (
        f"the bandwidths are not ultrametric: e({name[a]}, {name[c]}) = {e[a, c] / GBPS:g} Gb/s is below "
        f"min(e({name[a]}, {name[b]}), e({name[b]}, {name[c]})) = {min(e[a, b], e[b, c]) / GBPS:g} Gb/s"
    )


def solve_dp_dendrogram(instance: IslandsInstance, *, time_limit: float | None = None, method: str = "dp-dendrogram") -> Result:
    """The DP over the bandwidth dendrogram; DECLINED when e is not ultrametric.

    Returns
    -------
    Result
        OPTIMAL; ``stats``: clusters, widest_level (most children of one cluster),
        cover_states.
    """
    deadline = Deadline(time_limit)
    try:
        tree = dendro.build(instance.inter, deadline)
        triple = dendro.ultrametric_violation(instance.inter, tree, deadline)
    except OutOfTime:
        return _timed_out(method, deadline)
    if triple is not None:
        return _declined(method, deadline, non_ultrametric_reason(instance, triple))
    try:
        islands, counters = dendrogram_islands(instance, tree, deadline)
    except Declined as exc:
        return _declined(method, deadline, str(exc))
    except OutOfTime:
        return _timed_out(method, deadline)
    return _finish(instance, method, islands, deadline, dict(counters, algorithm="dendrogram"))


def solve_dp_subsets(instance: IslandsInstance, *, time_limit: float | None = None, method: str = "dp-subsets") -> Result:
    """The subset DP; DECLINED beyond its size or work limits.

    Returns
    -------
    Result
        OPTIMAL; TIME_LIMIT; DECLINED; ERROR when no partition exists (an instance that
        bypassed validation, e.g. a negative tolerance); ``stats``: valid_sets, updates.
    """
    deadline = Deadline(time_limit)
    try:
        islands, counters = fewest_parts(instance, deadline)
    except TooLarge as exc:
        return _declined(method, deadline, str(exc))
    except OutOfTime:
        return _timed_out(method, deadline)
    except NoPartition as exc:
        return no_solution(problem="islands", method=method, status=Status.ERROR, deadline=deadline, reason=str(exc))
    return _finish(instance, method, islands, deadline, dict(counters, algorithm="subsets"))


def solve_dp(instance: IslandsInstance, *, time_limit: float | None = None) -> Result:
    """The dendrogram DP when e is ultrametric, else the subset DP on small clusters, else DECLINED."""
    deadline = Deadline(time_limit)
    try:
        tree = dendro.build(instance.inter, deadline)
        triple = dendro.ultrametric_violation(instance.inter, tree, deadline)
    except OutOfTime:
        return _timed_out("dp", deadline)
    if triple is None:
        try:
            islands, counters = dendrogram_islands(instance, tree, deadline)
        except OutOfTime:
            return _timed_out("dp", deadline)
        except Declined as exc:
            if instance.num_nodes > SUBSET_MAX_NODES:
                return _declined("dp", deadline, str(exc))
        else:
            return _finish(instance, "dp", islands, deadline, dict(counters, algorithm="dendrogram"))
    if instance.num_nodes > SUBSET_MAX_NODES:
        reason = non_ultrametric_reason(instance, triple) if triple is not None else "the dendrogram DP does not apply"
        return _declined("dp", deadline, f"{reason}, and {instance.num_nodes} nodes exceed the subset DP's limit of {SUBSET_MAX_NODES}")
    result = solve_dp_subsets(instance, time_limit=None if time_limit is None else deadline.remaining(), method="dp")
    return result if not result.status.has_solution else _rewall(result, deadline)


def _rewall(result: Result, deadline: Deadline) -> Result:
    return replace(result, wall_s=deadline.elapsed())
