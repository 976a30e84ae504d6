"""Pipeline stages whose data-parallel replicas span GPU types: data, plan, and ``evaluate``.

Symbols follow ``formulations/mixed.md``. L layers are cut into S contiguous stages of a 1F1B
pipeline of M micro-batches of b samples. Stage s uses, per GPU type g, a *count* r_{s,g} ≥ 0
of identical replicas, each a tensor-parallel group of t_{s,g} GPUs, which together hold
n_{s,g} samples of every micro-batch (Σ_g n = b), spread as evenly as whole samples allow:
n mod r replicas hold ⌈n/r⌉ samples, the others ⌊n/r⌋. A type's GPUs are taken in whole
*units* (``GpuGroup.unit``: a node, or 1 GPU), so r·t is a multiple of the unit. Its time per micro-batch is the slowest member's table time plus its gradient
ring all-reduce amortized over M (as ``hetopt.costmodel.stage`` folds data parallelism into a
stage's price); the iteration time is the pipeline family's closed form

    T = Σ_s t_s + (S − 1)·λ + (M − 1)·max(max_s t_s, [S > 1]·λ)

with λ the hand-over time per micro-batch between two stages.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate

import numpy as np

from hetopt.errors import InputError
from hetopt.result import Evaluation
from hetopt.units import GBPS, GIB, MEMORY_RTOL

#: Most GPU types (the issue's G ≤ 4: the DP's state is a product over types).
MAX_TYPES = 4
#: Most layers (a model's transformer blocks, plus embedding and head slices).
MAX_LAYERS = 1024
#: Largest micro-batch size b in samples (a pipeline micro-batch that the replicas split; the
#: planner's global batch at one micro-batch). The tables hold one row per share 1..Y, Y ≤ b,
#: and the stage pricing is linear in Y, not in b.
MAX_MICROBATCH_SIZE = 65_536
#: Most micro-batches M (the planner's largest global batch at one sample each).
MAX_MICROBATCHES = 2**20
#: Most GPUs of one type (a datacenter's worth).
MAX_COUNT = 65_536
#: Largest tensor-parallel degree.
MAX_TP = 64
#: Longest table time or hand-over, seconds: a day is not one micro-batch of any layer.
MAX_TIME_S = 86_400.0
#: Largest byte figure of an instance (memory per GPU, static, activation and gradient table
#: entries), 1 PiB: a thousand times today's largest GPU memory, so every sum stays exact.
MAX_BYTES = 2.0**50
#: Bandwidth range, Gb/s (1 kb/s to 1 Pb/s, as the replicas family).
MIN_GBPS, MAX_GBPS = 1e-6, 1e6


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _whole(key: str, value, low: int, high: int) -> None:
    if not _is_int(value) or not low <= value <= high:
        raise InputError(f"{key}: must be a whole number from {low} to {high} (got {value!r})")


def _real(key: str, value, low: float, high: float, unit: str, *, scale: float = 1.0, low_open: bool = False) -> None:
    """``value`` (SI) is a finite number whose ``value / scale`` (the file's ``unit``: GiB for
    ``scale = GIB``) lies in [low, high], or (low, high] with ``low_open``; the message shows the
    value in that unit, as a file would have written it."""
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    shown = float(value) / scale if number else value
    if not number or not math.isfinite(shown) or (shown <= low if low_open else shown < low) or shown > high:
        rel = ">" if low_open else ">="
        got = f"{shown:.12g}" if number else repr(value)
        raise InputError(f"{key}: must be a finite number of {unit}, {rel} {low:g} and <= {high:g} (got {got})")


def _table(key: str, rows, shape: tuple[int, ...], high: float, unit: str, scale: float = 1.0) -> None:
    """``rows`` is a nested tuple of the given shape with entries in [0, high] (in the file's
    ``unit``; entries are SI, ``scale`` SI per ``unit``).

    A two-level shape (Y, L) is the rows of the shares y = 1..Y: Y is exact when it is given as
    an int, and may be any of 1..Y when it is given as a range (the tables of the shares).
    """
    if len(shape) == 2:
        rows_ok = range(1, shape[0].stop) if isinstance(shape[0], range) else (shape[0],)
        if not isinstance(rows, tuple) or len(rows) not in rows_ok:
            want = f"1 to {rows_ok[-1]}" if len(rows_ok) > 1 else f"{rows_ok[0]}"
            raise InputError(f"{key}: must have {want} rows, one per share y = 1, 2, ... "
                             f"(got {len(rows) if isinstance(rows, tuple) else rows!r})")
        for y, row in enumerate(rows):
            _table(f"{key}[{y}]", row, shape[1:], high, unit, scale)
        return
    if not isinstance(rows, tuple) or len(rows) != shape[0]:
        raise InputError(f"{key}: must list {shape[0]} numbers, one per layer "
                         f"(got {len(rows) if isinstance(rows, tuple) else rows!r})")
    for i, v in enumerate(rows):
        _real(f"{key}[{i}]", v, 0.0, high, unit, scale=scale)


def _non_decreasing(key: str, rows, scale: float = 1.0) -> None:
    """Row y + 1 is no smaller than row y in every layer (more samples: no less work, no fewer
    bytes); values are shown in the file's unit (SI / ``scale``)."""
    for y in range(1, len(rows)):
        for l, (lo, hi) in enumerate(zip(rows[y - 1], rows[y])):
            if hi < lo:
                low, high = f"{lo / scale:.12g}", f"{hi / scale:.12g}"
                raise InputError(f"{key}[{y}][{l}]: {high} is below the row of one sample fewer ({low}); the "
                                 f"tables must not decrease with the share (a replica holding more samples does "
                                 f"no less work and holds no fewer bytes): raise it to at least {low}")


