"""What :func:`hetopt.plan` returns: :class:`HeteroPlan`, frozen, with one :class:`StageRow` a stage.

The plan is built once, at the end of the planner's steps (``planner/steps.py``), from the
islands, the plan's outcome (``planner/search/outcome.py``: status, bound, gap, reason), the composed
stages and the alternatives; nothing changes it afterwards. ``hetopt.jsonout.plain`` turns it into
the ``hetopt plan --json`` document.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from hetopt.costmodel import TRAINING_PER_FORWARD
from hetopt.costmodel.running import Running
from hetopt.hardware import DEFAULT_HEADROOM_GIB, HEADROOM_PARTS
from hetopt.planfile import PLAN_FORMAT, PLAN_VERSION, model_shape
from hetopt.result import Status
from hetopt.units import GIB
from hetopt.workload import ModelConfig, head_forward_flops, layer_forward_flops

if TYPE_CHECKING:
    from hetopt.planner.setup.cluster import Cluster
    from hetopt.planner.setup.layout import PricedLayout, PricedPipeline
    from hetopt.planner.search.outcome import Attempt
    from hetopt.planner.parallelizer.protocol import IslandSpec
    from hetopt.planner.alternatives.replicas import ReplicasPlan


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
    #: the running settings it was priced under (the plan's), and the ``--runtime`` keys of them
    #: its pricing model cannot express (priced as that model assumes: then it is not compared
    #: for "best", :func:`rank`)
    running: Running | None = None
    ignores: tuple[str, ...] = ()
    #: the plan itself as plain data, where the alternative is one that can be read back
    #: (``mixed-stages``: its stages, members, memory and times, and its ``--layout`` text;
    #: ``planner/alternatives/mixedplan.py``, docs/formats.md); None for the others, whose ``detail`` says them
    plan: dict | None = None


@dataclass(frozen=True)
class StageRow:
    """One stage of the composed pipeline, for the report.

    Figures are SI with the unit in the name (``time_s``, ``memory_bytes``), as on every
    public object (CONVENTIONS §9, "Units on public objects"); the layout is ``tp``, ``pp``,
    ``dp``, ``ep``, ``cp`` as integers and ``layout_text`` as text (``tp2 pp3 dp2 selective
    zero1 sp``). ``layout`` and ``memory_gib`` are the names of the previous release, kept
    as read-only aliases for one more; the JSON document keeps its keys ``layout`` (the text)
    and ``memory_gib`` (GiB, as files use), beside ``tp``, ``pp`` and ``dp``.

    Examples
    --------
    >>> row = StageRow("a100-0", "A100", 0, 12, "tp2 pp2 dp2 none zero1", 8, 0.31, 12 * 2**30, 2, tp=2, pp=2, dp=2)
    >>> (row.tp, row.pp, row.dp), row.layout_text, row.memory_gib
    ((2, 2, 2), 'tp2 pp2 dp2 none zero1', 12.0)
    >>> row.to_dict()["layout"], row.to_dict()["memory_gib"]
    ('tp2 pp2 dp2 none zero1', 12.0)
    """

    island: str
    gpu: str
    first_layer: int
    layers: int
    layout_text: str  # the layout as text, e.g. "tp2 pp3 dp2 selective zero1 sp"
    gpus: int
    time_s: float
    memory_bytes: float  # the peak per GPU
    in_flight: int
    ep: int = 1  # experts' parallel degree (1: experts split by TP like a dense FFN)
    fsep: bool = False  # fully sharded EP
    cp: int = 1  # context-parallel degree
    offload: bool = False  # activations offloaded to host memory
    #: the memory of one of the stage's GPUs that ``memory_bytes`` (which holds the plan's memory
    #: headroom) must fit: its nodes' ``memory_gib``, in bytes (None: not known)
    capacity_bytes: float | None = None
    tp: int = 1  # tensor-parallel degree of the stage's island layout
    pp: int = 1  # pipeline stages of that layout on its island (this row is one of them)
    dp: int = 1  # data-parallel replicas of every stage of that layout
    #: one micro-batch's forward and backward (``time_s`` is their sum), and the round-trip time of
    #: the link to the next stage (0 inside an island's block): what the 1F1B schedule of the plan
    #: is simulated from (``hetopt draw --gantt``)
    forward_s: float | None = None
    backward_s: float | None = None
    link_after_s: float = 0.0

    @property
    def layout(self) -> str:
        """The previous release's name of ``layout_text`` (an alias for one release)."""
        return self.layout_text

    @property
    def capacity_gib(self) -> float | None:
        """``capacity_bytes`` in GiB (the plan document's unit)."""
        return None if self.capacity_bytes is None else self.capacity_bytes / GIB

    @property
    def memory_gib(self) -> float:
        """The previous release's field: ``memory_bytes`` in GiB (an alias for one release)."""
        return self.memory_bytes / GIB

    def to_dict(self) -> dict:
        """The row as the plan's JSON document writes it: field by field, the layout's text
        under ``layout`` and the memory in GiB under ``memory_gib`` (files name human units)."""
        out = {}
        for f in fields(self):
            if f.name == "layout_text":
                out["layout"] = self.layout_text
            elif f.name == "memory_bytes":
                out["memory_gib"] = self.memory_gib
            elif f.name == "capacity_bytes":
                out["capacity_gib"] = self.capacity_gib
            else:
                out[f.name] = getattr(self, f.name)
        return out


