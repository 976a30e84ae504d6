"""Megatron-LM / Megatron-Core: one launch-argument file per island of the plan.

Megatron-LM runs one SPMD job: every rank gets the same arguments, and pipeline stage k sits
on global ranks [k·t·d, (k+1)·t·d) (its default rank order puts tensor parallelism innermost
and pipeline outermost). So when every island has the same tensor size t, data-parallel size
d, recomputation and ZeRO stage, the island files differ only in their header (which stages
and ranks the island runs) and together form the job; where they differ, each island's file
keeps its own value and a gap line says the files are not one job as written.

The uneven split goes out as ``--decoder-first-pipeline-num-layers`` /
``--decoder-last-pipeline-num-layers`` when the middle stages are equal (Megatron-Core 0.9 or
later), else as ``--pipeline-model-parallel-layout`` (0.13 or later). Argument names are
those of Megatron-LM ``megatron/training/arguments.py`` at tag core_v0.15.3 (the last
release that spells every argument out; later ones derive them from config dataclasses
under the same names); ``tests/test_export.py`` holds the allow-list.
"""

from __future__ import annotations

from hetopt.export.common import PLANNED_PRECISION, gpu_types, job_value, plan_line, safe_name, split_text
from hetopt.export.source import Block, PlanView
from hetopt.workload import ModelConfig

ACCEPTS = ("plan",)
HINT = "it takes a plan: `hetopt plan ... --json`"
NEEDS_MODEL = True

#: ZeRO stage → Megatron-LM: stage 1 is its distributed optimizer; it has no ZeRO-2/3 beside
#: pipeline parallelism (``--use-torch-fsdp2`` refuses PP), so those keep the optimizer sharding only.
DISTRIBUTED_OPTIMIZER_FROM_ZERO = 1


def _recompute(mode: str) -> list[str]:
    # full: every layer recomputed whole (uniform method, groups of one layer), as the cost model prices it
    return {"none": [], "selective": ["--recompute-granularity selective"],
            "full": ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]}[mode]


def split_arguments(layers: tuple[int, ...]) -> list[str]:
    """The arguments of an uneven split (none for an even one).

    Examples
    --------
    >>> split_arguments((6, 6, 6, 6))
    []
    >>> split_arguments((5, 6, 6, 7))
    ['--decoder-first-pipeline-num-layers 5', '--decoder-last-pipeline-num-layers 7']
    >>> split_arguments((4, 5, 6, 9))
    ['--pipeline-model-parallel-layout Etttt|ttttt|tttttt|tttttttttL']
    """
    if len(set(layers)) <= 1:
        return []
    if len(set(layers[1:-1])) <= 1:
        return [f"--decoder-first-pipeline-num-layers {layers[0]}", f"--decoder-last-pipeline-num-layers {layers[-1]}"]
    # E the embedding, t a decoder layer, L the loss; stages split by "|" (core_v0.15.3
    # megatron/core/transformer/pipeline_parallel_layer_layout.py)
    stages = ["t" * n for n in layers]
    stages[0] = "E" + stages[0]
    stages[-1] += "L"
    return ["--pipeline-model-parallel-layout " + "|".join(stages)]


def model_arguments(cfg: ModelConfig, seq: int, gaps: list[str]) -> list[str]:
    """The model's shape as Megatron-LM arguments; what they cannot say goes to ``gaps``."""
    args = [f"--hidden-size {cfg.hidden}", f"--num-attention-heads {cfg.heads}", f"--ffn-hidden-size {cfg.ffn}",
            f"--max-position-embeddings {max(seq, cfg.sequence)}"]
    if cfg.head_dim is not None:
        args.append(f"--kv-channels {cfg.head_dim}")
    if cfg.architecture == "llama":
        args += ["--normalization RMSNorm", "--position-embedding-type rope", "--swiglu", "--disable-bias-linear"]
        if cfg.kv_heads and cfg.kv_heads != cfg.heads:
            args += ["--group-query-attention", f"--num-query-groups {cfg.kv_heads}"]
    elif cfg.architecture == "vit":
        gaps.append(f"model: {cfg.name} is a vision transformer; the arguments are for pretrain_gpt.py-style "
                    "decoders, use Megatron-LM's vision scripts with these sizes")
    if not cfg.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    if cfg.experts > 1:
        args += [f"--num-experts {cfg.experts}", f"--moe-router-topk {cfg.top_k}"]
        if cfg.expert_ffn is not None:
            args.append(f"--moe-ffn-hidden-size {cfg.expert_ffn}")
        if cfg.moe_every > 1:
            if cfg.layers % cfg.moe_every:
                gaps.append(f"model: MoE on every {cfg.moe_every}th of {cfg.layers} layers does not repeat evenly; "
                            "--moe-layer-freq left out (give the pattern as a list)")
            else:
                # hetopt's MoE layers are the moe_every-th, 2·moe_every-th, ...: a dense-first pattern
                pattern = f"([0]*{cfg.moe_every - 1}+[1])*{cfg.layers // cfg.moe_every}"
                args.append(f"--moe-layer-freq {pattern}")
        gaps.append("model: the plan prices no expert parallelism; --expert-model-parallel-size is left at 1")
    return args