def range_sum(values, first: int, end: int) -> float:
    """Σ values[first:end], added left to right from 0.0: the one way a layer range is summed.

    Not a difference of prefix sums: p[end] − p[first] cancels, and rounds differently for each
    share's row (2.331 + 3.838 − 2.331 = 3.8380000000000005, while the next share's row gives
    3.838), so a range's table could fall as the share grows although every layer's rises; the
    threshold search of ``stages.py`` needs it not to fall (issue 44). Summed left to right,
    rows that do not decrease entry by entry give sums that do not decrease either (a rounded
    addition is monotone in both operands). :func:`range_sums` gives the same floats for many
    rows at once.

    Examples
    --------
    >>> range_sum((2.331, 3.838), 1, 2), range_sum((4.19, 3.838), 1, 2), range_sum((1.0, 2.0, 4.0), 0, 3)
    (3.838, 3.838, 7.0)
    """
    total = 0.0
    for v in values[first:end]:
        total += v
    return total


def range_sums(rows, first: int, end: int) -> np.ndarray:
    """:func:`range_sum` of every row of ``rows`` (a sequence of equal-length rows), bit for bit:
    the same additions in the same order, one column at a time.

    >>> range_sums(((1.965, 1.688), (2.331, 3.838), (4.19, 3.838)), 1, 2).tolist()
    [1.688, 3.838, 3.838]
    """
    table = np.asarray(rows, dtype=np.float64).reshape(len(rows), -1)
    total = np.zeros(len(table))
    for column in range(first, end):
        total += table[:, column]
    return total


@dataclass(frozen=True)
class TpTables:
    """The per-layer tables of one GPU type at one tensor-parallel degree t.

    Parameters
    ----------
    degree
        t, GPUs per replica.
    time_s
        time_s[y − 1][l]: forward + backward seconds of layer l for one micro-batch on a
        replica holding y samples of it (y = 1..Y, Y ≤ b rows; a share above Y does not fit).
        Non-decreasing in y.
    static_bytes
        static_bytes[l]: weights, gradients and optimizer state of layer l per GPU.
    activation_bytes
        activation_bytes[y − 1][l]: activations of layer l per GPU per micro-batch in flight
        (the same Y rows), non-decreasing in y.
    """

    degree: int
    time_s: tuple[tuple[float, ...], ...]
    static_bytes: tuple[float, ...]
    activation_bytes: tuple[tuple[float, ...], ...]

    @property
    def shares(self) -> int:
        """Y, the largest share the tables price (larger shares do not fit)."""
        return len(self.time_s)

    @cached_property
    def _time_array(self) -> np.ndarray:
        return np.asarray(self.time_s, dtype=np.float64)

    @cached_property
    def _activation_array(self) -> np.ndarray:
        return np.asarray(self.activation_bytes, dtype=np.float64)

    def range_times(self, first: int, end: int) -> np.ndarray:
        """τ(y, first..end−1) for y = 1..Y: :func:`range_sums` of ``time_s`` (non-decreasing in y)."""
        return range_sums(self._time_array, first, end)

    def range_activations(self, first: int, end: int) -> np.ndarray:
        """a(y, first..end−1) for y = 1..Y: :func:`range_sums` of ``activation_bytes`` (non-decreasing in y)."""
        return range_sums(self._activation_array, first, end)


