"""The optimizer step (memory-bound Adam over a GPU's shard) and ZeRO-3's per-tensor copies.

Part of the cost model (:mod:`hetopt.costmodel`); every formula, constant and source is in
``formulations/costmodel.md``. SI units: FLOPs, bytes, seconds, bytes/s.
"""

from __future__ import annotations

import math

from hetopt.hardware import GpuType
from hetopt.workload import ACTIVATION_BYTES
from hetopt.costmodel.precision import GRADIENT_BYTES, WEIGHT_BYTES, elements_of, element_bytes
from hetopt.costmodel.host import HOST_LAUNCH_S
from hetopt.costmodel.kernels import GPU_KERNEL_S


#: Bytes the mixed-precision Adam step moves per parameter of a GPU's optimizer shard, by its
#: memory-bound kernels in Megatron-LM's ``Float16OptimizerWithFloat16Params.step``
#: (megatron/core/optimizer/optimizer.py): copy the 16-bit gradient into the fp32 main
#: gradient (read 2, write 4), unscale it and check for inf/NaN in place (read 4, write 4),
#: its norm for clipping (read 4), the fused Adam update (read weight, gradient, m and v,
#: 4 each; write weight, m and v, 4 each: 28), and copy the fp32 weight back to the 16-bit
#: one (read 4, write 2). A count of bytes, not a measurement.
OPTIMIZER_STEP_BYTES = (2 + 4) + (4 + 4) + 4 + (16 + 12) + (4 + 2)

#: The same step of a run in fp32 (or tf32), which keeps no 16-bit copy and scales no loss
#: (PyTorch's fused Adam on fp32 parameters, as DeepSpeed runs it without an ``fp16`` or
#: ``bf16`` section): the gradient norm for clipping (read 4) and the Adam update (28).
FP32_OPTIMIZER_STEP_BYTES = 4 + (16 + 12)


#: Kernels of one fused step: Megatron's mixed-precision step runs five multi-tensor passes over
#: the shard (the gradient copy, unscale and inf/NaN check, the norm, Adam, the weight copy:
#: ``OPTIMIZER_STEP_BYTES``), each through apex's ``multi_tensor_apply``, which launches a kernel
#: per 320 blocks of 65,536 elements (``csrc/multi_tensor_apply.cuh``: ``depth_to_max_blocks``
#: 320; Megatron's ``chunk_size`` 2048 · 32); fp32 runs the norm and Adam (two). Megatron-LM,
#: DeepSpeed (FusedAdam) and PyTorch's AdamW (``foreach``, the default on CUDA) all step fused so.
FUSED_STEP_PASSES = 5
FP32_FUSED_STEP_PASSES = 2
MULTI_TENSOR_ELEMENTS = 320 * 65536


def optimizer_step_s(parameters: float, gpu: GpuType, *, element_bytes: int = ACTIVATION_BYTES) -> float:
    """Seconds of one optimizer step over ``parameters`` (the GPU's shard): its bytes at the
    memory bandwidth plus the GPU's fixed time of its fused kernels (:data:`FUSED_STEP_PASSES`
    passes of a kernel per :data:`MULTI_TENSOR_ELEMENTS`), or the host's launches of them,
    whichever is slower (the host issues them while the GPU runs the ones before).

    Once per iteration, after the last micro-batch's backward. Under ZeRO ≥ 1 (and Megatron's
    distributed optimizer) each GPU steps only its 1/d of the state.

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> a100 = load_gpus()["A100-SXM4-80GB"]
    >>> OPTIMIZER_STEP_BYTES, round(optimizer_step_s(1.7e9, a100) * 1e3, 1)  # GPT 1.7B on one GPU: 43 ms
    (52, 43.7)
    >>> optimizer_step_s(1e9, a100, element_bytes=4) == FP32_OPTIMIZER_STEP_BYTES * 1e9 / a100.memory_bandwidth + 2 * 48 * GPU_KERNEL_S
    True
    """
    mixed = element_bytes == ACTIVATION_BYTES
    per_parameter = OPTIMIZER_STEP_BYTES if mixed else FP32_OPTIMIZER_STEP_BYTES
    kernels = (FUSED_STEP_PASSES if mixed else FP32_FUSED_STEP_PASSES) * math.ceil(parameters / MULTI_TENSOR_ELEMENTS)
    # the host launches the kernels while the GPU runs the ones before: whichever is slower
    return max(per_parameter * parameters / gpu.memory_bandwidth + kernels * GPU_KERNEL_S, kernels * HOST_LAUNCH_S)


