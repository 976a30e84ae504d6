"""The price of one pipeline stage: its time and memory per micro-batch, the one home of that rule.

A stage is ``ell`` consecutive layers of a model slice on t·c·d GPUs of a homogeneous island
(t tensor-, c context-, d data-parallel; e expert-parallel inside them), with a recomputation
policy and a ZeRO stage. :func:`price_stage` adds up its parts, each a function below:

* memory (:func:`_memory`): the training state, ZeRO-3's gathered layers, the recomputed layer's
  working set, the logits, the activations of one micro-batch (or what offloading leaves);
* compute (:func:`_compute`): the GEMMs at their efficiency (a roofline with their own traffic),
  FlashAttention's kernels, the memory-bound kernels and the loss;
* collectives: tensor parallelism (:func:`_tensor_parallel`), context parallelism's K/V ring
  (:func:`_context_parallel`), the hand-overs between stages (:func:`_handovers`), expert
  parallelism's all-to-alls and FSEP's gathers (:func:`_expert_parallel`), the data-parallel
  reduction with ZeRO and the optimizer step (:func:`_data_parallel`), and offloading's copies.

The formulas, units and sources are in ``formulations/costmodel.md`` ("A stage"); the terms they
use are the functions of :mod:`hetopt.costmodel` and :mod:`hetopt.parallelism`. A parallelizer
chooses layouts and asks this module for their stages' prices (``planner/parallelizer/builtin.py``).

The island and the slice are read through their attributes only (:class:`IslandLike`,
:class:`SliceLike`, with the layout and the per-layer table in :mod:`hetopt.costmodel.stage_shape`,
re-exported here), so the cost model does not depend on the planner that defines them.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from hetopt import costmodel as cm
from hetopt.costmodel.running import Running
from hetopt.costmodel.stage_shape import (IslandLike, LayerTable, Layout, SliceLike, StageCost, expert_locality,
                                          layer_table, stage_nodes, stage_offset)
from hetopt.hardware import GpuType
from hetopt.parallelism import context as ctx
from hetopt.parallelism import expert as ex
from hetopt.parallelism import offload as off
from hetopt.pipeline.problem import stage_fits
from hetopt.workload import ModelConfig

if TYPE_CHECKING:  # the cost model reads a profile through its methods only
    from hetopt.profile.measured import Measured

#: Layers whose 16-bit weights and gradients ZeRO-3 holds unsharded at once: the one
#: computed and the one prefetched (as the allocation family's FSDP units).
ZERO3_GATHERED_LAYERS = 2
#: Bytes per parameter of such an unsharded layer: fp16 weights (2) and gradients (2).
ZERO3_GATHERED_BYTES = cm.WEIGHT_BYTES + cm.GRADIENT_BYTES


# ---- one stage -----------------------------------------------------------------------------------


class _Shares:
    """What every part of one stage's price reads: its layers, roles and per-GPU shares."""

    __slots__ = ("a", "b", "ell", "embed", "head", "samples", "tokens", "replicas", "sp", "n_moe", "etp", "imbalance",
                 "exp_params", "dense_params", "expert_replicas", "uniform", "one_node", "element", "peak",
                 "precision", "measured", "taken")

    def __init__(self, sl: SliceLike, tab: LayerTable, lay: Layout, q: int, nodes: tuple[tuple[int, int], ...],
                 microbatch_size: int, sequence_parallel: bool) -> None:
        cfg, tp, ep = sl.model, lay.tp, lay.ep
        self.replicas = lay.dp * lay.cp  # the dense weights' data-parallel group: Megatron reduces gradients over DP × CP
        self.sp = sequence_parallel and tp > 1
        self.a = a = sum(lay.split[:q])
        self.b = b = a + lay.split[q]
        self.ell = b - a
        self.embed = sl.embedding and q == 0
        self.head = sl.head and q == lay.pp - 1
        # samples per replica per micro-batch, over c: CP gives each GPU s/c tokens of each sample,
        # and every per-GPU quantity is proportional to its tokens (the s² attention terms too:
        # s/c queries against s keys)
        self.samples = microbatch_size / self.replicas
        self.tokens = self.samples * sl.seq  # the GEMMs' token rows on every GPU of the replica (TP splits the weights)
        # experts (MoE layers only; all zero for a dense model): their GEMMs run on the expert's
        # own token rows, and the busiest EP rank sets the pace unless FSEP rebalances
        self.n_moe = n_moe = tab.moe[b] - tab.moe[a]
        self.etp = ex.expert_tp(tp=tp, ep=ep, cp=lay.cp, dp=lay.dp) if n_moe else tp
        self.imbalance = ex.ROUTING_IMBALANCE if ep > 1 and not lay.fsep else 1.0
        self.exp_params = tab.expert_params[b] - tab.expert_params[a]
        params = tab.params[b] - tab.params[a]
        params += cm.input_embedding_parameters(cfg) if self.embed else 0
        params += cm.head_parameters(cfg, with_embedding=self.embed) if self.head else 0
        self.dense_params = params - self.exp_params if n_moe else params
        self.expert_replicas = tp * self.replicas // (ep * self.etp)
        # a run of layers of one kind (``LayerTable.kinds``: equal figures): its maxima are its first layer's
        self.uniform = tab.run_end[a] >= b
        self.one_node = nodes[q][0] == nodes[q][1]
        # the precision's bytes per element (the table's) and its matmul peak (None: 16-bit's; price_stage)
        self.element: int = tab.element_bytes
        self.peak: float | None = None
        # a measured profile (``price_stage``'s ``measured``) and the terms taken from it so far
        self.precision: str = cm.DEFAULT_PRECISION
        self.measured: Measured | None = None
        self.taken: list[str] = []

    def ask(self, measured: Measured | None, precision: str) -> None:
        """Price with ``measured`` (None: the analytic model alone) in ``precision``."""
        self.measured, self.precision = measured, precision


