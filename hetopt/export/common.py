"""Pieces every exporter shares: job-wide settings across islands, headers, file names."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from hetopt.export.source import Block, PlanView
from hetopt.hardware import load_gpus

#: The precision of an allocation result (Cephalo's FSDP): its model and split_workload's
#: defaults train in fp16 autocast with fp32 reductions. A plan carries its own
#: (``PlanView.precision``: bf16, or fp16 where a GPU has no BF16).
ALLOCATION_PRECISION = "fp16"


#: The start of a gap line that is not a gap but something the user fills in (a model spec, a
#: path): ``hetopt export`` lists those in the export's README, not in GAPS.txt.
FILL_IN = "fill in: "


def job_value(plan: PlanView, what: str, get: Callable[[Block], Any], gaps: list[str], runtime: str,
              consequence: str) -> Any:
    """The value of a per-island setting for a one-job runtime: the first island's.

    When the islands disagree, one gap line names every island's value and what the files do
    (``consequence``); the first island's value is returned so the files stay consistent.
    """
    values = [(b.island, get(b)) for b in plan.blocks]
    if len({v for _, v in values}) > 1:
        listed = ", ".join(f"{island} {v}" for island, v in values)
        gaps.append(f"{what} differs by island ({listed}): {runtime} takes one for the whole job; {consequence}")
    return values[0][1]


def job_layout(plan: PlanView, gaps: list[str], runtime: str, consequence: str, **what: str) -> list[Any]:
    """The job's value of each named field of the islands' :class:`~hetopt.export.source.Layout`,
    in the order given: :func:`job_value` of each, ``what`` naming the field as the gap line does.

    Examples
    --------
    >>> from hetopt.export.source import Block, Layout, PlanView
    >>> a = Block("a", "A100", Layout(2, 1, 2, 1, "none", 1, True), 0, (4,), 4, 1)
    >>> b = Block("b", "V100", Layout(1, 1, 4, 1, "none", 1, True), 1, (4,), 4, 1)
    >>> plan, gaps = PlanView("c", "m", 8, 2, 4, 128, "OPTIMAL", (a, b), None), []
    >>> job_layout(plan, gaps, "X", "the first island's", tp="tensor parallel size", zero="ZeRO stage")
    [2, 1]
    >>> gaps
    ["tensor parallel size differs by island (a 2, b 1): X takes one for the whole job; the first island's"]
    """
    return [job_value(plan, text, lambda b, name=name: getattr(b.layout, name), gaps, runtime, consequence)
            for name, text in what.items()]


def gpu_types(plan: PlanView) -> list[str]:
    """The GPU types of the plan's stages, in pipeline order, each once."""
    return list(dict.fromkeys(b.gpu for b in plan.blocks))


def without_bf16(gpus: list[str]) -> list[str]:
    """Those of the catalog GPUs ``gpus`` that have no BF16 arithmetic (the catalog's ``bf16``; a
    name the catalog does not know is not listed). Runtimes that offer only bf16 mixed precision
    (torchtitan) cannot run them as planned.

    Examples
    --------
    >>> without_bf16(["V100-SXM2-32GB", "A100-SXM4-80GB", "T4"])
    ['V100-SXM2-32GB', 'T4']
    """
    return _catalog_without(gpus, "bf16")


def without_flash_attention(gpus: list[str]) -> list[str]:
    """Those of the catalog GPUs ``gpus`` whose attention runs unfused (the catalog's
    ``flash_attention``: FlashAttention needs Ampere or later); a name the catalog does not know
    is not listed.

    Examples
    --------
    >>> without_flash_attention(["V100-SXM2-32GB", "A100-SXM4-80GB", "T4"])
    ['V100-SXM2-32GB', 'T4']
    """
    return _catalog_without(gpus, "flash_attention")


def _catalog_without(gpus: list[str], feature: str) -> list[str]:
    """Those of ``gpus`` the catalog knows and whose entry has ``feature`` (a bool field) false."""
    catalog = load_gpus()
    return [g for g in gpus if g in catalog and not getattr(catalog[g], feature)]


#: What a job needs to run its matmuls in TF32 on any of the exporters' runtimes: PyTorch's cuBLAS
#: matmuls on fp32 tensors run in TF32 when ``torch.backends.cuda.matmul.allow_tf32`` is true
#: (false by default since PyTorch 1.12) or when this environment variable is 1 (PyTorch's
#: ``Context::allowTF32CuBLAS``, aten/src/ATen/Context.cpp); none of the runtimes' own config keys
#: sets it.
TF32_ENVIRONMENT = "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1"


def precision_gaps(precision: str) -> list[str]:
    """What the export of a plan in ``precision`` leaves to the launcher (tf32: the environment).

    Examples
    --------
    >>> precision_gaps("bf16"), len(precision_gaps("tf32"))
    ([], 1)
    """
    if precision != "tf32":
        return []
    return [f"precision tf32: the files train in fp32 and {TF32_ENVIRONMENT} in every rank's environment (launch.sh "
            "exports it) runs the matmuls on the tensor cores in TF32, as the plan prices; without it they run at the "
            "FP32 rate"]


def handover_gaps(handover: str, target: str) -> list[str]:
    """What the export of a plan priced with DeepSpeed's 2021 hand-over (``handover=deepspeed``)
    says to a runtime that hands over the split way (Megatron-LM, torchtitan).

    Examples
    --------
    >>> handover_gaps("split", "Megatron-LM"), len(handover_gaps("deepspeed", "torchtitan"))
    ([], 1)
    """
    if handover != "deepspeed":
        return []
    return [f"hand-over: the plan is priced with DeepSpeed's 2021 pipeline hand-over (handover=deepspeed: gradients "
            f"sent whole by every TP rank, activations gathered again); {target} sends each rank's share, so its "
            "hand-overs take less time than priced"]


def safe_name(text: str) -> str:
    """``text`` as a file-name part: letters, digits and ``.+-_`` kept, the rest ``_``.

    Examples
    --------
    >>> safe_name("h100nvl-0+3 / x")
    'h100nvl-0+3___x'
    """
    return re.sub(r"[^A-Za-z0-9.+_-]", "_", text)


def plan_line(plan: PlanView) -> str:
    """One line describing the plan, for file headers."""
    return (f"{plan.model} on {plan.cluster}: global batch {plan.global_batch}, {plan.microbatches} micro-batches of "
            f"{plan.microbatch_size} samples, sequence {plan.seq}, {len(plan.stage_layers)} stages ({plan.status})")


def split_text(layers: tuple[int, ...]) -> str:
    """Layers per stage joined by ``+``.

    Examples
    --------
    >>> split_text((4, 4, 5))
    '4+4+5'
    """
    return "+".join(map(str, layers))
