"""The replicas family's size limits, one place for all of them: which method declines what.

Every limit is decided from the instance's counts alone, before any table or model is built,
so a method declines in milliseconds and its advice ("use dp", "use milp or cpsat", "use
greedy") is true: the DP's tables (:func:`table_sizes`, :func:`dp_limit_hit`) and the models'
slots and pairs (:func:`slot_count`, :func:`model_limit_hit`) are both known here.
"""

from __future__ import annotations

import math

from hetopt.replicas.problem import ReplicasInstance, usable_candidates

#: Most knapsack cells (island-count states × (R_max + 1)) the DP fills per τ: 4·10^6 int64
#: cells are 32 MB per table and about 0.05 s per candidate copy on one core. Above it the
#: DP declines (the MILP and CP-SAT count candidates instead of states).
MAX_DP_CELLS = 4_000_000
#: Most bytes of the choice tables kept to rebuild the plan (one byte or two per cell and
#: candidate, only in the final pass).
MAX_CHOICE_BYTES = 2**29
#: Most slots (Σ_c K_c) a model takes: each is two variables and four rows; beyond 20,000
#: the models take longer to build than the DP to solve, so they decline.
MAX_SLOTS = 20_000
#: Most (class, R) pairs a model takes (binaries w_{k,R}).
MAX_PAIRS = 50_000

def components(instance: ReplicasInstance, candidates: list[int]) -> list[list[int]]:
    """The candidates grouped so that no two groups share a shape (connected components).

    Groups meet only through R, so each gets its own knapsack over its own shapes and the
    tables are joined by a max-plus convolution over R: the state space is a sum over groups
    instead of one product over every shape.
    """
    parent = list(range(instance.num_shapes))

    def root(s: int) -> int:
        while parent[s] != s:
            parent[s] = parent[parent[s]]
            s = parent[s]
        return s

    for c in candidates:
        used = [s for s, u in enumerate(instance.candidates[c].uses) if u]
        for s in used[1:]:
            parent[root(s)] = root(used[0])
    groups: dict[int, list[int]] = {}
    for c in candidates:
        first = next(s for s, u in enumerate(instance.candidates[c].uses) if u)
        groups.setdefault(root(first), []).append(c)
    return [groups[k] for k in sorted(groups)]


def table_sizes(instance: ReplicasInstance, candidates: list[int]) -> dict[str, int]:
    """The sizes of the DP's tables, from the input's counts alone (Python integers: a product
    of island counts overflows int64 long before it is refused), so the DP can decline before
    it builds anything.

    Returns
    -------
    dict
        ``states`` (island-count states of all components), ``cells`` (knapsack cells),
        ``choice_bytes`` (the final pass's choice tables), ``sync_cells`` (σ(k, R): classes ×
        (R_max + 1)), ``classes``, ``components``.

    Examples
    --------
    >>> from hetopt.replicas.problem import Candidate, IslandShape
    >>> shapes = tuple(IslandShape(f"S{i}", 1023) for i in range(7))
    >>> inst = ReplicasInstance("x", 8, shapes, (Candidate("a", (1,) * 7, 1.0, 0.5, 1e9, 1e11),))
    >>> table_sizes(inst, [0])["states"] == 1024**7  # 2^70: past int64
    True
    """
    cands = instance.candidates
    r_max = min(instance.max_replicas, sum(instance.copies(c) for c in candidates))
    states = cells = choice_bytes = 0
    groups = components(instance, candidates)
    for group in groups:
        dims = [s for s in range(instance.num_shapes) if any(cands[c].uses[s] for c in group)]
        part_states = math.prod(int(instance.counts[s]) + 1 for s in dims)
        part_cells = part_states * (min(r_max, sum(instance.copies(c) for c in group)) + 1)
        states += part_states
        cells += part_cells
        choice_bytes += 2 * part_cells * len(group)
    classes = len({cands[c].sync_ratio for c in candidates})
    return {"states": states, "cells": cells, "choice_bytes": choice_bytes, "sync_cells": classes * (r_max + 1),
            "classes": classes, "components": len(groups)}


def dp_limit_hit(instance: ReplicasInstance, sizes: dict[str, int] | None = None) -> str | None:
    """Which of the DP's limits the instance passes (``table_sizes``), or None."""
    sizes = table_sizes(instance, usable_candidates(instance)) if sizes is None else sizes
    for key, what, limit in (("cells", "knapsack cells (island-count states × replicas)", MAX_DP_CELLS),
                             ("sync_cells", "cells of the sync table (ratio classes × replicas)", MAX_DP_CELLS),
                             ("choice_bytes", "bytes of choice tables", MAX_CHOICE_BYTES)):
        if sizes[key] > limit:
            return f"{sizes[key]} {what} exceed the DP's limit of {limit}"
    return None


def slot_count(instance: ReplicasInstance, kept: list[int] | None = None) -> int:
    """Σ_c min(K_c, R_max) over the candidates ``kept`` (default: the usable ones), without
    building a slot: O(candidates · shapes)."""
    kept = usable_candidates(instance) if kept is None else kept
    r_max = min(instance.max_replicas, sum(instance.copies(c) for c in kept))
    return sum(min(instance.copies(c), r_max) for c in kept)


def model_limit_hit(instance: ReplicasInstance, model: str = "the model") -> str | None:
    """Which of the models' limits the instance passes (slots or pairs), or None.

    Decided from the counts alone, before any work and without the known plan's pruning, so
    the answer does not depend on the time limit (the greedy that finds the known plan stops
    with it). MILP and CP-SAT share these limits.
    """
    usable = usable_candidates(instance)
    slots = slot_count(instance, usable)
    if slots > MAX_SLOTS:
        return f"{slots} replica slots exceed {model}'s limit of {MAX_SLOTS}"
    r_max = min(instance.max_replicas, sum(instance.copies(c) for c in usable))
    classes = len({instance.candidates[c].sync_ratio for c in usable})
    pairs = 1 + classes * max(0, r_max - 1)
    if pairs > MAX_PAIRS:
        return f"{pairs} (sync class, replicas) pairs exceed {model}'s limit of {MAX_PAIRS}"
    return None


def size_problem(instance: ReplicasInstance, model: str) -> str | None:
    """Why ``model`` (MILP or CP-SAT) declines the instance, with advice that holds: dp only
    when dp would take it (:func:`dp_limit_hit`), else greedy."""
    hit = model_limit_hit(instance, model)
    if hit is None:
        return None
    dp_hit = dp_limit_hit(instance)
    return f"{hit}; use dp" if dp_hit is None else f"{hit}; dp declines it too ({dp_hit}): use greedy"


__all__ = ["MAX_CHOICE_BYTES", "MAX_DP_CELLS", "MAX_PAIRS", "MAX_SLOTS", "components", "dp_limit_hit", "model_limit_hit",
           "size_problem", "slot_count", "table_sizes"]
