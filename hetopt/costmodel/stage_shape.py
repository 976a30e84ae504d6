"""What a pipeline stage is, before its price: the island and the slice as the cost model reads
them (:class:`IslandLike`, :class:`SliceLike`), the layout (:class:`Layout`), the model's
per-layer figures as prefix sums (:class:`LayerTable`), where a stage's GPUs sit on the island's
nodes (:func:`stage_offset`, :func:`stage_nodes`, :func:`expert_locality`) and what a price holds
(:class:`StageCost`). :mod:`hetopt.costmodel.stage` prices a stage from these and re-exports
them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from itertools import accumulate
from typing import Protocol

from hetopt import costmodel as cm
from hetopt.hardware import GpuType
from hetopt.parallelism import expert as ex
from hetopt.workload import ModelConfig

class IslandLike(Protocol):
    """What pricing reads of an island (``hetopt.planner.parallelizer.protocol.IslandSpec``)."""

    gpu: GpuType
    nodes: int
    gpus_per_node: int
    intra_achieved: float  # bytes/s per GPU inside a node, as NCCL achieves it
    inter_achieved: float  # bytes/s of one node's network, as NCCL achieves it
    inter_bandwidth: float  # bytes/s of one node's network, its datasheet figure
    transport: str | None  # "rdma", "tcp" or None (by the bandwidth: cm.is_rdma)


class SliceLike(Protocol):
    """What pricing reads of a model slice (``hetopt.planner.parallelizer.protocol.Slice``)."""

    model: ModelConfig
    seq: int
    first_layer: int
    layers: int
    embedding: bool  # the slice holds the input embedding
    head: bool  # the slice holds the output head


@dataclass(frozen=True)
class StageCost:
    """One inner stage: ``layers`` layers on ``gpus`` GPUs; per micro-batch times, per-GPU bytes."""

    layers: int
    forward_s: float
    backward_s: float
    static_bytes: float
    activation_bytes: float
    gpus: int
    #: the host's time to issue the layers' ops, not their kernels, set its forward or backward
    #: (``cm.host_floor_s``)
    host_bound: bool = False
    #: the terms of this price taken from a measured profile (``price_stage``'s ``measured``;
    #: ``hetopt.profile.measured.TERMS``); () when the analytic model priced it all
    measured: tuple[str, ...] = ()

    @property
    def time_s(self) -> float:
        return self.forward_s + self.backward_s


class StageGpus:
    """The GPUs of one stage of a layout record with ``tp``, ``cp`` and ``dp``: t·c·d (the cost
    model's :class:`Layout`, the runtimes' ``hetopt.runtimes.Shape``, the exporters'
    ``hetopt.export.source.Layout``)."""

    __slots__ = ()

    @property
    def stage_gpus(self) -> int:
        """GPUs of one stage: t·c·d."""
        return self.tp * self.cp * self.dp


@dataclass(frozen=True)
class Layout(StageGpus):
    """A layout: t, p, d, the layer split, recomputation, ZeRO stage, virtual stages; EP degree
    (with or without FSEP), CP degree and activation offloading (``hetopt.parallelism``). A
    stage has t·c·d GPUs."""

    tp: int
    pp: int
    dp: int
    split: tuple[int, ...]
    recompute: str
    zero_stage: int
    vpp: int = 1  # virtual stages per GPU (Megatron's interleaved 1F1B); > 1 only for whole models
    ep: int = 1
    fsep: bool = False
    cp: int = 1
    offload: bool = False


@dataclass(frozen=True)
class LayerTable:
    """Per-layer quantities of a slice as prefix sums (index j = first j layers of the slice)."""

    forward: tuple[float, ...]  # FLOPs per sample
    scores: tuple[float, ...]  # attention-score FLOPs per sample
    params: tuple[float, ...]
    sharded: tuple[float, ...]  # TP-sharded activation bytes per token
    sharded_each: tuple[float, ...]  # the same, per layer (for the recomputed layer's peak)
    ew_wide: tuple[float, ...]  # memory-bound forward bytes per token, h-wide kernels
    ew_sharded: tuple[float, ...]  # memory-bound forward bytes per token, TP-sharded kernels
    tensors: tuple[int, ...]  # parameter tensors (ZeRO-3 collectives per pass)
    kinds: tuple[int, ...]  # per layer, an id of everything its price depends on (memo key)
    run_end: tuple[int, ...]  # run_end[j]: where the run of layers of kind kinds[j] from j ends
    # MoE layers (all zero for a dense model): expert GEMM FLOPs per sample, expert parameters
    expert: tuple[float, ...] = (0.0,)
    expert_params: tuple[float, ...] = (0.0,)
    expert_params_each: tuple[float, ...] = ()
    moe: tuple[int, ...] = (0,)
    # the GEMMs' operand elements per token (``cm.gemm_operand_widths``; experts': per routed token)
    gemm_wide: tuple[float, ...] = (0.0,)
    gemm_sharded: tuple[float, ...] = (0.0,)
    expert_wide: tuple[float, ...] = (0.0,)
    expert_sharded: tuple[float, ...] = (0.0,)
    # bytes per activation element the byte figures above count (cm.element_bytes of the precision)
    element_bytes: int = cm.ACTIVATION_BYTES


def layer_table(sl: SliceLike, kind_ids: dict[tuple, int] | None = None, *, flash: bool = False,
                element_bytes: int = cm.ACTIVATION_BYTES) -> LayerTable:
    """The slice's prefix sums; ``kind_ids`` numbers the distinct per-layer figures (a memo);
    ``element_bytes`` per activation element (``cm.element_bytes`` of the run's precision)."""
    kind_ids = {} if kind_ids is None else kind_ids
    cfg, s = sl.model, sl.seq
    idx = range(sl.first_layer, sl.first_layer + sl.layers)
    forward = [cm.layer_forward_flops(cfg, s, i) for i in idx]
    params = [float(cm.layer_parameters(cfg, i)) for i in idx]
    sharded = [cm.sharded_activation_widths(cfg, i, element_bytes=element_bytes) for i in idx]
    ew = [cm.elementwise_widths(cfg, s, i, flash=flash, element_bytes=element_bytes) for i in idx]
    operands = [cm.gemm_operand_widths(cfg, i) for i in idx]
    expert_operands = [ex.expert_operand_widths(cfg, i) for i in idx]

    def pre(xs):
        return tuple(accumulate(xs, initial=0.0))

    # a layer's price depends on its index only through these (experts or not)
    kinds = tuple(
        kind_ids.setdefault(kind, len(kind_ids)) for kind in zip(forward, params, sharded, (cfg.is_moe_layer(i) for i in idx))
    )
    run_end = [len(kinds)] * len(kinds)  # run_end[j]: end of the run of equal kinds starting at j
    for j in range(len(kinds) - 2, -1, -1):
        run_end[j] = run_end[j + 1] if kinds[j] == kinds[j + 1] else j + 1
    return LayerTable(
        forward=pre(forward), scores=pre(cm.attention_score_flops(cfg, s) for _ in idx), params=pre(params),
        sharded=pre(sharded), sharded_each=tuple(sharded), ew_wide=pre(w for w, _ in ew), ew_sharded=pre(x for _, x in ew),
        tensors=tuple(accumulate((cm.parameter_tensors(cfg, i) for i in idx), initial=0)), kinds=kinds,
        run_end=tuple(run_end), expert=pre(ex.expert_forward_flops(cfg, s, i) for i in idx),
        expert_params=pre(float(ex.expert_parameters(cfg, i)) for i in idx),
        expert_params_each=tuple(float(ex.expert_parameters(cfg, i)) for i in idx),
        moe=tuple(accumulate((int(cfg.is_moe_layer(i)) for i in idx), initial=0)),
        gemm_wide=pre(w for w, _ in operands), gemm_sharded=pre(x for _, x in operands),
        expert_wide=pre(w for w, _ in expert_operands), expert_sharded=pre(x for _, x in expert_operands),
        element_bytes=element_bytes,
    )


# ---- where the stages sit ------------------------------------------------------------------------


def stage_offset(island: IslandLike, gpus: int, pp: int, q: int) -> int:
    """The first GPU (island-wide index) of stage q of ``pp`` stages of ``gpus`` GPUs, placed as
    :func:`stage_nodes`."""
    gpn = island.gpus_per_node
    per_node = gpn // gpus
    if per_node >= 1 and pp <= island.nodes * per_node:
        return (q // per_node) * gpn + (q % per_node) * gpus
    return q * gpus


def stage_nodes(island: IslandLike, tp: int, dp: int, pp: int) -> tuple[tuple[int, int], ...]:
    """First and last node of every stage's t·d GPUs.

    Stages are packed whole into nodes when they fit (⌊gpus_per_node / (t·d)⌋ per node);
    otherwise laid out contiguously, GPU offsets multiples of t, so no TP group straddles
    a node.

    >>> from types import SimpleNamespace as island
    >>> stage_nodes(island(nodes=2, gpus_per_node=4), 1, 3, 2), stage_nodes(island(nodes=2, gpus_per_node=4), 2, 3, 1)
    (((0, 0), (1, 1)), ((0, 1),))
    """
    g, gpn = tp * dp, island.gpus_per_node
    per_node = gpn // g
    if per_node >= 1 and pp <= island.nodes * per_node:
        return tuple((q // per_node, q // per_node) for q in range(pp))
    return tuple(((q * g) // gpn, (q * g + g - 1) // gpn) for q in range(pp))


@functools.lru_cache(maxsize=4096)
def expert_locality(gpn: int, offset: int, gpus: int, span: int, ep: int, stride: int) -> tuple[int, int]:
    """(fewest EP-group members on one node, the stage's GPUs on that node) for a stage at ``offset``.

    Groups are ``span`` consecutive GPUs from the stage's start, members every ``stride``;
    ``gpn`` GPUs per node. Only ``offset`` mod ``gpn`` matters (callers pass it reduced).
    """
    worst = (ep, min(gpus, gpn))
    for g0 in range(offset, offset + gpus, span):
        counts: dict[int, int] = {}
        for j in range(ep):
            n = (g0 + j * stride) // gpn
            counts[n] = counts.get(n, 0) + 1
        if len(counts) > 1:
            n, local = min(counts.items(), key=lambda kv: kv[1])
            on_node = min((n + 1) * gpn, offset + gpus) - max(n * gpn, offset)
            worst = min(worst, (local, on_node))
    return worst



__all__ = ["IslandLike", "LayerTable", "Layout", "SliceLike", "StageCost", "expert_locality", "layer_table", "stage_nodes", "stage_offset"]