#: Bytes a ZeRO-3 runtime that gathers parameter by parameter through list collectives moves
#: in the GPU's memory per element of a parameter, besides the collective itself: DeepSpeed's
#: ZeRO-3 of 2021 (v0.3.13 to v0.5.0, ``deepspeed/runtime/zero/partition_parameters.py``,
#: ``_allgather_param`` and ``_reduce_scatter_gradient``) on PyTorch's ``ProcessGroupNCCL``,
#: whose list ``all_gather`` and ``reduce_scatter`` run NCCL on a flat buffer of their own.
#: Each gather zero-fills the full tensor it builds (write 2) and PyTorch copies every rank's
#: piece out of its flat buffer into it (read 2, write 2); each gradient reduce-scatter
#: divides the full gradient by d in place (``average_tensor``: read 2, write 2) and PyTorch
#: copies the rank pieces into its flat input (read 2, write 2). 16-bit elements. A count of
#: bytes, not a measurement; a runtime that gathers into one flat buffer (FSDP's flat
#: parameters, DeepSpeed after 2021) moves none of it.
ZERO3_TENSOR_GATHER_COPY_BYTES = WEIGHT_BYTES + (WEIGHT_BYTES + WEIGHT_BYTES)

ZERO3_TENSOR_SCATTER_COPY_BYTES = (GRADIENT_BYTES + GRADIENT_BYTES) + (GRADIENT_BYTES + GRADIENT_BYTES)


def list_copies_s(pieces: float, *, gathers: int, scatters: int) -> float:
    """Seconds of launching the copies of ``pieces`` rank pieces per collective round (a
    collective's d pieces times the collectives of a pass) for ``gathers`` all-gathers and
    ``scatters`` reduce-scatters through PyTorch's list collectives: one ``copy_`` kernel a piece
    (``ProcessGroupNCCL``'s copy out of its flat output, or into its flat input), each the host's
    launch (``cm.HOST_LAUNCH_S``) or the GPU's kernel (``cm.GPU_KERNEL_S``), whichever is slower:
    the host issues them while the GPU runs them, and DeepSpeed's 2021 ZeRO-3 synchronizes the
    device around every gather, so they are on the path.

    Examples
    --------
    >>> round(list_copies_s(1152 * 1536, gathers=1, scatters=0), 2)  # 175B's tensors, 1,536 pieces each
    10.62
    """
    return (gathers + scatters) * pieces * max(HOST_LAUNCH_S, GPU_KERNEL_S)


def zero3_tensor_copies_s(parameters: float, gpu: GpuType, *, gathers: int, scatters: int,
                          element_bytes: int = ACTIVATION_BYTES) -> float:
    """Seconds of the memory copies around ``gathers`` all-gathers and ``scatters`` reduce-scatters
    of ``parameters`` (the full tensors a GPU gathers) under ZeRO-3 tensor by tensor
    (:data:`ZERO3_TENSOR_GATHER_COPY_BYTES`, :data:`ZERO3_TENSOR_SCATTER_COPY_BYTES`), at the
    memory bandwidth. They run on the GPU between the collectives and the compute that
    waits for them (DeepSpeed of 2021 synchronizes the device before every gather), so
    nothing hides them.

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> a100 = load_gpus()["A100-SXM4-80GB"]
    >>> round(zero3_tensor_copies_s(174.6e9, a100, gathers=3, scatters=1), 2)  # GPT 175B, full recomputation
    2.23
    """
    per_parameter = gathers * ZERO3_TENSOR_GATHER_COPY_BYTES + scatters * ZERO3_TENSOR_SCATTER_COPY_BYTES
    nbytes = elements_of(per_parameter, element_bytes) * parameters  # copies of 16-bit (or fp32) elements
    return nbytes / gpu.memory_bandwidth
