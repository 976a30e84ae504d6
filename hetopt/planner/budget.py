"""How a plan spends its time limit: every share of it, in one place.

``hetopt plan --time-limit S`` bounds the whole call. The planner's steps split it: the
composition of each micro-batch size (its enumeration first), the alternatives (the FSDP
allocation, the mixed stages), the data-parallel replicas. :class:`PlanBudget` owns those
shares; the steps take the deadlines it hands out and read the clock through
:class:`hetopt.budget.Deadline` (``seconds_left``, ``share``, ``expired``), never computing a
share or a remaining time of their own.

Examples
--------
>>> b = PlanBudget(10.0, alternatives=True, replicas=False)
>>> round(b.inner.limit, 3), round(b.composing.limit, 3)
(9.5, 8.55)
>>> PlanBudget(None, alternatives=True, replicas=True).composing.limited
False
"""

from __future__ import annotations

from dataclasses import dataclass

from hetopt.budget import Deadline


@dataclass(frozen=True)
class Shares:
    """The shares of a plan's time limit (fractions of what is left when a step starts, unless
    said otherwise)."""

    #: Seconds before the limit the inner deadline ends: each step may overshoot by its own last
    #: unit of work (a DP layer, an ``evaluate``), which this and the stated slack absorb (at most
    #: half the limit).
    inner_margin_s: float = 0.5
    #: Of the inner limit, kept for the alternatives when they are asked for.
    alternatives: float = 0.1
    #: Of what the composition would take, kept for the replicas when they are asked for
    #: (pricing the candidates takes 0.2-0.5 s each, the datacenter has about 30; the DP well under 1 s).
    replicas: float = 0.2
    #: Of one micro-batch size's budget, its enumeration's: the rest composes what it found (the
    #: composition of a few thousand plans takes about as long as their enumeration).
    enumeration: float = 0.5
    #: Of what is left when the alternatives start, the FSDP allocation's (in a forked process
    #: stopped at its share): the other, in-process, quick ones get the rest.
    fsdp: float = 0.5
    #: Of what is left, the mixed-stages alternative's, and at most ``mixed_cap_s`` seconds (also
    #: without a limit: its dp then answers FEASIBLE with the best plan found, or TIME_LIMIT).
    mixed: float = 0.25
    mixed_cap_s: float = 30.0


#: The shares every plan uses.
SHARES = Shares()


class PlanBudget:
    """A plan's time limit and its shares (:class:`Shares`), started at construction.

    Parameters
    ----------
    time_limit
        Seconds for the whole call, or None for no limit.
    alternatives, replicas
        Whether those steps run (each keeps its share only then).
    """

    def __init__(self, time_limit: float | None, *, alternatives: bool, replicas: bool,
                 shares: Shares = SHARES) -> None:
        self.shares = shares
        margin = None if time_limit is None else min(shares.inner_margin_s, time_limit / 2)
        #: the deadline every step stops by
        self.inner = Deadline(None if time_limit is None else time_limit - margin)
        composing = self.inner.limit * (1 - shares.alternatives) if alternatives else self.inner.limit
        if replicas and time_limit is not None:
            composing *= 1 - shares.replicas
        #: the composed pipeline's share of it (every micro-batch size, enumerations included)
        self.composing = Deadline(None if time_limit is None else composing)


def enumeration_deadline(deadline: Deadline, shares: Shares = SHARES) -> Deadline:
    """The enumeration's deadline of a micro-batch size composed within ``deadline``."""
    return Deadline(deadline.share(shares.enumeration))


def fsdp_limit(deadline: Deadline, shares: Shares = SHARES) -> float | None:
    """The FSDP alternative's time limit (None: none)."""
    return deadline.share(shares.fsdp)


def mixed_deadline(deadline: Deadline, shares: Shares = SHARES) -> Deadline:
    """The mixed-stages alternative's deadline: its share of what is left, at most ``mixed_cap_s``."""
    left = deadline.share(shares.mixed)
    return Deadline(shares.mixed_cap_s if left is None else min(shares.mixed_cap_s, left))


__all__ = ["SHARES", "PlanBudget", "Shares", "enumeration_deadline", "fsdp_limit", "mixed_deadline"]
