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
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property

from hetopt.errors import InputError
from hetopt.result import Evaluation
from hetopt.units import GIB, MEMORY_RTOL  # noqa: F401  (GIB re-exported: instances are built in GiB)


# -- accepted ranges (checked by PipelineInstance, so files and the API get the same errors) --
#: Most layers: GPT-3 175B has 96, the deepest published LLMs a few hundred.
MAX_LAYERS = 4_096
#: Most micro-batches per iteration (a 10^6 would be an input error).
MAX_MICROBATCHES = 65_536
#: Most islands: the DP is exponential in the number of distinct islands.
MAX_ISLANDS = 64
#: Most options in one instance.
MAX_OPTIONS = 200_000
#: Most stages in one option.
MAX_STAGES = 1_024
#: Most GPUs per island.
MAX_GPUS = 100_000
#: Largest forward, backward or link time, seconds (11.6 days per micro-batch). HiGHS treats
#: constraint coefficients >= 1e15 as infinite (``large_matrix_value``; the MILP's bottleneck
#: rows z >= τ_o·y carry stage times) and costs >= 1e20 as infinite; CBC proves a feasible
#: model infeasible at 1e25. With this bound an option's Σt is <= 1024 · 2e6 s and any plan's
#: T <= (S + M) · 2e6 s < 3e11 s, far inside both and exact to 3e-5 s in a double.
MAX_TIME_S = 1e6
#: Smallest positive forward, backward or link time, seconds (0 means free).
#: HiGHS drops coefficients <= 1e-9 (``small_matrix_value``) and CP-SAT's time quantum is
#: 1 ns, so a time must be well above both to be represented: 1 µs is 1000 quanta, and
#: below the launch time of a GPU kernel.
MIN_TIME_S = 1e-6
#: What a time refused for falling below ``MIN_TIME_S`` is told (callers that build instances
#: from a cost model recognise it and name their own input).
BELOW_RESOLUTION = "a time below that is not represented by the solvers"
#: Largest ratio of the largest positive time to the smallest (stage times and links of
#: the whole instance). The MILP backends resolve a coefficient only above their primal
#: feasibility / integrality tolerances (1e-6 to 1e-9 relative to the row's largest): a
#: model whose times span more than 1e6 is not solved exactly. The shipped instances span
#: at most 8e3.
MAX_TIME_RATIO = 1e6
#: Largest memory per GPU (island memory, static and activation bytes): 1 PiB, a thousand
#: times today's largest GPU memory; keeps static + activation · M finite and exact.
MAX_MEMORY_BYTES = 2.0**50

#: Role names, as written in instance files. ``any`` fits every position.
ROLES = ("any", "first", "middle", "last", "whole")


def stage_fits(static_bytes: float, activation_bytes: float, flight: int, capacity_bytes: float) -> bool:
    """The 1F1B memory rule of one stage: static + activation · in-flight ≤ capacity (+ ``MEMORY_RTOL``).

    The one definition of the rule: ``PipelineInstance.fits`` and the planner's
    parallelizers call it.

    Examples
    --------
    >>> stage_fits(4.0, 2.0, 2, 8.0), stage_fits(4.0, 2.0, 3, 8.0), stage_fits(8.0 + 1e-12, 0.0, 1, 8.0)
    (True, False, True)
    """
    return static_bytes + activation_bytes * flight <= capacity_bytes * (1.0 + MEMORY_RTOL)


def most_in_flight(static_bytes: float, activation_bytes: float, capacity_bytes: float, microbatches: int) -> int:
    """The most micro-batches (0..M) a stage may hold under :func:`stage_fits`; -1 if not even 0.

    Exact at the boundary: the float quotient is corrected by stepping with the predicate.

    Examples
    --------
    >>> most_in_flight(4.0, 2.0, 9.0, 8), most_in_flight(4.0, 2.0, 40.0, 8), most_in_flight(4.0, 2.0, 3.0, 8)
    (2, 8, -1)
    """
    M = microbatches
    if stage_fits(static_bytes, activation_bytes, M, capacity_bytes):
        return M
    if not stage_fits(static_bytes, activation_bytes, 0, capacity_bytes):
        return -1
    room = capacity_bytes * (1.0 + MEMORY_RTOL) - static_bytes
    quotient = room / activation_bytes  # activation > 0 here, else M would fit
    f = M if quotient >= M else max(0, math.floor(quotient))
    # the float division may land one off; the predicate itself decides
    while f < M and stage_fits(static_bytes, activation_bytes, f + 1, capacity_bytes):
        f += 1
    while f >= 0 and not stage_fits(static_bytes, activation_bytes, f, capacity_bytes):
        f -= 1
    return f


