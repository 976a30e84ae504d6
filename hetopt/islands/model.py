"""Data shared by the CP-SAT and MILP assignment models (``formulations/islands.md``, §Models).

Island slots k = 0..K-1, K = the greedy's island count (an upper bound). Node v may sit in
slot k ≤ v only (symmetry breaking, see below). Conditions 1-2 are pairwise, stated over
*profiles* (nodes with equal g, c, m, b): two conflicting profiles never share a slot.

Proximity is stated over *balls*: for node v and each bandwidth level t of v's links except
the lowest, the ball B(v, t) = {v} ∪ {u : e(v, u) ≥ t}. Proximity of an island I holds
exactly when, for every v ∈ I and every ball B of v,

    some member of I lies outside B  ⇒  B ⊆ I.

Balls are shared: with a switch tree a ball is a dendrogram cluster (a rack, a pod), the
same for all its members, so the model has one "full" and one "spill" literal per
(ball, slot) and one clause per (node, level, slot); it never lists node triples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetopt.islands.heuristic import greedy_islands
from hetopt.islands.problem import IslandsInstance


@dataclass(frozen=True)
class ModelData:
    """Everything the two models read.

    Attributes
    ----------
    slots
        K, the number of island slots (the greedy's count).
    balls
        Distinct balls as sorted tuples of node indices.
    node_balls
        Per node, the ids of its balls (one per level but the lowest).
    profile
        Per node, its profile id.
    conflicts
        Pairs of profiles that may not share an island (conditions 1-2).
    hint
        The greedy's islands, ordered by their lowest node (slot k = k-th island).
    lower_bound
        A valid lower bound on the island count (distinct GPU counts never mix).
    """

    slots: int
    balls: tuple[tuple[int, ...], ...]
    node_balls: tuple[tuple[int, ...], ...]
    profile: tuple[int, ...]
    conflicts: tuple[tuple[int, int], ...]
    hint: tuple[tuple[int, ...], ...]
    lower_bound: int

    def allowed(self, v: int) -> range:
        """The slots node v may take: k ≤ v (an island's slot is at most its lowest node)."""
        return range(min(v, self.slots - 1) + 1)


def model_data(instance: IslandsInstance) -> ModelData:
    """Build the model data (balls, profiles, conflicts, greedy hint)."""
    n = instance.num_nodes
    e = instance.inter
    ball_id: dict[tuple[int, ...], int] = {}
    node_balls = []
    for v in range(n):
        others = np.delete(np.arange(n), v)
        levels = np.unique(e[v, others])[::-1]  # fastest first
        mine = []
        for t in levels[:-1]:  # the lowest level's ball is every node: no constraint
            ball = tuple(sorted([v, *others[e[v, others] >= t].tolist()]))
            mine.append(ball_id.setdefault(ball, len(ball_id)))
        node_balls.append(tuple(mine))
    profile = instance.profile
    rep: dict[int, int] = {}
    for v, p in enumerate(profile):
        rep.setdefault(p, v)
    conflicts = tuple(
        (p, q) for p in rep for q in rep if p < q and not instance.compatible[rep[p], rep[q]]
    )
    hint = tuple(sorted((tuple(sorted(i)) for i in greedy_islands(instance)), key=lambda i: i[0]))
    return ModelData(
        slots=len(hint),
        balls=tuple(ball_id),
        node_balls=tuple(node_balls),
        profile=profile,
        conflicts=conflicts,
        hint=hint,
        lower_bound=len({node.gpus for node in instance.nodes}),
    )


def hint_values(data: ModelData, n: int) -> dict:
    """The greedy's islands as model values: slot of each node, and per (ball, slot) full/spill."""
    slot_of = [0] * n
    for k, island in enumerate(data.hint):
        for v in island:
            slot_of[v] = k
    full, spill = {}, {}
    for b, ball in enumerate(data.balls):
        inside = set(ball)
        for k, island in enumerate(data.hint):
            full[b, k] = inside <= set(island)
            spill[b, k] = any(v not in inside for v in island)
    return {"slot": slot_of, "full": full, "spill": spill}
