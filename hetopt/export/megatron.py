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

Expert and context parallelism go out as ``--expert-model-parallel-size`` (with
``--expert-tensor-parallel-size 1`` where the planner folds the experts' TP into EP,
``hetopt.parallelism.expert.expert_tp``) and ``--context-parallel-size``. Megatron-LM counts
its data-parallel size as world / (TP·PP·CP), and a stage of the plan has t·c·d GPUs, so the
plan's d is Megatron's. The precision is the plan's (``--bf16``, or ``--fp16`` on GPUs without
BF16); Megatron-LM refuses ``--fp16`` with expert parallelism: such a job asks for ``--bf16``
(a gap). Activation offloading goes out as Megatron-Core's fine-grained
activation offloading (``--fine-grained-activation-offloading``, ``--offload-modules``: core
0.16 or later, where ``arguments.py`` turns ``TransformerConfig`` fields into arguments; its
layer-level ``--cpu-offloading-num-layers`` refuses pipeline parallelism and recomputation).
Fully sharded EP has no Megatron-LM equivalent: a gap.

What the plan priced for its data-parallel traffic goes out too: overlapped with compute
(``--overlap-grad-reduce``, and ``--overlap-param-gather`` with the distributed optimizer;
Megatron's defaults are off), gradients reduced in fp32 (``--accumulate-allreduce-grads-in-fp32``),
and a one-stage ZeRO-3 plan as PyTorch FSDP2 (``--use-torch-fsdp2`` with what Megatron-LM's
``validate_args`` requires of it), not as the distributed optimizer with a gap.
"""

from __future__ import annotations

from hetopt.export.common import (FILL_IN, gpu_types, handover_gaps, job_value, plan_line, precision_gaps, safe_name, split_text,
                                  without_bf16, without_flash_attention)
from hetopt.export import running
from hetopt.export.source import Block, Layout, PlanView
from hetopt.parallelism.expert import expert_tp
from hetopt.workload import ModelConfig

ACCEPTS = ("plan",)
HINT = "it takes a plan: `hetopt plan ... --json`"

#: ZeRO stage → Megatron-LM: stage 1 is its distributed optimizer; it has no ZeRO-2/3 beside
#: pipeline parallelism (``--use-torch-fsdp2`` refuses PP), so those keep the optimizer sharding only.
DISTRIBUTED_OPTIMIZER_FROM_ZERO = 1
#: A one-stage ZeRO-3 plan as PyTorch FSDP2 (:func:`fsdp2`), with what Megatron-LM's
#: ``validate_args`` asks of it: no gradient-accumulation fusion, a distributed checkpoint
#: format, untied embeddings (a gap where the model ties them), and not fp16.
FSDP2_ARGUMENTS = ["--use-torch-fsdp2", "--no-gradient-accumulation-fusion", "--ckpt-format torch_dist"]
#: Megatron-LM's precision when the job uses expert parallelism: ``validate_args`` asserts
#: ``not args.fp16`` when ``--expert-model-parallel-size`` > 1 (core_v0.15.3 arguments.py).
EXPERT_PARALLEL_PRECISION = "bf16"
#: ``--offload-modules`` for an offloading stage: the inputs of the attention block's modules
#: and norms, and of the experts' FC1 and activation on MoE layers (the choices of
#: ``TransformerConfig.offload_modules``, core_v0.16.0 megatron/core/transformer/transformer_config.py).
OFFLOAD_MODULES = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm")
OFFLOAD_EXPERT_MODULES = ("expert_fc1", "moe_act")


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


#: How Megatron-LM pads the vocabulary unless told: to a multiple of this × TP
#: (``--make-vocab-size-divisible-by``, default 128; tokenizer.py ``_vocab_size_with_padding``).
#: The export asks for 1 × TP, so the output layer is the vocabulary the plan priced.
VOCAB_DIVISIBLE_BY = 1


def model_arguments(cfg: ModelConfig, seq: int, gaps: list[str], *, expert_parallel: bool = False) -> list[str]:
    """The model's shape as Megatron-LM arguments, one for every key of the model format (layers
    are ``--num-layers`` and the sequence ``--seq-length``, beside the job's); what they cannot say
    goes to ``gaps``.

    Written even where they are Megatron-LM's defaults, so the file says the whole shape: hidden,
    FFN, heads, query groups, head dimension (``--kv-channels``), position embedding,
    activation (GELU is the default, ``--swiglu`` Llama's), normalization, biases, tied
    embeddings, vocabulary (``--vocab-size``, unpadded) and the positions the model holds.
    ``expert_parallel``: the plan uses EP somewhere (else an MoE model gets a gap line saying
    ``--expert-model-parallel-size`` stays 1).

    Examples
    --------
    >>> from hetopt.workload import ModelConfig
    >>> args = model_arguments(ModelConfig("m", "llama", 2, 64, 8, 256, 1000, 128, kv_heads=2), 128, [])
    >>> [a for a in args if a.split()[0] in ("--num-query-groups", "--kv-channels", "--vocab-size", "--swiglu")]
    ['--kv-channels 8', '--num-query-groups 2', '--swiglu', '--vocab-size 1000']
    """
    head_dim = cfg.head_dim or cfg.hidden // cfg.heads
    args = [f"--hidden-size {cfg.hidden}", f"--ffn-hidden-size {cfg.ffn}", f"--num-attention-heads {cfg.heads}",
            f"--kv-channels {head_dim}"]
    if cfg.kv_heads and cfg.kv_heads != cfg.heads:
        args += ["--group-query-attention", f"--num-query-groups {cfg.kv_heads}"]
    if cfg.architecture == "llama":
        # Llama: rotary positions, SwiGLU, RMSNorm, no biases (hetopt.workload prices these)
        args += ["--position-embedding-type rope", "--swiglu", "--normalization RMSNorm", "--disable-bias-linear"]
    else:
        # GPT (and ViT's encoder): learned positions, GELU (Megatron-LM's default activation), LayerNorm, biases
        args += ["--position-embedding-type learned_absolute", "--normalization LayerNorm"]
        if cfg.architecture == "vit":
            gaps.append(f"model: {cfg.name} is a vision transformer; the arguments are for pretrain_gpt.py-style "
                        "decoders, use Megatron-LM's vision scripts with these sizes")
    if not cfg.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    if cfg.vocab:  # a vision model has none
        args += [f"--vocab-size {cfg.vocab}", f"--make-vocab-size-divisible-by {VOCAB_DIVISIBLE_BY}"]
        # Megatron-LM reads the vocabulary off its tokenizer (--vocab-size is the NullTokenizer's)
        gaps.append(f"{FILL_IN}tokenizer: one of the model's {cfg.vocab} tokens (--vocab-size; Megatron-LM takes the "
                    "vocabulary from the tokenizer, so another tokenizer trains another output layer)")
    args.append(f"--max-position-embeddings {max(seq, cfg.sequence)}")
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
        if not expert_parallel:
            gaps.append("model: the plan prices no expert parallelism; --expert-model-parallel-size is left at 1")
    return args


#: The attention of GPUs without FlashAttention (the catalog's ``flash_attention``: V100, T4).
#: Megatron-LM selects attention with ``--attention-backend`` (its README, "FlashAttention";
#: arguments.py at core_v0.15.3: flash, fused, unfused, local, auto). Transformer Engine's
#: ``get_attention_backend`` turns FlashAttention and cuDNN fused attention off below compute
#: capability 8.0, so ``auto`` runs them unfused there and fused on the others, as the plan
#: prices each island; a job on such GPUs only asks for ``unfused`` outright.
ATTENTION_ALL_UNFUSED = "--attention-backend unfused"
ATTENTION_MIXED = "--attention-backend auto"


def attention_arguments(plan: PlanView) -> tuple[list[str], list[str]]:
    """The attention backend for the plan's GPUs, and its comment lines (none when every GPU runs FlashAttention).

    Examples
    --------
    >>> from hetopt.export.source import Block, Layout, PlanView
    >>> lay = Layout(1, 1, 4, 1, "none", 1, False)
    >>> plan = PlanView("c", "m", 8, 4, 2, 128, "OPTIMAL", (Block("t", "T4", lay, 0, (4,), 4, 1),), None)
    >>> attention_arguments(plan)[0]
    ['--attention-backend unfused']
    """
    unfused = without_flash_attention(gpu_types(plan))
    if not unfused:
        return [], []
    every = len(unfused) == len(gpu_types(plan))
    note = (f"# Attention unfused on {', '.join(unfused)} (no FlashAttention there, as the plan prices): "
            + ("--attention-backend unfused" if every else
               "--attention-backend auto, with which Transformer Engine runs it unfused below compute capability 8.0 "
               "and FlashAttention or cuDNN fused attention on the other GPUs")
            + " (Megatron-LM README, FlashAttention; Transformer Engine get_attention_backend).")
    return [ATTENTION_ALL_UNFUSED if every else ATTENTION_MIXED], [note]


def _per_stage(lay: Layout) -> str:
    # the GPUs of one stage as Megatron-LM multiplies them (CP between TP and DP)
    return f"tp{lay.tp} x dp{lay.dp}" if lay.cp == 1 else f"tp{lay.tp} x cp{lay.cp} x dp{lay.dp}"


def layout_arguments(block: Block, model: ModelConfig | None) -> list[str]:
    """The expert, context parallelism and offloading arguments of one island (none without them).

    Examples
    --------
    >>> from hetopt.export.source import Block, Layout
    >>> lay = Layout(2, 1, 2, 1, "none", 1, True, ep=4, cp=2)
    >>> layout_arguments(Block("a", "A100", lay, 0, (8,), 8, 1), None)
    ['--context-parallel-size 2', '--expert-model-parallel-size 4']
    >>> layout_arguments(Block("a", "A100", Layout(2, 1, 2, 1, "none", 1, True, ep=8), 0, (8,), 4, 1), None)
    ['--expert-model-parallel-size 8', '--expert-tensor-parallel-size 1']
    """
    lay = block.layout
    args = []
    if lay.cp > 1:
        args.append(f"--context-parallel-size {lay.cp}")
    if lay.ep > 1:
        args.append(f"--expert-model-parallel-size {lay.ep}")
        etp = expert_tp(tp=lay.tp, ep=lay.ep, cp=lay.cp, dp=lay.dp)
        if etp != lay.tp:  # Megatron-LM's default expert TP is the TP size
            args.append(f"--expert-tensor-parallel-size {etp}")
    if lay.offload:
        modules = OFFLOAD_MODULES + (OFFLOAD_EXPERT_MODULES if model is None or model.experts > 1 else ())
        args += ["--fine-grained-activation-offloading", "--offload-modules " + " ".join(modules)]
    return args


def _island_file(plan: PlanView, block: Block, index: int, first_rank: int, common: list[str], blocks: int,
                 model: ModelConfig | None) -> str:
    """One island's arguments file (a plan exported with gaps): which stages and ranks it runs."""
    lay = block.layout
    per_stage = lay.stage_gpus
    first, last = block.first_stage, block.first_stage + len(block.stage_layers) - 1
    first_layer = sum(plan.stage_layers[:first])
    used = per_stage * len(block.stage_layers)
    lines = [
        f"# Megatron-LM launch arguments, island {index + 1} of {blocks}: {block.island} "
        f"({block.island_gpus} x {block.gpu}, {block.island_nodes} nodes), written by `hetopt export`.",
        f"# Plan: {plan_line(plan)}.",
        f"# This island runs pipeline stages {first}-{last} (layers {first_layer}-{first_layer + sum(block.stage_layers) - 1},"
        f" split {split_text(block.stage_layers)}) on global ranks {first_rank}-{first_rank + used - 1}"
        f" ({per_stage} GPUs per stage: {_per_stage(lay)}); "
        + ("its nodes take the first node ranks." if index == 0 else f"its node ranks follow island {index}'s."),
    ]
    if block.island_gpus and used < block.island_gpus:
        lines.append(f"# The plan uses {used} of the island's {block.island_gpus} GPUs; leave the other "
                     f"{block.island_gpus - used} out of the job.")
    notes, args = _arguments_of(plan, block, model)
    return "\n".join(lines + notes + args + common) + "\n"


def _arguments_of(plan: PlanView, block: Block, model: ModelConfig | None) -> tuple[list[str], list[str]]:
    """The comment lines and the arguments of one island's layout (the whole job's, when every
    island has the same)."""
    lay = block.layout
    notes = []
    if lay.cp > 1:
        notes.append(f"# Megatron-LM's data-parallel size is world / (tp x pp x cp): dp{lay.dp}, as planned; "
                     f"a micro-batch of {plan.microbatch_size // lay.dp} per replica, its sequence split over cp{lay.cp}.")
    notes.append("# Names: Megatron-LM core_v0.15.3 megatron/training/arguments.py (--pipeline-model-parallel-layout: core 0.13+).")
    if lay.offload:
        notes.append("# --fine-grained-activation-offloading, --offload-modules: core 0.16+ (TransformerConfig fields as "
                     "arguments); with Transformer Engine 2.10+ set NVTE_CPU_OFFLOAD_V1=1.")
    notes.append("# Add data, tokenizer, optimizer and checkpoint arguments; e.g. torchrun ... pretrain_gpt.py $(grep -v '^#' FILE)")
    args = [f"--tensor-model-parallel-size {lay.tp}"]
    if lay.sequence_parallel:
        args.append("--sequence-parallel")
    args += layout_arguments(block, model)
    args.append(f"--micro-batch-size {plan.microbatch_size // lay.dp}")
    args += _recompute(lay.recompute)
    if fsdp2(plan):
        notes.append("# FSDP2 wants CUDA_DEVICE_MAX_CONNECTIONS above 1 (unset it if your launcher sets it to 1).")
        args += FSDP2_ARGUMENTS
        if model is None or model.tied_embeddings:  # an untied model's arguments already say so
            args.append("--untie-embeddings-and-output-weights")
    elif lay.zero >= DISTRIBUTED_OPTIMIZER_FROM_ZERO:
        args.append("--use-distributed-optimizer")
    args += _data_parallel_arguments(plan, lay)
    return notes, args


def _job_file(plan: PlanView, common: list[str], model: ModelConfig | None) -> str:
    """The one arguments file of a plan whose islands agree on every job-wide setting (so the
    first island's arguments are every island's), its header naming each island's stages and ranks."""
    lines = ["# Megatron-LM launch arguments for the whole job, written by `hetopt export`.", f"# Plan: {plan_line(plan)}."]
    rank = 0
    for b in plan.blocks:
        used = b.layout.stage_gpus * len(b.stage_layers)
        first, last = b.first_stage, b.first_stage + len(b.stage_layers) - 1
        lines.append(f"# Stages {first}-{last} (split {split_text(b.stage_layers)}) on {b.island} ({b.gpu}): global ranks "
                     f"{rank}-{rank + used - 1}.")
        rank += used
    lines.append("# launch.sh starts the ranks in that order (hostfile lists the nodes).")
    notes, args = _arguments_of(plan, plan.blocks[0], model)
    return "\n".join(lines + notes + args + common) + "\n"


def fsdp2(plan: PlanView) -> bool:
    """Whether the plan runs as Megatron-LM's ``--use-torch-fsdp2``: one pipeline stage, ZeRO-3
    (parameters, gradients and optimizer state sharded, as FSDP2 shards them), no EP.

    Megatron-LM refuses FSDP2 with pipeline or expert parallelism (``validate_args``), so a
    ZeRO-3 plan with either keeps the distributed optimizer and a gap line.
    """
    return (len(plan.stage_layers) == 1 and all(b.layout.zero == 3 for b in plan.blocks)
            and all(b.layout.ep == 1 for b in plan.blocks))


def _data_parallel_arguments(plan: PlanView, lay: Layout) -> list[str]:
    """How the plan priced its data-parallel traffic, as Megatron-LM runs it: overlapped with
    compute (``--overlap-grad-reduce``, and ``--overlap-param-gather`` with the distributed
    optimizer, which it requires), and gradients reduced in fp32."""
    out = []
    if plan.running.overlap and lay.dp * lay.cp > 1:
        out.append("--overlap-grad-reduce")
        if lay.zero >= DISTRIBUTED_OPTIMIZER_FROM_ZERO and not fsdp2(plan):
            out.append("--overlap-param-gather")
    if plan.running.grad_fp32:
        out.append("--accumulate-allreduce-grads-in-fp32")
    return out


def _breadth_gaps(plan: PlanView, model: ModelConfig | None, gaps: list[str]) -> None:
    """Gap lines for the expert, context parallelism and offloading Megatron-LM cannot run as planned."""
    for b in plan.blocks:
        lay = b.layout
        if lay.ep > 1:
            etp = expert_tp(tp=lay.tp, ep=lay.ep, cp=lay.cp, dp=lay.dp)
            # initialize_model_parallel: world divisible by etp·ep·pp as well as by tp·cp·pp
            if lay.stage_gpus % (etp * lay.ep):
                gaps.append(f"expert parallel size {lay.ep} on {b.island}: Megatron-Core needs expert TP x EP "
                            f"({etp} x {lay.ep}) to divide a stage's tp x cp x dp = {lay.stage_gpus} GPUs; re-plan")
            if model is not None and model.experts <= 1:
                gaps.append(f"expert parallel size {lay.ep} on {b.island}: {model.name} has no experts; Megatron-LM "
                            "refuses --expert-model-parallel-size without --num-experts")
            elif model is not None and model.experts % lay.ep:
                gaps.append(f"expert parallel size {lay.ep} on {b.island}: does not divide the {model.experts} experts "
                            f"of {model.name} (Megatron-LM refuses it); re-plan")
            if lay.tp > 1 and not lay.sequence_parallel:
                gaps.append(f"expert parallelism with tp{lay.tp} on {b.island} without sequence parallelism: "
                            "Megatron-Core warns that EP with TP must use --sequence-parallel")
        if lay.fsep:
            gaps.append(f"fully sharded EP on {b.island}: Megatron-LM has no FSEP; written as plain EP "
                        f"(--expert-model-parallel-size {lay.ep}): each GPU keeps all the parameters of its experts "
                        "(FSEP shards them over the EP group: more memory than planned) and the busiest expert sets "
                        "the pace (the routing imbalance the plan avoids)")
        if lay.cp > 1 and plan.seq % (2 * lay.cp):
            gaps.append(f"context parallel size {lay.cp} on {b.island}: Megatron-LM needs the sequence {plan.seq} "
                        f"to be a multiple of 2 x cp = {2 * lay.cp}; re-plan")
        if lay.offload:
            dense = model is None or any(not model.is_moe_layer(i) for i in range(model.layers))
            gaps.append(f"activation offloading on {b.island}: written as Megatron-Core's fine-grained activation "
                        "offloading (core 0.16+), which moves the inputs of the listed modules"
                        + ("; the dense MLPs' inner activations stay on the GPU (memory above the plan's)" if dense else
                           "") + "; with Transformer Engine 2.10+ set NVTE_CPU_OFFLOAD_V1=1")


#: The file of a one-job export, and what torchrun starts (``hetopt.export.launch``).
MAIN_FILE = "megatron.args"
#: launch.sh reads the arguments file into the bash array ARGS (one word per argument and value)
ARGS_FILE = MAIN_FILE
LAUNCH_COMMAND = '"${TRAIN_SCRIPT:-pretrain_gpt.py}" "${ARGS[@]}" "$@"'


def build(plan: PlanView, model: ModelConfig | None, *, one_job: bool = False) -> tuple[dict[str, str], list[str]]:
    """One ``megatron-<n>-<island>.args`` file per island, and the gaps; with ``one_job`` (the
    plan keeps Megatron-LM's rules, so every island's arguments are the same) one
    ``megatron.args`` for the whole job, placed by ``launch.sh``.

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
    --overlap-grad-reduce
    --overlap-param-gather
    --pipeline-model-parallel-size 2
    --global-batch-size 8
    --num-layers 5
    --seq-length 128
    --bf16
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
    job_value(plan, "context parallel size", lambda b: f"cp{b.layout.cp}", gaps, "Megatron-LM", split_each)
    job_value(plan, "expert parallel size", lambda b: f"ep{b.layout.ep}", gaps, "Megatron-LM", split_each)
    job_value(plan, "activation offloading", lambda b: "on" if b.layout.offload else "off", gaps, "Megatron-LM",
              split_each)
    _breadth_gaps(plan, model, gaps)
    if fsdp2(plan):
        if model is not None and model.tied_embeddings:
            gaps.append(f"FSDP2: Megatron-LM's --use-torch-fsdp2 needs --untie-embeddings-and-output-weights, so the job "
                        f"trains {model.name} with its output layer untied from the embedding (more parameters than "
                        "the plan priced)")
        if plan.precision == "fp16":
            gaps.append("FSDP2: Megatron-LM's --use-torch-fsdp2 refuses --fp16; these GPUs have no BF16, so the "
                        "job cannot run as priced (use DeepSpeed's ZeRO-3 export)")
    for b in plan.blocks:
        if b.layout.zero > DISTRIBUTED_OPTIMIZER_FROM_ZERO and not fsdp2(plan):
            gaps.append(f"ZeRO stage {b.layout.zero} on {b.island}: Megatron-LM shards only the optimizer state beside "
                        "pipeline parallelism (--use-distributed-optimizer); gradients and weights stay replicated, "
                        "so memory is above the plan's")
    vpp = job_value(plan, "virtual pipeline stages", lambda b: b.layout.vpp, gaps, "Megatron-LM", split_each)
    types = gpu_types(plan)
    if len(types) > 1 and not one_job:
        gaps.append(f"GPU types {', '.join(types)} in one job: Megatron-LM's arguments do not place ranks; the launcher "
                    "must start each island's nodes so they get the global ranks its file lists")
    expert_parallel = any(b.layout.ep > 1 for b in plan.blocks)
    precision = plan.precision
    if expert_parallel and precision == "fp16":  # validate_args refuses fp16 only; fp32 runs
        precision = EXPERT_PARALLEL_PRECISION
        no_bf16 = without_bf16(types)
        gaps.append(f"precision: Megatron-LM refuses --{plan.precision} with expert parallelism; the files ask for "
                    f"--{precision} (the plan prices {plan.precision})"
                    + (f", which {', '.join(no_bf16)} cannot run: train those islands without EP" if no_bf16 else ""))
    common = [f"--pipeline-model-parallel-size {len(plan.stage_layers)}", f"--global-batch-size {plan.global_batch}",
              f"--num-layers {plan.layers}", f"--seq-length {plan.seq}"]
    # Megatron-LM trains in fp32 when neither --fp16 nor --bf16 is given (tf32: precision_gaps)
    common += [f"--{precision}"] if precision in ("bf16", "fp16") else []
    gaps.extend(precision_gaps(precision))
    gaps.extend(handover_gaps(plan.running.handover, "Megatron-LM"))
    split = split_arguments(plan.stage_layers)
    if isinstance(vpp, int) and vpp > 1:
        if split:
            gaps.append(f"virtual pipeline stages {vpp} with an uneven split: hetopt does not know the per-chunk layout; "
                        "the split arguments are left out")
            split = []
        common.append(f"--num-virtual-stages-per-pipeline-rank {vpp}")
    common += split
    attention, attention_notes = attention_arguments(plan)
    if not plan.running.flash:  # the plan prices attention unfused on every GPU (flash=no)
        attention, attention_notes = [running.MEGATRON_UNFUSED], []
    common += attention
    if running.megatron_tp_overlap(plan):  # Transformer Engine's userbuffers, as priced (tpoverlap=yes)
        common.append(running.MEGATRON_TP_OVERLAP)
    if plan.running.host == "cudagraph":  # each layer replayed as a CUDA graph, as priced (host=cudagraph)
        common += [running.MEGATRON_CUDA_GRAPH, running.MEGATRON_RNG_TRACKER]
    if model is not None:
        common += model_arguments(model, plan.seq, gaps, expert_parallel=expert_parallel)
    common = attention_notes + common
    if one_job:
        return {MAIN_FILE: _job_file(plan, common, model)}, gaps
    files = {}
    rank = 0
    for i, block in enumerate(plan.blocks):
        files[f"megatron-{i + 1}-{safe_name(block.island)}.args"] = _island_file(plan, block, i, rank, common,
                                                                                len(plan.blocks), model)
        rank += block.layout.stage_gpus * len(block.stage_layers)
    return files, gaps