def _island_file(plan: PlanView, block: Block, index: int, first_rank: int, common: list[str], blocks: int) -> str:
    lay = block.layout
    per_stage = lay.tp * lay.dp
    first, last = block.first_stage, block.first_stage + len(block.stage_layers) - 1
    first_layer = sum(plan.stage_layers[:first])
    used = per_stage * len(block.stage_layers)
    lines = [
        f"# Megatron-LM launch arguments, island {index + 1} of {blocks}: {block.island} "
        f"({block.island_gpus} x {block.gpu}, {block.island_nodes} nodes), written by `hetopt export`.",
        f"# Plan: {plan_line(plan)}.",
        f"# This island runs pipeline stages {first}-{last} (layers {first_layer}-{first_layer + sum(block.stage_layers) - 1},"
        f" split {split_text(block.stage_layers)}) on global ranks {first_rank}-{first_rank + used - 1}"
        f" ({per_stage} GPUs per stage: tp{lay.tp} x dp{lay.dp}); "
        + ("its nodes take the first node ranks." if index == 0 else f"its node ranks follow island {index}'s."),
    ]
    if block.island_gpus and used < block.island_gpus:
        lines.append(f"# The plan uses {used} of the island's {block.island_gpus} GPUs; leave the other "
                     f"{block.island_gpus - used} out of the job.")
    lines += [
        "# Names: Megatron-LM core_v0.15.3 megatron/training/arguments.py (--pipeline-model-parallel-layout: core 0.13+).",
        "# Add data, tokenizer, optimizer and checkpoint arguments; e.g. torchrun ... pretrain_gpt.py $(grep -v '^#' FILE)",
    ]
    island_args = [f"--tensor-model-parallel-size {lay.tp}"]
    if lay.sequence_parallel:
        island_args.append("--sequence-parallel")
    island_args.append(f"--micro-batch-size {plan.microbatch_size // lay.dp}")
    island_args += _recompute(lay.recompute)
    if lay.zero >= DISTRIBUTED_OPTIMIZER_FROM_ZERO:
        island_args.append("--use-distributed-optimizer")
    return "\n".join(lines + island_args + common) + "\n"


def build(plan: PlanView, model: ModelConfig | None) -> tuple[dict[str, str], list[str]]:
    """One ``megatron-<n>-<island>.args`` file per island, and the gaps.

    Examples
    --------
    >>> from hetopt.export.source import Block, Layout, PlanView
    >>> lay = Layout(1, 2, 2, 1, "none", 1, False)
    >>> plan = PlanView("c", "m", 8, 2, 4, 128, "OPTIMAL", (Block("a", "A100", lay, 0, (3, 2), 4, 1),), None)
    >>> files, gaps = build(plan, None)
    >>> print(files["megatron-1-a.args"].split("\\n# Add data")[1].split("\\n", 1)[1], end="")
    --tensor-model-parallel-size 1
    --micro-batch-size 1
    --use-distributed-optimizer
    --pipeline-model-parallel-size 2
    --global-batch-size 8
    --num-layers 5
    --seq-length 128
    --fp16
    --decoder-first-pipeline-num-layers 3
    --decoder-last-pipeline-num-layers 2
    """
    gaps: list[str] = []
    split_each = "each island's file keeps its own value, so the files are not one job as written"
    job_value(plan, "tensor parallel size", lambda b: f"tp{b.layout.tp}", gaps, "Megatron-LM", split_each)
    job_value(plan, "data-parallel size", lambda b: f"dp{b.layout.dp}", gaps, "Megatron-LM", split_each)
    job_value(plan, "sequence parallelism", lambda b: "on" if b.layout.sequence_parallel else "off", gaps,
              "Megatron-LM", split_each)
    job_value(plan, "recomputation", lambda b: b.layout.recompute, gaps, "Megatron-LM", split_each)
    job_value(plan, "ZeRO stage", lambda b: f"zero{b.layout.zero}", gaps, "Megatron-LM", split_each)
    for b in plan.blocks:
        if b.layout.zero > DISTRIBUTED_OPTIMIZER_FROM_ZERO:
            gaps.append(f"ZeRO stage {b.layout.zero} on {b.island}: Megatron-LM shards only the optimizer state beside "
                        "pipeline parallelism (--use-distributed-optimizer); gradients and weights stay replicated, "
                        "so memory is above the plan's")
    vpp = job_value(plan, "virtual pipeline stages", lambda b: b.layout.vpp, gaps, "Megatron-LM", split_each)
    types = gpu_types(plan)
    if len(types) > 1:
        gaps.append(f"GPU types {', '.join(types)} in one job: Megatron-LM's arguments do not place ranks; the launcher "
                    "must start each island's nodes so they get the global ranks its file lists")
    common = [f"--pipeline-model-parallel-size {len(plan.stage_layers)}", f"--global-batch-size {plan.global_batch}",
              f"--num-layers {plan.layers}", f"--seq-length {plan.seq}", f"--{PLANNED_PRECISION}"]
    split = split_arguments(plan.stage_layers)
    if isinstance(vpp, int) and vpp > 1:
        if split:
            gaps.append(f"virtual pipeline stages {vpp} with an uneven split: hetopt does not know the per-chunk layout; "
                        "the split arguments are left out")
            split = []
        common.append(f"--num-virtual-stages-per-pipeline-rank {vpp}")
    common += split
    if model is not None:
        common += model_arguments(model, plan.seq, gaps)
    files = {}
    rank = 0
    for i, block in enumerate(plan.blocks):
        files[f"megatron-{i + 1}-{safe_name(block.island)}.args"] = _island_file(plan, block, i, rank, common, len(plan.blocks))
        rank += block.layout.tp * block.layout.dp * len(block.stage_layers)
    return files, gaps
