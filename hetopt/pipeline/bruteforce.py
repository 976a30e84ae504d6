"""Exhaustive search over every island order and option choice: the oracle for tiny instances."""

from __future__ import annotations

from hetopt.family import Deadline, conclude, no_solution
from hetopt.pipeline.plan import blocks_from_choices, build_solution
from hetopt.pipeline.problem import PipelineInstance, PipelineSolution, evaluate
from hetopt.result import Result, Status

#: Largest number of complete layer tilings (ordered island sequences × option choices)
#: bruteforce will evaluate; beyond it, it declines. Each costs ~0.35 ms on the shipped
#: instances (evaluate of a few stages), so 100,000 take about 35 s.
MAX_PLANS = 100_000


def plan_count(instance: PipelineInstance, limit: int = MAX_PLANS + 1) -> int:
    """How many ordered option sequences (distinct islands) tile the L layers, counted up to ``limit``.

    Every option counts, memory and roles are ignored: this is what bruteforce would try.
    """
    by_island: dict[int, dict[int, int]] = {}  # island -> slice length -> number of options
    for opt in instance.options:
        lengths = by_island.setdefault(opt.island, {})
        lengths[opt.layers] = lengths.get(opt.layers, 0) + 1
    memo: dict[tuple[frozenset, int], int] = {}

    def count(used: frozenset, left: int) -> int:
        if left == 0:
            return 1
        key = (used, left)
        if key not in memo:
            total = 0
            for island, lengths in by_island.items():
                if island in used:
                    continue
                for k, many in lengths.items():
                    if k <= left and total < limit:
                        total += many * count(used | {island}, left - k)
            memo[key] = min(total, limit)
        return memo[key]

    return count(frozenset(), instance.layers)


def solve_bruteforce(instance: PipelineInstance, *, time_limit: float | None = None) -> Result:
    """Evaluate every tiling of the layers by options on distinct islands; keep the fastest.

    Shares nothing with the other methods but ``evaluate`` (no memory limits, no
    thresholds, no pruning). Declines when more than ``MAX_PLANS`` tilings exist.
    """
    deadline = Deadline(time_limit)
    count = plan_count(instance)
    if count > MAX_PLANS:
        return no_solution(
            problem="pipeline", method="bruteforce", status=Status.DECLINED, deadline=deadline,
            reason=f"more than {MAX_PLANS} island orders x option choices tile the layers; bruteforce is for tiny instances",
        )
    best, best_plan, tried = float("inf"), None, 0
    timed_out = False
    stack: list[int] = []

    def visit(used: set[int], left: int) -> None:
        nonlocal best, best_plan, tried, timed_out
        if timed_out:
            return
        if left == 0:
            tried += 1
            ev = evaluate(instance, PipelineSolution(blocks_from_choices(instance, stack)))
            if ev.feasible and ev.objective < best:
                best, best_plan = ev.objective, list(stack)
            if tried % 4096 == 0 and deadline.expired():
                timed_out = True
            return
        for o, opt in enumerate(instance.options):
            if opt.island not in used and opt.layers <= left:
                stack.append(o)
                used.add(opt.island)
                visit(used, left - opt.layers)
                used.discard(opt.island)
                stack.pop()

    visit(set(), instance.layers)
    if best_plan is None:
        if timed_out:
            return no_solution(problem="pipeline", method="bruteforce", status=Status.TIME_LIMIT, deadline=deadline,
                               reason="time limit reached", stats={"plans": tried})
        return no_solution(
            problem="pipeline", method="bruteforce", status=Status.INFEASIBLE, deadline=deadline, stats={"plans": tried},
            reason=f"none of the {tried} tilings of the layers by options on distinct islands passes evaluate "
            "(memory at the 1F1B position or roles)",
        )
    return conclude(
        problem="pipeline", method="bruteforce", instance=instance,
        solution=build_solution(instance, blocks_from_choices(instance, best_plan)),
        evaluate=evaluate, deadline=deadline, proven_optimal=not timed_out, stats={"plans": tried},
    )