def price_stage(
    sl: SliceLike, island: IslandLike, tab: LayerTable, lay: Layout, q: int, nodes: tuple[tuple[int, int], ...],
    *, microbatch_size: int, microbatches: int, running: Running, reserved_bytes: float, capacity: float | None = None,
    measured: Measured | None = None,
) -> StageCost | None:
    """Time and memory of inner stage q of ``lay`` (formulas: formulations/costmodel.md, "A stage").

    Parameters
    ----------
    tab
        The slice's :func:`layer_table`, built for ``running``'s attention and element size.
    nodes
        Every stage's first and last node (:func:`stage_nodes`).
    running
        How the framework runs the stage, resolved for the island's GPU
        (:meth:`~hetopt.costmodel.running.Running.on`: its precision set, FlashAttention only
        where the GPU runs it): overlap of data-parallel traffic, attention, sequence
        parallelism, TP overlap, ZeRO-3's gathers, precision, gradient reduction, hand-over,
        host stack (:data:`~hetopt.costmodel.running.KEYS`).
    reserved_bytes
        Bytes per GPU no layout may use.
    capacity
        Bytes per GPU. When given, None instead of a price when the stage's static bytes alone
        exceed it (``stage_fits`` with nothing in flight): such a layout fits in no pipeline
        position whatever its time, which is then left uncomputed.
    measured
        A measured profile (:class:`hetopt.profile.measured.Measured`): the layers' compute, TP
        collectives, host time, hand-overs and optimizer step are taken from it where it covers
        the stage's setting (:func:`_measured_compute` and the terms' own lookups), and from the
        analytic model elsewhere; None (the default): the analytic model alone. The terms taken
        are listed in the price's ``measured``.
    """
    sh = _Shares(sl, tab, lay, q, nodes, microbatch_size, running.sequence_parallel)
    _check_resolved(running, tab)
    precision, flash = running.precision, running.flash
    sh.ask(measured, precision)
    sh.peak = cm.matmul_flops(island.gpu, precision)
    static, activation, offloaded = _memory(sl, tab, lay, sh, reserved_bytes, flash, precision)
    if capacity is not None and not stage_fits(static, activation, 0, capacity):
        return None
    forward, backward, compute, host_bound = _on_path(sl, island, tab, lay, sh, flash, running.tp_overlap, running.host)
    hand_fwd, hand_bwd = _handovers(sl, island, lay, sh, q, nodes, microbatch_size, running.handover)
    forward, backward = forward + hand_fwd, backward + hand_bwd
    # the parts below add to the running times term by term, in the order of the formulas
    # (the same floating-point sums wherever a stage is priced)
    if lay.ep > 1 and sh.n_moe:
        forward, backward = _expert_parallel(sl, island, lay, sh, q, forward, backward)
    forward, backward = _data_parallel(sl, island, tab, lay, sh, q, nodes, microbatches, running.zero3_per_tensor,
                                       compute if running.overlap else None, forward, backward,
                                       cm.gradient_bytes(precision, running.grad_fp32))
    if lay.offload:
        # the micro-batch's activations go to the host during forward and come back during
        # backward, hidden behind the stage's compute up to the host link (memory: above)
        host = island.gpu.host_bandwidth
        forward += off.exposed_s(offloaded, host, compute[0])
        backward += off.exposed_s(offloaded, host, compute[1])
    return StageCost(sh.ell, forward, backward, static, activation, lay.stage_gpus, host_bound, tuple(sh.taken))


def _check_resolved(running: Running, tab: LayerTable) -> None:
    """A stage is priced under a record resolved for its GPU, on a table of its element size."""
    if running.precision is None:
        raise ValueError("price a stage under running.on(gpu): the precision is unset")
    if tab.element_bytes != cm.element_bytes(running.precision):
        raise ValueError(f"the layer table counts {tab.element_bytes}-byte elements, precision {running.precision} has "
                         f"{cm.element_bytes(running.precision)} (layer_table(..., element_bytes=cm.element_bytes(precision)))")


def path_floor_s(sl: SliceLike, island: IslandLike, tab: LayerTable, lay: Layout, q: int, *, microbatch_size: int,
                 running: Running, measured: Measured | None = None) -> float:
    """Forward + backward seconds of inner stage q's kernels and TP/CP collectives, each pass held
    to the host's floor: a lower bound of its ``time_s`` under the same ``running`` (resolved
    for the island's GPU, as :func:`price_stage` takes it).

    The first sums of :func:`price_stage`, in its order: everything it adds after them (hand-overs,
    expert parallelism, data-parallel traffic and the optimizer step, offloading's copies) is a
    non-negative time, and floating-point addition is monotone, so no price of the stage, whatever
    its ZeRO stage, offloading or the nodes it sits on, is below this (formulations/costmodel.md,
    "Layouts dropped before pricing"). It reads the layout's TP, CP, DP, recomputation and
    experts, the stage's layers and roles (embedding and head: their TP all-reduces), and the
    island's GPU and links inside a node.
    """
    one_node = ((0, 0),) * lay.pp  # where the stages sit: none of these parts reads it
    sh = _Shares(sl, tab, lay, q, one_node, microbatch_size, running.sequence_parallel)
    _check_resolved(running, tab)
    sh.peak = cm.matmul_flops(island.gpu, running.precision)
    sh.ask(measured, running.precision)  # the same terms as price_stage takes: the floor stays below its price
    forward, backward, _, _ = _on_path(sl, island, tab, lay, sh, running.flash, running.tp_overlap, running.host)
    return forward + backward


