"""Exhaustive search over every per-GPU choice: the oracle for tiny instances."""

from __future__ import annotations

import itertools

from hetopt.budget import CLOCK_EVERY
from hetopt.allocation.options import enumerate_options, why_infeasible
from hetopt.allocation.plan import build_solution
from hetopt.allocation.problem import AllocationInstance, evaluate
from hetopt.errors import SolverBug
from hetopt.family import Deadline, conclude, no_solution
from hetopt.result import Result, Status

#: Largest number of complete plans bruteforce will enumerate; beyond it, it declines.
MAX_PLANS = 2_000_000
#: Combinations tried between two looks at the clock (about 10 ms of work).
STEPS_PER_CLOCK = 32 * CLOCK_EVERY


def plan_count(instance: AllocationInstance) -> int:
    """Number of per-GPU option combinations bruteforce would try (before the Σ b filter).

    Counted from the option ranges, without enumerating the options.
    """
    bmax = instance.global_batch - (instance.num_gpus - 1)
    total = 1
    for grp, u in zip(instance.groups, instance.max_microbatch_per_group):
        per_gpu = sum(bmax // m for m in range(1, u + 1)) if bmax >= 1 and u >= 1 else 0
        total *= max(1, per_gpu) ** grp.count
        if total > MAX_PLANS:  # enough to decline; the exact figure could have 10^6 digits
            return total
    return total


def solve_bruteforce(instance: AllocationInstance, *, time_limit: float | None = None) -> Result:
    """Try every combination of options, GPU by GPU; keep the best plan meeting (I) and (III).

    Declines (status DECLINED) when there are more than ``MAX_PLANS`` combinations. It
    shares nothing with the DPs beyond the option list and ``evaluate``.
    """
    deadline = Deadline(time_limit)
    reason = why_infeasible(instance)
    if reason is not None:
        return no_solution(problem="allocation", method="bruteforce", status=Status.INFEASIBLE, deadline=deadline, reason=reason)
    count = plan_count(instance)
    if count > MAX_PLANS:
        return no_solution(
            problem="allocation", method="bruteforce", status=Status.DECLINED, deadline=deadline,
            reason=f"more than {MAX_PLANS} combinations of options, bruteforce's limit",
        )
    per_gpu = []
    for g in instance.group_of_gpu:
        o = enumerate_options(instance, g)
        per_gpu.append(list(zip(o.microbatch_size.tolist(), o.microbatches.tolist(), o.time.tolist())))
    best, best_choice, tried = float("inf"), None, 0
    timed_out = True  # unless the loop runs to its end
    for combo in itertools.product(*per_gpu):
        tried += 1
        # look at the clock before the filters below skip the rest of the loop body
        if tried % STEPS_PER_CLOCK == 0 and deadline.expired():
            break
        if sum(m * ell for m, ell, _ in combo) != instance.global_batch:
            continue
        if sum(m for m, _, _ in combo) > instance.microbatch_budget:
            continue
        worst = max(t for _, _, t in combo)
        if worst < best:
            best, best_choice = worst, [(m, ell) for m, ell, _ in combo]
    else:
        timed_out = False
    if best_choice is None and timed_out:
        return no_solution(
            problem="allocation", method="bruteforce", status=Status.TIME_LIMIT, deadline=deadline, reason="time limit reached"
        )
    if best_choice is None:
        raise SolverBug("allocation/bruteforce found no plan where the presolve proved one exists")
    return conclude(
        problem="allocation", method="bruteforce", instance=instance, solution=build_solution(instance, best_choice),
        evaluate=evaluate, deadline=deadline, proven_optimal=not timed_out, stats={"combinations": tried},
    )
