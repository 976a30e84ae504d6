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
from hetopt.errors import SolverBug


def build_solution(instance: AllocationInstance, choices: Sequence[tuple[int, int]]) -> AllocationSolution:
    """The plan for per-GPU ``(microbatch_size, microbatches)`` in file order.

    The state is split by the exact LP (the plan's ``state_share``) and by Cephalo's greedy
    (``state_share_greedy``, in ``instance.layers`` units, or 100 without a layer count).

    Raises
    ------
    SolverBug
        When no state split fits: the choices break (II) or (III), which every method
        enforces, so this is a bug to report (exit 4), never bad input. The split fills GPUs
        up to the limit ``evaluate`` checks (``problem.memory_limit``), so whatever (II) and
        (III) admit with their rounding slack has a split.
    """
    groups = instance.group_of_gpu
    m = np.array([c[0] for c in choices], dtype=np.int64)
    ell = np.array([c[1] for c in choices], dtype=np.int64)
    grp = [instance.groups[g] for g in groups]
    used = np.array([g.memory_base_bytes for g in grp]) + instance.activation_bytes_per_sample * m
    capacity = np.array([g.memory_bytes for g in grp], dtype=float)
    usable = instance.memory_fraction * capacity
    state = instance.state_bytes
    try:
        shares, lp_util = lp_partition(used, capacity, usable, state)
    except ValueError as exc:
        raise SolverBug(f"allocation: the chosen micro-batches leave no state split ({exc}); (II) and (III) "
                        f"should have ruled them out") from None
    units = instance.layers or DEFAULT_GREEDY_UNITS
    greedy = greedy_partition(used, capacity, usable, state, units)
    greedy_shares = None if greedy is None else greedy[0]
    greedy_util = None if greedy is None else greedy[1]
    time = instance.cached_time()
    even = instance.even_shard_max_microbatch_per_group
    greedy_list = [None] * len(groups) if greedy_shares is None else greedy_shares.tolist()
    # GPUs of one group with the same choice and share are the same plan: one (frozen) object
    # each, shared, so 100,000 GPUs of a few kinds build a few objects, not 100,000
    made: dict[tuple, GpuPlan] = {}
    gpus_list = []
    for g, mi, li, share, share_greedy, u in zip(groups, m.tolist(), ell.tolist(), shares.tolist(), greedy_list,
                                                  used.tolist()):
        key = (g, mi, li, share, share_greedy)
        plan = made.get(key)
        if plan is None:
            plan = made[key] = GpuPlan(
                type=instance.groups[g].type,
                group=g,
                microbatch_size=mi,
                microbatches=li,
                state_share=share,
                state_share_greedy=share_greedy,
                time_s=time(g, li, mi),
                memory_bytes=u + share * state,
                uneven_shard=mi > even[g],
                capacity_bytes=float(instance.groups[g].memory_bytes),
            )
        gpus_list.append(plan)
    gpus = tuple(gpus_list)
    iteration = max(p.time_s for p in made.values())
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
