"""torchtitan: one job TOML (``--job.config_file``) for the whole pipeline.

torchtitan builds one device mesh for the job, so the tensor and data-parallel degrees, the
activation checkpointing mode and the sharding are the same on every stage: where the islands
differ, the file takes the first island's and a gap line says so. The uneven stage split is
``module_fqns_per_model_part``, one list of module names per stage in torchtitan's decoder
naming (``tok_embeddings``, ``layers.N``, ``norm``, ``output``). Without pipeline stages the plan's
micro-batches are torchtitan's gradient accumulation (``local_batch_size`` one micro-batch per
replica). Keys are those of
torchtitan v0.2.2 ``torchtitan/config/job_config.py`` (later versions configure jobs in
Python); ``tests/test_export.py`` holds the allow-list.

Expert parallelism is ``expert_parallel_degree`` with ``expert_tensor_parallel_degree`` the
planner's expert TP (t or 1, the two torchtitan takes; its default is 1), context parallelism
``context_parallel_degree``. torchtitan's EP borrows its ranks from ``dp_shard × cp × tp``,
never from ``dp_replicate``, and it always shards the weights over the CP ranks (FSDP over
``dp_shard × cp``); where the plan replicates them, the file shards and a gap line says so.
torchtitan has no fully sharded EP and no activation offloading (``training.enable_cpu_offload``
moves FSDP's parameters, gradients and optimizer state): gap lines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hetopt.export.common import gpu_types, handover_gaps, job_layout, plan_line, precision_gaps, without_bf16
from hetopt.errors import InputError
from hetopt.export import running
from hetopt.export.source import PlanView
from hetopt.parallelism.expert import expert_tp
from hetopt.workload import ModelConfig

ACCEPTS = ("plan",)
HINT = "it takes a plan: `hetopt plan ... --json`; an allocation result goes to --to cephalo or --to deepspeed"

#: The decoders torchtitan v0.2.2 ships, as hetopt's model format describes them: (model.name,
#: model.flavor) → layers, hidden, heads, kv_heads, head_dim, ffn (an MoE layer's: each expert's),
#: vocab, experts, top_k, tied_embeddings. Read from the installed package, ``llama3_args`` and
#: ``qwen3_args`` (torchtitan/models/llama3/__init__.py, torchtitan/models/qwen3/__init__.py),
#: by building each flavor on the meta device (tests/export/test_torchtitan_models.py reads them
#: again and compares); the flex and varlen flavors are the same shapes with another attention
#: kernel, the debug models are left out. Llama 3 has no biases, RMSNorm, SwiGLU, RoPE, untied
#: embeddings (hetopt's ``llama`` architecture); Qwen3 the same with an RMSNorm on the queries and
#: keys, which hetopt's cost model does not count (a norm per head: no matmul). llama4,
#: deepseek_v3 and gpt_oss have shared experts, latent attention or sinks that the model format
#: does not describe: no hetopt model file is one of them.
TORCHTITAN_FLAVORS: dict[tuple[str, str], tuple[int, ...]] = {
    # layers, hidden, heads, kv_heads, head_dim, ffn, vocab, experts, top_k, tied
    ("llama3", "8B"): (32, 4096, 32, 8, 128, 14336, 128256, 1, 1, False),
    ("llama3", "70B"): (80, 8192, 64, 8, 128, 28672, 128256, 1, 1, False),
    ("llama3", "405B"): (126, 16384, 128, 8, 128, 53248, 128256, 1, 1, False),
    ("qwen3", "0.6B"): (28, 1024, 16, 8, 128, 3072, 151936, 1, 1, True),
    ("qwen3", "1.7B"): (28, 2048, 16, 8, 128, 6144, 151936, 1, 1, True),
    ("qwen3", "4B"): (36, 2560, 32, 8, 128, 9728, 151936, 1, 1, True),
    ("qwen3", "8B"): (36, 4096, 32, 8, 128, 12288, 151936, 1, 1, False),
    ("qwen3", "14B"): (40, 5120, 40, 8, 128, 17408, 151936, 1, 1, False),
    ("qwen3", "32B"): (64, 5120, 64, 8, 128, 25600, 151936, 1, 1, False),
    ("qwen3", "30B-A3B"): (48, 2048, 32, 4, 128, 768, 151936, 128, 8, False),
    ("qwen3", "235B-A22B"): (94, 4096, 64, 4, 128, 1536, 151936, 128, 8, False),
}
#: The names of :data:`TORCHTITAN_FLAVORS`' figures, in order.
FLAVOR_KEYS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "experts", "top_k", "tied_embeddings")


def check_model(cfg: ModelConfig) -> None:
    """Refuse a model torchtitan does not ship (:func:`shipped_flavor`), before its rules are read."""
    shipped_flavor(cfg)


def model_figures(cfg: ModelConfig) -> tuple[int, ...]:
    """A hetopt model's figures in :data:`FLAVOR_KEYS` order (an MoE model's ffn: each expert's).

    Examples
    --------
    >>> from hetopt.workload import ModelConfig
    >>> model_figures(ModelConfig("m", "llama", 2, 64, 8, 256, 1000, 128, kv_heads=2))
    (2, 64, 8, 2, 8, 256, 1000, 1, 1, False)
    """
    ffn = (cfg.expert_ffn or cfg.ffn) if cfg.experts > 1 else cfg.ffn
    return (cfg.layers, cfg.hidden, cfg.heads, cfg.kv_heads or cfg.heads, cfg.head_dim or cfg.hidden // cfg.heads, ffn,
            cfg.vocab, cfg.experts, cfg.top_k if cfg.experts > 1 else 1, cfg.tied_embeddings)


def shipped_flavor(cfg: ModelConfig) -> tuple[str, str]:
    """torchtitan's (model.name, model.flavor) of the same shape as ``cfg``.

    Raises
    ------
    InputError
        torchtitan ships no model of that shape: the job file would train another model (its
        default is a debug model), so the export stops, naming what differs from the closest flavor.

    Examples
    --------
    >>> from hetopt.workload import ModelConfig
    >>> shipped_flavor(ModelConfig("L", "llama", 32, 4096, 32, 14336, 128256, 8192, kv_heads=8))
    ('llama3', '8B')
    >>> shipped_flavor(ModelConfig("G", "gpt", 24, 2048, 16, 8192, 50257, 2048))
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: model: torchtitan v0.2.2 ships no model of G's shape, so its job file cannot train it (G is a gpt decoder: learned positions, GELU, LayerNorm, biases; torchtitan's decoders are Llama 3 and Qwen3); export it to megatron or deepspeed, or add the model to torchtitan
    """
    figures = model_figures(cfg)
    if cfg.architecture == "llama" and (cfg.experts == 1 or cfg.moe_every == 1):
        for names, shipped in TORCHTITAN_FLAVORS.items():
            if shipped == figures:
                return names
        closest, shipped = min(TORCHTITAN_FLAVORS.items(),
                               key=lambda item: sum(a != b for a, b in zip(item[1], figures)))
        differ = ", ".join(f"{key} {mine} (not {theirs})" for key, mine, theirs in zip(FLAVOR_KEYS, figures, shipped)
                           if mine != theirs)
        why = f"the closest, {closest[0]} {closest[1]}, differs in {differ}"
    elif cfg.architecture == "llama":
        why = f"experts on every {cfg.moe_every}th layer; torchtitan's Qwen3 MoE has them on every layer"
    else:
        why = (f"{cfg.name} is a {cfg.architecture} {'decoder' if cfg.architecture == 'gpt' else 'encoder'}: learned "
               "positions, GELU, LayerNorm, biases; torchtitan's decoders are Llama 3 and Qwen3")
    raise InputError(f"model: torchtitan v0.2.2 ships no model of {cfg.name}'s shape, so its job file cannot train it "
                     f"({why}); export it to megatron or deepspeed, or add the model to torchtitan")
#: hetopt recomputation → ``[activation_checkpoint] mode``.
AC_MODES = {"none": "none", "selective": "selective", "full": "full"}


def _toml(value: object) -> str:
    # JSON's strings, numbers, booleans and arrays are TOML's too
    return json.dumps(value, ensure_ascii=False)


def model_parts(stage_layers: tuple[int, ...]) -> list[list[str]]:
    """Module names per stage: embedding with the first, norm and output head with the last.

    Examples
    --------
    >>> model_parts((2, 1))
    [['tok_embeddings', 'layers.0', 'layers.1'], ['layers.2', 'norm', 'output']]
    """
    parts, first = [], 0
    for n in stage_layers:
        parts.append([f"layers.{i}" for i in range(first, first + n)])
        first += n
    parts[0].insert(0, "tok_embeddings")
    parts[-1] += ["norm", "output"]
    return parts


#: The file a launch script passes, and what torchrun starts (``hetopt.export.launch``).
MAIN_FILE = "torchtitan.toml"
LAUNCH_COMMAND = '-m torchtitan.train --job.config_file "$HERE/torchtitan.toml" "$@"'


@dataclass(frozen=True)
class _JobLayout:
    """The one layout torchtitan's job takes: each setting the first island's (``job_layout``)."""

    tp: int
    dp: int
    sp: bool
    recompute: str
    zero: int
    vpp: int
    cp: int
    ep: int
    etp: int


def _job_layout(plan: PlanView, gaps: list[str]) -> _JobLayout:
    """The job's layout, a gap line for each setting the islands disagree on."""
    tp, dp, sp, recompute, zero, vpp, cp, ep = job_layout(
        plan, gaps, "torchtitan", "the file takes the first island's", tp="tensor parallel degree",
        dp="data-parallel degree", sequence_parallel="sequence parallelism", recompute="recomputation",
        zero="ZeRO stage", vpp="virtual pipeline stages", cp="context parallel degree", ep="expert parallel degree")
    etp = expert_tp(tp=tp, ep=ep, cp=cp, dp=dp) if ep > 1 else 1
    return _JobLayout(tp, dp, sp, recompute, zero, vpp, cp, ep, etp)