#: Stages listed by ``print(plan)`` (the rest are counted): a summary, not the report.
STR_STAGES = 12


@dataclass(frozen=True)
class HeteroPlan:
    """The planner's answer. Times in seconds; ``status``, ``bound_s``, ``gap`` and ``reason``
    are the :class:`~hetopt.planner.search.outcome.PlanOutcome` of the composed pipeline."""

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
    #: regimes of the plan no calibration covers, a sentence each (``planner/evaluation/coverage.py``)
    outside_calibration: list[str] = field(default_factory=list)
    #: how the framework runs the plan, every setting it was priced under (its precision set:
    #: the training state's bytes and what ``hetopt export`` asks the runtime for); the plan's
    #: JSON keeps it whole as ``running`` (:meth:`~hetopt.costmodel.running.Running.to_file`)
    running: Running = Running()
    #: the runtime the plan was searched for (``target``), and the launchable plan beside the
    #: unrestricted one (``planner/launchable.launch_summary``)
    target: str | None = None
    launchability: dict | None = None
    #: what an iteration costs on the GPUs the plan holds (:func:`plan_cost`); None without a plan
    cost: dict | None = None
    #: ``objective="cost"`` or a budget: the island sets planned and how each was settled
    #: (``planner/alternatives/cheapest.py``)
    cost_search: dict | None = None
    #: with a measured profile (``plan --profile``): which terms of each stage came from it and
    #: which from the analytic model (``hetopt.profile.measured.priced_from``); None without one
    priced_from: dict | None = None
    #: the model's whole shape (``hetopt.planfile.model_shape``) and the cluster's nodes
    #: (name, GPU type, GPUs, memory_gib), so the plan document needs no other file to export
    model_shape: dict | None = None
    nodes: list[dict] = field(default_factory=list)
    #: the memory headroom every stage holds beyond its tensors, GiB per GPU, and its parts with
    #: their sources (``hetopt.hardware.HEADROOM_PARTS``; a given ``memory_headroom``: one part)
    memory: dict | None = None

    def to_dict(self) -> dict:
        """The plan document (``hetopt plan --json``): ``format`` and ``version`` first
        (``hetopt.planfile``), then every field.

        >>> list(HeteroPlan("c", "m", 8, 0, 0, 2048, Status.TIME_LIMIT).to_dict())[:3]
        ['format', 'version', 'cluster']
        """
        return {"format": PLAN_FORMAT, "version": PLAN_VERSION,
                **{f.name: getattr(self, f.name) for f in fields(self)}}

    @property
    def precision(self) -> str:
        """The mixed precision the plan is priced in (``running.precision``; "" before a plan has one)."""
        return self.running.precision or ""

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

    def __str__(self) -> str:
        """A short aligned summary for ``print(plan)``: status, iteration time and how it was
        timed, bound and gap, throughput, the best of the alternatives, and the stages, one line
        each; ``repr`` keeps every field for debugging, ``hetopt plan`` prints the full report.

        Examples
        --------
        >>> row = StageRow("a100-0", "A100", 0, 24, "tp2 pp1 dp4 none zero1", 8, 0.25, 30 * 2**30, 1, tp=2, dp=4)
        >>> print(HeteroPlan("a100-8", "opt-350m", 64, 2, 32, 2048, Status.OPTIMAL, stages=[row],
        ...                  iteration_time_s=8.0, time_model="closed form", throughput_samples_s=8.0,
        ...                  tflops_per_gpu=41.2, bound_s=8.0, gap=0.0, best="tangram-composed"))
                        plan: opt-350m on a100-8, global batch 64 = 32 micro-batches of 2, seq 2048
                      status: OPTIMAL
            iteration_time_s: 8 (closed form)
                     bound_s: 8
                         gap: 0
        throughput_samples_s: 8
              tflops_per_gpu: 41.2
                        best: tangram-composed
                      stages: 1 stage on 8 GPUs
                              0  a100-0 (A100)  layers 0-23  tp2 pp1 dp4 none zero1  8 GPUs  0.25 s  30 GiB
        """
        from hetopt.result import figure, summary_lines  # the one summary style (result.py)

        split = f" = {self.microbatches} micro-batches of {self.microbatch_size}" if self.microbatch_size else ""
        rows: list[tuple[str, object]] = [
            ("plan", f"{self.model} on {self.cluster}, global batch {self.global_batch}{split}, seq {self.seq}"),
            ("status", self.status)]
        if self.iteration_time_s is not None:
            how = f" ({self.time_model})" if self.time_model else ""
            rows += [("iteration_time_s", figure(self.iteration_time_s) + how), ("bound_s", figure(self.bound_s)),
                     ("gap", figure(self.gap)), ("throughput_samples_s", figure(self.throughput_samples_s)),
                     ("tflops_per_gpu", figure(self.tflops_per_gpu))]
        if self.best:
            rows.append(("best", self.best))
        if self.stages:
            gpus = sum(s.gpus for s in self.stages)
            lines = [f"{len(self.stages)} stage{'s' if len(self.stages) != 1 else ''} on {gpus} GPUs"]
            cells = [(str(k), f"{st.island} ({st.gpu})", f"layers {st.first_layer}-{st.first_layer + st.layers - 1}",
                      st.layout_text, f"{st.gpus} GPU{'s' if st.gpus != 1 else ''}", f"{st.time_s:.4g} s",
                      f"{st.memory_bytes / GIB:.3g} GiB") for k, st in enumerate(self.stages[:STR_STAGES])]
            widths = [max(len(c[j]) for c in cells) for j in range(len(cells[0]))]
            # text columns left-aligned, the figures (GPUs, seconds, GiB) right-aligned
            lines += ["  ".join(c.rjust(w) if j in (0, 4, 5, 6) else c.ljust(w) for j, (c, w) in enumerate(zip(row, widths)))
                      for row in cells]
            if len(self.stages) > STR_STAGES:
                lines.append(f"... {len(self.stages) - STR_STAGES} more (plan.stages)")
            rows.append(("stages", "\n".join(lines)))
        if self.reason:
            rows.append(("reason", self.reason))
        return summary_lines(rows)