@dataclass(frozen=True)
class GpuGroup:
    """All GPUs of one type.

    Parameters
    ----------
    name
        The type's label ("A100"), unique in the instance.
    count
        N_g, GPUs of this type.
    memory_bytes
        Usable memory per GPU.
    bandwidth
        Bytes/s of one unit's link (a node's network when a unit is a node; a GPU's link when
        unit = 1) for a gradient ring inside this type.
    tp
        One :class:`TpTables` per allowed tensor-parallel degree.
    unit
        GPUs per allocation unit (a node's GPUs, or 1): a stage takes whole units, so its
        replicas × TP degree of this type is a multiple of ``unit``; ``count`` is a multiple
        of it too. The DP counts units, not GPUs.
    """

    name: str
    count: int
    memory_bytes: float
    bandwidth: float
    tp: tuple[TpTables, ...]
    unit: int = 1

    @property
    def units(self) -> int:
        """The type's allocation units, N_g / unit."""
        return self.count // self.unit

    def degree_index(self, degree: int) -> int | None:
        """The index of ``degree`` in ``tp``, or None when it is not allowed."""
        return next((k for k, t in enumerate(self.tp) if t.degree == degree), None)


@dataclass(frozen=True)
class MixedInstance:
    """One mixed-stage instance (SI units: seconds, bytes, bytes/s).

    Examples
    --------
    >>> from hetopt.mixed.synthetic import random_instance
    >>> inst = random_instance(0)
    >>> inst.problem, inst.layers >= 1
    ('mixed', True)
    """

    name: str
    microbatches: int
    microbatch_size: int
    layers: int
    gradient_bytes: tuple[float, ...]
    link_s: float
    cross_bandwidth: float
    gpus: tuple[GpuGroup, ...]
    #: ω, the share of a replica's time per micro-batch that the gradient ring can hide behind
    #: (its backward); 0: nothing overlaps (the ring runs after the last backward).
    overlap: float = 0.0
    #: K_l, the buckets the gradients of layer l are reduced in (the ring's last bucket follows
    #: the last backward and cannot hide); () means one per layer.
    buckets: tuple[int, ...] = ()

    problem = "mixed"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"name: must be a non-empty string (got {self.name!r})", field="name")
        _whole("microbatches", self.microbatches, 1, MAX_MICROBATCHES)
        _whole("microbatch_size", self.microbatch_size, 1, MAX_MICROBATCH_SIZE)
        _whole("layers", self.layers, 1, MAX_LAYERS)
        _table("gradient_gib", self.gradient_bytes, (self.layers,), MAX_BYTES / GIB, "GiB", GIB)
        _real("link_s", self.link_s, 0.0, MAX_TIME_S, "seconds")
        if not _is_real(self.overlap) or not 0.0 <= self.overlap < 1.0:
            raise InputError(f"overlap: must be a share from 0 (inclusive) to 1 (exclusive) of a replica's time "
                             f"(got {self.overlap!r})")
        if self.buckets != ():
            if not isinstance(self.buckets, tuple) or len(self.buckets) != self.layers:
                raise InputError(f"buckets: must list {self.layers} whole numbers, one per layer (or leave it out: "
                                 f"one bucket per layer)")
            for i, k in enumerate(self.buckets):
                _whole(f"buckets[{i}]", k, 1, MAX_LAYERS)
        _real("cross_bandwidth_gbps", self.cross_bandwidth, MIN_GBPS, MAX_GBPS, "Gb/s", scale=GBPS)
        if not isinstance(self.gpus, tuple) or not 1 <= len(self.gpus) <= MAX_TYPES:
            raise InputError(f"gpu: give 1 to {MAX_TYPES} [[gpu]] tables, one per GPU type (got {self.gpus!r:.60})")
        names = set()
        shape = (range(1, self.microbatch_size + 1), self.layers)
        for g, grp in enumerate(self.gpus):
            key = f"gpu[{g}]"
            if not isinstance(grp, GpuGroup):
                raise InputError(f"{key}: must be a GpuGroup (got {type(grp).__name__})")
            if not isinstance(grp.name, str) or not grp.name or grp.name in names:
                raise InputError(f"{key}.name: must be a non-empty name unique among the types (got {grp.name!r})")
            names.add(grp.name)
            _whole(f"{key}.count", grp.count, 0, MAX_COUNT)
            _whole(f"{key}.unit", grp.unit, 1, MAX_COUNT)
            if grp.count % grp.unit:
                raise InputError(f"{key}.count: {grp.count} GPUs are not whole units of {grp.unit} "
                                 f"(give a multiple of {key}.unit, or unit = 1)")
            _real(f"{key}.memory_gib", grp.memory_bytes, 0.0, MAX_BYTES / GIB, "GiB", scale=GIB, low_open=True)
            _real(f"{key}.bandwidth_gbps", grp.bandwidth, MIN_GBPS, MAX_GBPS, "Gb/s", scale=GBPS)
            if not isinstance(grp.tp, tuple) or not grp.tp:
                raise InputError(f"{key}.tp: give at least one [[{key}.tp]] table (a tensor-parallel degree)")
            degrees = set()
            for k, tab in enumerate(grp.tp):
                tkey = f"{key}.tp[{k}]"
                _whole(f"{tkey}.degree", tab.degree, 1, MAX_TP)
                if tab.degree in degrees:
                    raise InputError(f"{tkey}.degree: {tab.degree} is given twice (one table per degree)")
                degrees.add(tab.degree)
                _table(f"{tkey}.time_s", tab.time_s, shape, MAX_TIME_S, "seconds")
                _table(f"{tkey}.static_gib", tab.static_bytes, (self.layers,), MAX_BYTES / GIB, "GiB", GIB)
                _table(f"{tkey}.activation_gib", tab.activation_bytes, (len(tab.time_s), self.layers),
                       MAX_BYTES / GIB, "GiB", GIB)
                _non_decreasing(f"{tkey}.time_s", tab.time_s)
                _non_decreasing(f"{tkey}.activation_gib", tab.activation_bytes, GIB)

    @property
    def num_types(self) -> int:
        """G, the GPU types."""
        return len(self.gpus)

    def gradient_range_bytes(self, first: int, end: int) -> float:
        """B(first..end−1), the gradient bytes of a layer range (:func:`range_sum`)."""
        return range_sum(self.gradient_bytes, first, end)

    @cached_property
    def bucket_prefix(self) -> tuple[int, ...]:
        return tuple(accumulate(self.buckets or (1,) * self.layers, initial=0))


