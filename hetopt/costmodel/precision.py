"""The mixed precision a run trains in: its element sizes, its matmul peak, which GPUs can run it.

Part of the cost model (:mod:`hetopt.costmodel`); every formula, constant and source is in
``formulations/costmodel.md``. SI units: FLOPs, bytes, seconds, bytes/s.
"""

from __future__ import annotations

from collections.abc import Iterable

from hetopt.hardware import GpuType
from hetopt.workload import ACTIVATION_BYTES


#: fp16/bf16 weight bytes per parameter (mixed precision keeps a 16-bit working copy).
WEIGHT_BYTES = 2

#: 16-bit gradient bytes per parameter; also what the gradient all-reduce moves.
GRADIENT_BYTES = 2

#: Bytes per gradient element of a data-parallel reduction run in fp32 (``gradreduce=fp32``):
#: DeepSpeed's ``"fp32_allreduce": true`` (deepspeed/runtime/engine.py: the 16-bit gradients
#: cast to fp32 before the all-reduce), Megatron-LM's ``--accumulate-allreduce-grads-in-fp32``
#: (fp32 main-gradient buffers reduced as they are), FSDP2's ``reduce_dtype=torch.float32``.
#: Twice the bytes of a 16-bit reduction, the same ring.
FP32_GRADIENT_BYTES = 4

#: The formats a plan trains in (``precision`` of the planner, ``--layout``, ``--runtime``):
#: bf16 with fp32 main gradients, Megatron's default for current runs; fp16 with loss scaling
#: (the 2021 runs, and every run on a GPU without BF16); fp32, PyTorch's default dtype with its
#: default ``torch.backends.cuda.matmul.allow_tf32 = False`` (since PyTorch 1.12), matmuls on the
#: CUDA cores; tf32, fp32 tensors whose matmuls run on the tensor cores in TF32
#: (``allow_tf32 = True``, Ampere and later).
PRECISIONS = ("bf16", "fp16", "fp32", "tf32")

#: Bytes per element of the weights, gradients and activations a precision stores and moves:
#: 2 for the 16-bit formats, 4 for fp32 and tf32 (TF32 is a tensor-core arithmetic mode on fp32
#: storage: NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020, "TF32"). Every 16-bit
#: byte count of this module (activations, hand-overs, TP/EP/DP collectives, memory-bound
#: kernels, GEMM operands) is a count of elements times ``ACTIVATION_BYTES``; the functions take
#: the element size as ``element_bytes`` (default: 16 bits). 1-byte dropout masks and the
#: loss's fp32 logits keep their sizes.
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "tf32": 4}

#: The precisions FlashAttention's kernels take: fp16 and bf16 only (Dao-AILab/flash-attention
#: README, "Datatype fp16 and bf16"); a fp32 or tf32 run computes attention unfused.
FLASH_PRECISIONS = ("bf16", "fp16")

#: The precision of GPUs that have BF16 arithmetic; the others train in fp16
#: (:func:`hardware_precision`).
DEFAULT_PRECISION = "bf16"


def elements_of(nbytes16: int, element_bytes: int) -> int:
    """A byte count of 16-bit elements (``ACTIVATION_BYTES`` each) at ``element_bytes`` an element."""
    return nbytes16 * element_bytes // ACTIVATION_BYTES


# ---------------------------------------------------------------------- training state


def hardware_precision(gpus: Iterable[GpuType]) -> str:
    """The precision a job on ``gpus`` trains in when nobody says: bf16 where every GPU has BF16
    arithmetic, else fp16 (one job, one precision; Volta, Turing and Pascal parts have no BF16).

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> cat = load_gpus()
    >>> hardware_precision([cat["A100-SXM4-80GB"]]), hardware_precision([cat["A100-SXM4-80GB"], cat["V100-SXM2-32GB"]])
    ('bf16', 'fp16')
    """
    return DEFAULT_PRECISION if all(g.bf16 for g in gpus) else "fp16"


def precision_problem(precision: str, gpus: Iterable[GpuType]) -> str | None:
    """Why ``precision`` cannot run on ``gpus`` (bf16 on a GPU without BF16, tf32 on one without
    TF32 tensor cores), or None.

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> precision_problem("bf16", [load_gpus()["T4"]])
    'precision=bf16: the T4 has no BF16 arithmetic (use precision=fp16)'
    >>> precision_problem("tf32", [load_gpus()["V100-SXM2-16GB"]])
    'precision=tf32: the V100-SXM2-16GB has no TF32 tensor cores (use precision=fp32)'
    """
    gpus = tuple(gpus)
    if precision == "bf16":
        lacking = sorted({g.name for g in gpus if not g.bf16})
        if lacking:
            return f"precision=bf16: the {', '.join(lacking)} {'has' if len(lacking) == 1 else 'have'} no BF16 arithmetic (use precision=fp16)"
    if precision == "tf32":
        lacking = sorted({g.name for g in gpus if g.tf32_flops is None})
        if lacking:
            verb = "has" if len(lacking) == 1 else "have"
            return f"precision=tf32: the {', '.join(lacking)} {verb} no TF32 tensor cores (use precision=fp32)"
    return None


def element_bytes(precision: str) -> int:
    """Bytes per weight, gradient and activation element a run in ``precision`` stores and moves.

    Examples
    --------
    >>> element_bytes("bf16"), element_bytes("fp16"), element_bytes("fp32"), element_bytes("tf32")
    (2, 2, 4, 4)
    """
    if precision not in ELEMENT_BYTES:
        raise ValueError(f"unknown precision {precision!r} (valid: {', '.join(PRECISIONS)})")
    return ELEMENT_BYTES[precision]


def matmul_flops(gpu: GpuType, precision: str) -> float:
    """The peak FLOP/s the matrix multiplications of a run in ``precision`` run against on ``gpu``.

    bf16 and fp16: the catalog's ``training_tflops`` (the 16-bit tensor rate, or FP32 where
    FP16 is crippled); fp32: the CUDA cores' FP32 rate (``fp32_tflops``); tf32: the dense TF32
    tensor rate (``tf32_tflops``; :func:`precision_problem` refuses tf32 where it is missing).
    The catalog's ``gemm_efficiency`` and ``attention_efficiency`` apply to this peak as they
    do to the 16-bit one (formulations/costmodel.md, "Precision (fp32, tf32)").

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> a100 = load_gpus()["A100-SXM4-80GB"]
    >>> [matmul_flops(a100, p) / 1e12 for p in PRECISIONS]
    [312.0, 312.0, 19.5, 156.0]
    """
    element_bytes(precision)
    if precision == "fp32":
        return gpu.fp32_flops
    if precision == "tf32":
        if gpu.tf32_flops is None:
            raise ValueError(precision_problem("tf32", (gpu,)))
        return gpu.tf32_flops
    return gpu.training_flops


def gradient_bytes(precision: str, reduce_fp32: bool = False) -> int:
    """Bytes per gradient element the data-parallel reduction moves: the precision's element, or
    ``FP32_GRADIENT_BYTES`` when the runtime reduces in fp32 (``gradreduce=fp32``).

    Examples
    --------
    >>> gradient_bytes("bf16"), gradient_bytes("bf16", True), gradient_bytes("fp32")
    (2, 4, 4)
    """
    return FP32_GRADIENT_BYTES if reduce_fp32 else element_bytes(precision)
