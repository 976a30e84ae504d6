"""Tangram's pipeline composition: data, plan, and ``evaluate``, the single source of truth.

Symbols follow ``formulations/pipeline.md``: L layers, M micro-batches, usable memory
fraction φ; islands i with memory per GPU; options o (island i_o, slice length k_o, role,
stages with forward/backward times, static and per-micro-batch activation memory); links
c(i, j). A plan is an ordered list of blocks; its stages s = 0..S-1 are the blocks' stages
concatenated, and

    T = Σ_s t_s + Σ_links c + (M − 1) · max(max_s t_s, max_links c),

with stage s holding min(S − s, M) micro-batches of activations (1F1B).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

from hetopt.result import Evaluation
from hetopt.units import GIB  # noqa: F401  (re-exported: instances are built in GiB)

#: Relative slack of the memory check: a stage that needs exactly its capacity fits, and
#: so does one that exceeds it by a rounding error of the GiB -> bytes conversion.
MEMORY_RTOL = 1e-9

#: Role names, as written in instance files. ``any`` fits every position.
ROLES = ("any", "first", "middle", "last", "whole")


def allowed_roles(position: int, count: int) -> tuple[str, str]:
    """The roles a block may have at ``position`` (0-based) of a pipeline of ``count`` blocks.

    Examples
    --------
    >>> allowed_roles(0, 1), allowed_roles(0, 3), allowed_roles(1, 3), allowed_roles(2, 3)
    (('whole', 'any'), ('first', 'any'), ('middle', 'any'), ('last', 'any'))
    """
    if count == 1:
        return ("whole", "any")
    if position == 0:
        return ("first", "any")
    if position == count - 1:
        return ("last", "any")
    return ("middle", "any")


def in_flight(stages_after: int, microbatches: int) -> int:
    """Micro-batches a 1F1B stage keeps in flight: min(S − s, M), with S − s − 1 stages after it.

    Examples
    --------
    >>> in_flight(0, 8), in_flight(3, 8), in_flight(20, 8)
    (1, 4, 8)
    """
    return min(stages_after + 1, microbatches)


@dataclass(frozen=True)
class StagePlan:
    """One stage of an option: ``layers`` consecutive layers on ``gpus`` GPUs of the island.

    Times are per micro-batch, memory is per GPU in bytes: ``static_bytes`` (parameters,
    gradients, optimizer state, buffers) and ``activation_bytes`` per in-flight micro-batch.
    """

    layers: int
    forward_s: float
    backward_s: float
    static_bytes: float
    activation_bytes: float
    gpus: int = 1

    @property
    def time_s(self) -> float:
        """t = forward + backward."""
        return self.forward_s + self.backward_s


@dataclass(frozen=True)
class PipelineOption:
    """A partial plan: a small pipeline of ``stages`` for a slice of ``layers`` layers on ``island``."""

    island: int
    layers: int
    stages: tuple[StagePlan, ...]
    role: str = "any"

    @cached_property
    def total_time_s(self) -> float:
        """Σ t over the option's stages."""
        return sum(s.time_s for s in self.stages)

    @cached_property
    def max_time_s(self) -> float:
        """max t over the option's stages."""
        return max(s.time_s for s in self.stages)


@dataclass(frozen=True)
class Island:
    """Homogeneous GPUs: ``gpus`` of them with ``memory_bytes`` each."""

    name: str
    gpus: int
    memory_bytes: float


@dataclass(frozen=True)
class PipelineInstance:
    """One pipeline-composition instance (SI units: bytes, seconds).

    ``link_s[i][j]`` is c(i, j), symmetric, 0 on the diagonal (never used: an island hosts
    at most one block). Build it with ``hetopt.load``; ``hetopt.readers.pipeline`` validates.
    """

    name: str
    layers: int
    microbatches: int
    islands: tuple[Island, ...]
    options: tuple[PipelineOption, ...]
    link_s: tuple[tuple[float, ...], ...]
    memory_fraction: float = 1.0
    description: str = ""

    problem = "pipeline"

    def capacity(self, island: int) -> float:
        """φ · memory per GPU of ``island``, bytes."""
        return self.memory_fraction * self.islands[island].memory_bytes

    def fits(self, island: int, stage: StagePlan, flight: int) -> bool:
        """static + activation · in-flight ≤ φ · memory (with ``MEMORY_RTOL`` slack)."""
        need = stage.static_bytes + stage.activation_bytes * flight
        return need <= self.capacity(island) * (1.0 + MEMORY_RTOL)

    def behind_limit(self, o: int) -> int | None:
        """The most stages that may follow option ``o``'s block (its 1F1B memory limit).

        Returns None when the option fits whatever follows it, -1 when it never fits.
        Memory only tightens as more stages follow, so the feasible counts are 0..limit.
        """
        return self.behind_limits[o]

    def max_in_flight(self, island: int, stage: StagePlan) -> int:
        """The most micro-batches (0..M) ``stage`` may hold in flight on ``island``; -1 if none.

        Examples
        --------
        >>> inst = PipelineInstance("x", 1, 8, (Island("a", 1, 10 * GIB),), (), ((0.0,),))
        >>> inst.max_in_flight(0, StagePlan(1, 1.0, 1.0, 4 * GIB, 2 * GIB))
        3
        """
        M = self.microbatches
        if self.fits(island, stage, M):
            return M
        if not self.fits(island, stage, 0):
            return -1
        room = self.capacity(island) * (1.0 + MEMORY_RTOL) - stage.static_bytes
        f = min(M, max(0, math.floor(room / stage.activation_bytes)))
        # the float division may land one off; the predicate itself decides
        while f < M and self.fits(island, stage, f + 1):
            f += 1
        while f >= 0 and not self.fits(island, stage, f):
            f -= 1
        return f

    @cached_property
    def behind_limits(self) -> tuple[int | None, ...]:
        """:meth:`behind_limit` of every option."""
        out: list[int | None] = []
        M = self.microbatches
        for opt in self.options:
            n = len(opt.stages)
            limit: int | None = None
            for q, st in enumerate(opt.stages):
                f = self.max_in_flight(opt.island, st)
                if f >= M:
                    continue  # holds M micro-batches wherever it stands
                # stage q has b + n - q stages from it to the end: in flight min(b + n - q, M) <= f
                b = f - (n - q)
                limit = b if limit is None else min(limit, b)
            out.append(None if limit is None else max(limit, -1))
        return tuple(out)


