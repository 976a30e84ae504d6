"""DeepSpeed: ``ds_config.json`` and a side file with what the config cannot hold.

From a plan: the pipeline engine's batch keys (``train_batch_size`` = micro-batch per GPU ×
gradient accumulation steps × data-parallel size, the accumulation steps being the plan's
micro-batches), ZeRO stage (at most 1 beside pipeline parallelism: DeepSpeed's pipeline
engine refuses 2 and 3) and fp16; ``pipeline.json`` holds the stage boundaries for
``PipelineModule`` (which has no partition method taking them, so they are set by hand) and
the topology. From an allocation result: ZeRO-3 over every GPU with the per-GPU batches in
``per_gpu_batch.json``, since DeepSpeed takes one micro-batch size for all GPUs.

Keys: DeepSpeed ``deepspeed/runtime/constants.py`` and ``deepspeed/runtime/zero/config.py``
(v0.18); the pipeline facts from ``deepspeed/runtime/pipe/module.py`` (``_partition_layers``:
uniform, parameters, type:REGEX) and ``engine.py`` (ZeRO-2/3 refused with pipelines).

Expert parallelism is not a config key: DeepSpeed sets it in the model,
``deepspeed.moe.layer.MoE(num_experts, ep_size, k)``, so ``pipeline.json`` gets a ``moe`` entry
with each stage's ``ep_size`` and a gap line says so; DeepSpeed's expert groups lie inside the
data-parallel group with the experts split by TP (``deepspeed/utils/groups.py``), so a plan
whose experts fold TP into EP gets a gap. DeepSpeed's sequence parallelism is Ulysses
(``sequence_parallel_size``, an all-to-all over the heads), not the ring context parallelism
the plan prices: CP is a gap, not written. Activation offloading is
``activation_checkpointing.cpu_checkpointing``, which moves activation checkpoints to the host
and so needs recomputation (``deepspeed/runtime/activation_checkpointing/config.py``); without
it, a gap. Fully sharded EP has no DeepSpeed equivalent: a gap.
"""

from __future__ import annotations

import json
import math
from collections import Counter

from hetopt.export.common import ALLOCATION_PRECISION, gpu_types, job_layout, plan_line, precision_gaps
from hetopt.export.source import AllocationView, PlanView, share_text
from hetopt.parallelism.expert import expert_tp
from hetopt.workload import ModelConfig

ACCEPTS = ("plan", "allocation")
HINT = "it takes a plan (`hetopt plan ... --json`) or an allocation result (`hetopt solve ALLOCATION.toml --json`)"

#: The largest ZeRO stage DeepSpeed's pipeline engine accepts (engine.py refuses gradients
#: and weights sharding with pipeline parallelism).
PIPELINE_MAX_ZERO = 1
#: ZeRO stage of an FSDP allocation: weights, gradients and optimizer state all sharded.
FSDP_ZERO = 3
#: State shares closer than this count as even (the allocation LP's shares are floats).
SHARE_TOLERANCE = 1e-9


def _json(doc: dict) -> str:
    return json.dumps(doc, indent=2) + "\n"


def _breadth_gaps(plan: PlanView, model: ModelConfig | None, gaps: list[str]) -> None:
    """Gap lines for expert and context parallelism (whatever DeepSpeed's config cannot hold)."""
    for b in plan.blocks:
        lay = b.layout
        if lay.ep > 1:
            gaps.append(f"expert parallelism ep{lay.ep} on {b.island}: not a ds_config key; DeepSpeed sets it in the "
                        f"model, deepspeed.moe.layer.MoE(..., ep_size={lay.ep}) (pipeline.json moe)")
            if expert_tp(tp=lay.tp, ep=lay.ep, cp=lay.cp, dp=lay.dp) != lay.tp or lay.dp % lay.ep:
                gaps.append(f"expert parallelism ep{lay.ep} on {b.island}: DeepSpeed's expert groups lie inside the "
                            f"dp{lay.dp} data-parallel group with the experts split by tp{lay.tp}; the plan spreads them "
                            "over the TP or CP ranks, which DeepSpeed cannot (re-plan)")
            if model is not None and (model.experts <= 1 or model.experts % lay.ep):
                gaps.append(f"expert parallelism ep{lay.ep} on {b.island}: MoE asserts that ep_size divides the "
                            f"experts, and {model.name} has {model.experts} (re-plan)")
        if lay.fsep:
            gaps.append(f"fully sharded EP on {b.island}: DeepSpeed's MoE has no FSEP; written as plain EP: each GPU "
                        "keeps all the parameters of its experts (more memory than planned) and the busiest expert "
                        "sets the pace")
        if lay.cp > 1:
            gaps.append(f"context parallelism cp{lay.cp} on {b.island}: DeepSpeed's sequence parallelism is Ulysses "
                        "(sequence_parallel_size, an all-to-all over the heads), not the ring CP the plan prices; not "
                        f"written: each stage runs on tp x dp = {lay.tp * lay.dp} of the plan's {lay.stage_gpus} GPUs "
                        "with whole sequences (memory above the plan's)")