def _layout_gaps(plan: PlanView, job: _JobLayout, gaps: list[str]) -> None:
    """Gap lines for the layout settings torchtitan runs otherwise than the plan prices."""
    for b in plan.blocks:
        if b.layout.fsep:
            gaps.append(f"fully sharded EP on {b.island}: torchtitan has no FSEP; written as plain EP "
                        f"(expert_parallel_degree {b.layout.ep}): each GPU keeps all the parameters of its experts "
                        "(more memory than planned) and the busiest expert sets the pace (the routing imbalance the "
                        "plan avoids)")
        if b.layout.offload:
            gaps.append(f"activation offloading on {b.island}: torchtitan has none (training.enable_cpu_offload moves "
                        "FSDP's parameters, gradients and optimizer state, not activations); left out, so the "
                        "activations stay on the GPU (memory above the plan's)")
    if job.tp > 1 and not job.sp:
        gaps.append("sequence parallelism: the plan has TP without it, torchtitan's TP always shards the norms "
                    "along the sequence (less activation memory than planned)")
    if job.vpp != 1:
        gaps.append(f"virtual pipeline stages {job.vpp}: module_fqns_per_model_part lists one part per physical stage; "
                    "an interleaved schedule needs the per-chunk split")
    if job.recompute == "selective":
        gaps.append("recomputation selective: torchtitan's selective mode is its op-level policy, not Megatron's "
                    "attention-only recomputation the plan prices")
    if job.zero in (1, 2):
        gaps.append(f"ZeRO stage {job.zero}: torchtitan has no optimizer/gradient-only sharding; written as FSDP "
                    f"over the {job.dp} data-parallel ranks without resharding after forward (weights sharded too: less memory "
                    "than planned, an all-gather of the weights every step)")