@dataclass(frozen=True)
class Member:
    """The replicas of one GPU type in a stage: r identical replicas of t GPUs holding n
    samples of every micro-batch between them (n mod r of them ⌈n/r⌉, the others ⌊n/r⌋)."""

    gpu: int
    degree: int
    replicas: int
    samples: int

    @property
    def shares(self) -> tuple[int, ...]:
        """The distinct shares its replicas hold: (⌊n/r⌋,) or (⌊n/r⌋, ⌈n/r⌉).

        >>> Member(0, 1, 3, 7).shares, Member(0, 1, 2, 4).shares
        ((2, 3), (2,))
        """
        low = self.samples // self.replicas
        return (low,) if self.samples % self.replicas == 0 else (low, low + 1)

    def label(self, names: tuple[str, ...]) -> str:
        """``8×A100 tp4 y2`` (every replica holds 2) or ``8×A100 tp4 y2-3 n20`` (uneven)."""
        name = names[self.gpu] if self.gpu < len(names) else f"type{self.gpu}"
        sh = self.shares
        share = f"y{sh[0]}" if len(sh) == 1 else f"y{sh[0]}-{sh[1]} n{self.samples}"
        return f"{self.replicas}×{name} tp{self.degree} {share}"


@dataclass(frozen=True)
class Stage:
    """Layers ``first``..``end − 1`` on ``members`` (one per GPU type used, by type index)."""

    first: int
    end: int
    members: tuple[Member, ...]


