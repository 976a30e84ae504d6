"""Data-parallel replicas across heterogeneous pipelines: data, plan, and ``evaluate``.

Symbols follow ``formulations/replicas.md``: island shape s has a_s islands available;
candidate pipeline c uses u_{c,s} islands of shape s, runs n micro-batches in
T_c(n) = f_c + (n − 1)·p_c seconds (1F1B: fill, then one bottleneck stage time per further
micro-batch) and syncs g_c gradient bytes per network endpoint at bandwidth w_c. N
micro-batches are split among the chosen replicas (each n_r ≥ 1, Σ n_r = N); the iteration
time is max_r T_r(n_r) + sync, the cross-replica ring all-reduce among R replicas
(0 for R = 1), whose ring runs at its slowest member: max_r of the cost model's
``ring_allreduce_s(g_r, R, w_r, α_hop)``, its launch latency kept at α_hop = 0 (``ring_s``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from hetopt.errors import InputError
from hetopt.result import Evaluation
from hetopt.units import GBPS, GIB  # noqa: F401  (GBPS re-exported: readers build shapes in Gb/s)


# Accepted ranges, checked by the constructor for files and code alike (the reader
# imports these names). They keep every derived figure finite and the integer scaling of
# the CP-SAT model inside int64 (see cpsat.py).

#: Most micro-batches N: the planner's largest global batch (2^20 samples) at one sample each.
MAX_MICROBATCHES = 2**20
#: Most island shapes: a shape is a kind of island (GPU type, size, links); a datacenter
#: has a handful, and the DP's state grows as the product of the counts.
MAX_SHAPES = 64
#: Most islands of one shape (4056 GPUs of the datacenter form 30 islands; 4096 leaves room
#: for one-node islands of a large cluster).
MAX_ISLANDS_PER_SHAPE = 4096
#: Most candidate pipelines (the planner builds tens to hundreds).
MAX_CANDIDATES = 10_000
#: Longest fill time f_c and per-micro-batch time p_c, seconds: a day is not one
#: micro-batch of any model. Keeps T_c(N) ≤ 86,400·(2^20 + 1) s, finite and, scaled by the
#: CP-SAT model's quantum, inside int64.
MAX_TIME_S = 86_400.0
#: Smallest fill time f_c, seconds (1 ns): a pipeline pass takes time.
MIN_FILL_S = 1e-9
#: Most gradient bytes per endpoint (1 PiB: beyond any model).
MAX_GRADIENT_BYTES = 2.0**50
#: Network bandwidth range, Gb/s: 1 kb/s (slower is a unit mistake) to 1 Pb/s.
MIN_GBPS, MAX_GBPS = 1e-6, 1e6
#: Ring step latency range, seconds: 0 (the bandwidth-only model) to 1 s.
MAX_HOP_LATENCY_S = 1.0

#: Default per-step latency of the cross-replica ring, seconds: replicas meet over the
#: network, so NCCL's ring/Simple network figure, ``hetopt.costmodel.HOP_LATENCY_S["network"]``
#: (a test checks the two agree; the cost model is not imported at module level because it
#: imports the catalogs, which import ``hetopt.io``, which imports this family's reader).
DEFAULT_HOP_LATENCY_S = 14.0e-6


def ring_s(nbytes: float, replicas: int, bandwidth: float, hop_latency_s: float) -> float:
    """The cross-replica ring all-reduce, seconds: 2(R − 1)/R · g/w + RING_BASE_LATENCY_S + 2(R − 1)·α_hop.

    0 for one replica. For α_hop > 0 it is the cost model's ``ring_allreduce_s``. At α_hop = 0
    the cost model drops the launch latency as well (its "bandwidth-only" switch for its own
    callers); here α_hop is a physical per-step latency, and a ring whose steps cost nothing
    still launches, so the launch latency stays and the iteration time is continuous in α_hop
    (issue 44: it jumped by 8.4 µs between 0 and 1e-12).

    Examples
    --------
    >>> ring_s(1e9, 4, 1e10, 0.0)  # 0.15 s of bandwidth + NCCL's 8.4 µs launch
    0.1500084
    >>> ring_s(1e9, 1, 1e10, 0.0)
    0.0
    """
    from hetopt.costmodel import RING_BASE_LATENCY_S, ring_allreduce_s  # see DEFAULT_HOP_LATENCY_S: not at module level

    if replicas <= 1:
        return 0.0
    if hop_latency_s > 0:
        return ring_allreduce_s(nbytes, replicas, bandwidth, hop_latency_s)
    return ring_allreduce_s(nbytes, replicas, bandwidth, 0.0) + RING_BASE_LATENCY_S


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _check_named(items: tuple, table: str, kind: type, limit: int) -> None:
    """``items`` (the ``[[table]]`` entries): one at least, at most ``limit``, each a ``kind`` with a
    non-empty name of its own."""
    if not items:
        raise InputError(f"{table}: is empty (give at least one [[{table}]] table)")
    if len(items) > limit:
        raise InputError(f"{table}: has {len(items)} entries, more than the limit of {limit}")
    seen: set[str] = set()
    for i, item in enumerate(items):
        key = f"{table}[{i}]"
        if not isinstance(item, kind):
            raise InputError(f"{key}: must be {'an' if kind.__name__[0] in 'AEIOU' else 'a'} {kind.__name__} "
                             f"(got {type(item).__name__})")
        if not isinstance(item.name, str) or not item.name:
            raise InputError(f"{key}.name: must be a non-empty string (got {item.name!r})")
        if item.name in seen:
            raise InputError(f"{key}.name: {item.name!r} is given twice ({table} names must be unique)")
        seen.add(item.name)


def _check_int(key: str, value, low: int, high: int, fix: str = "") -> None:
    if not _is_int(value):
        raise InputError(f"{key}: must be a whole number (got {value!r})")
    if not low <= value <= high:
        raise InputError(f"{key}: must be from {low} to {high} (got {value}){fix}")


def _check_real(key: str, value, low: float, high: float, unit: str, *, low_open: bool = False) -> None:
    if not _is_real(value):
        raise InputError(f"{key}: must be a finite number of {unit} (got {value!r})")
    if (value <= low if low_open else value < low) or value > high:
        rel = ">" if low_open else ">="
        raise InputError(f"{key}: must be {rel} {low:g} and <= {high:g} {unit} (got {value:g})")


@dataclass(frozen=True)
class IslandShape:
    """``count`` interchangeable islands of one shape.

    Parameters
    ----------
    name
        A label unique in the instance, e.g. "H100x64".
    count
        a_s, the islands of this shape available (0 is allowed: a shape no longer in service).
    gpu
        The GPU type (a label, shown in tables).
    gpus
        GPUs per island (shown in tables; the candidates' times already account for it).
    """

    name: str
    count: int
    gpu: str = ""
    gpus: int = 1


@dataclass(frozen=True)
class Candidate:
    """A candidate pipeline: the islands it uses, its 1F1B time, its sync traffic.

    Parameters
    ----------
    name
        A label (unique in the instance).
    uses
        u_c: islands of each shape it uses, in the instance's shape order (at least one).
    fill_s
        f_c = T_c(1): seconds of one micro-batch through the whole pipeline.
    per_microbatch_s
        p_c: seconds each further micro-batch adds (the bottleneck stage), so that
        T_c(n) = f_c + (n − 1)·p_c.
    gradient_bytes
        g_c: gradient bytes each network endpoint of the replica all-reduces with the others.
    bandwidth
        w_c: bytes/s of those endpoints' network links.
    stages
        A description of the pipeline (its stages), shown in tables; no effect on the solve.
    """

    name: str
    uses: tuple[int, ...]
    fill_s: float
    per_microbatch_s: float
    gradient_bytes: float
    bandwidth: float
    stages: str = ""

    def time(self, n: int) -> float:
        """T_c(n), seconds for n ≥ 1 micro-batches (the formula ``evaluate`` uses).

        Examples
        --------
        >>> Candidate("a", (1,), 2.0, 0.5, 0.0, 1e9).time(3)
        3.0
        """
        return self.fill_s + (n - 1) * self.per_microbatch_s

    @property
    def sync_ratio(self) -> float:
        """ρ_c = g_c / w_c: seconds its share of a ring all-reduce costs per unit of 2(R − 1)/R."""
        return self.gradient_bytes / self.bandwidth


@dataclass(frozen=True)
class ReplicasInstance:
    """One replicas instance (SI units: seconds, bytes, bytes/s).

    The constructor checks every field and raises ``InputError("key.path: problem (fix)")``
    naming the file's key (``candidate[2].uses``).

    Examples
    --------
    >>> inst = ReplicasInstance("x", 4, (IslandShape("A", 2),),
    ...                         (Candidate("a", (1,), 1.0, 0.5, 1e9, 1e10),))
    >>> inst.num_shapes, inst.max_replicas
    (1, 2)
    """

    name: str
    microbatches: int
    shapes: tuple[IslandShape, ...]
    candidates: tuple[Candidate, ...]
    hop_latency_s: float = DEFAULT_HOP_LATENCY_S

    problem = "replicas"

    def __post_init__(self) -> None:
        for key in ("shapes", "candidates"):
            value = getattr(self, key)
            if isinstance(value, list):  # a list from code becomes the tuple a frozen value needs
                object.__setattr__(self, key, tuple(value))
        self._validate()

    def _validate(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"name: must be a non-empty string (got {self.name!r})", field="name")
        _check_int("microbatches", self.microbatches, 1, MAX_MICROBATCHES, " (the global batch in micro-batches)")
        _check_real("hop_latency_s", self.hop_latency_s, 0.0, MAX_HOP_LATENCY_S, "seconds")
        _check_named(self.shapes, "shape", IslandShape, MAX_SHAPES)
        for i, s in enumerate(self.shapes):
            key = f"shape[{i}]"
            _check_int(f"{key}.count", s.count, 0, MAX_ISLANDS_PER_SHAPE)
            _check_int(f"{key}.gpus", s.gpus, 1, 2**20)
            if not isinstance(s.gpu, str):
                raise InputError(f"{key}.gpu: must be a string (got {s.gpu!r})")
        _check_named(self.candidates, "candidate", Candidate, MAX_CANDIDATES)
        for i, c in enumerate(self.candidates):
            key = f"candidate[{i}]"
            if isinstance(c.uses, list):
                object.__setattr__(c, "uses", tuple(c.uses))
            if not isinstance(c.uses, tuple) or len(c.uses) != len(self.shapes):  # only from code: files name shapes
                raise InputError(f"{key}.uses: must list one count per shape ({len(self.shapes)}: "
                                 f"{', '.join(s.name for s in self.shapes)}; got {c.uses!r})")
            for s, u in enumerate(c.uses):
                _check_int(f"{key}.uses.{self.shapes[s].name}", u, 0, MAX_ISLANDS_PER_SHAPE)
            if sum(c.uses) < 1:
                raise InputError(f"{key}.uses: uses no island (a pipeline runs on at least one island)")
            _check_real(f"{key}.fill_s", c.fill_s, MIN_FILL_S, MAX_TIME_S, "seconds")
            _check_real(f"{key}.per_microbatch_s", c.per_microbatch_s, 0.0, MAX_TIME_S, "seconds")
            if c.per_microbatch_s > c.fill_s:
                raise InputError(f"{key}.per_microbatch_s: {c.per_microbatch_s:g} s exceeds fill_s {c.fill_s:g} s "
                                 "(in 1F1B the bottleneck stage is part of the fill: p ≤ f)")
            # messages in the file's units (GiB, Gb/s), under the file's keys
            if not _is_real(c.gradient_bytes):
                raise InputError(f"{key}.gradient_gib: must be a finite number of GiB (got {c.gradient_bytes!r} bytes)")
            _check_real(f"{key}.gradient_gib", c.gradient_bytes / GIB, 0.0, MAX_GRADIENT_BYTES / GIB, "GiB")
            if not _is_real(c.bandwidth):
                raise InputError(f"{key}.bandwidth_gbps: must be a finite number of Gb/s (got {c.bandwidth!r} bytes/s)")
            _check_real(f"{key}.bandwidth_gbps", c.bandwidth / GBPS, MIN_GBPS, MAX_GBPS, "Gb/s")

    @property
    def num_shapes(self) -> int:
        """The number of island shapes."""
        return len(self.shapes)

    @cached_property
    def counts(self) -> tuple[int, ...]:
        """a_s, islands available per shape."""
        return tuple(s.count for s in self.shapes)

    def copies(self, c: int) -> int:
        """K_c: the most copies of candidate c the islands (and N) allow."""
        uses = self.candidates[c].uses
        return min([self.microbatches] + [a // u for a, u in zip(self.counts, uses) if u > 0])

    @cached_property
    def max_replicas(self) -> int:
        """An upper bound on R: no more replicas than micro-batches or islands."""
        return min(self.microbatches, sum(self.counts))

    def sync_s(self, chosen: Sequence[int]) -> float:
        """The cross-replica all-reduce of the candidates ``chosen`` (one entry per replica).

        max over replicas r of ``ring_allreduce_s(g_r, R, w_r, α_hop)`` (``ring_s`` here); 0 for R ≤ 1.
        """
        replicas = len(chosen)
        if replicas <= 1:
            return 0.0
        return max(ring_s(self.candidates[c].gradient_bytes, replicas, self.candidates[c].bandwidth,
                          self.hop_latency_s) for c in set(chosen))


@dataclass(frozen=True)
class Replica:
    """One replica of a plan: candidate index and the micro-batches it runs."""

    candidate: int
    microbatches: int


@dataclass(frozen=True)
class ReplicasSolution:
    """The chosen replicas (candidate, micro-batches), ordered by candidate index.

    ``names`` and ``times`` are filled by :func:`build_solution` for display; ``evaluate``
    recomputes everything from ``replicas``.
    """

    replicas: tuple[Replica, ...]
    names: tuple[str, ...] = ()
    times: tuple[float, ...] = ()
    sync_s: float = 0.0
    islands: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """Plain data for JSON."""
        return {
            "replicas": [
                {"candidate": r.candidate, "name": name, "islands": isl, "microbatches": r.microbatches, "time_s": t}
                for r, name, isl, t in zip(self.replicas, self.names, self.islands, self.times)
            ],
            "sync_s": self.sync_s,
        }

    def rows(self) -> list[dict]:
        """One row per replica for the human-readable table."""
        return [
            {"replica": k, "candidate": name, "islands": isl, "micro-batches": r.microbatches, "time s": t}
            for k, (r, name, isl, t) in enumerate(zip(self.replicas, self.names, self.islands, self.times))
        ]

    def summary(self) -> list[str]:
        """A few lines under the table."""
        slowest = max(self.times) if self.times else 0.0
        return [f"{len(self.replicas)} replicas; slowest {slowest:.6g} s + sync {self.sync_s:.6g} s"]


def build_solution(instance: ReplicasInstance, replicas: Sequence[tuple[int, int]]) -> ReplicasSolution:
    """A ReplicasSolution from (candidate, micro-batches) pairs, sorted by candidate.

    Examples
    --------
    >>> inst = ReplicasInstance("x", 4, (IslandShape("A", 2),),
    ...                         (Candidate("a", (1,), 1.0, 0.5, 1e9, 1e10),))
    >>> build_solution(inst, [(0, 1), (0, 3)]).times
    (1.0, 2.0)
    """
    ordered = sorted((int(c), int(n)) for c, n in replicas)
    chosen = [c for c, _ in ordered]
    return ReplicasSolution(
        replicas=tuple(Replica(c, n) for c, n in ordered),
        names=tuple(instance.candidates[c].name for c in chosen),
        times=tuple(instance.candidates[c].time(n) for c, n in ordered),
        sync_s=instance.sync_s(chosen),
        islands=tuple(describe_uses(instance, c) for c in chosen),
    )


def describe_uses(instance: ReplicasInstance, c: int) -> str:
    """The islands candidate c uses, e.g. "A100x8×1 + V100x8×2"."""
    return " + ".join(f"{s.name}×{u}" for s, u in zip(instance.shapes, instance.candidates[c].uses) if u)


def evaluate(instance: ReplicasInstance, solution: ReplicasSolution) -> Evaluation:
    """Check a plan and recompute its iteration time: the single source of truth.

    Examples
    --------
    >>> inst = ReplicasInstance("x", 4, (IslandShape("A", 2),),
    ...                         (Candidate("a", (1,), 1.0, 0.5, 1e9, 1e10),), hop_latency_s=0.0)
    >>> ev = evaluate(inst, build_solution(inst, [(0, 2), (0, 2)]))
    >>> ev.feasible, ev.objective  # max(1.5, 1.5) + 2·1/2·1e9/1e10 + the ring's launch, 8.4 µs
    (True, 1.6000084)
    """
    violations: list[str] = []
    replicas = solution.replicas
    if not replicas:
        violations.append("no replica is chosen")
    used = [0] * instance.num_shapes
    total = 0
    for k, r in enumerate(replicas):
        if not _is_int(r.candidate) or not 0 <= r.candidate < len(instance.candidates):
            violations.append(f"replica {k}: unknown candidate index {r.candidate!r}")
            continue
        if not _is_int(r.microbatches) or r.microbatches < 1:
            violations.append(f"replica {k}: must run at least one micro-batch (got {r.microbatches!r})")
            continue
        total += r.microbatches
        for s, u in enumerate(instance.candidates[r.candidate].uses):
            used[s] += u
    for s, (u, shape) in enumerate(zip(used, instance.shapes)):
        if u > shape.count:
            violations.append(f"shape {shape.name}: the replicas use {u} islands, {shape.count} are available")
    if not violations and total != instance.microbatches:
        violations.append(f"the replicas run {total} micro-batches, the instance has {instance.microbatches}")
    if violations:
        return Evaluation(False, math.inf, tuple(violations))
    times = [instance.candidates[r.candidate].time(r.microbatches) for r in replicas]
    sync = instance.sync_s([r.candidate for r in replicas])
    slowest = max(times)
    return Evaluation(True, slowest + sync, (), {"times_s": times, "slowest_s": slowest, "sync_s": sync,
                                                 "islands_used": used})


def usable_candidates(instance: ReplicasInstance) -> list[int]:
    """The candidates whose islands are available at least once."""
    return [c for c in range(len(instance.candidates)) if instance.copies(c) >= 1]


def infeasible_reason(instance: ReplicasInstance) -> str | None:
    """Why no plan exists (no candidate fits the islands available), or None.

    Examples
    --------
    >>> inst = ReplicasInstance("x", 4, (IslandShape("A", 2),), (Candidate("big", (3,), 1.0, 0.5, 0.0, 1e9),))
    >>> infeasible_reason(inst)
    "no candidate pipeline fits the islands available: 'big' needs 3 islands of shape A, 2 exist (add islands, or candidates on fewer)"
    """
    if usable_candidates(instance):
        return None
    c = instance.candidates[0]
    s = next(s for s, (u, a) in enumerate(zip(c.uses, instance.counts)) if u > a)
    more = f" (and {len(instance.candidates) - 1} more candidates do not fit either)" if len(instance.candidates) > 1 else ""
    return (f"no candidate pipeline fits the islands available: {c.name!r} needs {c.uses[s]} islands of shape "
            f"{instance.shapes[s].name}, {instance.counts[s]} exist{more} (add islands, or candidates on fewer)")