def _precision_and_placement_gaps(plan: PlanView, job: _JobLayout, one_job: bool, gaps: list[str]) -> list[str]:
    """Gap lines for precision, hand-over and GPU placement; returns the plan's GPU types without bf16."""
    no_bf16 = without_bf16(gpu_types(plan))
    gaps.extend(precision_gaps(plan.precision))
    gaps.extend(handover_gaps(plan.running.handover, "torchtitan"))
    if no_bf16:
        verb = "have" if len(no_bf16) > 1 else "has"
        gaps.append(f"precision: torchtitan trains in bf16 or fp32 only and {', '.join(no_bf16)} {verb} no bf16; "
                    f"mixed_precision_param is float32 (slower and larger than the {plan.precision} the plan prices)")
    if len(gpu_types(plan)) > 1 and not one_job:
        per_stage = "tp*dp" if job.cp == 1 else "tp*cp*dp"
        gaps.append(f"GPU types {', '.join(gpu_types(plan))} in one job: torchtitan assigns pipeline stages by rank; "
                    f"launch so the ranks of each stage are on its island (stage k: ranks k*{per_stage} .. "
                    f"(k+1)*{per_stage}-1 with torchtitan's pp-outermost mesh)")
    return no_bf16


def _sharding(job: _JobLayout, gaps: list[str]) -> tuple[int, int, str]:
    """FSDP's shard and replicate degrees and reshard-after-forward mode, with their gap lines."""
    shard, replicate = (1, job.dp) if job.zero == 0 else (job.dp, 1)
    reshard = "always" if job.zero == 3 else "never" if job.zero else "default"
    if job.ep > 1 and (shard * job.cp * job.tp) % (job.etp * job.ep):
        # parallel_dims.py: the experts' mesh is dp_replicate × (dp_shard·cp·tp / (etp·ep)) × ep × etp
        shard, replicate, reshard = job.dp, 1, "never"
        gaps.append(f"expert parallel degree {job.ep}: torchtitan's EP takes its ranks from dp_shard x cp x tp, not "
                    f"from replicas; the {job.dp} data-parallel ranks are written as FSDP without resharding after forward "
                    "(weights sharded where the plan replicates them: less memory, an all-gather every step)")
    elif job.cp > 1 and job.zero == 0:
        gaps.append(f"context parallel degree {job.cp}: torchtitan shards the weights over the CP ranks (FSDP over "
                    "dp_shard x cp) where the plan replicates them: less memory, an all-gather every step")
    return shard, replicate, reshard


