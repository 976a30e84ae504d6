"""What each training runtime runs as one job, unmodified: the rule table.

A heterogeneous plan gives every island its own layout. A stock runtime starts one SPMD job:
some settings are one value for the whole job (Megatron-LM's ``--tensor-model-parallel-size``,
torchtitan's device mesh), some layouts it cannot run at all (ZeRO-2 beside pipeline stages in
DeepSpeed's pipeline engine). This module writes those facts down once, per runtime and
version, with the argument or source line behind each:

- :attr:`Runtime.job_wide`: the layout fields that must be equal on every island;
- :attr:`Runtime.rules`: what one island's layout must satisfy.

Two readers use the same table. The planner's ``target`` search (``planner/search/launchable.py``)
keeps only the partial plans a runtime takes and composes each combination of job-wide values
apart, so its optimum is exact over what the runtime can launch. The exporters
(``hetopt.export``) list the rules a plan breaks (:func:`plan_breaks`) and refuse it unless
gaps are allowed. ``docs/runtimes.md`` prints the table (:func:`markdown`; a test checks that
the page is this module's).

Examples
--------
>>> shape = Shape(tp=2, pp=4, dp=1, vpp=1, recompute="none", zero=2, sequence_parallel=True,
...               stage_layers=(6, 6, 6, 6), whole_model=True, bf16=True)
>>> job = Job(precision="bf16", seq=2048, experts=1, tied_embeddings=False)
>>> [r.key for r in RUNTIMES["megatron"].broken(shape, job)]
['zero']
>>> [r.key for r in RUNTIMES["deepspeed"].broken(shape, job)]
['tp', 'zero']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hetopt.costmodel.stage_shape import StageGpus
from hetopt.parallelism.expert import expert_tp


@dataclass(frozen=True)
class Shape(StageGpus):
    """One island's part of a plan, as a runtime sees it: the island's layout, the layers of its
    stages, whether it holds the whole model, and whether its GPU computes in BF16."""

    tp: int
    pp: int
    dp: int
    vpp: int
    recompute: str
    zero: int
    sequence_parallel: bool
    stage_layers: tuple[int, ...]
    whole_model: bool
    bf16: bool
    ep: int = 1
    fsep: bool = False
    cp: int = 1
    offload: bool = False

    @property
    def sp(self) -> bool:
        """Sequence parallelism as a job setting: only meaningful with TP (off at tp1)."""
        return self.sequence_parallel and self.tp > 1

    @property
    def etp(self) -> int:
        """The experts' tensor-parallel degree (``hetopt.parallelism.expert.expert_tp``; 1 without EP)."""
        return expert_tp(tp=self.tp, ep=self.ep, cp=self.cp, dp=self.dp) if self.ep > 1 else 1

    @property
    def layers_per_stage(self) -> int | None:
        """The layers every stage holds, or None when the stages differ."""
        return self.stage_layers[0] if len(set(self.stage_layers)) == 1 else None

    def value(self, field: str) -> object:
        """The value of a job-wide field (an attribute or property of this shape)."""
        return getattr(self, field)


@dataclass(frozen=True)
class Job:
    """What the whole job shares: its mixed precision, sequence length, the model's experts and
    whether it ties its output layer to the embedding (None: the model is not known)."""

    precision: str
    seq: int
    experts: int | None = None
    tied_embeddings: bool | None = None


@dataclass(frozen=True)
class Rule:
    """One island-level rule: ``holds(shape, job)``; ``text`` says it, ``source`` where it is read."""

    key: str
    text: str
    source: str
    holds: Callable[[Shape, Job], bool]


@dataclass(frozen=True)
class JobWide:
    """A layout field the runtime takes once for the whole job."""

    field: str  # the Shape attribute
    name: str  # how a message names it
    source: str  # the runtime's argument or key


