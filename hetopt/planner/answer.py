"""What :func:`hetopt.plan` returns: :class:`HeteroPlan`, frozen, with one :class:`StageRow` a stage.

The plan is built once, at the end of the planner's steps (``planner/plan.py``), from the
islands, the plan's outcome (``planner/outcome.py``: status, bound, gap, reason), the composed
stages and the alternatives; nothing changes it afterwards. ``hetopt.jsonout.plain`` turns it into
the ``hetopt plan --json`` document.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hetopt.costmodel import DEFAULT_HANDOVER, DEFAULT_HOST, TRAINING_PER_FORWARD
from hetopt.result import Status
from hetopt.units import GIB
from hetopt.workload import ModelConfig, head_forward_flops, layer_forward_flops

if TYPE_CHECKING:
    from hetopt.planner.cluster import Cluster
    from hetopt.planner.layout import PricedLayout, PricedPipeline
    from hetopt.planner.outcome import Attempt
    from hetopt.planner.parallelizer import IslandSpec
    from hetopt.planner.replicas import ReplicasPlan


#: What priced an alternative: the pipeline family's closed form over the built-in stage prices
#: (as the composed plan), or the allocation family's FSDP model (Cephalo's, per GPU).
PRICED_BY_PIPELINE = "pipeline closed form"
PRICED_BY_ALLOCATION = "allocation model (FSDP, per GPU)"


@dataclass(frozen=True)
class Alternative:
    """Another plan: its name, iteration time (None if none), note, status, and the model that priced it."""

    name: str
    iteration_time_s: float | None
    detail: str
    status: Status
    priced_by: str = PRICED_BY_PIPELINE
    #: GPUs the plan holds, by type (for its cost), and its cost (:func:`plan_cost`, set by the planner)
    gpus_by_type: dict[str, int] | None = None
    cost: dict | None = None


@dataclass(frozen=True)
class StageRow:
    """One stage of the composed pipeline, for the report."""

    island: str
    gpu: str
    first_layer: int
    layers: int
    layout: str
    gpus: int
    time_s: float
    memory_gib: float
    in_flight: int
    ep: int = 1  # experts' parallel degree (1: experts split by TP like a dense FFN)
    fsep: bool = False  # fully sharded EP
    cp: int = 1  # context-parallel degree
    offload: bool = False  # activations offloaded to host memory
    #: one micro-batch's forward and backward (``time_s`` is their sum), and the round-trip time of
    #: the link to the next stage (0 inside an island's block): what the 1F1B schedule of the plan
    #: is simulated from (``hetopt draw --gantt``)
    forward_s: float | None = None
    backward_s: float | None = None
    link_after_s: float = 0.0


@dataclass(frozen=True)
class HeteroPlan:
    """The planner's answer. Times in seconds; ``status``, ``bound_s``, ``gap`` and ``reason``
    are the :class:`~hetopt.planner.outcome.PlanOutcome` of the composed pipeline."""

    cluster: str
    model: str
    global_batch: int
    microbatch_size: int
    microbatches: int
    seq: int
    status: Status
    reason: str = ""
    islands: list[dict] = field(default_factory=list)
    stages: list[StageRow] = field(default_factory=list)
    iteration_time_s: float | None = None  # by ``time_model``: the 1F1B simulation unless it says why not
    simulated_s: float | None = None
    analytic_s: float | None = None  # the family's closed form T of the same pipeline
    time_model: str = ""  # what iteration_time_s is: "1F1B simulation", or "closed form" with the reason
    throughput_samples_s: float | None = None
    tflops_per_gpu: float | None = None
    ideal_time_s: float | None = None
    efficiency: float | None = None
    bound_s: float | None = None  # a proven lower bound on the iteration time
    gap: float | None = None  # (iteration − bound) / iteration
    alternatives: list[Alternative] = field(default_factory=list)
    best: str = ""
    speedups: dict[str, float] = field(default_factory=dict)
    timing_s: dict[str, float] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)  # islands not composed (max_islands)
    enumeration: dict = field(default_factory=dict)
    composition: dict = field(default_factory=dict)
    given_layout: dict | None = None  # the given layout priced by the same cost model, with the plan's speed-up over it
    runtime: str | None = None  # the runtime the search was held to (its non-default keys)
    replicas: ReplicasPlan | None = None  # data-parallel replicas beside the pipeline (``replicas=True``)
    #: GPUs of the composed islands that run attention unfused although the runtime asks for
    #: FlashAttention: it does not run on them (the catalog's ``flash_attention``)
    unfused_attention: list[str] = field(default_factory=list)
    #: the mixed precision the plan is priced in (``cm.PRECISIONS``): its training state's bytes, and
    #: what ``hetopt export`` asks the runtime for
    precision: str = ""
    #: regimes of the plan no calibration covers, a sentence each (``planner/coverage.py``)
    outside_calibration: list[str] = field(default_factory=list)
    #: how the plan's data-parallel traffic was priced, for ``hetopt export``: overlapped with
    #: compute (``overlap=``), its gradients reduced in fp32 (``gradreduce=fp32``), and how a
    #: micro-batch crosses between stages (``handover=``, ``cm.HANDOVERS``)
    overlap: bool = True
    grad_reduce_fp32: bool = False
    handover: str = DEFAULT_HANDOVER
    #: the software stack whose host time per layer floored every stage (``host=``, ``cm.HOST_STACKS``)
    host: str = DEFAULT_HOST
    #: the runtime the plan was searched for (``target``), and the launchable plan beside the
    #: unrestricted one (``planner/launchable.launch_summary``)
    target: str | None = None
    launchability: dict | None = None
    #: what an iteration costs on the GPUs the plan holds (:func:`plan_cost`); None without a plan
    cost: dict | None = None
    #: ``objective="cost"`` or a budget: the island sets planned and how each was settled
    #: (``planner/cheapest.py``)
    cost_search: dict | None = None

    @property
    def status_line(self) -> str:
        """The status as ``hetopt plan`` prints it: ``status OPTIMAL, bound 16.37 s, gap 0``,
        and the reason when there is one.

        >>> HeteroPlan("c", "m", 8, 0, 0, 2048, Status.TIME_LIMIT, reason="time limit reached").status_line
        'status TIME_LIMIT: time limit reached'
        """
        line = f"status {self.status}"
        chosen = (self.cost_search or {}).get("chosen")
        if self.status.has_solution and chosen and self.cost_search["objective"] == "cost":
            # the cheapest plan: its status, bound and gap are in dollars per iteration
            gap = "-" if self.gap is None else f"{self.gap:.3g}"
            line += f" (cost), bound ${chosen['bound']:.4g} per iteration, gap {gap}"
        elif self.status.has_solution:
            bound = "-" if self.bound_s is None else f"{self.bound_s:.4g}"
            gap = "-" if self.gap is None else f"{self.gap:.3g}"
            line += f", bound {bound} s, gap {gap}"
        return line + (f": {self.reason}" if self.reason else "")

    @property
    def answer_status(self) -> Status:
        """The status of the planner's answer as a whole: the composed plan's, or FEASIBLE when
        only its data-parallel replicas (``replicas=True``) found a plan, which then is the
        answer (not proven best). The command line's exit code follows it.

        Examples
        --------
        >>> HeteroPlan("c", "m", 8, 0, 0, 2048, Status.TIME_LIMIT).answer_status
        <Status.TIME_LIMIT: 'TIME_LIMIT'>
        """
        if not self.status.has_solution and self.replicas is not None and self.replicas.status.has_solution:
            return Status.FEASIBLE
        return self.status


def model_training_flops(cfg: ModelConfig, seq: int) -> float:
    """Training FLOPs of one sample (forward + backward, no recomputation)."""
    forward = sum(layer_forward_flops(cfg, seq, i) for i in range(cfg.layers)) + head_forward_flops(cfg, seq)
    return TRAINING_PER_FORWARD * forward


def ideal_time(cluster: Cluster, cfg: ModelConfig, global_batch: int, seq: int) -> float:
    """The iteration's training FLOPs spread over every GPU at its modeled speed
    (``GpuType.sustained_flops``), no memory traffic, no communication: this cost
    model's physical limit, a lower bound on every plan's iteration time."""
    speed = sum(node.gpus * gpu.sustained_flops for node, gpu in zip(cluster.islands.nodes, cluster.gpu_types))
    return global_batch * model_training_flops(cfg, seq) / speed


def plan_figures(best: Attempt, specs: list[IslandSpec], cluster: Cluster, cfg: ModelConfig, seq: int, global_batch: int,
             ideal: float) -> dict:
    """The plan's figures and stages from the best composition's solution."""
    res, sol = best.result, best.result.solution
    stages, reports = [], iter(sol.stages)
    for k, block in enumerate(sol.blocks):
        pp, first = best.plans[block.option], block.first_layer
        for n, s in enumerate(pp.stages):
            report = next(reports)
            last = n == len(pp.stages) - 1 and k < len(sol.link_s)  # the link to the next block follows
            stages.append(StageRow(
                island=specs[block.island].name, gpu=specs[block.island].gpu.name, first_layer=first,
                layers=s.layers, layout=pp.layout, gpus=s.gpus, time_s=report.time_s,
                memory_gib=report.memory_bytes / GIB, in_flight=report.in_flight,
                ep=pp.ep, fsep=pp.fsep, cp=pp.cp, offload=pp.offload,
                forward_s=report.forward_s, backward_s=report.backward_s,
                link_after_s=sol.link_s[k] if last else 0.0,
            ))
            first += s.layers
    return {
        "microbatch_size": best.microbatch_size, "microbatches": global_batch // best.microbatch_size,
        "iteration_time_s": res.objective, "simulated_s": getattr(sol, "simulated_or_none", None),
        "analytic_s": getattr(sol, "iteration_time_s", None), "time_model": res.stats.get("time_model", "closed form"),
        "throughput_samples_s": global_batch / res.objective,
        "tflops_per_gpu": global_batch * model_training_flops(cfg, seq) / res.objective / cluster.gpus / 1e12,
        "efficiency": ideal / res.objective, "stages": stages,
        "composition": {"method": res.method, "status": res.status.value, "gap": res.gap, "stats": res.stats},
    }


def given_layout_figures(given: PricedLayout | PricedPipeline, time_model: str, plan_s: float | None) -> dict:
    """The given layout's figures, timed like the plan, with the plan's speed-up over it."""
    out = given.to_dict()
    simulated = out.get("simulated_s")
    if time_model == "simulated" and simulated is not None:
        # a per-island layout is a pipeline: priced like the plan, by its simulated schedule
        out["analytic_s"] = out["iteration_time_s"]
        out["iteration_time_s"] = simulated
    if out.get("iteration_time_s") is not None and plan_s:
        out["plan_speedup"] = out["iteration_time_s"] / plan_s
    return out


#: Seconds in an hour: prices are per GPU-hour.
SECONDS_PER_HOUR = 3600.0


def dollars(usd_per_hour: float, seconds: float) -> float:
    """What ``seconds`` of GPUs renting at ``usd_per_hour`` cost, US dollars.

    >>> dollars(36.0, 1.8)
    0.018
    """
    return usd_per_hour * seconds / SECONDS_PER_HOUR


def plan_cost(gpus_by_type: dict[str, int], prices: dict[str, float], time_s: float, tokens: int) -> dict:
    """What a plan costs: each GPU it holds, at its price per GPU-hour, for the iteration's time.

    A plan holds every GPU of the islands it runs on (the planner places a block on a whole
    island: GPUs its layout leaves idle there are paid for), not the cluster's other islands
    (released, as Sailor's planner counts them). ``usd_per_hour`` is the rate of those GPUs; per iteration it
    is rate × time / 3600, per million tokens that over the iteration's tokens × 10⁶. A GPU type
    without a price (``unpriced``) leaves every figure None: a partial sum would read as a price.

    Examples
    --------
    >>> plan_cost({"A100": 8, "V100": 8}, {"A100": 3.0, "V100": 2.0}, 1.8, 1_000_000)
    {'usd_per_hour': 40.0, 'usd_per_iteration': 0.02, 'usd_per_million_tokens': 0.02, 'gpus': 16, 'unpriced': []}
    >>> plan_cost({"T4": 4}, {}, 1.0, 1000)["unpriced"]
    ['T4']
    """
    unpriced = sorted(t for t in gpus_by_type if t not in prices)
    rate = None if unpriced else sum(n * prices[t] for t, n in gpus_by_type.items())
    per_iteration = None if rate is None else dollars(rate, time_s)
    return {"usd_per_hour": rate, "usd_per_iteration": per_iteration,
            "usd_per_million_tokens": None if per_iteration is None else per_iteration / tokens * 1e6,
            "gpus": sum(gpus_by_type.values()), "unpriced": unpriced}


def comparable(a: Status, b: Status) -> bool:
    """Whether two answers' times make an honest speed-up: both proven (OPTIMAL), or both cut
    by the same time limit (FEASIBLE). A proven time against a cut one overstates the gap
    (the cut search might have found better), so no speed-up is shown between them.

    >>> comparable(Status.OPTIMAL, Status.OPTIMAL), comparable(Status.FEASIBLE, Status.FEASIBLE)
    (True, True)
    >>> comparable(Status.OPTIMAL, Status.FEASIBLE)
    False
    """
    return a == b and a in (Status.OPTIMAL, Status.FEASIBLE)


def rank(plan_s: float | None, alternatives: list[Alternative]) -> dict:
    """The fastest of the composed plan and the alternatives, and the plan's speed-up over each."""
    timed = [(n, t) for n, t in [("tangram-composed", plan_s)] + [(a.name, a.iteration_time_s) for a in alternatives]
             if t is not None]
    if not timed:
        return {}
    speedups = {} if plan_s is None else {a.name: a.iteration_time_s / plan_s for a in alternatives if a.iteration_time_s}
    return {"best": min(timed, key=lambda nt: nt[1])[0], "speedups": speedups}


__all__ = ["PRICED_BY_ALLOCATION", "PRICED_BY_PIPELINE", "SECONDS_PER_HOUR", "Alternative", "HeteroPlan", "StageRow", "comparable", "dollars", "plan_cost", "given_layout_figures", "ideal_time", "model_training_flops", "plan_figures", "rank"]