#: The file a launch script passes, and what torchrun starts (``hetopt.export.launch``).
MAIN_FILE = "ds_config.json"
LAUNCH_COMMAND = ('"${TRAIN_SCRIPT:?set TRAIN_SCRIPT to your DeepSpeed training script}" --deepspeed '
                  '--deepspeed_config "$HERE/ds_config.json" "$@"')


def _pipeline_gaps(plan: PlanView, tp: int, zero: int, gaps: list[str]) -> int:
    """Gap lines for what DeepSpeed's pipeline engine runs otherwise; returns the ZeRO stage it accepts."""
    stages = len(plan.stage_layers)
    if stages > 1 and zero > PIPELINE_MAX_ZERO:
        gaps.append(f"ZeRO stage {zero} with {stages} pipeline stages: DeepSpeed's pipeline engine allows at most stage "
                    f"{PIPELINE_MAX_ZERO}; ds_config uses {PIPELINE_MAX_ZERO} (memory above the plan's)")
        zero = PIPELINE_MAX_ZERO
    if tp > 1:
        gaps.append(f"tensor parallel size {tp}: DeepSpeed has none of its own; run a Megatron-DeepSpeed model with "
                    f"topology num_mp={tp} (pipeline.json)")
    if any(b.layout.sequence_parallel for b in plan.blocks):
        gaps.append("sequence parallelism: not a DeepSpeed setting; it belongs to the Megatron-DeepSpeed model")
    vpp = max(b.layout.vpp for b in plan.blocks)
    if vpp > 1:
        gaps.append(f"virtual pipeline stages {vpp}: DeepSpeed's pipeline engine runs plain 1F1B (no interleaved "
                    "schedule); the partition is written for one stage per GPU, slower than the plan")
    if stages > 1 and len(set(plan.stage_layers)) > 1:
        gaps.append(f"uneven split {'+'.join(map(str, plan.stage_layers))}: PipelineModule has no partition_method "
                    "taking boundaries; set its parts from pipeline.json (e.g. override _partition_layers)")
    return zero


def _ds_config(plan: PlanView, dp: int, zero: int, offload: bool, interval: int, gaps: list[str]) -> dict:
    """``ds_config.json``'s keys, with gap lines for precision, overlap and activation offloading."""
    stages = len(plan.stage_layers)
    config = {
        "train_batch_size": plan.global_batch,
        "train_micro_batch_size_per_gpu": plan.microbatch_size // dp,
        "gradient_accumulation_steps": plan.microbatches,
        "zero_optimization": {"stage": zero, "overlap_comm": plan.running.overlap},
    }
    if plan.precision in ("bf16", "fp16"):  # DeepSpeed trains in fp32 without an fp16 or bf16 section
        config[plan.precision] = {"enabled": True}
    gaps.extend(precision_gaps(plan.precision))
    if plan.running.grad_fp32:  # deepspeed/runtime/constants.py FP32_ALLREDUCE: gradients cast to fp32 to reduce
        config["fp32_allreduce"] = True
    if plan.running.handover == "deepspeed" and stages > 1:
        # priced as the 2021 engine ran: activations partitioned over TP, gradients sent whole
        # (the pipeline section's pipe_partitioned / grad_partitioned, deepspeed/runtime/config.py)
        config["pipeline"] = {"pipe_partitioned": True, "grad_partitioned": False}
    if plan.running.overlap and stages > 1 and dp > 1:
        gaps.append("overlap: DeepSpeed's pipeline engine reduces the gradients after the pipeline's flush, where the "
                    "plan priced them overlapped with the last backward passes (the iteration runs longer)")
    if offload and interval:
        # the checkpointed layer inputs go to host memory (DeepSpeed's checkpointing.py copies them)
        config["activation_checkpointing"] = {"cpu_checkpointing": True}
        gaps.append("activation offloading: written as activation_checkpointing.cpu_checkpointing, which moves the "
                    "activation checkpoints to the host; it takes effect when the model's checkpointing is configured "
                    "from ds_config (deepspeed.checkpointing.configure) and runs through deepspeed.checkpointing")
    elif offload:
        gaps.append("activation offloading without recomputation: DeepSpeed offloads only activation checkpoints "
                    "(activation_checkpointing.cpu_checkpointing); left out, so the activations stay on the GPU "
                    "(memory above the plan's)")
    return config


