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
schedule of a DAG; it is computed by sweeping the resources until all work is placed,
keeping only the hand-overs not yet consumed (memory O(S · min(S, M))).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from hetopt.errors import InputError


@dataclass(frozen=True)
class Simulation:
    """The simulated iteration: ``makespan_s`` and each stage's ``idle_s`` (makespan − busy)."""

    makespan_s: float
    idle_s: tuple[float, ...]


#: Most stage operations (2·S·M forwards and backwards) :func:`simulate_1f1b` runs. The
#: sweep is pure Python (1 µs per operation on an idle core, 3 µs measured on the loaded
#: 2-core test machine), and ``build_solution`` simulates every plan a solver returns
#: inside the solver's time budget, whose slack is ``TIME_LIMIT_SLACK_S`` = 1 s: so at most
#: a quarter of a million operations (the shipped instances need at most 33,000). Beyond
#: it the simulation declines with this limit (the plan's ``simulated_s`` stays NaN and its
#: summary says why).
MAX_SIMULATED_OPERATIONS = 250_000


def _op(stage: int, stages: int, microbatches: int, k: int) -> tuple[str, int]:
    """The k-th operation of ``stage`` in its 1F1B order (without listing the order)."""
    M = microbatches
    warmup = min(stages - stage - 1, M)
    if k < warmup:
        return ("F", k)
    j = k - warmup
    steady = 2 * (M - warmup)
    if j < steady:
        return ("F", warmup + j // 2) if j % 2 == 0 else ("B", j // 2)
    return ("B", M - warmup + (j - steady))


def one_f_one_b_order(stage: int, stages: int, microbatches: int) -> list[tuple[str, int]]:
    """The 1F1B operation order of ``stage``: ("F", m) and ("B", m) pairs.

    Examples
    --------
    >>> one_f_one_b_order(0, 3, 4)
    [('F', 0), ('F', 1), ('F', 2), ('B', 0), ('F', 3), ('B', 1), ('B', 2), ('B', 3)]
    """
    return [_op(stage, stages, microbatches, k) for k in range(2 * microbatches)]


def simulation_size(stages: int, microbatches: int) -> int:
    """The operations a simulation of S stages and M micro-batches runs: 2·S·M."""
    return 2 * stages * microbatches


def simulate_1f1b(
    forward_s: Sequence[float],
    backward_s: Sequence[float],
    link_after_s: Sequence[float],
    microbatches: int,
) -> Simulation:
    """Simulate one 1F1B iteration.

    Memory is O(S · min(S, M)), not O(S · M): every stage performs its forwards and its
    backwards in micro-batch order, so what a stage hands to its neighbour is a FIFO
    queue of arrival times, consumed in the order it is produced, and never longer than
    the neighbour's lag (at most its in-flight count).

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

    Raises
    ------
    InputError
        When 2·S·M exceeds ``MAX_SIMULATED_OPERATIONS`` (the message gives the limit).

    Examples
    --------
    Uniform stages and free links give (S + M − 1)·(F + B):

    >>> simulate_1f1b([1.0] * 3, [2.0] * 3, [0.0] * 3, 4).makespan_s
    18.0
    """
    makespan, _ = _sweep(forward_s, backward_s, link_after_s, microbatches, record=False)
    M = microbatches
    idle = tuple(makespan - M * (forward_s[s] + backward_s[s]) for s in range(len(forward_s)))
    return Simulation(makespan, idle)


@dataclass(frozen=True)
class Operation:
    """One forward ("F") or backward ("B") of micro-batch ``microbatch`` on ``stage``."""

    stage: int
    kind: str
    microbatch: int
    start_s: float
    end_s: float


def schedule_1f1b(
    forward_s: Sequence[float],
    backward_s: Sequence[float],
    link_after_s: Sequence[float],
    microbatches: int,
) -> tuple[float, tuple[Operation, ...]]:
    """The schedule :func:`simulate_1f1b` simulates: the makespan and every operation's interval.

    The same sweep, keeping every operation (memory O(S · M), for pictures and tests);
    the parameters, limit and errors are those of :func:`simulate_1f1b`.

    Returns
    -------
    tuple of float and tuple of Operation
        The makespan (equal to ``simulate_1f1b(...).makespan_s``) and the operations in the
        order they were placed.

    Examples
    --------
    >>> makespan, ops = schedule_1f1b([1.0, 1.0], [2.0, 2.0], [0.0, 0.0], 2)
    >>> makespan, [(o.stage, o.kind, o.microbatch, o.start_s) for o in ops if o.stage == 1]
    (9.0, [(1, 'F', 0, 1.0), (1, 'B', 0, 2.0), (1, 'F', 1, 4.0), (1, 'B', 1, 5.0)])
    """
    return _sweep(forward_s, backward_s, link_after_s, microbatches, record=True)


def _sweep(
    forward_s: Sequence[float],
    backward_s: Sequence[float],
    link_after_s: Sequence[float],
    microbatches: int,
    *,
    record: bool,
) -> tuple[float, tuple[Operation, ...]]:
    """The makespan, and with ``record`` every operation placed (else an empty tuple)."""
    S, M = len(forward_s), microbatches
    if simulation_size(S, M) > MAX_SIMULATED_OPERATIONS:
        raise InputError(
            f"the 1F1B simulation of {S} stages x {M} micro-batches has {simulation_size(S, M):,} operations, "
            f"above the limit of {MAX_SIMULATED_OPERATIONS:,}"
        )
    placed: list[Operation] = []
    # fwd[s]: arrival times at stage s+1 of F_s(m)'s activations, in m order, not yet consumed;
    # bwd[s]: arrival times at stage s of B_{s+1}(m)'s gradients; own: F ends of the last stage
    fwd = [deque() for _ in range(S)]
    bwd = [deque() for _ in range(S)]
    own: deque = deque()
    stage_free = [0.0] * S
    fwd_channel_free = [0.0] * S
    bwd_channel_free = [0.0] * S
    next_op = [0] * S
    total, done, makespan = 2 * M, 0, 0.0
    while done < S:
        progress = False
        for s in range(S):
            while next_op[s] < total:
                kind, m = _op(s, S, M, next_op[s])
                if kind == "F":
                    if s == 0:
                        ready = 0.0
                    elif fwd[s - 1]:
                        ready = fwd[s - 1].popleft()
                    else:
                        break
                    end = stage_free[s] = max(ready, stage_free[s]) + forward_s[s]
                    if record:
                        placed.append(Operation(s, "F", m, end - forward_s[s], end))
                    if s == S - 1:
                        own.append(end)
                    else:  # the activations cross the link after s, one micro-batch at a time
                        fwd_channel_free[s] = max(end, fwd_channel_free[s]) + link_after_s[s] / 2.0
                        fwd[s].append(fwd_channel_free[s])
                else:
                    if s == S - 1:
                        ready = own.popleft()  # the last stage ran F(m) just before B(m)
                    elif bwd[s]:
                        ready = bwd[s].popleft()
                    else:
                        break
                    end = stage_free[s] = max(ready, stage_free[s]) + backward_s[s]
                    if record:
                        placed.append(Operation(s, "B", m, end - backward_s[s], end))
                    makespan = max(makespan, end)
                    if s > 0:  # the gradients cross the link before s
                        bwd_channel_free[s - 1] = max(end, bwd_channel_free[s - 1]) + link_after_s[s - 1] / 2.0
                        bwd[s - 1].append(bwd_channel_free[s - 1])
                next_op[s] += 1
                progress = True
                if next_op[s] == total:
                    done += 1
        if not progress:  # cannot happen for 1F1B orders; a guard against an endless loop
            raise RuntimeError("the 1F1B simulation is stuck: the operation orders deadlock")
    return makespan, tuple(placed)
