"""A discrete-event simulation of one 1F1B iteration (PipeDream-flush), to check the cost formula.

Model (see ``formulations/pipeline.md``, "The simulator"):

* Stage s runs its operations one at a time in the fixed 1F1B order: w_s = min(S − s − 1, M)
  warm-up forwards, then M − w_s pairs (forward of micro-batch w_s + j, backward of j),
  then the w_s remaining backwards. Forward takes F_s, backward B_s.
* F_s(m) needs F_{s−1}(m); B_s(m) needs B_{s+1}(m) (the last stage: its own F_s(m)).
* A block boundary between stages s and s + 1 is a link of round-trip time c: activations
  cross it forward in c/2, gradients backward in c/2. Each direction is a channel that
  carries one micro-batch at a time, in micro-batch order (full duplex). Inside a block
  (an option's inner stages) hand-over is free: the option's times already include it.

Every resource processes its work in a fixed order, so the schedule is the earliest-start
schedule of a DAG; it is computed by sweeping the resources until all work is placed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Simulation:
    """The simulated iteration: ``makespan_s`` and each stage's ``idle_s`` (makespan − busy)."""

    makespan_s: float
    idle_s: tuple[float, ...]


def one_f_one_b_order(stage: int, stages: int, microbatches: int) -> list[tuple[str, int]]:
    """The 1F1B operation order of ``stage``: ("F", m) and ("B", m) pairs.

    Examples
    --------
    >>> one_f_one_b_order(0, 3, 4)
    [('F', 0), ('F', 1), ('F', 2), ('B', 0), ('F', 3), ('B', 1), ('B', 2), ('B', 3)]
    """
    warmup = min(stages - stage - 1, microbatches)
    order = [("F", m) for m in range(warmup)]
    for j in range(microbatches - warmup):
        order += [("F", warmup + j), ("B", j)]
    order += [("B", m) for m in range(microbatches - warmup, microbatches)]
    return order


def simulate_1f1b(
    forward_s: Sequence[float],
    backward_s: Sequence[float],
    link_after_s: Sequence[float],
    microbatches: int,
) -> Simulation:
    """Simulate one 1F1B iteration.

    Parameters
    ----------
    forward_s, backward_s
        Per stage, per micro-batch.
    link_after_s
        Per stage: the round-trip link time c between it and the next stage (0 inside a
        block and after the last stage). Half of it is spent each way.
    microbatches
        M.

    Returns
    -------
    Simulation

    Examples
    --------
    Uniform stages and free links give (S + M − 1)·(F + B):

    >>> simulate_1f1b([1.0] * 3, [2.0] * 3, [0.0] * 3, 4).makespan_s
    18.0
    """
    S, M = len(forward_s), microbatches
    orders = [one_f_one_b_order(s, S, M) for s in range(S)]
    f_end = [[-1.0] * M for _ in range(S)]  # end of F_s(m), -1 while unscheduled
    b_end = [[-1.0] * M for _ in range(S)]
    # arrival of F_{s}(m)'s activations at stage s+1, and of B_{s+1}(m)'s gradients at stage s
    f_arrive = [[-1.0] * M for _ in range(S)]
    b_arrive = [[-1.0] * M for _ in range(S)]
    stage_free = [0.0] * S
    fwd_channel_free = [0.0] * S
    bwd_channel_free = [0.0] * S
    next_op = [0] * S
    next_fwd_msg = [0] * S  # next micro-batch to send forward over the link after stage s
    next_bwd_msg = [0] * S  # next micro-batch to send backward over the link after stage s
    remaining = 2 * S * M + 2 * (S - 1) * M
    while remaining:
        progress = False
        for s in range(S):
            while next_op[s] < len(orders[s]):
                kind, m = orders[s][next_op[s]]
                if kind == "F":
                    ready = 0.0 if s == 0 else f_arrive[s - 1][m]
                    if ready < 0:
                        break
                    f_end[s][m] = max(ready, stage_free[s]) + forward_s[s]
                    stage_free[s] = f_end[s][m]
                else:
                    ready = f_end[s][m] if s == S - 1 else b_arrive[s][m]
                    if ready < 0:
                        break
                    b_end[s][m] = max(ready, stage_free[s]) + backward_s[s]
                    stage_free[s] = b_end[s][m]
                next_op[s] += 1
                remaining -= 1
                progress = True
            if s == S - 1:
                continue
            half = link_after_s[s] / 2.0
            while next_fwd_msg[s] < M and f_end[s][next_fwd_msg[s]] >= 0:
                m = next_fwd_msg[s]
                f_arrive[s][m] = fwd_channel_free[s] = max(f_end[s][m], fwd_channel_free[s]) + half
                next_fwd_msg[s] += 1
                remaining -= 1
                progress = True
            while next_bwd_msg[s] < M and b_end[s + 1][next_bwd_msg[s]] >= 0:
                m = next_bwd_msg[s]
                b_arrive[s][m] = bwd_channel_free[s] = max(b_end[s + 1][m], bwd_channel_free[s]) + half
                next_bwd_msg[s] += 1
                remaining -= 1
                progress = True
        if not progress:  # cannot happen for 1F1B orders; a guard against an endless loop
            raise RuntimeError("the 1F1B simulation is stuck: the operation orders deadlock")
    makespan = max(max(row) for row in b_end)
    idle = tuple(makespan - M * (forward_s[s] + backward_s[s]) for s in range(S))
    return Simulation(makespan, idle)