def _model_shape(plan: PlanView, model: ModelConfig) -> dict:
    """``pipeline.json``'s ``model`` entry: every key of the model file, the shape the user's layers must have."""
    return {"name": model.name, "architecture": model.architecture, "layers": model.layers,
            "hidden": model.hidden, "ffn": model.ffn, "heads": model.heads,
            "kv_heads": model.kv_heads or model.heads,
            "head_dim": model.head_dim or model.hidden // model.heads, "vocab": model.vocab,
            "sequence": plan.seq, "max_positions": max(plan.seq, model.sequence),
            "tied_embeddings": model.tied_embeddings, "experts": model.experts, "top_k": model.top_k,
            "expert_ffn": model.expert_ffn, "moe_every": model.moe_every,
            "note": "build the PipelineModule's layers with this shape (llama: RoPE, SwiGLU, RMSNorm, "
                    "no biases; gpt: learned positions, GELU, LayerNorm, biases)"}


def _side_file(plan: PlanView, model: ModelConfig | None, tp: int, dp: int, interval: int) -> dict:
    """``pipeline.json``: the topology, stage boundaries and ranks, the model's shape and its MoE layers."""
    stages = len(plan.stage_layers)
    boundaries = [0]
    for n in plan.stage_layers:
        boundaries.append(boundaries[-1] + n)
    per_stage = tp * dp
    side = {
        "written_by": "hetopt export",
        "plan": plan_line(plan),
        "num_stages": stages,
        "topology": {"num_pp": stages, "num_mp": tp, "num_dp": dp},
        "activation_checkpoint_interval": interval,
        "decoder_layer_boundaries": boundaries,
        "note": "PipelineModule parts: with the embedding as the first layer spec and the head as the last, "
                "use parts_with_embedding_and_head",
        "parts_with_embedding_and_head": [0] + [b + 1 for b in boundaries[1:-1]] + [boundaries[-1] + 2],
        "stages": [
            {"stage": k, "island": b.island, "gpu": b.gpu, "layers": n, "ranks": [k * per_stage, (k + 1) * per_stage - 1]}
            for b in plan.blocks for k, n in zip(range(b.first_stage, b.first_stage + len(b.stage_layers)), b.stage_layers)
        ],
    }
    if model is not None:
        # DeepSpeed has no model of its own (PipelineModule runs the user's layers): the shape they
        # must have, every key of the model file, so the job trains the model the plan priced
        side["model"] = _model_shape(plan, model)
    if any(b.layout.ep > 1 for b in plan.blocks):
        side["moe"] = {
            "class": "deepspeed.moe.layer.MoE",
            "num_experts": model.experts if model is not None else None,
            "k": model.top_k if model is not None else None,
            "ep_size_by_stage": [b.layout.ep for b in plan.blocks for _ in b.stage_layers],
            "note": "ep_size is MoE's argument in each stage's MoE layers; DeepSpeed carves the expert groups out of "
                    "the data-parallel group",
        }
    return side


def _plan(plan: PlanView, model: ModelConfig | None = None, one_job: bool = False) -> tuple[dict[str, str], list[str]]:
    """``ds_config.json``, ``pipeline.json`` and the gaps of a plan (:func:`build`)."""
    gaps: list[str] = []
    tp, dp, zero, recompute, offload = job_layout(
        plan, gaps, "DeepSpeed", "the files take the first island's", tp="tensor parallel size", dp="data-parallel size",
        zero="ZeRO stage", recompute="recomputation", offload="activation offloading")
    _breadth_gaps(plan, model, gaps)
    zero = _pipeline_gaps(plan, tp, zero, gaps)
    interval = {"none": 0, "selective": 1, "full": 1}[recompute]
    if recompute == "selective":
        gaps.append("recomputation selective: DeepSpeed checkpoints whole layers only; activation_checkpoint_interval 1 "
                    "recomputes all of each layer (slower than planned)")
    types = gpu_types(plan)
    if len(types) > 1 and not one_job:
        gaps.append(f"GPU types {', '.join(types)} in one job: DeepSpeed places stages by rank; launch so each stage's "
                    "ranks are on its island (pipeline.json lists them)")
    config = _ds_config(plan, dp, zero, offload, interval, gaps)
    side = _side_file(plan, model, tp, dp, interval)
    return {"ds_config.json": _json(config), "pipeline.json": _json(side)}, gaps