def time_problem(seconds: float) -> str | None:
    """What is wrong with a forward, backward or link time, or None when it is accepted.

    Examples
    --------
    >>> time_problem(0.01), time_problem(0.0)
    (None, None)
    >>> time_problem(1e308)
    'must be between 0 and 1e+06 s (got 1e+308)'
    """
    if type(seconds) is not float and (isinstance(seconds, bool) or not isinstance(seconds, numbers.Real)):
        return f"must be a number of seconds (got {seconds!r})"
    value = float(seconds)
    if not 0.0 <= value <= MAX_TIME_S:  # also rejects NaN
        return f"must be between 0 and {MAX_TIME_S:g} s (got {value:g})"
    if 0.0 < value < MIN_TIME_S:
        return f"must be 0 or at least {MIN_TIME_S:g} s (got {value:g}); {BELOW_RESOLUTION}"
    return None


class BelowResolution(InputError):
    """A time above 0 but below ``MIN_TIME_S``: valid physics the solvers cannot represent
    (the planner then names the model and the fix, ``planner/search/compose.py``)."""


def check_time(where: str, seconds: float) -> None:
    """Refuse a time :func:`time_problem` refuses, naming ``where``.

    Raises
    ------
    BelowResolution
        Above 0 but below ``MIN_TIME_S``.
    InputError
        Any other time out of range.
    """
    problem = time_problem(seconds)
    if problem is None:
        return
    below = isinstance(seconds, numbers.Real) and not isinstance(seconds, bool) and 0.0 < float(seconds) < MIN_TIME_S
    raise (BelowResolution if below else InputError)(f"{where}: {problem}")


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
class PipelineIsland:
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
    islands: tuple[PipelineIsland, ...]
    options: tuple[PipelineOption, ...]
    link_s: tuple[tuple[float, ...], ...]
    memory_fraction: float = 1.0
    description: str = ""

    problem = "pipeline"

    def capacity(self, island: int) -> float:
        """φ · memory per GPU of ``island``, bytes."""
        return self.memory_fraction * self.islands[island].memory_bytes

    def __post_init__(self) -> None:
        _validate(self)

    def subset(self, options: Sequence[int], name: str) -> PipelineInstance:
        """This instance with only ``options`` (indices, kept in that order), named ``name``.

        Not validated again: every field of a valid instance stays valid when options are left
        out (each is checked on its own), and the planner's launchable search builds one subset
        per job-wide group, where validation would cost more than the composition.

        Examples
        --------
        >>> from hetopt import load
        >>> from hetopt.catalog import instances_dir
        >>> inst = load(instances_dir() / "pipeline" / "tiny.toml")
        >>> len(inst.subset([0, 1], "two").options)
        2
        """
        sub = object.__new__(PipelineInstance)
        for f in fields(self):
            object.__setattr__(sub, f.name, getattr(self, f.name))
        object.__setattr__(sub, "options", tuple(self.options[o] for o in options))
        object.__setattr__(sub, "name", name)
        return sub

    def fits(self, island: int, stage: StagePlan, flight: int) -> bool:
        """static + activation · in-flight ≤ φ · memory (:func:`stage_fits`)."""
        return stage_fits(stage.static_bytes, stage.activation_bytes, flight, self.capacity(island))

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
        >>> inst = PipelineInstance("x", 1, 8, (PipelineIsland("a", 1, 10 * GIB),), (), ((0.0,),))
        >>> inst.max_in_flight(0, StagePlan(1, 1.0, 1.0, 4 * GIB, 2 * GIB))
        3
        """
        return most_in_flight(stage.static_bytes, stage.activation_bytes, self.capacity(island), self.microbatches)

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


def _is_int(value) -> bool:
    # the exact type first: the abstract-class check costs about twenty times more, and the
    # planner validates tens of thousands of its own integers per composition
    return type(value) is int or (isinstance(value, numbers.Integral) and not isinstance(value, bool))


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))


def _whole(key: str, value, low: int, high: int) -> None:
    if not _is_int(value):
        raise InputError(f"{key}: must be a whole number (got {value!r})")
    if not low <= value <= high:
        raise InputError(f"{key}: must be between {low} and {high} (got {value}); larger values are outside what hetopt plans")


def _gib(key: str, value, *, positive: bool) -> None:
    """Memory in bytes, reported under the file's GiB key."""
    if type(value) is not float and (isinstance(value, bool) or not isinstance(value, numbers.Real)) or math.isnan(value):
        raise InputError(f"{key}: must be a number of GiB (got {value!r})")
    low_ok = value > 0 if positive else value >= 0
    if not low_ok or value > MAX_MEMORY_BYTES:
        low = "> 0" if positive else ">= 0"
        raise InputError(f"{key}: must be {low} and at most {MAX_MEMORY_BYTES / GIB:g} GiB (got {value / GIB:g})")