@dataclass(frozen=True)
class MixedSolution:
    """The stages, first to last. ``evaluate`` recomputes every figure from them.

    ``names`` (the GPU types' labels) is filled by :func:`build_solution` for display only.
    """

    stages: tuple[Stage, ...]
    names: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line, e.g. ``S0[6×A100 tp1 y1 + 1×V100 tp4 y2]``.

        Examples
        --------
        >>> MixedSolution((Stage(0, 2, (Member(0, 1, 6, 6), Member(1, 4, 1, 2))),), ("A100", "V100")).describe()
        'S0[6×A100 tp1 y1 + 1×V100 tp4 y2]'
        """
        return " → ".join(f"S{s}[" + " + ".join(m.label(self.names) for m in st.members) + "]"
                          for s, st in enumerate(self.stages))

    def to_dict(self) -> dict:
        """Plain data for JSON."""
        return {"stages": [{"layers": [st.first, st.end], "members": [
            {"gpu": self.names[m.gpu] if m.gpu < len(self.names) else m.gpu, "tp": m.degree, "replicas": m.replicas,
             "samples": m.samples} for m in st.members]} for st in self.stages]}

    def rows(self) -> list[dict]:
        """One row per stage."""
        return [{"stage": s, "layers": f"{st.first}-{st.end - 1}",
                 "members": " + ".join(m.label(self.names) for m in st.members)}
                for s, st in enumerate(self.stages)]

    def summary(self) -> list[str]:
        """A line under the table."""
        return [f"{len(self.stages)} stages: {self.describe()}"]


def build_solution(instance: MixedInstance, stages) -> MixedSolution:
    """A MixedSolution from ``(first, end, [(gpu, degree, replicas, samples), ...])`` triples."""
    return MixedSolution(
        tuple(Stage(int(a), int(e), tuple(Member(*map(int, m)) for m in sorted(members))) for a, e, members in stages),
        tuple(g.name for g in instance.gpus))


def in_flight(stages_after: int, microbatches: int) -> int:
    """Micro-batches a 1F1B stage holds: min(S − s, M), with S − s − 1 stages after it.

    >>> in_flight(0, 4), in_flight(5, 4)
    (1, 4)
    """
    return min(stages_after + 1, microbatches)


def member_time_s(instance: MixedInstance, first: int, end: int, gpu: int, tp_index: int, share: int) -> float:
    """time_g(t, y, first..end−1): a replica's seconds per micro-batch on those layers (y ≤ Y)."""
    return range_sum(instance.gpus[gpu].tp[tp_index].time_s[share - 1], first, end)


def member_fits(instance: MixedInstance, first: int, end: int, gpu: int, tp_index: int, share: int, flight: int) -> bool:
    """static + flight · activation ≤ memory (+ MEMORY_RTOL) on each GPU of a replica with
    ``share`` samples; a share above the tables' rows Y does not fit."""
    tab = instance.gpus[gpu].tp[tp_index]
    if not 1 <= share <= tab.shares:
        return False
    static = range_sum(tab.static_bytes, first, end)
    act = range_sum(tab.activation_bytes[share - 1], first, end)
    return fits_memory(static, flight, act, instance.gpus[gpu].memory_bytes)


def fits_memory(static, flight: int, activation, memory_bytes: float):
    """m + f·a ≤ C·(1 + MEMORY_RTOL): the memory rule (``formulations/mixed.md``, constraint 3),
    for one share or, with numpy arrays, for every share at once."""
    return static + flight * activation <= memory_bytes * (1.0 + MEMORY_RTOL)