def _head_lines(plan: PlanView, names: tuple[str, str]) -> list[str]:
    """The file's comment header, ``[job]`` and ``[model]`` sections."""
    lines = [
        f"# torchtitan job config written by `hetopt export`: {plan_line(plan)}.",
        "# Keys: torchtitan v0.2.2 torchtitan/config/job_config.py. Add [optimizer], dataset, steps and checkpointing.",
        "# Stages: " + ", ".join(f"{b.island} ({b.gpu}) stages {b.first_stage}-{b.first_stage + len(b.stage_layers) - 1}"
                                 for b in plan.blocks),
        "",
        "[job]",
        f"description = {_toml('hetopt plan: ' + plan.model + ' on ' + plan.cluster)}",
        "",
    ]
    lines += ["[model]", f"name = {_toml(names[0])}", f"flavor = {_toml(names[1])}", ""]
    return lines


def _training_lines(plan: PlanView, job: _JobLayout, no_bf16: list[str]) -> list[str]:
    """The ``[training]`` section: batch sizes, sequence length, parameter precision."""
    # with pipeline stages a step's micro-batches are the pipeline's; without, torchtitan
    # accumulates global / (local x dp) micro-batches (train.py gradient_accumulation_steps)
    over_dp = plan.global_batch if len(plan.stage_layers) > 1 else plan.microbatch_size
    return [
        "[training]",
        f"local_batch_size = {over_dp // job.dp}",
        f"global_batch_size = {plan.global_batch}",
        f"seq_len = {plan.seq}",
        f"mixed_precision_param = {_toml('float32' if no_bf16 or plan.precision in ('fp32', 'tf32') else 'bfloat16')}",
        "",
    ]