def _on_path(sl: SliceLike, island: IslandLike, tab: LayerTable, lay: Layout, sh: _Shares, flash: bool,
             tp_overlap: bool, host: str = cm.DEFAULT_HOST) -> tuple[float, float, tuple[float, float], bool]:
    """The first sums of a stage's price, forward and backward: its kernels, then its TP and CP
    collectives, each pass held to the host's floor; with the kernels alone (what data-parallel
    traffic can hide behind: TP's cannot, it is on the path) and whether the floor set a pass."""
    measured = _measured_compute(sl, island, lay, sh)
    kernels = _kernels(sl, lay, sh, flash)  # the GPU's fixed time a kernel, the host's launches
    if measured is None:
        forward, backward, gemm_fwd, gemm_bwd = _compute(sl, island.gpu, tab, lay, sh, flash, kernels)
    else:  # the profile's layers (their kernels' fixed time included): what TP overlap can hide behind is their whole time
        forward, backward, with_tp = measured
        gemm_fwd, gemm_bwd = forward, backward
        sh.taken.append("compute")
    compute = (forward, backward)
    if measured is not None and with_tp:  # the rows were measured with their TP collectives
        sh.taken.append("tp_collectives")
    else:
        tp_fwd, tp_bwd = _tensor_parallel(sl, island, lay, sh, tp_overlap, gemm_fwd, gemm_bwd)
        forward, backward = forward + tp_fwd, backward + tp_bwd
    if lay.cp > 1:
        cp_fwd, cp_bwd = _context_parallel(sl, island, lay, sh, flash)
        forward, backward = forward + cp_fwd, backward + cp_bwd
    # the host issues the layers' ops: kernels (and their TP/CP collectives) that finish sooner
    # wait for it (the hand-overs after this synchronise the host with the GPU every micro-batch)
    # an MoE layer issues its router, permutation and one FFN per local expert (FSEP: a shard of
    # every expert)
    local = (sl.model.experts if lay.fsep else sl.model.experts // lay.ep) if sh.n_moe else 0
    host_layer = sh.measured.host_s(island.gpu.name, host) if sh.measured is not None and not sh.n_moe else None
    if host_layer is None:
        # the host also launches every kernel and every TP collective (a reduce-scatter and an
        # all-gather each with sequence parallelism; the embedding's and the head's all-reduces)
        collectives = (sh.ell * cm.TP_ALLREDUCES_PER_PASS * (2 if sh.sp else 1)) if lay.tp > 1 else 0
        edges = (int(sh.embed), int(sh.head)) if lay.tp > 1 else (0, 0)
        recomputed = collectives if lay.recompute == "full" else 0
        launches = (kernels[0] + collectives + edges[0], kernels[1] + collectives + recomputed + edges[1])
        host_fwd, host_bwd = cm.host_floor_s(sh.ell, recompute=lay.recompute, stack=host, moe_layers=sh.n_moe,
                                             local_experts=local, launches=launches)
    else:  # the profile's host time per layer (its launches included), counted as cm.host_floor_s counts it
        host_fwd = sh.ell * host_layer[0]
        host_bwd = sh.ell * (host_layer[1] + (host_layer[0] if lay.recompute == "full" else 0.0))
        sh.taken.append("host")
    host_bound = host_fwd > forward or host_bwd > backward
    return max(forward, host_fwd), max(backward, host_bwd), compute, host_bound


def _measured_compute(sl: SliceLike, island: IslandLike, lay: Layout, sh: _Shares) -> tuple[float, float, bool] | None:
    """The stage's kernels from the profile: the sum of its measured parts (ℓ layers, the embedding
    on the first stage, the head on the last), forward and backward, and whether they hold the TP
    collectives; None unless the profile covers every part at the stage's setting (its GPU, model,
    TP, samples per micro-batch, sequence, recomputation, precision: ``Measured.layer``).

    A dense model without CP only: a measured layer is one layer of the model on one GPU of its TP
    group, which an MoE layer's routing or a CP ring's share of the sequence is not.
    """
    if sh.measured is None or sh.n_moe or lay.cp > 1 or lay.ep > 1:
        return None
    ask = functools.partial(sh.measured.layer, island.gpu.name, sl.model.name, tp=lay.tp, samples=sh.samples, seq=sl.seq,
                            recompute=lay.recompute, precision=sh.precision, hidden=sl.model.hidden)
    parts = [(ask("layer"), sh.ell)] + [(ask(part), 1) for part, here in (("embedding", sh.embed), ("head", sh.head)) if here]
    if any(times is None for times, _ in parts) or len({times.includes_tp for times, _ in parts}) > 1:
        return None
    forward = sum(n * times.forward_s for times, n in parts)
    backward = sum(n * times.backward_s for times, n in parts)
    return forward, backward, parts[0][0].includes_tp


def _measured_allreduce(island: IslandLike, sh: _Shares, nbytes: float, tp: int) -> float | None:
    """One TP all-reduce of ``nbytes`` inside a node from the profile (None: not covered). With
    sequence parallelism Megatron runs it as an all-gather and a reduce-scatter, measured as such
    when the profile has both."""
    if sh.measured is None or tp <= 1:
        return None
    gpu = island.gpu.name
    if sh.sp:
        gather = sh.measured.collective_s(gpu, "all_gather", "intra", tp, nbytes)
        scatter = sh.measured.collective_s(gpu, "reduce_scatter", "intra", tp, nbytes)
        if gather is not None and scatter is not None:
            return gather + scatter
    return sh.measured.collective_s(gpu, "all_reduce", "intra", tp, nbytes)


def _measured_ring_bandwidth(sh: _Shares, gpu: str, one_node: bool, gradient_bytes: float) -> float | None:
    """The bytes/s of one step of the data-parallel ring, from the profile's ``send_recv`` of the
    step's message (the stage's gradient over the replicas: inside a node each TP rank's ring, across
    nodes the node's whole share) over the same kind of link; None when the profile does not cover it."""
    if sh.measured is None or sh.replicas <= 1:
        return None
    params = sh.dense_params / sh.etp if one_node else sh.dense_params
    step_bytes = params * gradient_bytes / sh.replicas
    t = sh.measured.collective_s(gpu, "send_recv", "intra" if one_node else "inter", 2, step_bytes)
    return None if not t else step_bytes / t


def _memory(sl: SliceLike, tab: LayerTable, lay: Layout, sh: _Shares, reserved_bytes: float, flash: bool,
            precision: str) -> tuple[float, float, float]:
    """(static bytes, activation bytes of one micro-batch, activations offloaded) per GPU."""
    cfg, s, tp, z, rc = sl.model, sl.seq, lay.tp, lay.zero_stage, lay.recompute
    a, b, ell, samples = sh.a, sh.b, sh.ell, sh.samples
    ep, etp = lay.ep, sh.etp
    static = cm.state_bytes_per_parameter(z, sh.replicas, precision) * sh.dense_params / tp + reserved_bytes
    if sh.n_moe:
        static += cm.state_bytes_per_parameter(z, sh.expert_replicas, precision) * sh.exp_params / (ep * etp)
        if lay.fsep and ep > 1:
            widest_experts = max(tab.expert_params_each[a:b])
            static += ex.FSEP_GATHERED_LAYERS * 2 * sh.element * widest_experts / (ep * etp)  # weights + gradients
    last = a + 1 if sh.uniform else b
    if z == 3 and sh.replicas > 1:
        if sh.n_moe:  # per GPU: the dense part over t, the experts over e·etp
            widest = max((tab.params[j + 1] - tab.params[j] - tab.expert_params_each[j]) / tp
                         + tab.expert_params_each[j] / (ep * etp) for j in range(a, last))
            static += ZERO3_GATHERED_LAYERS * ZERO3_GATHERED_BYTES * sh.element / cm.ACTIVATION_BYTES * widest
        else:
            widest = max(cm.layer_parameters(cfg, i) for i in range(sl.first_layer + a, sl.first_layer + last))
            static += ZERO3_GATHERED_LAYERS * ZERO3_GATHERED_BYTES * sh.element / cm.ACTIVATION_BYTES * widest / tp
    if rc != "none":  # the layer being recomputed materializes what recomputation dropped
        # the first layer of the widest activations (of a run of equal layers: its first)
        i = sl.first_layer + a + (0 if sh.uniform else max(range(ell), key=lambda j: tab.sharded_each[a + j]))
        static += cm.recompute_working_bytes(cfg, s, samples, tp=tp, sequence_parallel=sh.sp, recompute=rc, index=i,
                                             flash=flash, element_bytes=sh.element)
    if sh.head:
        static += cm.logit_bytes(cfg, s, samples, tp=tp)
    h = cfg.hidden
    if rc == "full":
        # the layer input, one element per h (CHECKPOINT_WIDTHS in 16 bits)
        activation = ell * s * samples * (cm.CHECKPOINT_WIDTHS * sh.element // cm.ACTIVATION_BYTES) * h / (tp if sh.sp else 1)
    else:
        replicated = ell * cm.replicated_activation_widths(cfg, sh.element) * h
        sharded = tab.sharded[b] - tab.sharded[a]
        per_token = (replicated + sharded) / tp if sh.sp else replicated + sharded / tp
        kept_scores = (0.0 if rc == "selective" or flash
                       else ell * cm.attention_score_bytes(cfg, sh.element) * cfg.heads * s * s * samples / tp)
        activation = s * samples * per_token + kept_scores
    if not lay.offload:
        return static, activation, activation
    # activation offloading keeps the layers' activations on the host (their time: price_stage)
    return static + off.resident_bytes(activation, layers=ell), 0.0, activation


def _kernels(sl: SliceLike, lay: Layout, sh: _Shares, flash: bool) -> tuple[float, float]:
    """The kernels the stage launches per micro-batch (forward, backward): its layers'
    (``cm.layer_kernels``; an MoE layer in the proportion its ops bear to a dense layer's,
    ``cm.HOST_MOE_LAYER`` and ``cm.HOST_LOCAL_EXPERT``), the embedding's and the head's; the
    backward ``BACKWARD_PER_FORWARD`` times the forward's, the layers' forward again under full
    recomputation."""
    cfg = sl.model
    per_layer = cm.layer_kernels(cfg, flash=flash)
    layers = float(sh.ell)
    if sh.n_moe:
        local = cfg.experts if lay.fsep else cfg.experts // lay.ep
        layers += sh.n_moe * (cm.HOST_MOE_LAYER[0] + local * cm.HOST_LOCAL_EXPERT[0] - 1.0)
    forward = layers * per_layer
    edges = (cm.EMBEDDING_KERNELS if sh.embed else 0) + (cm.HEAD_KERNELS if sh.head else 0)
    backward = cm.BACKWARD_PER_FORWARD * (forward + edges) + (forward if lay.recompute == "full" else 0.0)
    return forward + edges, backward


def _compute(sl: SliceLike, gpu: GpuType, tab: LayerTable, lay: Layout, sh: _Shares,
             flash: bool, kernels: tuple[float, float] = (0.0, 0.0)) -> tuple[float, float, float, float]:
    """(forward s, backward s, the forward GEMMs' s, the backward GEMMs' s) of the stage's kernels:
    the matrix multiplications at the GEMM efficiency, the memory-bound kernels at the memory
    bandwidth, and the GPU's own time for each of the ``kernels`` (forward, backward) it launches
    (``cm.kernels_time_s``) (formulations/costmodel.md, "Time")."""
    cfg, s, tp, rc = sl.model, sl.seq, lay.tp, lay.recompute
    a, b, ell, samples, head, imbalance = sh.a, sh.b, sh.ell, sh.samples, sh.head, sh.imbalance
    h = cfg.hidden
    # the GEMMs' own traffic in one forward pass: the weights on the GPU once per call, the
    # tokens' operands and results (cm.gemm_traffic_bytes); the experts' on the busiest rank
    dense_traffic = cm.gemm_traffic_bytes(
        sh.tokens, (tab.gemm_wide[b] - tab.gemm_wide[a] + (h if head else 0.0),
                    tab.gemm_sharded[b] - tab.gemm_sharded[a] + (cfg.vocab if head else 0.0)),
        (tab.params[b] - tab.params[a] - sh.exp_params + (cfg.vocab * h if head else 0.0)) / tp, tp=tp, element_bytes=sh.element)
    expert_traffic = cm.gemm_traffic_bytes(
        ex.routed_rows(cfg, sh.tokens, tp=tp, etp=sh.etp) * imbalance,
        (tab.expert_wide[b] - tab.expert_wide[a], tab.expert_sharded[b] - tab.expert_sharded[a]),
        sh.exp_params / (lay.ep * sh.etp), tp=sh.etp, element_bytes=sh.element) if sh.n_moe else 0.0
    expert_fwd = (tab.expert[b] - tab.expert[a]) * samples / tp

    def gemm(flops: float, experts: float, passes: float) -> float:
        """``passes`` forward-equivalents of traffic (backward: BACKWARD_PER_FORWARD)."""
        t = cm.gemm_time_s(flops - experts, gpu, traffic_bytes=passes * dense_traffic, peak_flops=sh.peak)
        return t + cm.gemm_time_s(experts * imbalance, gpu, traffic_bytes=passes * expert_traffic, peak_flops=sh.peak) if experts else t

    layer_fwd = (tab.forward[b] - tab.forward[a]) * samples / tp
    head_fwd = cm.head_forward_flops(cfg, s) * samples / tp if head else 0.0
    scores = (tab.scores[b] - tab.scores[a]) * samples / tp
    # FlashAttention: the scores' FLOPs run in its own kernels at its own share of peak; it
    # stores no scores, so selective recomputation has nothing to redo, and its backward
    # recomputes Q·Kᵀ itself (FLASH_SCORE_BACKWARD_PER_FORWARD)
    attn = scores if flash else 0.0
    dense = layer_fwd + head_fwd - attn  # the FLOPs of the GEMMs
    extra = {"none": 0.0, "selective": 0.0 if flash else scores, "full": layer_fwd - attn}[rc]
    attn_bwd = cm.FLASH_SCORE_BACKWARD_PER_FORWARD * attn + (attn if rc == "full" else 0.0)
    wide = tab.ew_wide[b] - tab.ew_wide[a]
    ew_fwd = s * samples * ((wide / tp if sh.sp else wide) + (tab.ew_sharded[b] - tab.ew_sharded[a]) / tp)
    score_widths = cm.score_elementwise_widths(cfg, s, flash=flash, element_bytes=sh.element)
    ew_extra = {"none": 0.0, "selective": ell * s * samples * score_widths / tp,
                "full": ew_fwd}[rc]
    # the loss's memory-bound kernels over the stage's vocabulary-sharded logits (the head's stage)
    loss_fwd, loss_bwd = cm.loss_traffic_bytes(cfg, s, samples, tp=tp) if head else (0.0, 0.0)
    backward_passes = cm.BACKWARD_PER_FORWARD + (1.0 if rc == "full" else 0.0)  # full recomputation: one forward more
    # what the dense GEMMs lose to their tiles' waves on the GPU's SMs, as FLOPs at e_g (forward,
    # backward; a full recomputation runs the layers' forward GEMMs again)
    waves_fwd, waves_bwd = _wave_flops(sl, gpu, sh, tp)
    head_waves = (cm.quantization_flops(gpu.sms, ((sh.tokens, cfg.vocab / tp, h),)) if head and cfg.vocab
                  else (0.0, 0.0))
    gemm_fwd = gemm(dense + waves_fwd + head_waves[0], expert_fwd, 1.0)
    gemm_bwd = gemm(cm.BACKWARD_PER_FORWARD * dense + extra + waves_bwd + head_waves[1]
                    + (waves_fwd if rc == "full" else 0.0), backward_passes * expert_fwd, backward_passes)
    forward = gemm_fwd + cm.attention_time_s(attn, gpu, sh.peak) + cm.memory_time_s(ew_fwd + loss_fwd, gpu)
    forward += cm.kernels_time_s(kernels[0])
    backward = gemm_bwd + cm.attention_time_s(attn_bwd, gpu, sh.peak) + cm.kernels_time_s(kernels[1])
    backward += cm.memory_time_s(cm.BACKWARD_PER_FORWARD * ew_fwd + ew_extra + loss_bwd, gpu)
    if sh.n_moe:
        # the MoE layers' token permutations (memory-bound; again in a full recomputation)
        # (the expert module counts 16-bit elements: scaled to the run's element size)
        scale = sh.element / cm.ACTIVATION_BYTES
        perm_fwd, perm_bwd = (scale * x for x in ex.permutation_bytes(cfg, sh.tokens / tp))
        forward += cm.memory_time_s(sh.n_moe * perm_fwd, gpu)
        backward += cm.memory_time_s(sh.n_moe * (perm_bwd + (perm_fwd if rc == "full" else 0.0)), gpu)
        if imbalance > 1.0:
            # the experts' activation runs on the busiest rank's rows, as their GEMMs: the
            # memory-bound table above counted the balanced rows (every MoE layer has the shape of the first)
            act = (imbalance - 1.0) * sh.n_moe * scale * ex.activation_bytes(cfg, sh.tokens / tp, cfg.moe_every - 1)
            forward += cm.memory_time_s(act, gpu)
            backward += cm.memory_time_s((cm.BACKWARD_PER_FORWARD + (1.0 if rc == "full" else 0.0)) * act, gpu)
    return forward, backward, gemm_fwd, gemm_bwd


def _wave_flops(sl: SliceLike, gpu: GpuType, sh: _Shares, tp: int) -> tuple[float, float]:
    """The FLOPs (forward, backward) the stage's dense layer GEMMs lose to tile and wave
    quantization on the GPU's SMs (``cm.quantization_flops``), summed over its layers."""
    cfg = sl.model
    first = sl.first_layer + sh.a
    if sh.uniform:  # a run of layers of one kind: the first's times ℓ
        f, b = _layer_wave_flops(gpu.sms, cfg, cfg.is_moe_layer(first), sh.tokens, tp)
        return sh.ell * f, sh.ell * b
    forward = backward = 0.0
    for i in range(first, first + sh.ell):
        f, b = _layer_wave_flops(gpu.sms, cfg, cfg.is_moe_layer(i), sh.tokens, tp)
        forward, backward = forward + f, backward + b
    return forward, backward


@functools.lru_cache(maxsize=4096)
def _layer_wave_flops(sms: int, cfg: ModelConfig, moe: bool, tokens: float, tp: int) -> tuple[float, float]:
    """One layer's ``cm.quantization_flops`` (an MoE layer's dense GEMMs have no FFN)."""
    index = next(i for i in range(cfg.layers) if cfg.is_moe_layer(i) == moe)
    return cm.quantization_flops(sms, cm.dense_gemm_shapes(cfg, index, tokens, tp))


def _tensor_parallel(sl: SliceLike, island: IslandLike, lay: Layout, sh: _Shares, tp_overlap: bool, gemm_fwd: float,
                     gemm_bwd: float) -> tuple[float, float]:
    """Tensor parallelism's collectives (inside a node) on the path, forward and backward; folded
    EP keeps experts whole, so an MoE layer's FFN has no TP all-reduce."""
    cfg, s, tp = sl.model, sl.seq, lay.tp
    intra, fab = island.intra_achieved, cm.fabric(island.gpu, tp)
    output = cm.boundary_bytes(cfg, s, sh.samples, sh.element)
    # each collective at the algorithm and protocol NCCL's tuner picks for its size (a layer's
    # output at micro-batch 1 is 1-4 MB: LL or LL128, where latency, not bandwidth, dominates);
    # with sequence parallelism a reduce-scatter and an all-gather in place of each all-reduce
    allreduce = cm.collective_s("allreduce", output, intra, fab)
    per_layer = cm.tp_collective_s(output, intra, fab, sequence_parallel=sh.sp)
    measured = None if sh.n_moe else _measured_allreduce(island, sh, output, tp)
    if measured is not None:  # a dense layer's TP_ALLREDUCES_PER_PASS all-reduces, as measured
        allreduce = per_layer = measured
        sh.taken.append("tp_collectives")
    tp_pass = sh.ell * cm.TP_ALLREDUCES_PER_PASS * per_layer
    if sh.etp != tp:
        tp_pass -= sh.n_moe * per_layer
    elif tp > 1 and lay.ep > 1 and sh.n_moe:
        # experts split over TP (EP inside DP, the all-to-all dispatcher): the FFN's sequence-
        # parallel all-gather and reduce-scatter carry the routed rows the GPU received, k copies
        # a token on the busiest rank (``expert.tp_routed_factor``), where a dense FFN's carry the
        # tokens once (without EP, Megatron's all-gather dispatcher gathers the tokens once too)
        routed = ex.tp_routed_factor(sl.model, sh.imbalance) * output
        tp_pass += sh.n_moe * (cm.tp_collective_s(routed, intra, fab, sequence_parallel=sh.sp) - per_layer)
    tp_fwd, tp_bwd = tp_pass, tp_pass * (2.0 if lay.recompute == "full" else 1.0)
    if tp_overlap and sh.sp:
        # Megatron-Core's --tp-comm-overlap (Transformer Engine's userbuffers): each sequence-
        # parallel all-gather / reduce-scatter is cut into t chunks exchanged round the TP ring
        # while the adjacent GEMM computes the chunk before; what the GEMMs cannot hide, and
        # at least one chunk, stays on the path (cm.exposed_s with t pieces)
        tp_fwd, tp_bwd = cm.exposed_s(tp_fwd, gemm_fwd, tp), cm.exposed_s(tp_bwd, gemm_bwd, tp)
    return (tp_fwd + (cm.EMBEDDING_TP_ALLREDUCES * allreduce if sh.embed else 0.0),
            tp_bwd + (cm.HEAD_TP_ALLREDUCES * allreduce if sh.head else 0.0))


def _context_parallel(sl: SliceLike, island: IslandLike, lay: Layout, sh: _Shares, flash: bool) -> tuple[float, float]:
    """Context parallelism's K/V ring of every layer: inside a node (t·c divides it) over the GPU
    links, or node by node (t·c whole nodes), where the slowest step is the one that crosses the
    network: every GPU at a node's edge sends through its share of the node's network
    (rail-optimized nodes give each GPU its own NIC)."""
    cp, tp, gpn = lay.cp, lay.tp, island.gpus_per_node
    if ctx.crosses_nodes(cp, tp, gpn):
        ring_bw, ring_hop = island.inter_achieved / gpn, cm.HOP_LATENCY_S["network"]
    else:
        ring_bw, ring_hop = island.intra_achieved, cm.intra_hop_latency_s(island.gpu)
    ring_f, ring_b = ctx.ring_attention_s(sl.model, sl.seq, sh.samples * cp, cp=cp, tp=tp, gpu=island.gpu,
                                          bandwidth=ring_bw, hop_latency_s=ring_hop, flash=flash)
    return sh.ell * ring_f, sh.ell * (ring_b + (ring_f if lay.recompute == "full" else 0.0))


def _handovers(sl: SliceLike, island: IslandLike, lay: Layout, sh: _Shares, q: int, nodes: tuple[tuple[int, int], ...],
               microbatch_size: int, handover: str = cm.DEFAULT_HANDOVER) -> tuple[float, float]:
    """The hand-over to the next inner stage (activations, forward) and back (gradients, backward).

    Interleaved (v virtual stages per GPU): a micro-batch passes every GPU v times, so each
    hand-over happens v times, and the last stage's v − 1 chunk ends go round to the first.

    ``handover="deepspeed"`` (``cm.HANDOVERS``): DeepSpeed's 2021 pipeline engine. Each TP rank
    sends its 1/t share of the activations and the fp16 attention mask (``cm.pipe_mask_bytes``)
    forward and the whole gradient back; the receiver all-gathers the activations over its TP
    group before its forward, and the sender all-gathers its own output again before its
    backward (``PartitionedTensor.full``). The sender pays each send, as in the split hand-over.
    """
    cfg, s = sl.model, sl.seq
    deepspeed = handover == "deepspeed"
    replica = cm.boundary_bytes(cfg, s, sh.samples, sh.element)  # one replica's micro-batch, every TP rank holds it

    def handover_s(x: int, y: int, forward: bool) -> float:
        one_node = nodes[x][0] == nodes[x][1] == nodes[y][0] == nodes[y][1]
        if deepspeed:
            # every GPU of the stage sends: its share and the mask forward, the whole gradient back;
            # across nodes a node's network carries what all its GPUs of the stage send
            per_gpu = replica / lay.tp + cm.pipe_mask_bytes(s) if forward else replica
            if one_node:
                return per_gpu / island.intra_achieved
            return min(lay.stage_gpus, island.gpus_per_node) * per_gpu / island.inter_achieved
        if sh.measured is not None:  # the profile's send/recv of the same bytes over the same kind of link
            nbytes = cm.boundary_bytes(cfg, s, sh.samples / lay.tp if one_node else
                                       microbatch_size * min(lay.stage_gpus, island.gpus_per_node) / lay.stage_gpus,
                                       sh.element)
            sent = sh.measured.collective_s(island.gpu.name, "send_recv", "intra" if one_node else "inter", 2, nbytes)
            if sent is not None:
                if "handover" not in sh.taken:
                    sh.taken.append("handover")
                return sent
        if one_node:  # one node: every GPU sends its 1/t share
            return cm.p2p_transfer_s(cfg, s, sh.samples / lay.tp, island.intra_achieved, sh.element)
        # across nodes each node's network carries the samples of the replicas it holds (its
        # share of the stage's t·c·d GPUs; the whole micro-batch when the stage is one node),
        # all the stage's nodes sending at once
        node_share = min(lay.stage_gpus, island.gpus_per_node) / lay.stage_gpus
        return cm.p2p_transfer_s(cfg, s, microbatch_size * node_share, island.inter_achieved, sh.element)

    # DeepSpeed's partitioned activations are gathered over the TP group (inside a node) where
    # they are used: by the receiver before its forward, by the sender before its backward
    gather = (cm.collective_s("allgather", replica, island.intra_achieved, cm.fabric(island.gpu, lay.tp))
              if deepspeed else 0.0)
    v, forward, backward = lay.vpp, 0.0, 0.0
    if q + 1 < lay.pp:
        forward = v * handover_s(q, q + 1, True)
        backward = v * gather
    elif v > 1 and lay.pp > 1:
        forward = (v - 1) * handover_s(q, 0, True)
        backward = (v - 1) * gather
    if q > 0:
        backward += v * handover_s(q - 1, q, False)
        forward += v * gather
    elif v > 1 and lay.pp > 1:
        backward += (v - 1) * handover_s(lay.pp - 1, q, False)
        forward += (v - 1) * gather
    return forward, backward


def _expert_parallel(sl: SliceLike, island: IslandLike, lay: Layout, sh: _Shares, q: int, forward: float,
                     backward: float) -> tuple[float, float]:
    """``forward`` and ``backward`` plus expert parallelism: dispatch + combine per MoE layer in
    each pass (again with full recomputation), over the links the EP groups cross; FSEP gathers
    each layer's experts."""
    tp, ep, etp, gpn, stage_gpus = lay.tp, lay.ep, sh.etp, island.gpus_per_node, lay.stage_gpus
    span = ex.group_span(tp=tp, ep=ep, etp=etp)
    offset = stage_offset(island, stage_gpus, lay.pp, q) % gpn
    local, node_gpus = expert_locality(gpn, offset, stage_gpus, span, ep, tp if etp == tp else 1)
    intra, inter = island.intra_achieved, island.inter_achieved

    def exchange(nbytes: float) -> float:
        nbytes = nbytes * sh.element / cm.ACTIVATION_BYTES  # ex counts 16-bit elements; fp32 moves 4 bytes each
        return ex.alltoall_s(nbytes, ep, local=local, node_gpus=node_gpus, intra_bandwidth=intra,
                             inter_bandwidth=inter or intra, intra_hop_s=cm.intra_hop_latency_s(island.gpu),
                             inter_hop_s=cm.HOP_LATENCY_S["network"])

    a2a = exchange(sh.imbalance * ex.alltoall_bytes(sl.model, sh.tokens / tp, ep))
    passes = 2 if lay.recompute == "full" else 1
    forward += sh.n_moe * ex.ALLTOALLS_PER_PASS * a2a
    backward += (passes * sh.n_moe) * ex.ALLTOALLS_PER_PASS * a2a
    if lay.fsep:
        gather = exchange(ex.fsep_gather_bytes(sh.exp_params / sh.n_moe, ep, etp))
        forward += sh.n_moe * gather
        backward += sh.n_moe * gather * (2 + (1 if lay.recompute == "full" else 0))  # gather again, reduce-scatter gradients
    return forward, backward


def _expert_overlap(overlap: tuple[float, float] | None, dense: cm.DataParallelComm | None, zero_stage: int,
                    microbatches: int) -> tuple[float, float] | None:
    """The compute of one micro-batch (forward, backward) the dense data-parallel traffic leaves
    for the experts' to hide behind: both run on the same links (one NCCL stream each, sharing
    them), so what the dense part keeps busy of the window is not the experts' to use.

    ``dense`` is the dense traffic priced with nothing hidden (``cm.data_parallel_comm`` without
    ``overlap``), its busy seconds: ZeRO 0 and 1, the once-per-iteration reduction behind the
    last backward; ZeRO 2, the per-micro-batch reduce-scatter behind the backward and the
    once-per-iteration gather behind the forward; ZeRO 3, the gathers and reduce-scatters behind
    the pass they feed.

    >>> _expert_overlap((1.0, 2.0), cm.DataParallelComm(0.0, 0.1, 0.5), 1, 5)
    (1.0, 1.5)
    >>> _expert_overlap((1.0, 2.0), cm.DataParallelComm(0.3, 2.5, 0.0), 3, 5)
    (0.7, 0.0)
    """
    if overlap is None or dense is None:
        return overlap
    fwd, bwd = overlap
    if zero_stage <= 1:
        busy_fwd, busy_bwd = 0.0, dense.per_iteration_s
    elif zero_stage == 2:
        busy_fwd, busy_bwd = dense.per_iteration_s, dense.backward_s - dense.per_iteration_s / microbatches
    else:
        busy_fwd, busy_bwd = dense.forward_s, dense.backward_s
    return max(0.0, fwd - busy_fwd), max(0.0, bwd - busy_bwd)


def _data_parallel(sl: SliceLike, island: IslandLike, tab: LayerTable, lay: Layout, sh: _Shares, q: int,
                   nodes: tuple[tuple[int, int], ...], microbatches: int, zero3_per_tensor: bool,
                   overlap: tuple[float, float] | None, forward: float, backward: float,
                   gradient_bytes: float = cm.GRADIENT_BYTES) -> tuple[float, float]:
    """``forward`` and ``backward`` plus the data-parallel reduction (with ZeRO's gathers), ZeRO-3's tensor copies and the optimizer
    step, per micro-batch (the once-per-iteration parts amortized over M).

    One ring per TP rank; inside a node each on its own GPU link, across nodes all t rings share
    the node's network, so the node moves the stage's whole gradient. Experts' gradients are
    reduced over their own data-parallel group of t·c·d/(e·etp) GPUs.
    """
    cfg, gpu, tp, z, rc = sl.model, island.gpu, lay.tp, lay.zero_stage, lay.recompute
    ep, etp, n_moe, one_node = lay.ep, sh.etp, sh.n_moe, sh.one_node
    intra, inter = island.intra_achieved, island.inter_achieved
    intra_hop, inter_hop = cm.intra_hop_latency_s(gpu), cm.HOP_LATENCY_S["network"]
    step_floor = cm.ring_step_floor_s(gpu.host_cpu)  # the least step latency of a ring across nodes
    # an MoE layer's expert tensors (weight, + bias for GPT/ViT) go with the experts' own collectives
    expert_tensors = cfg.experts * cm.ffn_matrices(cfg) * (1 if cfg.architecture == "llama" else 2) if n_moe else 0
    # ZeRO-3 collectives per pass: one per parameter tensor (DeepSpeed's ZeRO-3 of 2021), or one
    # per layer (FSDP's unit: FSDP2's fully_shard groups a block's parameters into one all-gather;
    # the embedding and the head are units of their own, one unit when tied on the same stage)
    if zero3_per_tensor:
        collectives = max(1, tab.tensors[sh.b] - tab.tensors[sh.a] - n_moe * expert_tensors)
    else:
        collectives = sh.ell + int(sh.embed) + int(sh.head and not (sh.embed and cfg.tied_embeddings))
    span = nodes[q][1] - nodes[q][0] + 1
    ring_bandwidth = intra if one_node else inter
    ring_hop = cm.ring_hop_latency_s(sh.replicas, span, intra_hop, inter_hop, step_floor)
    rdma = cm.is_rdma(island.inter_bandwidth, island.transport)
    fabric = cm.fabric(gpu, sh.replicas, span, rdma=rdma)
    measured_step = _measured_ring_bandwidth(sh, gpu.name, one_node, gradient_bytes)
    if measured_step is not None:  # the ring's steps as the profile measured them (their latency included)
        ring_bandwidth, ring_hop, fabric = measured_step, 0.0, None
        sh.taken.append("dp_collectives")
    comm = cm.data_parallel_comm(
        sh.dense_params / tp if one_node else sh.dense_params, sh.replicas, ring_bandwidth, zero_stage=z,
        microbatches=microbatches, hop_latency_s=ring_hop,
        collectives=collectives, recompute_gather=rc == "full", overlap=overlap, buckets=sh.ell,
        gradient_bytes=gradient_bytes, weight_bytes=sh.element, fabric=fabric,
    )
    forward += comm.forward_s
    backward += comm.backward_s
    if zero3_per_tensor and z == 3:
        # the list collectives' copies of every gathered tensor and reduced gradient (the
        # gathers as ``data_parallel_comm`` counts them: forward; backward, again before a
        # full recomputation), on the full tensors a GPU holds: the dense ones over t, the
        # experts' over e·etp (each only when its group has replicas to gather from)
        gathered = ((sh.dense_params / tp if sh.replicas > 1 else 0.0)
                    + (sh.exp_params / (ep * etp) if n_moe and sh.expert_replicas > 1 else 0.0))
        forward += cm.zero3_tensor_copies_s(gathered, gpu, gathers=1, scatters=0, element_bytes=sh.element)
        backward += cm.zero3_tensor_copies_s(gathered, gpu, gathers=1 + (rc == "full"), scatters=1, element_bytes=sh.element)
        # ... and each such collective copies its d rank pieces one by one (PyTorch's
        # ProcessGroupNCCL: d copy_ calls out of, or into, its flat buffer), d launches the host
        # issues between the device synchronizations DeepSpeed makes around every gather
        pieces = collectives * sh.replicas if sh.replicas > 1 else 0
        forward += cm.list_copies_s(pieces, gathers=1, scatters=0)
        backward += cm.list_copies_s(pieces, gathers=1 + (rc == "full"), scatters=1)
    # the optimizer step over this GPU's shard of the state (ZeRO >= 1 shards it over the
    # data-parallel group), once per iteration: amortized over M as the gradient reduction
    step_params = sh.dense_params / tp / (sh.replicas if z >= 1 else 1)
    if n_moe:
        step_params += sh.exp_params / (ep * etp) / (sh.expert_replicas if z >= 1 else 1)
    step = None if sh.measured is None else sh.measured.optimizer_s(gpu.name, sh.precision, step_params)
    if step is None:
        step = cm.optimizer_step_s(step_params, gpu, element_bytes=sh.element)
    else:
        sh.taken.append("optimizer")
    backward += step / microbatches
    if n_moe:
        # the experts' reduction runs over the same links as the dense one and behind the same
        # compute: it hides only behind what the dense traffic leaves of that compute
        # (``_expert_overlap``); across nodes a node carries every distinct expert shard it holds
        node_gpus = min(lay.stage_gpus, island.gpus_per_node)
        dense_busy = cm.data_parallel_comm(
            sh.dense_params / tp if one_node else sh.dense_params, sh.replicas, intra if one_node else inter,
            zero_stage=z, microbatches=microbatches,
            hop_latency_s=cm.ring_hop_latency_s(sh.replicas, span, intra_hop, inter_hop, step_floor),
            collectives=collectives, recompute_gather=rc == "full", gradient_bytes=gradient_bytes,
            weight_bytes=sh.element, fabric=cm.fabric(gpu, sh.replicas, span, rdma=rdma),
        ) if overlap is not None else None
        ecomm = cm.data_parallel_comm(
            sh.exp_params / (ep * etp) if one_node else ex.reduction_parameters(sh.exp_params, ep=ep, etp=etp,
                                                                                 node_gpus=node_gpus),
            sh.expert_replicas, intra if one_node else inter, zero_stage=z, microbatches=microbatches,
            hop_latency_s=cm.ring_hop_latency_s(sh.expert_replicas, span, intra_hop, inter_hop, step_floor),
            collectives=n_moe, recompute_gather=rc == "full", overlap=_expert_overlap(overlap, dense_busy, z, microbatches),
            buckets=n_moe, gradient_bytes=gradient_bytes, weight_bytes=sh.element,
            fabric=cm.fabric(gpu, sh.expert_replicas, span, rdma=rdma),
        )
        forward += ecomm.forward_s
        backward += ecomm.backward_s
    return forward, backward


__all__ = ["IslandLike", "LayerTable", "Layout", "SliceLike", "StageCost", "ZERO3_GATHERED_BYTES", "ZERO3_GATHERED_LAYERS",
           "expert_locality", "layer_table", "path_floor_s", "price_stage", "stage_nodes", "stage_offset"]
