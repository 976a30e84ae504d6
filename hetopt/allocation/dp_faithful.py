"""Cephalo's recurrence for the allocation problem, as published: the reference DP.

D(i, j, k) over GPUs i, total batch j and Σ m = k, vectorized over the (j, k) table with
numpy. O(N·B·K·B·log B) work. See ``formulations/allocation.md``.
"""

from __future__ import annotations

import numpy as np

from hetopt.allocation.options import enumerate_options, why_infeasible
from hetopt.allocation.plan import build_solution
from hetopt.allocation.problem import AllocationInstance, evaluate
from hetopt.errors import SolverBug
from hetopt.family import Deadline, conclude, no_solution
from hetopt.result import Result, Status

INF = np.inf

#: Most bytes of tables dp-faithful may hold: the (B+1)·(K+1) table twice (float64) and one
#: int32 argmin table per GPU for the backtracking. Above it, it declines up front.
MAX_TABLE_BYTES = 1 << 30


def table_bytes(instance: AllocationInstance) -> int:
    """Bytes of the tables dp-faithful holds: (B+1)·(K+1)·(2·8 + 4·N)."""
    u = instance.max_microbatch_per_group
    k_max = min(instance.global_batch, sum(max(u[g], 0) * grp.count for g, grp in enumerate(instance.groups)))
    return (instance.global_batch + 1) * (k_max + 1) * (16 + 4 * instance.num_gpus)

# ------------------------------------------------------------------------ faithful DP


def faithful_work(instance: AllocationInstance) -> int:
    """Cells × options the faithful DP touches: (B+1)·(K+1)·Σ_i |options_i|, for thresholds."""
    u = instance.max_microbatch_per_group
    k_max = min(instance.global_batch, sum(u[g] * grp.count for g, grp in enumerate(instance.groups)))
    bmax = instance.global_batch - (instance.num_gpus - 1)
    options = sum(grp.count * sum(bmax // m for m in range(1, max(u[g], 0) + 1)) for g, grp in enumerate(instance.groups))
    return (instance.global_batch + 1) * (k_max + 1) * options


def solve_dp_faithful(instance: AllocationInstance, *, time_limit: float | None = None) -> Result:
    """Cephalo's recurrence, as published: D(i, j, k) over GPUs, total batch j, Σ m = k.

    D(i, j, k) = min over (ℓ, m) of max(D(i−1, j − ℓ·m, k − m), T_i(ℓ, m)), D(0, 0, 0) = 0;
    the optimum is min over k ≤ K* of D(N, B, k), the plan found by backtracking. Every
    option of every GPU is tried (no pruning); each option updates the whole (j, k) table
    at once with numpy.

    Returns
    -------
    Result
        TIME_LIMIT (no solution) when the time limit is reached; ``stats["cells"]`` is the
        table size, ``stats["updates"]`` the options applied.
    """
    deadline = Deadline(time_limit)
    reason = why_infeasible(instance)
    if reason is not None:
        return no_solution(
            problem="allocation", method="dp-faithful", status=Status.INFEASIBLE, deadline=deadline, reason=reason
        )
    need = table_bytes(instance)
    if need > MAX_TABLE_BYTES:
        return no_solution(
            problem="allocation", method="dp-faithful", status=Status.DECLINED, deadline=deadline,
            reason=f"its tables need {need / 2**30:.3g} GiB ((B+1)(K+1) cells per GPU), above its limit of "
            f"{MAX_TABLE_BYTES / 2**30:.3g} GiB; use dp",
        )
    big_b = instance.global_batch
    u = instance.max_microbatch_per_group
    k_max = min(big_b, sum(u[g] * grp.count for g, grp in enumerate(instance.groups)))
    options = [enumerate_options(instance, g) for g in range(len(instance.groups))]
    table = np.full((big_b + 1, k_max + 1), INF)
    table[0, 0] = 0.0
    chosen: list[np.ndarray] = []
    updates = 0
    for g in instance.group_of_gpu:
        opts = options[g]
        new = np.full_like(table, INF)
        pick = np.full(table.shape, -1, dtype=np.int32)
        for o in range(len(opts)):
            b, m, t = int(opts.batch[o]), int(opts.microbatch_size[o]), float(opts.time[o])
            if m > k_max:
                continue
            candidate = np.maximum(table[: big_b + 1 - b, : k_max + 1 - m], t)
            target = new[b:, m:]
            better = candidate < target
            target[better] = candidate[better]
            pick[b:, m:][better] = o
            updates += 1
            if deadline.expired():  # one update is one pass over the table: look after each
                break
        if deadline.expired():
            return no_solution(
                problem="allocation", method="dp-faithful", status=Status.TIME_LIMIT, deadline=deadline,
                reason=f"time limit reached after {len(chosen) + 1} of {instance.num_gpus} GPUs",
            )
        chosen.append(pick)
        table = new
    budget = min(instance.microbatch_budget, k_max)
    k = int(np.argmin(table[big_b, : budget + 1])) if budget >= 0 else 0
    if budget < 0 or not np.isfinite(table[big_b, k]):  # the presolve says a plan exists; this is a bug
        raise SolverBug("allocation/dp-faithful found no plan where the presolve proved one exists")
    choices: list[tuple[int, int]] = []
    j = big_b
    for i in range(instance.num_gpus - 1, -1, -1):
        opts = options[instance.group_of_gpu[i]]
        o = int(chosen[i][j, k])
        m, ell = int(opts.microbatch_size[o]), int(opts.microbatches[o])
        choices.append((m, ell))
        j -= m * ell
        k -= m
    choices.reverse()
    return conclude(
        problem="allocation", method="dp-faithful", instance=instance, solution=build_solution(instance, choices),
        evaluate=evaluate, deadline=deadline, proven_optimal=True, stats={"cells": int(table.size), "updates": updates},
    )
