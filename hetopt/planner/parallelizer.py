"""Tangram's parallelizer interface (its Table 2) and the data that crosses it.

A parallelizer turns a *slice* (consecutive layers of the model) on an *island*
(homogeneous GPUs) into *partial plans*: small pipelines whose stages the pipeline
composition can chain. Anyone can plug in another parallelizer by implementing
:class:`Parallelizer`; :mod:`hetopt.planner.builtin` is the built-in one.

Everything here is a frozen dataclass of plain data, so it crosses process and Dask
boundaries (pickled) unchanged. A slice's :attr:`Slice.signature` is a SHA-256 of its
atoms' shapes, stable across processes (Python's ``hash`` of strings is not), so two
slices with the same layers get the same signature wherever they are built.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol, runtime_checkable

from hetopt import costmodel as cm
from hetopt.costmodel.running import Running
from hetopt.costmodel.stage import StageCost
from hetopt.hardware import GpuType
from hetopt.pipeline.problem import MEMORY_RTOL, PipelineOption, StagePlan, most_in_flight
from hetopt.pipeline.problem import PipelineIsland
from hetopt.workload import ModelConfig

#: Hex digits of the SHA-256 kept as a signature: 64 bits, no collision among the few
#: thousand distinct slices of any model.
SIGNATURE_HEX_DIGITS = 16


@dataclass(frozen=True)
class Atom:
    """The smallest unit a slice is made of: ``layers`` consecutive layers from ``first_layer``.

    The model's first atom carries the input embedding (``embedding``), its last the
    output head (``head``). ``seq`` is the training sequence length.
    """

    model: ModelConfig
    seq: int
    first_layer: int
    layers: int
    embedding: bool = False
    head: bool = False

    @property
    def shape(self) -> tuple:
        """What the cost depends on (not where the atom sits): equal shapes, equal costs."""
        m = self.model
        moe = tuple(m.is_moe_layer(i) for i in range(self.first_layer, self.first_layer + self.layers))
        return (
            m.architecture, m.hidden, m.heads, m.attention_width, m.kv_width, m.ffn, m.expert_ffn,
            m.experts, m.top_k, self.seq, self.layers, moe,
            # vocabulary, positions and tying matter only where the embedding or head is
            (m.vocab, m.sequence, m.tied_embeddings) if self.embedding or self.head else None,
            self.embedding, self.head,
        )


@dataclass(frozen=True)
class Slice:
    """Consecutive atoms of one model; built by :func:`concatenate`."""

    atoms: tuple[Atom, ...]

    def __post_init__(self) -> None:
        if not self.atoms:
            raise ValueError("a slice needs at least one atom")
        for a, b in zip(self.atoms, self.atoms[1:]):
            if b.model != a.model or b.seq != a.seq:
                raise ValueError("the atoms of a slice must come from one model and sequence length")
            if b.first_layer != a.first_layer + a.layers:
                raise ValueError(
                    f"atoms are not consecutive: layers {a.first_layer}..{a.first_layer + a.layers - 1} "
                    f"then {b.first_layer}..{b.first_layer + b.layers - 1}"
                )

    @property
    def model(self) -> ModelConfig:
        return self.atoms[0].model

    @property
    def seq(self) -> int:
        return self.atoms[0].seq

    @property
    def first_layer(self) -> int:
        return self.atoms[0].first_layer

    @property
    def layers(self) -> int:
        """Number of layers in the slice."""
        return sum(a.layers for a in self.atoms)

    @property
    def embedding(self) -> bool:
        """Whether the slice holds the input embedding (it starts the model)."""
        return self.atoms[0].embedding

    @property
    def head(self) -> bool:
        """Whether the slice holds the output head (it ends the model)."""
        return self.atoms[-1].head

    @property
    def role(self) -> str:
        """The pipeline role the slice implies: whole, first, last or middle."""
        return {(True, True): "whole", (True, False): "first", (False, True): "last"}.get((self.embedding, self.head), "middle")

    @cached_property
    def signature(self) -> str:
        """A stable hash of the atoms' shapes: equal for slices with equal layers.

        Examples
        --------
        >>> cfg = ModelConfig("x", "gpt", 6, 1024, 16, 4096, 50257, 1024)
        >>> atoms = slice_model(cfg)
        >>> a = concatenate(atoms[1], atoms[2]); b = concatenate(atoms[3], atoms[4])
        >>> a.signature == b.signature, a.signature == concatenate(atoms[0], atoms[1]).signature
        (True, False)
        """
        text = repr(tuple(a.shape for a in self.atoms)).encode()
        return hashlib.sha256(text).hexdigest()[:SIGNATURE_HEX_DIGITS]


def slice_model(model: ModelConfig, *, seq: int | None = None, layers_per_atom: int = 1) -> tuple[Atom, ...]:
    """Cut a model into atoms of ``layers_per_atom`` consecutive layers (the last may be shorter).

    Examples
    --------
    >>> atoms = slice_model(ModelConfig("x", "gpt", 5, 1024, 16, 4096, 50257, 1024), layers_per_atom=2)
    >>> [(a.first_layer, a.layers, a.embedding, a.head) for a in atoms]
    [(0, 2, True, False), (2, 2, False, False), (4, 1, False, True)]
    """
    seq = model.sequence if seq is None else seq
    if seq < 1:
        raise ValueError(f"sequence length must be >= 1 (got {seq})")
    if layers_per_atom < 1:
        raise ValueError(f"layers per atom must be >= 1 (got {layers_per_atom})")
    starts = range(0, model.layers, layers_per_atom)
    return tuple(
        Atom(model, seq, f, min(layers_per_atom, model.layers - f), embedding=f == 0, head=f + layers_per_atom >= model.layers)
        for f in starts
    )


def concatenate(a: Atom | Slice, b: Atom | Slice) -> Slice:
    """The slice of ``a`` followed by ``b`` (which must start where ``a`` ends).

    Raises
    ------
    ValueError
        When ``b`` does not follow ``a`` in the same model.
    """
    left = a.atoms if isinstance(a, Slice) else (a,)
    right = b.atoms if isinstance(b, Slice) else (b,)
    return Slice(left + right)


def as_slice(x: Atom | Slice) -> Slice:
    """An atom as a one-atom slice; a slice unchanged."""
    return x if isinstance(x, Slice) else Slice((x,))


@dataclass(frozen=True)
class IslandSpec:
    """An island of ``nodes`` × ``gpus_per_node`` GPUs of one type.

    ``intra_bandwidth``: bytes/s per GPU per direction inside a node (defaults to the
    catalog's ``intra_gbs``); ``inter_bandwidth``: bytes/s of one node's network inside the
    island (needed only when ``nodes`` > 1).
    """

    name: str
    gpu: GpuType
    nodes: int
    gpus_per_node: int
    inter_bandwidth: float = 0.0
    intra_bandwidth: float | None = None
    #: the node's GPUs reach each other peer to peer (None: the catalog's default by link,
    #: ``cm.intra_link_efficiency``: PCIe GPUs go through host memory)
    p2p: bool | None = None
    #: how NCCL crosses the network between the island's nodes, "tcp" or "rdma" (None: by the
    #: node's bandwidth, ``cm.network_efficiency``)
    transport: str | None = None
    #: memory per GPU, bytes: its nodes' ``memory_gib`` (ECC, MIG slices, a GPU shared with
    #: others; the least of the island's nodes); None: the catalog's
    memory: float | None = None

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError(f"island {self.name!r}: nodes and GPUs per node must be >= 1")
        if self.intra_bandwidth is None:
            object.__setattr__(self, "intra_bandwidth", self.gpu.intra_bandwidth)
        if not self.intra_bandwidth > 0:
            raise ValueError(f"island {self.name!r}: intra-node bandwidth must be > 0 bytes/s")
        if self.nodes > 1 and not self.inter_bandwidth > 0:
            raise ValueError(f"island {self.name!r}: {self.nodes} nodes need an inter-node bandwidth > 0 bytes/s")

    @property
    def gpus(self) -> int:
        """All GPUs of the island."""
        return self.nodes * self.gpus_per_node

    @property
    def sustained_flops(self) -> float:
        """FLOP/s no stage of the island exceeds: its GPUs × ``GpuType.sustained_flops``."""
        return self.gpus * self.gpu.sustained_flops

    @property
    def intra_achieved(self) -> float:
        """Bytes/s per GPU per direction that NCCL achieves inside a node (``cm.intra_link_efficiency``)."""
        return self.intra_bandwidth * cm.intra_link_efficiency(self.gpu.intra_link, self.p2p)

    @property
    def inter_achieved(self) -> float:
        """Bytes/s that NCCL achieves over one node's network (``cm.network_efficiency``)."""
        return self.inter_bandwidth * cm.network_efficiency(self.inter_bandwidth, self.transport)

    @property
    def memory_bytes(self) -> float:
        """Memory per GPU, bytes: the capacity every stage on the island must fit (``memory``, else the catalog's)."""
        return self.gpu.memory_bytes if self.memory is None else self.memory

    def to_island(self) -> PipelineIsland:
        """The pipeline family's view of the island (name, GPUs, memory per GPU)."""
        return PipelineIsland(self.name, self.gpus, self.memory_bytes)


@dataclass(frozen=True)
class SliceProfile:
    """What a slice demands of an island, independent of the layout.

    Per sample: ``forward_flops``, ``training_flops`` (forward + backward, no
    recomputation). ``parameters`` and ``state_bytes`` (16 bytes each) of the slice;
    ``island_flops`` the island's sustained FLOP/s (GPUs × peak × e);
    ``ideal_time_per_sample_s`` = training FLOPs / island FLOP/s, the compute demand;
    ``min_bytes_per_gpu``: a lower bound on any layout's memory per GPU (the training
    state spread over every GPU, as ZeRO-3 over the whole island would).
    """

    signature: str
    island: str
    layers: int
    forward_flops: float
    training_flops: float
    parameters: int
    state_bytes: float
    island_flops: float
    ideal_time_per_sample_s: float
    min_bytes_per_gpu: float
    memory_bytes: float


def in_flight_fit(stage: StageCost, capacity_bytes: float, microbatches: int) -> int | None:
    """The most micro-batches ``stage`` may hold at once within ``capacity_bytes`` per GPU.

    None when all M fit, -1 when not even its static bytes fit; exact at the boundary
    (floating-point rounding of the quotient is corrected by stepping).

    >>> st = StageCost(1, 0.1, 0.2, static_bytes=4.0, activation_bytes=2.0, gpus=1)
    >>> in_flight_fit(st, 9.0, 8), in_flight_fit(st, 40.0, 8), in_flight_fit(st, 3.0, 8)
    (2, None, -1)
    """
    # the pipeline family's one memory rule, so a parallelizer keeps exactly what the composition accepts
    f = most_in_flight(stage.static_bytes, stage.activation_bytes, capacity_bytes, microbatches)
    return None if f >= microbatches else f


def limit_from_fits(fits: Sequence[int | None]) -> int | None:
    """:func:`behind_limit` from every stage's :func:`in_flight_fit`, front to back."""
    n = len(fits)
    limit: int | None = None
    for q, f in enumerate(fits):
        if f is None:
            continue
        if f < 0:
            return -1
        b = f - (n - q)
        limit = b if limit is None else min(limit, b)
    return None if limit is None else max(limit, -1)


def behind_limit(stages: tuple[StageCost, ...], capacity_bytes: float, microbatches: int) -> int | None:
    """The most stages that may follow these stages in a 1F1B pipeline (None: any number; -1: none fit).

    Stage q of n with b stages behind the block holds min(b + n − q, M) micro-batches;
    the rule of ``formulations/pipeline.md`` ("The stages-behind limit"). For another
    parallelizer's ``PartialPlan.behind``; the built-in one combines the same two helpers.

    >>> st = StageCost(1, 0.1, 0.2, static_bytes=4.0, activation_bytes=2.0, gpus=1)
    >>> behind_limit((st, st), 9.0, 8), behind_limit((st,), 40.0, 8), behind_limit((st,), 3.0, 8)
    (0, None, -1)
    """
    return limit_from_fits([in_flight_fit(st, capacity_bytes, microbatches) for st in stages])


def held_gpus(specs: Sequence[IslandSpec], islands: Iterable[int]) -> dict[str, int]:
    """The GPUs a plan holds, by type: every GPU of the islands it runs on (``answer.plan_cost``).

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> cat = load_gpus()
    >>> specs = [IslandSpec("a", cat["A100-SXM4-40GB"], 1, 8), IslandSpec("v", cat["V100-SXM2-16GB"], 2, 4, 1e9)]
    >>> held_gpus(specs, {1})
    {'V100-SXM2-16GB': 8}
    """
    held: dict[str, int] = {}
    for i in sorted(islands):
        held[specs[i].gpu.name] = held.get(specs[i].gpu.name, 0) + specs[i].gpus
    return held


@dataclass(frozen=True)
class PartialPlan:
    """A layout of a slice on an island: a small pipeline of ``stages``.

    Layout: ``tp`` (inside a node), ``pp`` inner stages, ``dp`` replicas of every stage
    (each gets microbatch_size / dp samples), ``recompute``, ``zero_stage``,
    ``sequence_parallel``; ``ep`` experts' parallel degree (``fsep``: fully sharded), ``cp``
    context-parallel degree (a stage has tp·cp·dp GPUs), ``offload`` activations to the host. ``behind`` is :func:`behind_limit` at the ``capacity_bytes`` and
    ``microbatches`` it was computed for.
    """

    island: str
    signature: str
    first_layer: int
    layers: int
    role: str
    tp: int
    pp: int
    dp: int
    microbatch_size: int
    microbatches: int
    recompute: str
    zero_stage: int
    sequence_parallel: bool
    stages: tuple[StageCost, ...]
    capacity_bytes: float
    behind: int | None
    #: Virtual stages per GPU (Megatron's interleaved 1F1B); > 1 only for a whole-model plan,
    #: whose ``stages`` are then as the 1F1B closed form must see them (builtin.interleaved_stages).
    vpp: int = 1
    ep: int = 1
    fsep: bool = False
    cp: int = 1
    offload: bool = False
    #: on the query's overall Pareto set; False for a plan kept only as the best of a ``target``
    #: runtime's job-wide group (``builtin._target_groups``), which the unrestricted composition skips
    front: bool = field(default=True, compare=False)
    #: the ``target`` runtime's job-wide group of this plan as the query found it (None: the
    #: runtime cannot run it; unset without a target), so the composition need not ask again
    launch_group: tuple | None | str = field(default="unset", compare=False)

    @property
    def gpus(self) -> int:
        """GPUs the plan uses (the stages use disjoint GPUs)."""
        return sum(s.gpus for s in self.stages)

    @property
    def total_time_s(self) -> float:
        """Σ t over the stages."""
        return sum(s.time_s for s in self.stages)

    @property
    def max_time_s(self) -> float:
        """The slowest stage's t."""
        return max(s.time_s for s in self.stages)

    @property
    def peak_bytes(self) -> float:
        """Largest per-GPU memory with nothing behind the plan (stage q holds min(pp − q, M))."""
        n = len(self.stages)
        return max(s.static_bytes + s.activation_bytes * min(n - q, self.microbatches) for q, s in enumerate(self.stages))

    @property
    def iteration_time_s(self) -> float:
        """1F1B time of this plan alone: Σ t + (M − 1) · max t."""
        return self.total_time_s + (self.microbatches - 1) * self.max_time_s

    @property
    def layout(self) -> str:
        """A short description, e.g. ``tp2 pp3 dp2 selective zero1 sp`` (``ep4 fsep``, ``cp2``, ``offload`` when used)."""
        sp = " sp" if self.sequence_parallel and self.tp > 1 else ""
        vpp = f" vpp{self.vpp}" if self.vpp > 1 else ""
        more = (f" ep{self.ep}" + (" fsep" if self.fsep else "")) if self.ep > 1 else ""
        more += f" cp{self.cp}" if self.cp > 1 else ""
        more += " offload" if self.offload else ""
        return f"tp{self.tp} pp{self.pp}{vpp} dp{self.dp} {self.recompute} zero{self.zero_stage}{sp}{more}"

    def to_option(self, island_index: int, role: str | None = None) -> PipelineOption:
        """The pipeline family's option for this plan on island number ``island_index``.

        ``role`` defaults to the slice's own (:attr:`Slice.role`).
        """
        stages = tuple(StagePlan(s.layers, s.forward_s, s.backward_s, s.static_bytes, s.activation_bytes, s.gpus) for s in self.stages)
        return PipelineOption(island_index, self.layers, stages, self.role if role is None else role)


@runtime_checkable
class Parallelizer(Protocol):
    """Tangram's parallelizer interface (Table 2).

    ``slice_model`` cuts a model into atoms; ``concatenate`` joins two adjacent atoms or
    slices; ``profile`` states a slice's demand on an island; ``parallelize`` returns the
    partial plans worth composing (memory-feasible with nothing behind them, and none
    dominated by another). Implementations must be picklable (queries run in worker
    processes or on Dask workers) and deterministic.
    """

    #: How the framework runs what it prices (:class:`~hetopt.costmodel.running.Running`): the
    #: planner saves it with the plan, and the alternatives are priced under it.
    running: Running
    #: Bytes per GPU no layout may use (the CUDA context, NCCL's buffers, fragmentation).
    reserved_bytes: float

    def slice_model(self, model: ModelConfig, *, seq: int | None = None) -> tuple[Atom, ...]: ...

    def concatenate(self, a: Atom | Slice, b: Atom | Slice) -> Slice: ...

    def profile(self, slice: Slice, island: IslandSpec) -> SliceProfile: ...

    def parallelize(
        self,
        slice: Slice,
        island: IslandSpec,
        *,
        microbatch_size: int,
        microbatches: int,
        global_batch: int,
        memory_fraction: float = 1.0,
    ) -> tuple[PartialPlan, ...]: ...


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n`` in increasing order (tensor/data-parallel degrees, batch splits).

    O(√n) trials: a global batch may be up to 2**20 and the API is called with larger values
    before they are refused, so a scan to n would be a hang, not a check.

    >>> divisors(12)
    [1, 2, 3, 4, 6, 12]
    >>> divisors(2**40)[-1]
    1099511627776
    """
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


__all__ = [
    "Atom",
    "IslandSpec",
    "MEMORY_RTOL",
    "Parallelizer",
    "PartialPlan",
    "Slice",
    "SliceProfile",
    "StageCost",
    "as_slice",
    "behind_limit",
    "in_flight_fit",
    "limit_from_fits",
    "concatenate",
    "divisors",
    "held_gpus",
    "slice_model",
]