def link_bytes(nbytes: float, degree: int, unit: int) -> float:
    """Bytes one unit's link moves per ring step share: nbytes · min(1, unit / t).

    >>> link_bytes(8.0, 1, 4), link_bytes(8.0, 4, 4), link_bytes(8.0, 2, 1)
    (8.0, 8.0, 4.0)
    """
    return nbytes * min(1.0, unit / degree)


def sync_s(instance: MixedInstance, first: int, end: int, members) -> float:
    """The stage's gradient ring all-reduce, once per iteration (0 for one replica).

    members: (gpu, degree, replicas) triples. 2(R − 1)/R · max_g bytes·min(1, unit_g/t_g) / w_g,
    where w_g is the bandwidth of one unit's link (a node's network; a GPU's when unit = 1)
    when the stage uses one type, else min(w_g, cross). A unit's link carries one TP shard
    (bytes/t) per TP rank it holds, of the t rings (one per rank) that cross it: bytes when
    the unit holds whole replicas (t ≤ unit), bytes·unit/t when a replica spans units.

    >>> from hetopt.mixed.synthetic import random_instance
    >>> inst = random_instance(0)
    >>> sync_s(inst, 0, 1, [(0, inst.gpus[0].tp[0].degree, 1)])
    0.0
    """
    replicas = sum(m[2] for m in members)
    if replicas <= 1:
        return 0.0
    nbytes = instance.gradient_range_bytes(first, end)
    mixed = len({m[0] for m in members}) > 1
    slowest = max(link_bytes(nbytes, m[1], instance.gpus[m[0]].unit)
                  / (min(instance.gpus[m[0]].bandwidth, instance.cross_bandwidth) if mixed
                     else instance.gpus[m[0]].bandwidth) for m in members)
    return 2.0 * (replicas - 1) / replicas * slowest


def exposed_sync_s(instance: MixedInstance, first: int, end: int, sync: float, compute_s: float) -> float:
    """The part of the ring that the last micro-batch's backward cannot hide:
    max(σ − ω·c, σ/K), K the buckets of the layers (0 when σ = 0).

    >>> from hetopt.mixed.synthetic import hand_instance
    >>> inst = hand_instance(overlap=0.5)
    >>> exposed_sync_s(inst, 0, 2, 2.0, 1.0), exposed_sync_s(inst, 0, 2, 2.0, 3.0)  # 2 − 0.5; then 2/2 buckets
    (1.5, 1.0)
    """
    if sync <= 0.0:
        return 0.0
    buckets = instance.bucket_prefix[end] - instance.bucket_prefix[first]
    return max(sync - instance.overlap * compute_s, sync / buckets)


def stage_time_s(instance: MixedInstance, first: int, end: int, members, compute_s: float) -> float:
    """t_s = c + max(σ − ω·c, σ/K) / M: the slowest replica's time plus the ring's exposed part,
    once per iteration, amortized over M (as the cost model's ``data_parallel_comm`` does).
    Non-decreasing in c (ω < 1 ≤ M), so the fastest split is the best one."""
    sync = sync_s(instance, first, end, members)
    return compute_s + exposed_sync_s(instance, first, end, sync, compute_s) / instance.microbatches


def iteration_time_s(instance: MixedInstance, times) -> float:
    """The pipeline family's closed form: Σ t_s + (S − 1)λ + (M − 1)·max(max t_s, [S > 1]λ).

    >>> from hetopt.mixed.synthetic import random_instance
    >>> inst = random_instance(0)
    >>> iteration_time_s(inst, [1.0]) == 1.0 + (inst.microbatches - 1) * 1.0
    True
    """
    link = instance.link_s if len(times) > 1 else 0.0
    return sum(times) + (len(times) - 1) * link + (instance.microbatches - 1) * max(max(times), link)