@dataclass(frozen=True)
class Block:
    """One block of a plan: option ``option`` (index in file order) on island ``island``."""

    island: int
    option: int
    first_layer: int
    layers: int


@dataclass(frozen=True)
class StageReport:
    """A stage of a composed pipeline, with recomputed time and peak memory per GPU."""

    block: int
    island: str
    first_layer: int
    layers: int
    gpus: int
    forward_s: float
    backward_s: float
    time_s: float
    in_flight: int
    memory_bytes: float
    capacity_bytes: float


@dataclass(frozen=True)
class PipelineSolution:
    """A composed pipeline: the ordered ``blocks`` (the decision) and what follows from them.

    ``stages``, ``link_s`` (one per block boundary), the analytic ``iteration_time_s``, the
    1F1B simulator's ``simulated_s`` and per-stage ``idle_s`` are filled by
    :func:`hetopt.pipeline.plan.build_solution`; ``evaluate`` reads the blocks only.
    """

    blocks: tuple[Block, ...]
    island_names: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    stages: tuple[StageReport, ...] = ()
    link_s: tuple[float, ...] = ()
    iteration_time_s: float = math.nan
    bottleneck_s: float = math.nan
    simulated_s: float = math.nan
    idle_s: tuple[float, ...] = field(default=())

    def to_dict(self) -> dict:
        """Plain data for JSON (``solution`` in ``hetopt solve --json``)."""
        return {
            "iteration_time_s": self.iteration_time_s,
            "bottleneck_s": self.bottleneck_s,
            "simulated_s": self.simulated_s,
            "simulated_minus_analytic_s": self.simulated_s - self.iteration_time_s,
            "blocks": [
                {
                    "island": self.island_names[b.island] if self.island_names else b.island,
                    "option": b.option,
                    "first_layer": b.first_layer,
                    "layers": b.layers,
                    "role": self.roles[k] if self.roles else None,
                    "link_after_s": self.link_s[k] if k < len(self.link_s) else None,
                }
                for k, b in enumerate(self.blocks)
            ],
            "stages": [
                {
                    "island": s.island,
                    "block": s.block,
                    "first_layer": s.first_layer,
                    "layers": s.layers,
                    "gpus": s.gpus,
                    "forward_s": s.forward_s,
                    "backward_s": s.backward_s,
                    "time_s": s.time_s,
                    "memory_gib": s.memory_bytes / GIB,
                    "capacity_gib": s.capacity_bytes / GIB,
                    "in_flight": s.in_flight,
                    "idle_s": self.idle_s[k] if k < len(self.idle_s) else None,
                }
                for k, s in enumerate(self.stages)
            ],
        }

    def rows(self) -> list[dict]:
        """One row per stage for the human-readable table."""
        return [
            {
                "stage": k,
                "block": s.block,
                "island": s.island,
                "layers": f"{s.first_layer}-{s.first_layer + s.layers - 1}",
                "gpus": s.gpus,
                "time_s": s.time_s,
                "in_flight": s.in_flight,
                "memory_gib": s.memory_bytes / GIB,
                "capacity_gib": s.capacity_bytes / GIB,
                "idle_s": self.idle_s[k] if k < len(self.idle_s) else None,
            }
            for k, s in enumerate(self.stages)
        ]

    def summary(self) -> list[str]:
        """A few lines under the table: the order, the analytic and the simulated time."""
        order = " -> ".join(
            f"{self.island_names[b.island] if self.island_names else b.island}[{b.first_layer}:{b.first_layer + b.layers}]"
            for b in self.blocks
        )
        diff = self.simulated_s - self.iteration_time_s
        rel = diff / self.iteration_time_s if self.iteration_time_s > 0 else 0.0
        return [
            f"pipeline {order}; links {', '.join(f'{c:.4g}' for c in self.link_s) or 'none'} s",
            f"iteration time {self.iteration_time_s:.6g} s (analytic), bottleneck {self.bottleneck_s:.6g} s",
            f"1F1B simulation {self.simulated_s:.6g} s; simulated - analytic = {diff:+.6g} s ({100 * rel:+.3f}%)",
        ]


