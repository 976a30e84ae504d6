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

from hetopt.export.common import FILL_IN, gpu_types, handover_gaps, job_value, plan_line, precision_gaps, without_bf16
from hetopt.export.source import PlanView
from hetopt.parallelism.expert import expert_tp
from hetopt.workload import ModelConfig

ACCEPTS = ("plan",)
HINT = "it takes a plan: `hetopt plan ... --json`; an allocation result goes to --to cephalo or --to deepspeed"
NEEDS_MODEL = False

#: hetopt model name → torchtitan (model.name, model.flavor), where torchtitan v0.2.2 ships the
#: same shape (torchtitan/models/llama3/__init__.py, torchtitan/models/qwen3/__init__.py).
TORCHTITAN_MODELS = {"Llama-3 8B": ("llama3", "8B"), "Llama-3 70B": ("llama3", "70B"), "Qwen3-30B-A3B": ("qwen3", "30B-A3B")}
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


def build(plan: PlanView, model: ModelConfig | None, *, one_job: bool = False) -> tuple[dict[str, str], list[str]]:
    """``torchtitan.toml`` and the gaps (``one_job``: the plan keeps torchtitan's rules and is
    launched by ``launch.sh``, which places the stages).

    Examples
    --------
    >>> import tomllib
    >>> from hetopt.export.source import Block, Layout, PlanView
    >>> lay = Layout(2, 2, 1, 1, "full", 3, True)
    >>> plan = PlanView("c", "Llama-3 8B", 8, 1, 8, 128, "OPTIMAL", (Block("a", "A100", lay, 0, (17, 15), 4, 1),), None)
    >>> files, gaps = build(plan, None)
    >>> job = tomllib.loads(files["torchtitan.toml"])
    >>> job["parallelism"]["pipeline_parallel_degree"], job["training"]["local_batch_size"], gaps
    (2, 8, [])
    """
    gaps: list[str] = []
    first_only = "the file takes the first island's"
    tp = int(job_value(plan, "tensor parallel degree", lambda b: b.layout.tp, gaps, "torchtitan", first_only))
    dp = int(job_value(plan, "data-parallel degree", lambda b: b.layout.dp, gaps, "torchtitan", first_only))
    sp = bool(job_value(plan, "sequence parallelism", lambda b: b.layout.sequence_parallel, gaps, "torchtitan", first_only))
    recompute = str(job_value(plan, "recomputation", lambda b: b.layout.recompute, gaps, "torchtitan", first_only))
    zero = int(job_value(plan, "ZeRO stage", lambda b: b.layout.zero, gaps, "torchtitan", first_only))
    vpp = int(job_value(plan, "virtual pipeline stages", lambda b: b.layout.vpp, gaps, "torchtitan", first_only))
    cp = int(job_value(plan, "context parallel degree", lambda b: b.layout.cp, gaps, "torchtitan", first_only))
    ep = int(job_value(plan, "expert parallel degree", lambda b: b.layout.ep, gaps, "torchtitan", first_only))
    etp = expert_tp(tp=tp, ep=ep, cp=cp, dp=dp) if ep > 1 else 1
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
    if tp > 1 and not sp:
        gaps.append("sequence parallelism: the plan has TP without it, torchtitan's TP always shards the norms "
                    "along the sequence (less activation memory than planned)")
    if vpp != 1:
        gaps.append(f"virtual pipeline stages {vpp}: module_fqns_per_model_part lists one part per physical stage; "
                    "an interleaved schedule needs the per-chunk split")
    if recompute == "selective":
        gaps.append("recomputation selective: torchtitan's selective mode is its op-level policy, not Megatron's "
                    "attention-only recomputation the plan prices")
    if zero in (1, 2):
        gaps.append(f"ZeRO stage {zero}: torchtitan has no optimizer/gradient-only sharding; written as FSDP over the "
                    f"{dp} data-parallel ranks without resharding after forward (weights sharded too: less memory "
                    "than planned, an all-gather of the weights every step)")
    names = TORCHTITAN_MODELS.get(plan.model)
    if names is None:
        gaps.append(f"{FILL_IN}model: torchtitan ships no {plan.model}; set [model] name and flavor to your model spec "
                    "(module_fqns_per_model_part uses torchtitan's decoder names tok_embeddings, layers.N, norm, output)")
    no_bf16 = without_bf16(gpu_types(plan))
    gaps.extend(precision_gaps(plan.precision))
    gaps.extend(handover_gaps(plan.running.handover, "torchtitan"))
    if no_bf16:
        verb = "have" if len(no_bf16) > 1 else "has"
        gaps.append(f"precision: torchtitan trains in bf16 or fp32 only and {', '.join(no_bf16)} {verb} no bf16; "
                    f"mixed_precision_param is float32 (slower and larger than the {plan.precision} the plan prices)")
    if len(gpu_types(plan)) > 1 and not one_job:
        per_stage = "tp*dp" if cp == 1 else "tp*cp*dp"
        gaps.append(f"GPU types {', '.join(gpu_types(plan))} in one job: torchtitan assigns pipeline stages by rank; "
                    f"launch so the ranks of each stage are on its island (stage k: ranks k*{per_stage} .. "
                    f"(k+1)*{per_stage}-1 with torchtitan's pp-outermost mesh)")
    shard, replicate = (1, dp) if zero == 0 else (dp, 1)
    reshard = "always" if zero == 3 else "never" if zero else "default"
    if ep > 1 and (shard * cp * tp) % (etp * ep):
        # parallel_dims.py: the experts' mesh is dp_replicate × (dp_shard·cp·tp / (etp·ep)) × ep × etp
        shard, replicate, reshard = dp, 1, "never"
        gaps.append(f"expert parallel degree {ep}: torchtitan's EP takes its ranks from dp_shard x cp x tp, not from "
                    f"replicas; the {dp} data-parallel ranks are written as FSDP without resharding after forward "
                    "(weights sharded where the plan replicates them: less memory, an all-gather every step)")
    elif cp > 1 and zero == 0:
        gaps.append(f"context parallel degree {cp}: torchtitan shards the weights over the CP ranks (FSDP over "
                    "dp_shard x cp) where the plan replicates them: less memory, an all-gather every step")
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
    if names is not None:
        lines += ["[model]", f"name = {_toml(names[0])}", f"flavor = {_toml(names[1])}", ""]
    lines += [
        "[training]",
        # with pipeline stages a step's micro-batches are the pipeline's; without, torchtitan
        # accumulates global / (local x dp) micro-batches (train.py gradient_accumulation_steps)
        f"local_batch_size = {plan.global_batch // dp if len(plan.stage_layers) > 1 else plan.microbatch_size // dp}",
        f"global_batch_size = {plan.global_batch}",
        f"seq_len = {plan.seq}",
        f"mixed_precision_param = {_toml('float32' if no_bf16 or plan.precision in ('fp32', 'tf32') else 'bfloat16')}",
        "",
        "[parallelism]",
        f"data_parallel_replicate_degree = {replicate}",
        f"data_parallel_shard_degree = {shard}",
        f"fsdp_reshard_after_forward = {_toml(reshard)}",
        f"tensor_parallel_degree = {tp}",
        f"pipeline_parallel_degree = {len(plan.stage_layers)}",
    ]
    if cp > 1:
        lines.append(f"context_parallel_degree = {cp}")
    if ep > 1:
        lines += [f"expert_parallel_degree = {ep}", f"expert_tensor_parallel_degree = {etp}"]
    if len(plan.stage_layers) > 1:
        lines += [
            f"pipeline_parallel_schedule = {_toml('1F1B')}",
            f"pipeline_parallel_microbatch_size = {plan.microbatch_size // dp}",
            "module_fqns_per_model_part = [",
            *(f"  {_toml(part)}," for part in model_parts(plan.stage_layers)),
            "]",
        ]
    lines += ["", "[activation_checkpoint]", f"mode = {_toml(AC_MODES[recompute])}"]
    return {"torchtitan.toml": "\n".join(lines) + "\n"}, gaps