def evaluate(instance: MixedInstance, solution: MixedSolution) -> Evaluation:
    """Check a plan and recompute its iteration time: the single source of truth.

    Examples
    --------
    >>> from hetopt.mixed.synthetic import hand_instance
    >>> inst = hand_instance()
    >>> plan = build_solution(inst, [(0, 2, [(0, 1, 2, 2)])])
    >>> ev = evaluate(inst, plan)
    >>> ev.feasible, round(ev.objective, 9)  # t = 2·1.0 (y=1) + sync 2·1/2·2 B/1 B/s / M=4 = 2.5; T = 4·2.5
    (True, 10.0)
    """
    violations: list[str] = []
    stages = solution.stages
    if not stages:
        return Evaluation(False, math.inf, ("no stage",))
    used = [0] * instance.num_types
    times, compute, syncs, flights = [], [], [], []
    expect = 0
    S, M, b = len(stages), instance.microbatches, instance.microbatch_size
    for s, st in enumerate(stages):
        where = f"stage {s}"
        if not (_is_int(st.first) and _is_int(st.end)) or st.first != expect or not st.first < st.end <= instance.layers:
            violations.append(f"{where}: layers {st.first!r}..{st.end!r} do not continue from layer {expect} "
                              f"(stages cover 0..{instance.layers - 1} in order, each at least one layer)")
            break
        expect = st.end
        flight = in_flight(S - s - 1, M)
        if not st.members:
            violations.append(f"{where}: has no replica")
            continue
        samples, slowest, seen, triples = 0, 0.0, set(), []
        for m in st.members:
            if not _is_int(m.gpu) or not 0 <= m.gpu < instance.num_types or m.gpu in seen:
                violations.append(f"{where}: GPU type {m.gpu!r} unknown or used twice in the stage")
                continue
            seen.add(m.gpu)
            grp = instance.gpus[m.gpu]
            k = grp.degree_index(m.degree) if _is_int(m.degree) else None
            if k is None:
                violations.append(f"{where}: tp {m.degree!r} is not allowed for {grp.name}")
                continue
            if not _is_int(m.replicas) or m.replicas < 1 or not _is_int(m.samples) or not m.replicas <= m.samples <= b:
                violations.append(f"{where}: {grp.name} needs replicas ≥ 1 and samples from replicas to {b} "
                                  f"(every replica holds one at least; got {m.replicas!r}, {m.samples!r})")
                continue
            if m.replicas * m.degree % grp.unit:
                violations.append(f"{where}: {grp.name} takes {m.replicas}×{m.degree} GPUs, not whole units of "
                                  f"{grp.unit}")
            samples += m.samples
            used[m.gpu] += m.replicas * m.degree
            for y in m.shares:  # every replica: the ⌊n/r⌋ ones and the ⌈n/r⌉ ones
                if not member_fits(instance, st.first, st.end, m.gpu, k, y, flight):
                    violations.append(f"{where}: {grp.name} tp{m.degree} y{y} does not fit its memory with "
                                      f"{flight} micro-batches in flight")
                    break
                slowest = max(slowest, member_time_s(instance, st.first, st.end, m.gpu, k, y))
            triples.append((m.gpu, m.degree, m.replicas))
        if samples != b:
            violations.append(f"{where}: the replicas hold {samples} samples of each micro-batch, b = {b}")
        sync = sync_s(instance, st.first, st.end, triples) if triples else 0.0
        compute.append(slowest)
        syncs.append(sync)
        flights.append(flight)
        times.append(slowest + exposed_sync_s(instance, st.first, st.end, sync, slowest) / M)
    if not violations and expect != instance.layers:
        violations.append(f"the stages cover layers 0..{expect - 1}, the model has {instance.layers}")
    for g, (u, grp) in enumerate(zip(used, instance.gpus)):
        if u > grp.count:
            violations.append(f"{grp.name}: the plan uses {u} GPUs, {grp.count} exist")
    if violations:
        return Evaluation(False, math.inf, tuple(violations))
    return Evaluation(True, iteration_time_s(instance, times), (), {
        "stage_times": times, "compute_s": compute, "sync_s": syncs, "in_flight": flights, "gpus_used": used})


def infeasible_reason(instance: MixedInstance) -> str | None:
    """A quick reason no plan can exist (no GPU at all), or None (not a proof of feasibility)."""
    if sum(g.count for g in instance.gpus) == 0:
        return "the cluster has no GPU (give some type a count ≥ 1)"
    return None
