"""Turning per-GPU choices (m_i, ℓ_i) into a full plan: times, memory and the state split."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hetopt.allocation.problem import (
    AllocationInstance,
    AllocationSolution,
    GpuPlan,
    StatePartition,
)
from hetopt.allocation.state import DEFAULT_GREEDY_UNITS, greedy_partition, lp_partition


def build_solution(instance: AllocationInstance, choices: Sequence[tuple[int, int]]) -> AllocationSolution:
    """The plan for per-GPU ``(microbatch_size, microbatches)`` in file order.

    The state is split by the exact LP (the plan's ``state_share``) and by Cephalo's greedy
    (``state_share_greedy``, in ``instance.layers`` units, or 100 without a layer count).

    Raises
    ------
    ValueError
        When no state split fits, i.e. the choices break (II) or (III).
    """
    groups = instance.group_of_gpu
    m = np.array([c[0] for c in choices], dtype=np.int64)
    ell = np.array([c[1] for c in choices], dtype=np.int64)
    grp = [instance.groups[g] for g in groups]
    used = np.array([g.memory_base_bytes for g in grp]) + instance.activation_bytes_per_sample * m
    capacity = np.array([g.memory_bytes for g in grp], dtype=float)
    usable = instance.memory_fraction * capacity
    state = instance.state_bytes
    shares, lp_util = lp_partition(used, capacity, usable, state)
    units = instance.layers or DEFAULT_GREEDY_UNITS
    greedy = greedy_partition(used, capacity, usable, state, units)
    greedy_shares = None if greedy is None else greedy[0]
    greedy_util = None if greedy is None else greedy[1]
    time = instance.cached_time()
    times = [time(g, int(ell[i]), int(m[i])) for i, g in enumerate(groups)]
    even = instance.even_shard_max_microbatch_per_group
    gpus = tuple(
        GpuPlan(
            type=grp[i].type,
            group=g,
            microbatch_size=int(m[i]),
            microbatches=int(ell[i]),
            state_share=float(shares[i]),
            state_share_greedy=None if greedy_shares is None else float(greedy_shares[i]),
            time_s=times[i],
            memory_bytes=float(used[i] + shares[i] * state),
            uneven_shard=bool(m[i] > even[g]),
            capacity_bytes=float(capacity[i]),
        )
        for i, g in enumerate(groups)
    )
    iteration = max(times)
    partition = StatePartition(
        lp_max_utilization=lp_util,
        greedy_max_utilization=greedy_util,
        greedy_units=units,
        greedy_gap=None if greedy_util is None else (greedy_util - lp_util) / lp_util,
    )
    return AllocationSolution(gpus, iteration, instance.global_batch / iteration, partition)


def expand_counts(instance: AllocationInstance, per_group: Sequence[Sequence[tuple[int, int, int]]]) -> list[tuple[int, int]]:
    """Per-GPU choices from per-group counts.

    ``per_group[g]`` lists ``(count, microbatch_size, microbatches)``; within a group the
    GPUs are interchangeable, so they take the options largest batch first, in file order.
    """
    out: list[tuple[int, int]] = []
    for g, grp in enumerate(instance.groups):
        items = sorted(per_group[g], key=lambda c: (-c[1] * c[2], -c[1]))
        expanded = [(m, ell) for count, m, ell in items for _ in range(count)]
        if len(expanded) != grp.count:
            raise ValueError(f"group {g} ({grp.type}): {len(expanded)} choices for {grp.count} GPUs")
        out.extend(expanded)
    return out