def self_contained(cluster: Cluster, cfg: ModelConfig, reserved_bytes: float | None) -> dict:
    """What makes a plan readable without other files: the model's shape, the cluster's nodes, and
    the memory headroom it was priced with (``reserved_bytes`` per GPU; None: a parallelizer that
    says none).

    >>> from hetopt.planner.setup.cluster import load_cluster
    >>> from hetopt.hardware import DEFAULT_HEADROOM_GIB
    >>> from hetopt.workload import ModelConfig
    >>> out = self_contained(load_cluster("tangram-c1"), ModelConfig("m", "gpt", 2, 64, 4, 256, 100, 128), DEFAULT_HEADROOM_GIB * GIB)
    >>> out["nodes"][0], out["memory"]["headroom_gib"] == DEFAULT_HEADROOM_GIB, len(out["memory"]["parts"])
    ({'name': 't4-0', 'gpu': 'T4', 'gpus': 4, 'memory_gib': 16.0}, True, 3)
    """
    nodes = [{"name": n.name, "gpu": gpu.name, "gpus": n.gpus, "memory_gib": n.memory_bytes / GIB}
             for n, gpu in zip(cluster.islands.nodes, cluster.gpu_types)]
    memory = None
    if reserved_bytes is not None:
        headroom = reserved_bytes / GIB
        default = abs(headroom - DEFAULT_HEADROOM_GIB) <= 1e-12
        parts = ([{"what": p.what, "gib": p.gib, "source": p.source} for p in HEADROOM_PARTS] if default else
                 [{"what": "given", "gib": headroom, "source": "the plan's request (memory_headroom)"}])
        memory = {"headroom_gib": headroom, "parts": parts}
    return {"model_shape": model_shape(cfg), "nodes": nodes, "memory": memory}


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
                layers=s.layers, layout_text=pp.layout, gpus=s.gpus, time_s=report.time_s,
                memory_bytes=report.memory_bytes, in_flight=report.in_flight,
                ep=pp.ep, fsep=pp.fsep, cp=pp.cp, offload=pp.offload, tp=pp.tp, pp=pp.pp, dp=pp.dp,
                capacity_bytes=specs[block.island].memory_bytes,
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
    """The fastest of the composed plan and the alternatives priced alike (none that ignores a
    running setting of the plan), and the plan's speed-up over each.

    >>> a = Alternative("x", 1.0, "", Status.OPTIMAL, ignores=("overlap",))
    >>> rank(2.0, [a])["best"]
    'tangram-composed'
    """
    timed = [(n, t) for n, t in [("tangram-composed", plan_s)] + [(a.name, a.iteration_time_s) for a in alternatives
                                                                   if not a.ignores] if t is not None]
    if not timed:
        return {}
    speedups = {} if plan_s is None else {a.name: a.iteration_time_s / plan_s for a in alternatives if a.iteration_time_s}
    return {"best": min(timed, key=lambda nt: nt[1])[0], "speedups": speedups}


__all__ = ["PRICED_BY_ALLOCATION", "PRICED_BY_PIPELINE", "SECONDS_PER_HOUR", "Alternative", "HeteroPlan", "StageRow", "comparable", "dollars", "plan_cost", "given_layout_figures", "ideal_time", "model_training_flops", "plan_figures", "rank", "self_contained"]
