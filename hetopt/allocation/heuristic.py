"""A fast greedy plan: the CP-SAT warm start and the MILP's upper bound.

Cephalo's paper has no greedy for the batch split (its greedy is the state split, in
``state.py``); this one is ours. Every GPU starts with one sample; then, one sample at a
time, the GPU whose time after taking it would be smallest takes it (each GPU's time for a
batch b is its fastest option of batch b). If the plan breaks (III), the GPUs with the
largest micro-batches fall back to their smallest-m option of the same batch.
"""

from __future__ import annotations

import heapq

import numpy as np

from hetopt.budget import CLOCK_EVERY
from hetopt.allocation.options import Options, first_of_each_batch
from hetopt.allocation.problem import AllocationInstance


def _fastest_per_batch(options: Options, length: int) -> tuple[np.ndarray, np.ndarray]:
    """best_time[b], best_index[b] over options of batch b (inf / -1 where none)."""
    best_time = np.full(length, np.inf)
    best_index = np.full(length, -1, dtype=np.int64)
    order = np.lexsort((options.time, options.batch))  # by batch, then time
    b = options.batch[order]
    first = first_of_each_batch(b)
    best_time[b[first]] = options.time[order][first]
    best_index[b[first]] = order[first]
    return best_time, best_index


#: Samples the greedy hands out between two looks at the clock (a heap step each).
STEPS_PER_CLOCK = 16 * CLOCK_EVERY


def greedy_choices(instance: AllocationInstance, options: list[Options], deadline=None) -> list[tuple[int, int]] | None:
    """Per-GPU (microbatch_size, microbatches) in file order, or None if it finds no plan.

    ``deadline`` (a ``hetopt.family.Deadline``): give up (None) once it expires.

    Examples
    --------
    >>> from hetopt.allocation.problem import GIB, GpuGroup, Latency
    >>> from hetopt.allocation.options import enumerate_options
    >>> f = Latency((0.010, 0.018, 0.026))
    >>> inst = AllocationInstance("x", 8, (GpuGroup("A", 2, 16 * GIB, GIB, f, f),), GIB, 4 * GIB)
    >>> greedy_choices(inst, [enumerate_options(inst, 0)])
    [(4, 1), (4, 1)]
    """
    length = instance.global_batch + 1
    tables = [_fastest_per_batch(o, length) for o in options]
    groups = instance.group_of_gpu
    batch = [1] * len(groups)
    if any(not np.isfinite(tables[g][0][1]) for g in groups):
        return None
    heap = [(tables[g][0][2] if length > 2 else np.inf, i) for i, g in enumerate(groups)]
    heapq.heapify(heap)
    for given in range(instance.global_batch - len(groups)):
        if deadline is not None and given % STEPS_PER_CLOCK == 0 and deadline.expired():
            return None
        if not heap:
            return None
        t, i = heapq.heappop(heap)
        if not np.isfinite(t):
            return None
        batch[i] += 1
        nxt = batch[i] + 1
        heapq.heappush(heap, (tables[groups[i]][0][nxt] if nxt < length else np.inf, i))
    choices = []
    for i, g in enumerate(groups):
        o = tables[g][1][batch[i]]
        choices.append((int(options[g].microbatch_size[o]), int(options[g].microbatches[o])))
    return _repair_memory(instance, choices)


def _repair_memory(instance: AllocationInstance, choices: list[tuple[int, int]]) -> list[tuple[int, int]] | None:
    """Lower micro-batch sizes (same batch, more micro-batches) until Σ m fits (III)."""
    budget = instance.microbatch_budget
    choices = list(choices)
    while sum(m for m, _ in choices) > budget:
        i = max(range(len(choices)), key=lambda k: choices[k][0])
        m, ell = choices[i]
        if m == 1:
            return None
        b = m * ell
        smaller = max(d for d in range(1, m) if b % d == 0)
        choices[i] = (smaller, b // smaller)
    return choices