@dataclass(frozen=True)
class Runtime:
    """A training runtime as it runs, unmodified, at ``version``."""

    name: str
    title: str
    version: str
    job_wide: tuple[JobWide, ...]
    rules: tuple[Rule, ...]
    #: runs pipeline stages of a planner's plan (Cephalo runs FSDP with per-GPU batches only)
    pipeline: bool = True
    #: data-parallel traffic overlapped with compute as the runtime runs it (None: as planned;
    #: False: the plan is priced without overlap)
    overlap: bool | None = None
    #: the one mixed precision it trains in (None: the plan's, bf16 or fp16)
    precision: str | None = None
    #: the launcher's rank order, for the docs
    placement: str = ""
    #: runs ZeRO-0 where it cannot run ZeRO-1 (torchtitan: DDP, or FSDP's ZeRO-3), so the search
    #: must keep ZeRO-0 layouts that ZeRO-1 ones dominate; where ZeRO-1 runs wherever ZeRO-0 does
    #: (ZeRO-1 is a job-wide setting like ZeRO-0, its layout no slower and no larger:
    #: ``parallelizer.layouts.without_redundant``), every ZeRO-0 job has a ZeRO-1 job at least as good
    keeps_zero0: bool = False

    def key(self, shape: Shape) -> tuple:
        """The job-wide values of ``shape``: islands whose keys are equal can form one job."""
        return tuple(shape.value(j.field) for j in self.job_wide)

    def broken(self, shape: Shape, job: Job) -> list[Rule]:
        """The rules ``shape`` breaks in ``job`` (empty: the runtime runs it)."""
        return [r for r in self.rules if not r.holds(shape, job)]

    def takes(self, shape: Shape, job: Job) -> bool:
        """Whether the runtime runs ``shape`` in ``job``."""
        return all(r.holds(shape, job) for r in self.rules)


def _fsdp2(s: Shape, j: Job) -> bool:
    # Megatron-LM validate_args: --use-torch-fsdp2 refuses pipeline and expert parallelism and
    # fp16, and needs untied embeddings
    return s.whole_model and s.pp == 1 and s.ep == 1 and j.precision == "bf16" and j.tied_embeddings is False


def _experts_divide(s: Shape, j: Job) -> bool:
    return s.ep == 1 or j.experts is None or j.experts % s.ep == 0


def _equal_stages(s: Shape) -> bool:
    return len(set(s.stage_layers)) == 1


_J = JobWide
#: Megatron-LM / Megatron-Core: one argument list for every rank.
MEGATRON = Runtime(
    name="megatron", title="Megatron-LM", version="core_v0.15.3 (offloading: core 0.16)",
    job_wide=(
        _J("tp", "tensor parallel size", "--tensor-model-parallel-size"),
        _J("dp", "data-parallel size", "world / (tp·pp·cp)"),
        _J("cp", "context parallel size", "--context-parallel-size"),
        _J("ep", "expert parallel size", "--expert-model-parallel-size"),
        _J("sp", "sequence parallelism", "--sequence-parallel"),
        _J("recompute", "recomputation", "--recompute-granularity"),
        _J("zero", "ZeRO stage", "--use-distributed-optimizer / --use-torch-fsdp2"),
        _J("vpp", "virtual pipeline stages", "--num-virtual-stages-per-pipeline-rank"),
        _J("offload", "activation offloading", "--fine-grained-activation-offloading"),
    ),
    rules=(
        Rule("zero", "ZeRO 0 or 1 (the distributed optimizer); ZeRO-3 only as FSDP2: one stage, no EP, bf16, "
                     "untied embeddings; no ZeRO-2",
             "arguments.py: --use-distributed-optimizer, --use-torch-fsdp2 and its asserts in validate_args",
             lambda s, j: s.zero <= 1 or (s.zero == 3 and _fsdp2(s, j))),
        Rule("fsep", "no fully sharded expert parallelism", "Megatron-Core has none",
             lambda s, j: not s.fsep),
        Rule("vpp", "interleaving only on a plan of one island with equal stages (the per-chunk split of "
                    "uneven stages is not written)",
             "--num-virtual-stages-per-pipeline-rank; --pipeline-model-parallel-layout",
             lambda s, j: s.vpp == 1 or (s.whole_model and _equal_stages(s))),
        Rule("ep", "EP divides the experts, and expert TP × EP divides a stage's tp·cp·dp GPUs",
             "validate_args (num_experts % ep); parallel_state.initialize_model_parallel",
             lambda s, j: s.ep == 1 or (_experts_divide(s, j) and s.stage_gpus % (s.etp * s.ep) == 0)),
        Rule("ep-sp", "EP with TP needs sequence parallelism", "validate_args: MoE with TP requires --sequence-parallel",
             lambda s, j: s.ep == 1 or s.tp == 1 or s.sequence_parallel),
        Rule("ep-bf16", "EP trains in bf16", "validate_args: not fp16 with --expert-model-parallel-size > 1",
             lambda s, j: s.ep == 1 or j.precision == "bf16"),
        Rule("cp", "the sequence is a multiple of 2·cp", "context parallelism's load-balanced split (2·cp chunks)",
             lambda s, j: s.cp == 1 or j.seq % (2 * s.cp) == 0),
    ),
    overlap=None,
    placement="global rank = tp innermost, then cp, dp, pp outermost: stage k on ranks [k·S, (k+1)·S), S = tp·cp·dp",
)