def _validate(inst: PipelineInstance) -> None:
    """Check every field against the accepted ranges; raise InputError("key.path: problem (fix)").

    Key paths are the instance file's keys (GiB where the file has GiB), so a file and an
    instance built in code get the same message. The ranges are the module's constants.
    """
    if not isinstance(inst.name, str):
        raise InputError(f"name: must be a string (got {inst.name!r})")
    _whole("layers", inst.layers, 1, MAX_LAYERS)
    _whole("microbatches", inst.microbatches, 1, MAX_MICROBATCHES)
    phi = inst.memory_fraction
    if not _is_real(phi) or not 0.0 < phi <= 1.0:
        raise InputError(f"memory_fraction: must be in (0, 1] (got {phi!r})")
    if not 1 <= len(inst.islands) <= MAX_ISLANDS:
        raise InputError(f"island: give between 1 and {MAX_ISLANDS} islands (got {len(inst.islands)})")
    names: dict[str, int] = {}
    for i, isl in enumerate(inst.islands):
        if not isinstance(isl, PipelineIsland):
            raise InputError(f"island[{i}]: must be an PipelineIsland (got {type(isl).__name__})")
        if not isinstance(isl.name, str) or not isl.name:
            raise InputError(f"island[{i}].name: must be a non-empty string (got {isl.name!r})")
        if isl.name in names:
            raise InputError(f"island[{i}].name: island {isl.name!r} is defined twice (island[{names[isl.name]}] has the same name)")
        names[isl.name] = i
        _whole(f"island[{i}].gpus", isl.gpus, 1, MAX_GPUS)
        _gib(f"island[{i}].memory_gib", isl.memory_bytes, positive=True)
    n = len(inst.islands)
    link = inst.link_s
    if len(link) != n or any(len(row) != n for row in link):
        raise InputError(f"link_s: must be a {n} x {n} matrix, one row and column per island")
    for a in range(n):
        for b in range(n):
            where = f"link {inst.islands[a].name}-{inst.islands[b].name}: time_s"
            check_time(where, link[a][b])
            if a == b and link[a][b] != 0:
                raise InputError(f"{where}: an island's link to itself must be 0 (got {link[a][b]:g})")
            if link[a][b] != link[b][a]:
                raise InputError(f"{where}: links are symmetric (round trip), but c(a, b) = {link[a][b]:g} and c(b, a) = {link[b][a]:g}")
    if len(inst.options) > MAX_OPTIONS:
        raise InputError(f"option: has {len(inst.options)} entries, more than the limit of {MAX_OPTIONS}")
    positive: list[tuple[float, str]] = [(link[a][b], f"link {inst.islands[a].name}-{inst.islands[b].name}")
                                         for a in range(n) for b in range(a + 1, n) if link[a][b] > 0]
    for o, opt in enumerate(inst.options):
        key = f"option[{o}]"
        if not isinstance(opt, PipelineOption):
            raise InputError(f"{key}: must be a PipelineOption (got {type(opt).__name__})")
        if not _is_int(opt.island) or not 0 <= opt.island < n:
            raise InputError(f"{key}.island: must name one of the {n} islands (got {opt.island!r})")
        _whole(f"{key}.layers", opt.layers, 1, MAX_LAYERS)
        if opt.layers > inst.layers:
            raise InputError(f"{key}.layers: {opt.layers} is more than the model's {inst.layers} layers")
        if opt.role not in ROLES:
            raise InputError(f"{key}.role: unknown value {opt.role!r} (known: {', '.join(ROLES)})")
        if not 1 <= len(opt.stages) <= MAX_STAGES:
            raise InputError(f"{key}.stage: give between 1 and {MAX_STAGES} stages (got {len(opt.stages)})")
        for q, st in enumerate(opt.stages):
            sk = f"{key}.stage[{q}]"
            if not isinstance(st, StagePlan):
                raise InputError(f"{sk}: must be a StagePlan (got {type(st).__name__})")
            _whole(f"{sk}.layers", st.layers, 1, MAX_LAYERS)
            _whole(f"{sk}.gpus", st.gpus, 1, MAX_GPUS)
            for attr in ("forward_s", "backward_s"):
                check_time(f"{sk}.{attr}", getattr(st, attr))
            t = st.forward_s + st.backward_s  # 0 or >= MIN_TIME_S, as both parts are
            if t > 0:
                positive.append((t, sk))
            _gib(f"{sk}.static_gib", st.static_bytes, positive=False)
            _gib(f"{sk}.activation_gib", st.activation_bytes, positive=False)
        total = sum(st.layers for st in opt.stages)
        if total != opt.layers:
            raise InputError(f"{key}.stage: the stages' layers add up to {total}, the option's layers = {opt.layers}; make them equal")
        gpus = sum(st.gpus for st in opt.stages)
        isl = inst.islands[opt.island]
        if gpus > isl.gpus:
            raise InputError(
                f"{key}.stage: the stages use {gpus} GPUs, island {isl.name!r} has {isl.gpus} "
                "(an option's stages use disjoint GPUs of its island)"
            )
    if positive:
        small, large = min(positive), max(positive)
        if large[0] > MAX_TIME_RATIO * small[0]:
            raise InputError(
                f"{small[1]}: its time {small[0]:g} s is {large[0] / small[0]:.3g} times below the largest time "
                f"({large[1]}, {large[0]:g} s); the solvers resolve times spanning at most a factor {MAX_TIME_RATIO:g} "
                "(raise the small time or drop the slow option)"
            )


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
    simulation_note: str = ""  # why simulated_s is NaN for a feasible plan (too large to simulate)
    microbatches: int = 0  # M of the instance, so a result file alone can be re-simulated (0: not filled)

    @property
    def simulated_or_none(self) -> float | None:
        """``simulated_s``, or None for a schedule that was not simulated (NaN: too large, or out of time)."""
        return None if math.isnan(self.simulated_s) else self.simulated_s

    def to_dict(self) -> dict:
        """Plain data for JSON (``solution`` in ``hetopt solve --json``)."""
        return {
            "iteration_time_s": self.iteration_time_s,
            "bottleneck_s": self.bottleneck_s,
            "simulated_s": self.simulated_or_none,
            "simulated_minus_analytic_s": None if math.isnan(self.simulated_s) else self.simulated_s - self.iteration_time_s,
            "simulation_note": self.simulation_note or None,
            "microbatches": self.microbatches or None,
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
        simulated = (
            self.simulation_note or "1F1B simulation not run" if math.isnan(self.simulated_s)
            else f"1F1B simulation {self.simulated_s:.6g} s; simulated - analytic = {diff:+.6g} s ({100 * rel:+.3f}%)"
        )
        return [
            f"pipeline {order}; links {', '.join(f'{c:.4g}' for c in self.link_s) or 'none'} s",
            f"iteration time {self.iteration_time_s:.6g} s (analytic), bottleneck {self.bottleneck_s:.6g} s",
            simulated,
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


def simple_bound(instance: PipelineInstance) -> float:
    """A lower bound on every pipeline's T, from the options alone (no search): the chosen
    blocks cover the L layers, so Σ t ≥ L · min_o (Σ t_o / layers_o); some stage runs, so the
    bottleneck is ≥ min_o max t_o; links add ≥ 0. What a model stopped before its own bound
    reports, so that no FEASIBLE answer comes without one.

    >>> opt = PipelineOption(0, 4, (StagePlan(4, 0.25, 0.75, 0.0, 0.0),))
    >>> inst = PipelineInstance("x", 4, 3, (PipelineIsland("A", 1, 1e12),), (opt,), ((0.0,),))
    >>> simple_bound(inst)  # 4 layers at 1 s for 4 + (3 − 1)·1
    3.0
    """
    per_layer = min(o.total_time_s / o.layers for o in instance.options)
    bottleneck = min(o.max_time_s for o in instance.options)
    return instance.layers * per_layer + (instance.microbatches - 1) * bottleneck


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
    >>> inst = PipelineInstance("x", 2, 4, (PipelineIsland("a", 1, 8 * GIB),), (PipelineOption(0, 2, (st,)),), ((0.0,),))
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
