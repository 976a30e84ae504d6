"""A group of interchangeable GPUs of the allocation problem and its latency curves f(m), g(m).

The parts an :class:`~hetopt.allocation.problem.AllocationInstance` is made of, below both the
instance and the ranges that check it (``hetopt.allocation.limits``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Latency:
    """A latency curve m -> seconds: a table for m = 1..P, then a line beyond P.

    Parameters
    ----------
    table
        ``table[m-1]`` is the latency at micro-batch m, in seconds.
    slope, intercept
        The line ``slope * m + intercept`` used for m > P. When None, the line through the
        last two table points is used (the table then needs at least two points).
    """

    table: tuple[float, ...]
    slope: float | None = None
    intercept: float | None = None

    def __post_init__(self) -> None:
        # a list or an array from code becomes the tuple a frozen, hashable value needs; the
        # ranges are checked by the instance (limits.validate_instance), which knows u_g
        if isinstance(self.table, (list, np.ndarray)):
            object.__setattr__(self, "table", tuple(float(x) for x in self.table))

    def line(self) -> tuple[float, float]:
        """The (slope, intercept) used beyond the table."""
        if self.slope is not None and self.intercept is not None:
            return self.slope, self.intercept
        p = len(self.table)
        slope = self.table[p - 1] - self.table[p - 2]
        return slope, self.table[p - 1] - slope * p

    def at(self, m: int) -> float:
        """Latency at one micro-batch size (pure Python: the scalar path of the solvers)."""
        if m <= len(self.table):
            return self.table[m - 1]
        slope, intercept = self.line()
        return slope * m + intercept

    def __call__(self, m: np.ndarray | int) -> np.ndarray:
        """Latency at micro-batch sizes ``m`` (m >= 1), vectorized.

        Examples
        --------
        >>> f = Latency((0.010, 0.018, 0.026))
        >>> [round(float(x), 3) for x in f(np.array([1, 3, 5]))]
        [0.01, 0.026, 0.042]
        """
        m = np.asarray(m)
        slope, intercept = self.line()
        out = slope * m.astype(float) + intercept
        if self.table:
            table = np.asarray(self.table, dtype=float)
            inside = m <= len(table)
            out = np.where(inside, table[np.clip(m, 1, len(table)) - 1], out)
        return out


@dataclass(frozen=True)
class GpuGroup:
    """``count`` interchangeable GPUs of one type.

    Parameters
    ----------
    type
        A label, e.g. "A6000".
    count
        Number of GPUs in the group.
    memory_bytes
        Capacity C of each GPU.
    memory_base_bytes
        β: framework, buffers and the FSDP unit being computed.
    forward, backward
        f(m), g(m): latency of the whole layer stack for one micro-batch of m samples.
    max_microbatch
        Optional override of the derived max micro-batch (must not exceed it).
    even_shard_max_microbatch
        Optional override of the derived even-shard max micro-batch e.
    """

    type: str
    count: int
    memory_bytes: float
    memory_base_bytes: float
    forward: Latency
    backward: Latency
    max_microbatch: int | None = None
    even_shard_max_microbatch: int | None = None


__all__ = ["GpuGroup", "Latency"]
