"""How each runtime carries each running setting a plan was priced under.

A plan is priced under one :class:`~hetopt.costmodel.running.Running` record (overlap,
FlashAttention, sequence parallelism, TP overlap, ZeRO-3's gathers, precision, TF32, gradient
reduction, hand-over, host stack). Every one of them reaches every export: as the runtime's own
argument or config key where it has one (:attr:`Carried.flag`, written by the runtime's
exporter: a test checks that the flag is in its files), or as a line of the export's README
(``RUNNING.md`` beside per-island files) that says what the runtime does instead. This module is
the one table of which runtime carries which setting how; the exporters read the flags they
write from it where it decides them (``tpoverlap``, ``flash=no``, TF32's environment).

Examples
--------
>>> from hetopt.export.source import Block, Layout, PlanView
>>> lay = Layout(2, 2, 2, 1, "none", 1, True)
>>> plan = PlanView("c", "m", 8, 2, 4, 128, "OPTIMAL", (Block("a", "A100-SXM4-80GB", lay, 0, (3, 2), 8, 1),), None,
...                 Running(precision="bf16", tp_overlap=True))
>>> next(c for c in carried(plan, "megatron") if c.key == "tpoverlap").flag
'--tp-comm-overlap'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hetopt import runtimes
from hetopt.costmodel import running as run
from hetopt.costmodel.running import Running
from hetopt.export.source import PlanView

#: PyTorch's cuBLAS matmuls on fp32 tensors run in TF32 when this variable is 1, whatever
#: ``torch.backends.cuda.matmul.allow_tf32`` says (aten/src/ATen/Context.cpp,
#: ``allowTF32CuBLAS``); NVIDIA's PyTorch containers set it to 1, so a plan priced in plain FP32
#: sets it to 0.
TF32_VARIABLE = "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"


@dataclass(frozen=True)
class Carried:
    """One running setting of a plan in one runtime's export: ``key=word`` as ``--runtime``
    writes it, the runtime's ``flag`` for it (None: it has none, or needs none for this value)
    and one sentence on how the job runs it."""

    key: str
    word: str
    flag: str | None
    how: str

    def line(self) -> str:
        """The README line."""
        return f"- `{self.key}={self.word}`: " + (f"`{self.flag}`; " if self.flag else "") + self.how


def tf32_environment(running: Running) -> str | None:
    """The ``VAR=value`` that launch.sh exports for TF32 (None in 16 bits): 1 where the plan runs
    matmuls in TF32 (``precision=tf32``, or fp32 with ``tf32=auto|on``: a GPU without TF32
    tensor cores runs FP32 whatever the variable says), 0 in plain FP32.

    >>> tf32_environment(Running(precision="fp32", tf32="auto")), tf32_environment(Running(precision="bf16"))
    ('TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1', None)
    """
    if running.precision == "tf32" or (running.precision == "fp32" and running.tf32 != "off"):
        return f"{TF32_VARIABLE}=1"
    if running.precision == "fp32":
        return f"{TF32_VARIABLE}=0"
    return None


def megatron_tp_overlap(plan: PlanView) -> bool:
    """Whether Megatron-LM's export asks for ``--tp-comm-overlap``: the plan prices it and every
    island runs TP with sequence parallelism (Megatron-LM's validate_args refuses it otherwise)."""
    return plan.running.tp_overlap and all(b.layout.tp > 1 and b.layout.sequence_parallel for b in plan.blocks)


def _dp(plan: PlanView) -> int:
    return max(b.layout.dp * b.layout.cp for b in plan.blocks)


def _tp(plan: PlanView) -> int:
    return max(b.layout.tp for b in plan.blocks)


def _common(plan: PlanView, key: str, title: str) -> tuple[str | None, str] | None:
    """What every runtime's export does alike: TF32's environment, the host stack."""
    r = plan.running
    if key == "tf32":
        env = tf32_environment(r)
        if env is None:
            return None, f"no effect in {r.precision} (TF32 is a mode of fp32 matmuls)"
        return env, ("in every rank's environment: launch.sh exports it (files per island: set it yourself); a GPU "
                     "without TF32 tensor cores runs FP32 either way")
    if key == "host" and r.host != "cudagraph":  # cudagraph: the runtime's own (GRAPHED)
        stack = "today's eager PyTorch" if r.host == "torch2" else "a PyTorch 1.x stack (DeepSpeed 0.3, Megatron-LM 1.1)"
        return None, (f"no {title} argument: the plan's stages are floored by the host time per layer of {stack}; "
                      "the job's own software stack decides it")
    return None


def _megatron(plan: PlanView, key: str) -> tuple[str | None, str]:
    r, dp, tp = plan.running, _dp(plan), _tp(plan)
    if key == "overlap":
        if not r.overlap:
            return None, "Megatron-LM's default: without --overlap-grad-reduce the gradients are reduced after the backward"
        return ("--overlap-grad-reduce" if dp > 1 else None,
                "with --overlap-param-gather under the distributed optimizer" if dp > 1 else "no data-parallel traffic")
    if key == "flash":
        if not r.flash:
            return MEGATRON_UNFUSED, "attention unfused everywhere, its scores kept, as the plan prices"
        return None, "Megatron-LM picks FlashAttention where the GPU runs it (unfused on Volta and Turing: see the args)"
    if key == "sp":
        if tp == 1:
            return None, "no effect without tensor parallelism"
        return ("--sequence-parallel" if r.sequence_parallel else None,
                "per island, with its TP" if r.sequence_parallel else "Megatron-LM's default: TP without it")
    if key == "tpoverlap":
        if not r.tp_overlap:
            return None, "Megatron-LM's default: TP collectives on the path"
        if not megatron_tp_overlap(plan):
            return None, "no effect here: Megatron-LM overlaps TP traffic only with TP > 1 and sequence parallelism"
        return MEGATRON_TP_OVERLAP, "TP traffic overlapped with the GEMMs (Transformer Engine's userbuffers)"
    if key == "zero3gather":
        return None, ("no Megatron-LM argument: its distributed optimizer shards the optimizer state only; ZeRO-3's "
                      "gathers, per layer or per tensor, apply to FSDP2 (--use-torch-fsdp2 gathers per layer)")
    if key == "precision":
        return (f"--{r.precision}" if r.precision in ("bf16", "fp16") else None,
                "Megatron-LM trains in fp32 without --bf16 or --fp16" if r.precision in ("fp32", "tf32") else "mixed precision")
    if key == "gradreduce":
        return ("--accumulate-allreduce-grads-in-fp32", "fp32 main gradients reduced") if r.grad_fp32 else \
            (None, "Megatron-LM's default: gradients reduced in the parameters' 16 bits")
    if key == "host":
        return MEGATRON_CUDA_GRAPH, (f"with {MEGATRON_RNG_TRACKER} (CUDA graphs require Transformer Engine's RNG tracker): "
                                     "each layer's kernels captured once and replayed, as priced without the host's floor")
    return None, ("Megatron-LM sends each TP rank's share between stages, as priced" if r.handover == "split" else
                  "Megatron-LM sends each TP rank's share: its hand-overs take less time than priced (GAPS)")


def _torchtitan(plan: PlanView, key: str) -> tuple[str | None, str]:
    r = plan.running
    if key == "overlap":
        return None, ("torchtitan's FSDP2 prefetches and reduces during the backward, as priced" if r.overlap else
                      "no torchtitan key: FSDP2 always overlaps its collectives, faster than the plan prices")
    if key == "flash":
        return None, ("torchtitan's models call scaled_dot_product_attention: FlashAttention where the GPU runs it"
                      if r.flash else "no torchtitan key for unfused attention: SDPA picks FlashAttention where it can "
                      "(less memory and time than priced)")
    if key == "sp":
        return None, ("torchtitan's TP plan is always sequence-parallel" if r.sequence_parallel or _tp(plan) == 1 else
                      "no torchtitan key: its TP plan is always sequence-parallel (less activation memory than priced)")
    if key == "tpoverlap":
        if not r.tp_overlap:
            return None, "torchtitan's default: TP collectives on the path"
        if _tp(plan) == 1:
            return None, "no effect without tensor parallelism"
        return TORCHTITAN_ASYNC_TP, "async TP in [parallelism], effective with [compile] enabled"
    if key == "zero3gather":
        return None, ("FSDP2's fully_shard per block gathers one layer at a time, as priced" if not r.zero3_per_tensor
                      else "no torchtitan key: FSDP2 gathers per block, not tensor by tensor (fewer, larger collectives "
                      "than priced)")
    if key == "precision":
        return "mixed_precision_param", "in [training]: bfloat16 for 16-bit plans, float32 for fp32 and tf32"
    if key == "gradreduce":
        return None, ("torchtitan 0.2.2 reduces gradients in float32 only (mixed_precision_reduce)" +
                      ("" if r.grad_fp32 else ": twice the bytes the plan prices"))
    if key == "host":
        return None, ("no torchtitan key for CUDA graphs: its [compile] runs torch.compile's default mode, not "
                      "reduce-overhead, so the host issues every op (slower than the plan prices where it is host-bound)")
    return None, ("torchtitan's pipeline sends each rank's share, as priced" if r.handover == "split" else
                  "torchtitan sends each rank's share: its hand-overs take less time than priced (GAPS)")


def _deepspeed(plan: PlanView, key: str) -> tuple[str | None, str]:
    r = plan.running
    if key == "overlap":
        return DEEPSPEED_OVERLAP, ("zero_optimization.overlap_comm = " + ("true" if r.overlap else "false")
                                   + " (the pipeline engine reduces after the flush either way: GAPS)")
    if key == "flash":
        return None, "no DeepSpeed key: the model code chooses its attention" + ("" if r.flash else " (the plan prices it unfused)")
    if key == "sp":
        return None, ("no DeepSpeed key: DeepSpeed's sequence_parallel_size is Ulysses (all-to-all), not Megatron's "
                      "sequence parallelism; the model code decides it")
    if key == "tpoverlap":
        return None, "no DeepSpeed key: TP overlap is the model code's" + (" (the plan prices it on)" if r.tp_overlap else "")
    if key == "zero3gather":
        return None, ("DeepSpeed's ZeRO-3 gathers tensor by tensor, as priced" if r.zero3_per_tensor else
                      "no DeepSpeed key: its ZeRO-3 gathers tensor by tensor (more collectives than the plan's per-layer "
                      "gathers; stage3_prefetch_bucket_size groups them)")
    if key == "precision":
        return (f'"{r.precision}"' if r.precision in ("bf16", "fp16") else None,
                "its section enabled" if r.precision in ("bf16", "fp16") else "DeepSpeed trains in fp32 without a section")
    if key == "gradreduce":
        return ('"fp32_allreduce"', "gradients cast to fp32 to reduce") if r.grad_fp32 else \
            (None, "DeepSpeed's default: gradients reduced in their 16 bits")
    if key == "host":
        return None, ("no DeepSpeed key for CUDA graphs in training: the model code must capture its layers "
                      "(torch.cuda.make_graphed_callables), else the host issues every op (slower than priced where "
                      "it is host-bound)")
    return ('"pipeline"', "pipe_partitioned, grad_partitioned as DeepSpeed 0.3's engine") if r.handover == "deepspeed" else \
        (None, "no DeepSpeed key: its engine's hand-over is set by its version (the plan prices the split one)")


#: The flags this table decides (the exporters write them from here).
MEGATRON_UNFUSED = "--attention-backend unfused"
MEGATRON_TP_OVERLAP = "--tp-comm-overlap"
TORCHTITAN_ASYNC_TP = "enable_async_tensor_parallel = true"
DEEPSPEED_OVERLAP = '"overlap_comm"'
#: Megatron-Core's per-layer CUDA graphs (``host=cudagraph``): the capture backend and the RNG
#: tracker every CUDA graph backend requires (Megatron-Core documentation, "CUDA Graph";
#: ``TransformerConfig.cuda_graph_impl`` "local" and ``use_te_rng_tracker`` in core 0.16.1, whose
#: ``transformer/cuda_graphs.py`` refuses to capture with Megatron's own RNG tracker;
#: ``--enable-cuda-graph`` before ``--cuda-graph-impl``).
MEGATRON_CUDA_GRAPH = "--cuda-graph-impl local"
MEGATRON_RNG_TRACKER = "--te-rng-tracker"

#: Each runtime's table: a running setting's ``--runtime`` key to (flag or None, how), for the keys
#: every runtime's export carries alike (:func:`_common`) the runtime's own lines.
RUNTIMES: dict[str, Callable[[PlanView, str], tuple[str | None, str]]] = {
    "megatron": _megatron, "torchtitan": _torchtitan, "deepspeed": _deepspeed}


def carried(plan: PlanView, runtime: str) -> list[Carried]:
    """Every running setting of ``plan`` as ``runtime``'s export carries it, in :data:`KEYS` order."""
    how, title = RUNTIMES[runtime], runtimes.RUNTIMES[runtime].title
    out = []
    for key in run.KEYS:
        value = getattr(plan.running, key.field)
        flag, text = _common(plan, key.text, title) or how(plan, key.text)
        out.append(Carried(key.text, "unset" if value is None else key.word(value), flag, text))
    return out


def readme_section(plan: PlanView, runtime: str, title: str) -> list[str]:
    """The README lines: how the job runs each setting the plan was priced under."""
    return ["## How the plan runs", "", f"Every setting the plan was priced under, and how {title} runs it:", "",
            *(c.line() for c in carried(plan, runtime)), ""]


__all__ = ["Carried", "RUNTIMES", "TF32_VARIABLE", "carried", "readme_section", "tf32_environment"]