#: torchtitan: one device mesh and one job TOML.
TORCHTITAN = Runtime(
    name="torchtitan", title="torchtitan", version="v0.2.2 job_config (read by 0.3.0 as well)",
    job_wide=(
        _J("tp", "tensor parallel degree", "parallelism.tensor_parallel_degree"),
        _J("dp", "data-parallel degree", "parallelism.data_parallel_{shard,replicate}_degree"),
        _J("cp", "context parallel degree", "parallelism.context_parallel_degree"),
        _J("ep", "expert parallel degree", "parallelism.expert_parallel_degree"),
        _J("recompute", "recomputation", "activation_checkpoint.mode"),
        _J("zero", "ZeRO stage", "data_parallel_shard_degree (FSDP2) or data_parallel_replicate_degree (DDP)"),
        _J("vpp", "virtual pipeline stages", "parallelism.pipeline_parallel_schedule"),
    ),
    rules=(
        Rule("zero", "ZeRO 0 (DDP, replicate degree) or 3 (FSDP2, shard degree); no optimizer- or gradient-only "
                     "sharding", "parallelism.data_parallel_replicate_degree / data_parallel_shard_degree",
             lambda s, j: s.zero in (0, 3)),
        Rule("recompute", "recomputation none or full (its selective mode is an op-level policy, not Megatron's "
                          "attention recomputation)", "activation_checkpoint.mode",
             lambda s, j: s.recompute in ("none", "full")),
        Rule("sp", "TP always with sequence parallelism", "parallelize_llama: SequenceParallel on the norms",
             lambda s, j: s.tp == 1 or s.sequence_parallel),
        Rule("vpp", "plain 1F1B (no interleaving: the per-chunk split is not written)",
             "parallelism.pipeline_parallel_schedule = 1F1B", lambda s, j: s.vpp == 1),
        Rule("fsep", "no fully sharded expert parallelism", "torchtitan has none", lambda s, j: not s.fsep),
        Rule("offload", "no activation offloading", "training.enable_cpu_offload moves FSDP state, not activations",
             lambda s, j: not s.offload),
        Rule("bf16", "bf16 on GPUs with BF16", "training.mixed_precision_param: bfloat16 or float32",
             lambda s, j: s.bf16 and j.precision == "bf16"),
        Rule("cp", "CP shards the weights (FSDP over dp_shard·cp): ZeRO-3 with CP", "parallel_dims.py",
             lambda s, j: s.cp == 1 or s.zero == 3),
        Rule("ep", "EP divides the experts and takes its ranks from dp_shard·cp·tp", "parallel_dims.py",
             lambda s, j: s.ep == 1 or (_experts_divide(s, j)
                                        and ((s.dp if s.zero == 3 else 1) * s.cp * s.tp) % (s.etp * s.ep) == 0)),
    ),
    overlap=None, precision="bf16", keeps_zero0=True,
    placement="device mesh pp outermost: stage k on ranks [k·S, (k+1)·S), S = tp·cp·dp",
)

#: DeepSpeed's pipeline engine (``PipelineModule``) and ZeRO, without Megatron-DeepSpeed's model code.
DEEPSPEED = Runtime(
    name="deepspeed", title="DeepSpeed", version="v0.18 (pipeline engine)",
    job_wide=(
        _J("tp", "tensor parallel size", "none of its own"),
        _J("dp", "data-parallel size", "world / pp"),
        _J("zero", "ZeRO stage", "zero_optimization.stage"),
        _J("recompute", "recomputation", "PipelineModule(activation_checkpoint_interval)"),
        _J("offload", "activation offloading", "activation_checkpointing.cpu_checkpointing"),
        _J("layers_per_stage", "layers per stage", "PipelineModule(partition_method='type:...')"),
    ),
    rules=(
        Rule("tp", "no tensor parallelism (stock DeepSpeed has none; Megatron-DeepSpeed's model code has)",
             "deepspeed/runtime/pipe/topology.py: PipeDataParallelTopology", lambda s, j: s.tp == 1),
        Rule("zero", "ZeRO at most 1 beside pipeline stages", "runtime/pipe/engine.py: ZeRO-2/3 refused with pipelines",
             lambda s, j: s.zero <= 1 or (s.whole_model and s.pp == 1)),
        Rule("recompute", "recomputation none or full (whole layers)", "PipelineModule(activation_checkpoint_interval)",
             lambda s, j: s.recompute in ("none", "full")),
        Rule("vpp", "plain 1F1B (no interleaved schedule)", "runtime/pipe/schedule.py: TrainSchedule",
             lambda s, j: s.vpp == 1),
        Rule("split", "every stage holds the same number of layers (no partition method takes boundaries)",
             "runtime/pipe/module.py _partition_layers: uniform, parameters, type:REGEX",
             lambda s, j: _equal_stages(s)),
        Rule("ep-cp", "no expert or context parallelism in the config (EP lives in the model's "
                      "deepspeed.moe.layer.MoE; its sequence parallelism is Ulysses, not ring CP)",
             "deepspeed/moe/layer.py; runtime/sequence_parallel", lambda s, j: s.ep == 1 and s.cp == 1 and not s.fsep),
        Rule("offload", "activation offloading only with full recomputation (it moves the checkpoints)",
             "activation_checkpointing.cpu_checkpointing", lambda s, j: not s.offload or s.recompute == "full"),
    ),
    overlap=False,
    placement="PipeDataParallelTopology: pipe outermost, stage k on ranks [k·d, (k+1)·d)",
)