def _check_blocks(instance: PipelineInstance, blocks: tuple[Block, ...]) -> list[str]:
    """Structure: indices, option/island/length consistency, tiling, island once, roles."""
    v: list[str] = []
    n_islands, n_options = len(instance.islands), len(instance.options)
    expected = 0
    seen: dict[int, int] = {}
    for k, b in enumerate(blocks):
        if not 0 <= b.island < n_islands:
            v.append(f"block {k}: island index {b.island} is not one of the {n_islands} islands")
            continue
        if not 0 <= b.option < n_options:
            v.append(f"block {k}: option index {b.option} is not one of the {n_options} options")
            continue
        opt = instance.options[b.option]
        name = instance.islands[b.island].name
        if opt.island != b.island:
            v.append(f"block {k}: option {b.option} belongs to island {instance.islands[opt.island].name}, not {name}")
        if opt.layers != b.layers:
            v.append(f"block {k}: option {b.option} covers {opt.layers} layers, the block says {b.layers}")
        if b.island in seen:
            v.append(f"block {k}: island {name} already hosts block {seen[b.island]} (each island hosts at most one)")
        seen.setdefault(b.island, k)
        if b.first_layer > expected:
            v.append(f"block {k}: layers {expected}..{b.first_layer - 1} are covered by no block (gap)")
        elif b.first_layer < expected:
            v.append(f"block {k}: starts at layer {b.first_layer}, but layers up to {expected - 1} are already covered (overlap)")
        expected = b.first_layer + b.layers
        roles = allowed_roles(k, len(blocks))
        if opt.role not in roles:
            v.append(f"block {k}: option {b.option} has role '{opt.role}', position {k} of {len(blocks)} needs {' or '.join(roles)}")
    if expected != instance.layers and not v:
        v.append(f"the blocks cover layers 0..{expected - 1}, the model has {instance.layers} layers")
    return v


def evaluate(instance: PipelineInstance, solution: PipelineSolution) -> Evaluation:
    """Check a composed pipeline against every constraint and recompute its iteration time.

    Only ``solution.blocks`` is read; everything else is recomputed from the instance.

    Returns
    -------
    Evaluation
        ``objective`` = T; ``details``: ``stage_times``, ``link_times``, ``in_flight``,
        ``memory_bytes`` per stage, ``bottleneck``.

    Examples
    --------
    >>> st = StagePlan(2, 0.01, 0.02, GIB, GIB, 1)
    >>> inst = PipelineInstance("x", 2, 4, (Island("a", 1, 8 * GIB),), (PipelineOption(0, 2, (st,)),), ((0.0,),))
    >>> ev = evaluate(inst, PipelineSolution((Block(0, 0, 0, 2),)))
    >>> ev.feasible, round(ev.objective, 6)
    (True, 0.12)
    """
    blocks = tuple(solution.blocks)
    if not blocks:
        return Evaluation(False, math.inf, ("the plan has no block",))
    v = _check_blocks(instance, blocks)
    if v:
        return Evaluation(False, math.inf, tuple(v))
    stages = [(k, b.island, st) for k, b in enumerate(blocks) for st in instance.options[b.option].stages]
    S, M = len(stages), instance.microbatches
    times, flights, memory = [], [], []
    for s, (k, island, st) in enumerate(stages):
        flight = in_flight(S - s - 1, M)
        need = st.static_bytes + st.activation_bytes * flight
        times.append(st.time_s)
        flights.append(flight)
        memory.append(need)
        if not instance.fits(island, st, flight):
            v.append(
                f"stage {s} (block {k}, island {instance.islands[island].name}) needs {need / GIB:.4f} GiB per GPU "
                f"with {flight} micro-batches in flight, above {instance.capacity(island) / GIB:.4f} GiB usable"
            )
    links = [instance.link_s[a.island][b.island] for a, b in zip(blocks, blocks[1:])]
    bottleneck = max(max(times), max(links, default=0.0))
    objective = sum(times) + sum(links) + (M - 1) * bottleneck
    details = {"stage_times": times, "link_times": links, "in_flight": flights, "memory_bytes": memory, "bottleneck": bottleneck}
    if v:
        return Evaluation(False, math.inf, tuple(v), details)
    return Evaluation(True, objective, (), details)
