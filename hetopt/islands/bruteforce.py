"""Every set partition of the nodes: the oracle for tiny clusters.

Partitions are enumerated as restricted growth strings (node i joins one of the blocks
opened by nodes 0..i-1, or opens a new one); a block is checked against the three
conditions by plain loops written from the definitions, independent of ``evaluate`` and
of the DPs, and memoized per block.
"""

from __future__ import annotations

from hetopt.family import Deadline, conclude, no_solution
from hetopt.islands.problem import IslandsInstance, build_solution, evaluate, within
from hetopt.result import Result, Status

#: Largest cluster bruteforce enumerates: Bell(10) = 115,975 partitions, about a second.
BRUTEFORCE_MAX_NODES = 10


def block_is_island(instance: IslandsInstance, block: tuple[int, ...]) -> bool:
    """The three conditions, read literally from ``formulations/islands.md``."""
    nodes = [instance.nodes[i] for i in block]
    tol = instance.tolerance
    if len({n.gpus for n in nodes}) != 1:
        return False
    for values, eps in (
        ([n.flops for n in nodes], tol.compute),
        ([n.memory_bytes for n in nodes], tol.memory),
        ([n.intra_bytes_s for n in nodes], tol.intra),
    ):
        if not within(max(values) / min(values), eps):
            return False
    e = instance.inter
    outside = [u for u in range(instance.num_nodes) if u not in block]
    for a in block:
        for b in block:
            if a != b and any(e[a, b] < e[a, c] for c in outside):
                return False
    return True


def solve_bruteforce(instance: IslandsInstance, *, time_limit: float | None = None) -> Result:
    """Try every partition; DECLINED beyond ``BRUTEFORCE_MAX_NODES`` nodes.

    Returns
    -------
    Result
        OPTIMAL; FEASIBLE (no bound) when the time limit cuts the enumeration short;
        ``stats["partitions"]``: partitions tried.
    """
    deadline = Deadline(time_limit)
    n = instance.num_nodes
    if n > BRUTEFORCE_MAX_NODES:
        return no_solution(
            problem="islands", method="bruteforce", status=Status.DECLINED, deadline=deadline,
            reason=f"{n} nodes exceed bruteforce's limit of {BRUTEFORCE_MAX_NODES} (Bell({n}) partitions)",
        )
    memo: dict[tuple[int, ...], bool] = {}

    def ok(block: list[int]) -> bool:
        key = tuple(block)
        if key not in memo:
            memo[key] = block_is_island(instance, key)
        return memo[key]

    best = [[i] for i in range(n)]  # all singletons: always valid
    tried = 0
    stopped = False
    blocks: list[list[int]] = []

    def place(i: int) -> None:
        nonlocal best, tried, stopped
        if stopped:
            return
        if i == n:
            tried += 1
            if tried % 4096 == 0 and deadline.expired():
                stopped = True
            if len(blocks) < len(best) and all(ok(b) for b in blocks):
                best = [list(b) for b in blocks]
            return
        for block in blocks:
            block.append(i)
            place(i + 1)
            block.pop()
        blocks.append([i])
        place(i + 1)
        blocks.pop()

    place(0)
    return conclude(
        problem="islands", method="bruteforce", instance=instance, solution=build_solution(instance, best),
        evaluate=evaluate, deadline=deadline, proven_optimal=not stopped, stats={"partitions": tried},
    )