#: Cephalo: FSDP over every GPU with its own batch and micro-batches (the allocation family).
CEPHALO = Runtime(
    name="cephalo", title="Cephalo", version="the Cephalo paper's runtime (per-GPU batches)",
    job_wide=(),
    rules=(Rule("fsdp", "FSDP over every GPU with per-GPU batches: no pipeline, tensor or per-island layouts",
                "Cephalo runs the allocation family's answer (its cephalo_config.json)", lambda s, j: False),),
    pipeline=False,
    placement="rank i runs GPU i of the allocation",
)

#: Every runtime by name, as ``--target`` and ``hetopt export --to`` name them.
RUNTIMES: dict[str, Runtime] = {r.name: r for r in (MEGATRON, TORCHTITAN, DEEPSPEED, CEPHALO)}


def plan_breaks(runtime: Runtime, shapes: Sequence[tuple[str, Shape]], job: Job) -> list[str]:
    """What keeps a plan (its islands' shapes, named, front first) from being one job of ``runtime``.

    One line per job-wide field that differs (naming every island's value) and per rule an
    island breaks (naming the islands); empty when the runtime runs the plan as one job.

    Examples
    --------
    >>> a = Shape(2, 2, 1, 1, "none", 1, True, (4, 4), False, True)
    >>> b = Shape(4, 2, 1, 1, "none", 1, True, (4, 4), False, True)
    >>> plan_breaks(MEGATRON, [("x", a), ("y", b)], Job("bf16", 2048))
    ['tensor parallel size differs by island (x 2, y 4): Megatron-LM takes one for the whole job (--tensor-model-parallel-size)']
    """
    out = []
    for wide in runtime.job_wide:
        values = [(name, s.value(wide.field)) for name, s in shapes]
        if len({v for _, v in values}) > 1:
            listed = ", ".join(f"{name} {_word(v)}" for name, v in values)
            out.append(f"{wide.name} differs by island ({listed}): {runtime.title} takes one for the whole job ({wide.source})")
    for rule in runtime.rules:
        where = [name for name, s in shapes if not rule.holds(s, job)]
        if where:
            out.append(f"{rule.text} ({runtime.title}: {rule.source}); broken on {', '.join(where)}")
    return out


def _word(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "uneven" if value is None else str(value)


def markdown() -> list[str]:
    """The rule table as Markdown lines (``docs/runtimes.md`` holds exactly these between its markers)."""
    lines = []
    for rt in RUNTIMES.values():
        lines += [f"### {rt.title} ({rt.name}), {rt.version}", ""]
        if rt.job_wide:
            lines += ["One value for the whole job:", "", "| setting | the runtime's argument |", "|---|---|"]
            lines += [f"| {j.name} | `{j.source}` |" for j in rt.job_wide]
            lines.append("")
        lines += ["Each island's layout:", "", "| rule | source |", "|---|---|"]
        lines += [f"| {r.text} | {r.source} |" for r in rt.rules]
        lines.append("")
        notes = []
        if rt.precision:
            notes.append(f"trains in {rt.precision} only")
        if rt.overlap is False:
            notes.append("data-parallel traffic priced without overlap (the pipeline engine reduces gradients after "
                         "the flush)")
        if rt.placement:
            notes.append(f"rank order: {rt.placement}")
        lines += [f"- {n}" for n in notes] + ([""] if notes else [])
    return lines


__all__ = ["CEPHALO", "DEEPSPEED", "MEGATRON", "RUNTIMES", "TORCHTITAN", "Job", "JobWide", "Rule", "Runtime", "Shape",
           "markdown", "plan_breaks"]
