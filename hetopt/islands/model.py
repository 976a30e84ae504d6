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

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hetopt.family import Deadline, conclude
from hetopt.islands.heuristic import greedy_partition
from hetopt.islands.problem import IslandsInstance, build_solution, evaluate
from hetopt.islands.subsets import OutOfTime
from hetopt.result import Result

#: Largest assignment model built, in terms (variable occurrences in constraints, see
#: :func:`model_terms`). Measured: PuLP + HiGHS hold about 1.2 kB per term (2.8 GB for the
#: 2.4e6 terms of datacenter-512's MILP) and build about 2e5 terms/s; CP-SAT about 0.45 kB.
#: 5e5 terms keep a model under ~0.6 GB and a few seconds of building; the shipped
#: instances the models are run on need at most 3e4 (ring-24), and beyond the limit the
#: methods decline up front (``dp`` solves switch trees of any size).
MODEL_MAX_TERMS = 500_000


class ModelTooLarge(Exception):
    """The model would exceed ``MODEL_MAX_TERMS``; the message gives the count and the limit."""


def ticker(deadline: Deadline) -> Callable[[], None]:
    """``tick()`` raising OutOfTime once ``deadline`` has passed: the models' builders call it
    once per slot, ball and node."""

    def tick() -> None:
        if deadline.expired():
            raise OutOfTime

    return tick


def model_terms(slots: int, nodes: int, balls: int, conflicts: int, node_balls: int) -> int:
    """Terms of the assignment model: per slot, n·(balls + 5) + conflicting profile pairs + node balls.

    Per slot k the model has, for every ball, |B| "full" terms and n − |B| "spill" terms
    (n per ball); about 5 terms per node for assignment, the prefix OR, symmetry breaking
    and profiles; one row per conflicting profile pair; one proximity clause per (node, ball
    of that node).

    Examples
    --------
    >>> model_terms(slots=10, nodes=64, balls=6, conflicts=1436, node_balls=124)
    22640
    """
    return slots * (nodes * (balls + 5) + conflicts + node_balls)


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


def model_data(instance: IslandsInstance, deadline: Deadline | None = None) -> ModelData:
    """Build the model data (balls, profiles, conflicts, greedy hint).

    The size is checked as it grows (with the fewest slots possible, then with the greedy's),
    so an instance too large for the models is declined before its balls or its greedy
    take time and memory.

    Raises
    ------
    ModelTooLarge
        When :func:`model_terms` exceeds ``MODEL_MAX_TERMS``.
    OutOfTime
        When ``deadline`` passes before the data (the greedy included) is complete.
    """
    deadline = deadline or Deadline(None)
    if deadline.expired():
        raise OutOfTime
    n = instance.num_nodes
    e = instance.inter
    lower_bound = len({node.gpus for node in instance.nodes})
    profile = instance.profile
    _, reps = np.unique(np.asarray(profile), return_index=True)  # reps[p]: first node of profile p
    clash = np.argwhere(np.triu(~instance.compatible[np.ix_(reps, reps)], 1))
    if deadline.expired():
        raise OutOfTime

    def check(slots: int, balls: int, node_balls: int, qualifier: str) -> None:
        terms = model_terms(slots, n, balls, len(clash), node_balls)
        if terms > MODEL_MAX_TERMS:
            raise ModelTooLarge(
                f"the assignment model would have {qualifier}{terms:,} terms ({slots} slots × ({n} nodes × "
                f"({balls} balls + 5) + {len(clash)} conflicting profile pairs + {node_balls} node balls)), above "
                f"the limit of {MODEL_MAX_TERMS:,} (MODEL_MAX_TERMS, about 0.6 GB); use dp (any switch tree) or greedy"
            )

    check(lower_bound, 0, 0, "at least ")
    ball_id: dict[bytes, int] = {}
    balls: list[tuple[int, ...]] = []
    node_balls = []
    refs = 0
    for v in range(n):
        if deadline.expired():
            raise OutOfTime
        row = e[v].copy()
        row[v] = np.inf  # v is in each of its balls
        levels = np.unique(np.delete(row, v))[::-1]  # fastest first
        mine = []
        for t in levels[:-1]:  # the lowest level's ball is every node: no constraint
            inside = row >= t
            key = np.packbits(inside).tobytes()
            if key not in ball_id:
                ball_id[key] = len(balls)
                balls.append(tuple(np.flatnonzero(inside).tolist()))
            mine.append(ball_id[key])
        node_balls.append(tuple(mine))
        refs += len(mine)
        check(lower_bound, len(balls), refs, "at least ")
    islands, finished = greedy_partition(instance, deadline)
    if not finished:
        raise OutOfTime
    hint = tuple(sorted((tuple(sorted(i)) for i in islands), key=lambda i: i[0]))
    check(len(hint), len(balls), refs, "")
    return ModelData(
        slots=len(hint),
        balls=tuple(balls),
        node_balls=tuple(node_balls),
        profile=profile,
        conflicts=tuple((int(p), int(q)) for p, q in clash.tolist()),
        hint=hint,
        lower_bound=lower_bound,
    )


def greedy_answer(
    instance: IslandsInstance, data: ModelData, method: str, deadline: Deadline, stats: dict, why: str, bound: float | None = None
) -> Result:
    """The greedy's islands as the model's answer when the model found none in time.

    The bound is the better of the solver's proven bound (if any) and the distinct GPU
    counts; the answer is OPTIMAL only when that bound reaches the greedy's count.
    """
    bound = float(max(data.lower_bound, bound if bound is not None else 0.0))
    return conclude(
        problem="islands", method=method, instance=instance, solution=build_solution(instance, data.hint),
        evaluate=evaluate, deadline=deadline, proven_optimal=bound >= len(data.hint), bound=bound,
        stats=dict(stats, incumbent="greedy", stopped=why),
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
