"""A heterogeneous published row priced by hetopt's cost model (with a measured profile, or without).

A row (:class:`~hetopt.planner.published.HeteroMeasurement`) states its layout stage by stage:
each stage's layers and its data-parallel replicas, each on its own node of one GPU type with
its TP degree. Replica j of stage i feeds replica j of stage i + 1 (a *column*, as Sailor runs
it). The price (docs/validation.md, "Side by side with Sailor"; docs/formats.md):

* every replica's stage is priced by ``price_stage`` (the built-in parallelizer's one-stage
  layout ``tp pp1 dp1`` of the stage's layers on its node; the embedding with the first
  stage, the head with the last): per micro-batch forward + backward, the optimizer step over
  the micro-batches, memory;
* the hand-over between consecutive stages of a column crosses the network: the micro-batch's
  boundary activations forward and their gradients back, each a ``send_recv`` across nodes
  from the profile (the sender's GPU) where it covers the size, the bytes at the node's achieved
  network bandwidth elsewhere; with DeepSpeed's hand-over (``handover = "deepspeed"``) the
  sender pays its sends (its engine blocks on them, as ``price_stage`` prices hand-overs inside
  an island), otherwise each boundary is a link of the closed form below;
* a column takes the pipeline family's closed form, Σ t + Σ links + (M − 1)·max(t, links);
* after the pipeline flush each stage all-reduces its gradient over its replicas' nodes (each
  node carries the whole stage's gradient: its TP ranks share the node's network): the
  profile's ``all_reduce`` across nodes at that many ranks, or a ring of 2(p − 1) steps of
  ``send_recv`` of n/p bytes on the slowest member's curve, or ``cm.ring_allreduce_s``;
* the iteration: the slowest column plus the slowest stage's reduction (DeepSpeed reduces after
  the flush; a row that overlaps is priced the same, an upper bound).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import accumulate

from hetopt import costmodel as cm
from hetopt.planner.builtin import BuiltinParallelizer
from hetopt.planner.parallelizer import IslandSpec, Slice
from hetopt.planner.published import HeteroMeasurement
from hetopt.profile.measured import Measured
from hetopt.costmodel.stage import Layout


@dataclass(frozen=True)
class HeteroPrice:
    """What the cost model says of a heterogeneous row: iteration seconds, per-GPU peak bytes (the
    largest replica's, its in-flight micro-batches counted), and which terms came from the profile."""

    iteration_time_s: float
    peak_bytes: float
    columns_s: tuple[float, ...]
    reduction_s: float
    profile_terms: tuple[str, ...]
    analytic_terms: tuple[str, ...]


def _send_s(measured: Measured | None, gpu: str, nbytes: float, bandwidth: float) -> tuple[float, bool]:
    """One message across nodes: (seconds, from the profile)."""
    t = None if measured is None else measured.collective_s(gpu, "send_recv", "inter", 2, nbytes)
    return (t, True) if t is not None else (nbytes / bandwidth, False)


def _allreduce_s(measured: Measured | None, gpus: list[str], nbytes: float, bandwidth: float) -> tuple[float, bool]:
    """A gradient all-reduce over one node of each of ``gpus``: (seconds, from the profile)."""
    p = len(gpus)
    if p <= 1 or nbytes <= 0:
        return 0.0, False
    if measured is not None:
        direct = [measured.collective_s(g, "all_reduce", "inter", p, nbytes) for g in gpus]
        if all(t is not None for t in direct):
            return max(direct), True
        steps = [measured.collective_s(g, "send_recv", "inter", 2, nbytes / p) for g in gpus]
        if all(t is not None for t in steps):  # the ring's 2(p − 1) steps, each paced by its slowest sender
            return 2 * (p - 1) * max(steps), True
    return cm.ring_allreduce_s(nbytes, p, bandwidth), False


def price_hetero(row: HeteroMeasurement, measured: Measured | None = None) -> HeteroPrice:
    """The row's iteration time and peak memory under the cost model (``measured``: from a profile where it covers)."""
    cfg, seq, b = row.model, row.seq, row.microbatch
    par = row.layout.runtime(BuiltinParallelizer(measured=measured))
    element = cm.element_bytes(row.layout.running.precision)
    M = row.global_batch // (b * row.dp)
    atoms = par.slice_model(cfg, seq=seq)
    starts = tuple(accumulate((st.layers for st in row.stages), initial=0))
    taken: set[str] = set()
    analytic: set[str] = {"memory"}
    times: dict[tuple[int, int], float] = {}
    peak = 0.0
    S = len(row.stages)
    for i, st in enumerate(row.stages):
        sl = Slice(atoms[starts[i]:starts[i + 1]])
        for j, rep in enumerate(st.replicas):
            island = IslandSpec(f"s{i}r{j}-{rep.gpu.name}", rep.gpu, 1, row.gpus_per_node, row.inter_bandwidth,
                                transport=row.transport)
            lay = Layout(rep.tp, 1, 1, (st.layers,), row.layout.recompute, row.layout.zero)
            plan = par.plan(sl, island, lay, microbatch_size=b, microbatches=M)
            cost = plan.stages[0]
            times[i, j] = cost.time_s
            taken |= set(cost.measured)
            analytic |= {"compute", "optimizer"} - set(cost.measured)
            # the 1F1B schedule keeps S − i micro-batches in flight on stage i (at most M)
            peak = max(peak, cost.static_bytes + cost.activation_bytes * min(S - i, M))
    boundary = cm.boundary_bytes(cfg, seq, b, element)
    # DeepSpeed's pipeline engine blocks on its sends (the sender pays, as price_stage's hand-overs
    # inside an island); otherwise the hand-over is a link between stages, as the composition prices it
    sender_pays = row.layout.running.handover == "deepspeed"
    columns = []
    for j in range(row.dp):
        t = [times[i, j] for i in range(S)]
        links = []
        for i in range(S - 1):
            a, z = row.stages[i].replicas[j], row.stages[i + 1].replicas[j]
            bw = min(_achieved(row, a.gpu), _achieved(row, z.gpu))
            fwd, f_measured = _send_s(measured, a.gpu.name, boundary, bw)  # activations, sent by stage i
            bwd, b_measured = _send_s(measured, z.gpu.name, boundary, bw)  # gradients, sent by stage i + 1
            if sender_pays:
                t[i] += fwd
                t[i + 1] += bwd
            else:
                links.append(fwd + bwd)
            (taken if f_measured and b_measured else analytic).add("handover")
        columns.append(sum(t) + sum(links) + (M - 1) * max(max(t), max(links, default=0.0)))
    reduction = 0.0
    for i, st in enumerate(row.stages):
        params = sum(float(cm.layer_parameters(cfg, k)) for k in range(starts[i], starts[i + 1]))
        params += cm.input_embedding_parameters(cfg) if i == 0 else 0
        params += cm.head_parameters(cfg, with_embedding=False) if i == S - 1 else 0
        nbytes = params * cm.gradient_bytes(row.layout.running.precision, row.layout.running.grad_fp32)
        bw = min(_achieved(row, r.gpu) for r in st.replicas)
        t, from_profile = _allreduce_s(measured, [r.gpu.name for r in st.replicas], nbytes, bw)
        if len(st.replicas) > 1:
            (taken if from_profile else analytic).add("dp_collectives")
        reduction = max(reduction, t)
    return HeteroPrice(max(columns) + reduction, peak, tuple(columns), reduction, tuple(sorted(taken)),
                       tuple(sorted(analytic - taken)))


def _achieved(row: HeteroMeasurement, gpu) -> float:
    """Bytes/s NCCL achieves over one node's network in the row's cluster."""
    return IslandSpec("n", gpu, 2, row.gpus_per_node, row.inter_bandwidth, transport=row.transport).inter_achieved


__all__ = ["HeteroPrice", "price_hetero"]