def _allocation(alloc: AllocationView) -> tuple[dict[str, str], list[str]]:
    gaps: list[str] = []
    n = len(alloc.gpus)
    batches = [g.batch for g in alloc.gpus]
    config: dict = {"train_batch_size": alloc.global_batch}
    smallest = min(g.microbatch_size or g.batch for g in alloc.gpus)
    if len(set(batches)) == 1 and len({(g.microbatch_size, g.microbatches) for g in alloc.gpus}) == 1 and alloc.exact:
        config["train_micro_batch_size_per_gpu"] = alloc.gpus[0].microbatch_size
        config["gradient_accumulation_steps"] = alloc.gpus[0].microbatches
    elif alloc.global_batch % n == 0:
        even = alloc.global_batch // n
        # the largest micro-batch that divides the even share and that every GPU held in the plan
        micro = max(m for m in range(1, min(smallest, even) + 1) if even % m == 0)
        config["train_micro_batch_size_per_gpu"] = micro
        config["gradient_accumulation_steps"] = even // micro
        grouped = ", ".join(f"{b}×{c}" for b, c in sorted(Counter(batches).items()))
        gaps.append(f"uneven per-GPU batches ({grouped}, batch×GPUs): DeepSpeed takes one micro-batch size for every "
                    f"GPU; ds_config splits evenly ({even} per GPU, {micro}×{even // micro}), slower than planned; "
                    "the planned batches are in per_gpu_batch.json")
    else:
        per_gpu = math.ceil(alloc.global_batch / n)
        del config["train_batch_size"]
        config["train_micro_batch_size_per_gpu"] = 1
        config["gradient_accumulation_steps"] = per_gpu
        gaps.append(f"global batch {alloc.global_batch} over {n} GPUs: DeepSpeed needs the same batch on every GPU; "
                    f"ds_config runs {per_gpu} per GPU ({per_gpu * n} samples per step, train_batch_size left to DeepSpeed); "
                    "the planned batches are in per_gpu_batch.json")
    config["zero_optimization"] = {"stage": FSDP_ZERO}
    config[ALLOCATION_PRECISION] = {"enabled": True}
    shares = [g.state_share for g in alloc.gpus if g.state_share is not None]
    if shares and max(shares) - min(shares) > SHARE_TOLERANCE:
        gaps.append(f"uneven state shares ({', '.join(share_text(s) for s in shares)}): ZeRO-3 shards evenly "
                    "(1/N each); a GPU whose planned share is below 1/N holds more than planned")
    if not alloc.exact:
        gaps.append(f"the {alloc.origin} gives per-GPU batches only; micro-batch sizes and state shares come from "
                    "`hetopt solve` on the allocation instance")
    if len({g.type for g in alloc.gpus}) > 1:
        gaps.append("GPU types " + ", ".join(dict.fromkeys(g.type for g in alloc.gpus)) + " in one job: rank i must "
                    "run on GPU i of per_gpu_batch.json")
    side = {
        "written_by": "hetopt export",
        "source": alloc.origin,
        "global_batch": alloc.global_batch,
        "gpus": [{"rank": i, "type": g.type, "batch": g.batch, "microbatch_size": g.microbatch_size,
                  "microbatches": g.microbatches, "state_share": g.state_share} for i, g in enumerate(alloc.gpus)],
    }
    return {"ds_config.json": _json(config), "per_gpu_batch.json": _json(side)}, gaps


def build(view: PlanView | AllocationView, model: ModelConfig | None, *, one_job: bool = False) -> tuple[dict[str, str], list[str]]:
    """``ds_config.json`` and its side file, and the gaps (``one_job``: a plan that keeps
    DeepSpeed's rules, launched by ``launch.sh``, which places the stages).

    Examples
    --------
    >>> from hetopt.export.source import AllocationView, GpuShare
    >>> alloc = AllocationView((GpuShare("A", 6, 3, 2, 0.5), GpuShare("B", 2, 1, 2, 0.5)), 8, "OPTIMAL", True, "r")
    >>> files, gaps = build(alloc, None)
    >>> json.loads(files["ds_config.json"])["train_micro_batch_size_per_gpu"], len(gaps)
    (1, 2)
    """
    return _plan(view, model, one_job) if isinstance(view, PlanView) else _allocation(view)