def _parallelism_lines(plan: PlanView, job: _JobLayout, sharding: tuple[int, int, str]) -> list[str]:
    """The ``[parallelism]`` section: the mesh's degrees and the pipeline's stage split."""
    shard, replicate, reshard = sharding
    lines = [
        "[parallelism]",
        f"data_parallel_replicate_degree = {replicate}",
        f"data_parallel_shard_degree = {shard}",
        f"fsdp_reshard_after_forward = {_toml(reshard)}",
        f"tensor_parallel_degree = {job.tp}",
        f"pipeline_parallel_degree = {len(plan.stage_layers)}",
    ]
    if plan.running.tp_overlap and job.tp > 1:  # async TP (tpoverlap=yes); it takes effect with [compile] on
        lines.append(running.TORCHTITAN_ASYNC_TP)
    if job.cp > 1:
        lines.append(f"context_parallel_degree = {job.cp}")
    if job.ep > 1:
        lines += [f"expert_parallel_degree = {job.ep}", f"expert_tensor_parallel_degree = {job.etp}"]
    if len(plan.stage_layers) > 1:
        lines += [
            f"pipeline_parallel_schedule = {_toml('1F1B')}",
            f"pipeline_parallel_microbatch_size = {plan.microbatch_size // job.dp}",
            "module_fqns_per_model_part = [",
            *(f"  {_toml(part)}," for part in model_parts(plan.stage_layers)),
            "]",
        ]
    return lines


def build(plan: PlanView, model: ModelConfig, *, one_job: bool = False) -> tuple[dict[str, str], list[str]]:
    """``torchtitan.toml`` and the gaps (``one_job``: the plan keeps torchtitan's rules and is
    launched by ``launch.sh``, which places the stages).

    Examples
    --------
    >>> import tomllib
    >>> from hetopt.export.source import Block, Layout, PlanView
    >>> lay = Layout(2, 2, 1, 1, "full", 3, True)
    >>> from hetopt.workload import ModelConfig
    >>> llama = ModelConfig("Llama-3 8B", "llama", 32, 4096, 32, 14336, 128256, 8192, kv_heads=8)
    >>> plan = PlanView("c", "Llama-3 8B", 8, 1, 8, 128, "OPTIMAL", (Block("a", "A100", lay, 0, (17, 15), 4, 1),), None)
    >>> files, gaps = build(plan, llama)
    >>> job = tomllib.loads(files["torchtitan.toml"])
    >>> job["parallelism"]["pipeline_parallel_degree"], job["training"]["local_batch_size"], gaps
    (2, 8, [])
    """
    gaps: list[str] = []
    job = _job_layout(plan, gaps)
    _layout_gaps(plan, job, gaps)
    # never torchtitan's default (a debug model): its own model of the plan's shape, or no file
    names = shipped_flavor(model)
    no_bf16 = _precision_and_placement_gaps(plan, job, one_job, gaps)
    sharding = _sharding(job, gaps)
    lines = _head_lines(plan, names) + _training_lines(plan, job, no_bf16) + _parallelism_lines(plan, job, sharding)
    lines += ["", "[activation_checkpoint]", f"mode = {_toml(AC_MODES[job.recompute])}"]
    return {"torchtitan.toml": "\n".join(lines) + "\n"}, gaps
