"""Seeded random replicas instances, for the agreement tests and the bench suite.

Figures are drawn in the ranges the planner produces (a pipeline pass of 0.1-10 s, a
bottleneck of 2-40% of it, gradient shares of 0.1-10 GB at 25-400 Gb/s), so the sync term
competes with the replicas' times, and a few candidates share a sync ratio to exercise the
DP's classes.
"""

from __future__ import annotations

import numpy as np

from hetopt.replicas.problem import GBPS, Candidate, IslandShape, ReplicasInstance


def random_instance(
    seed: int,
    *,
    shapes: int = 2,
    max_count: int = 3,
    candidates: int = 4,
    microbatches: int = 6,
    hop_latency_s: float | None = None,
) -> ReplicasInstance:
    """A random instance; the same seed gives the same instance.

    Parameters
    ----------
    shapes, max_count
        Island shapes and the most islands of each (each count is drawn from 0..max_count).
    candidates
        Candidate pipelines, each using 1-2 islands of 1-2 shapes.
    microbatches
        N.
    hop_latency_s
        The ring step latency; None draws 0 or the network default.

    Examples
    --------
    >>> random_instance(1).name
    'random-1'
    >>> random_instance(1) == random_instance(1)
    True
    """
    rng = np.random.default_rng(seed)
    shape_list = tuple(
        IslandShape(f"S{s}", int(rng.integers(0, max_count + 1)), gpu=f"G{s}", gpus=int(rng.choice([4, 8, 16])))
        for s in range(shapes)
    )
    ratio_pool = [float(rng.uniform(0.02, 0.8)) for _ in range(max(1, candidates // 2))]
    cand_list = []
    for c in range(candidates):
        uses = [0] * shapes
        for s in rng.choice(shapes, size=int(rng.integers(1, min(2, shapes) + 1)), replace=False):
            uses[int(s)] = int(rng.integers(1, 3))
        fill = float(rng.uniform(0.1, 10.0))
        per = fill * float(rng.uniform(0.02, 0.4))
        bandwidth = float(rng.choice([25, 100, 200, 400])) * GBPS
        ratio = ratio_pool[int(rng.integers(0, len(ratio_pool)))]
        cand_list.append(Candidate(f"c{c}", tuple(uses), fill, per, ratio * bandwidth, bandwidth))
    kwargs = {} if hop_latency_s is None else {"hop_latency_s": hop_latency_s}
    if hop_latency_s is None and rng.random() < 0.5:
        kwargs["hop_latency_s"] = 0.0
    return ReplicasInstance(f"random-{seed}", microbatches, shape_list, tuple(cand_list), **kwargs)
