"""The analytic cost model of training one transformer layer: FLOPs, bytes, seconds.

Pure functions of a :class:`~hetopt.workload.ModelConfig`, a
:class:`~hetopt.hardware.GpuType` and a layout (tensor parallel degree t, data parallel
degree d, activation recomputation, ZeRO stage). SI units: FLOPs, bytes, seconds,
bytes/s. Every formula, constant and assumption is in ``formulations/costmodel.md``; the
symbols there (s sequence, b samples per replica per micro-batch, h hidden, a heads,
t, d) are the argument names here.

Examples
--------
>>> from hetopt.workload import ModelConfig
>>> gpt = ModelConfig("x", "gpt", 1, 4096, 32, 16384, 50257, 2048)
>>> layer_activation_bytes(gpt, 2048, 1) == 2048 * 4096 * (34 + 5 * 32 * 2048 / 4096)
True
>>> state_bytes_per_parameter(zero_stage=3, dp=8)
2.25

The model is split by subject; this package's face re-exports every term, so ``from hetopt
import costmodel as cm; cm.ring_allreduce_s(...)`` reads as before:

- :mod:`~hetopt.costmodel.precision`: element sizes, matmul peaks, which GPUs run a precision;
- :mod:`~hetopt.costmodel.flops`: FLOPs and parameters of a layer, the embedding, the head;
- :mod:`~hetopt.costmodel.memory`: activations, logits and training state in bytes;
- :mod:`~hetopt.costmodel.kernels`: GEMMs, attention, element-wise kernels, the loss, in seconds;
- :mod:`~hetopt.costmodel.host`: the host's floor per layer by software stack;
- :mod:`~hetopt.costmodel.optimizer`: the optimizer step and ZeRO-3's per-tensor copies;
- :mod:`~hetopt.costmodel.network`: links, rings, TP, hand-overs and data-parallel traffic;
- :mod:`~hetopt.costmodel.nccl`: NCCL's tuner, the algorithm and protocol of a collective by size;
- :mod:`~hetopt.costmodel.running`: how a framework runs a layout (:class:`Running`, one table of its keys);
- :mod:`~hetopt.costmodel.stage`: the price of one pipeline stage, where the terms meet.

A test that needs another value of a constant passes it where the function takes one:
rebinding a name here does not reach the module that reads it.
"""

from __future__ import annotations

from hetopt.workload import (  # noqa: F401  (a layer's FLOPs and parameters are the workload's)
    ACTIVATION_BYTES, ffn_matrices, head_forward_flops, layer_forward_flops, layer_parameters,
)
from hetopt.costmodel.precision import (  # noqa: F401
    WEIGHT_BYTES, GRADIENT_BYTES, FP32_GRADIENT_BYTES, PRECISIONS, ELEMENT_BYTES, FLASH_PRECISIONS,
    DEFAULT_PRECISION, elements_of, hardware_precision, precision_problem, element_bytes, matmul_flops,
    gradient_bytes,
)
from hetopt.costmodel.flops import (  # noqa: F401
    RECOMPUTE_MODES, BACKWARD_PER_FORWARD, TRAINING_PER_FORWARD, check_recompute, attention_score_flops,
    layer_backward_flops, head_backward_flops, input_embedding_parameters, head_parameters,
    parameter_tensors, NORMS_PER_LAYER,
)
from hetopt.costmodel.memory import (  # noqa: F401
    ZERO_STAGES, LOGIT_BYTES, ATTENTION_SCORE_BYTES, REPLICATED_ACTIVATION_WIDTHS, REPLICATED_DROPOUT_WIDTHS,
    SOFTMAX_OUTPUT_BYTES, CHECKPOINT_WIDTHS, FFN_TENSORS, DISTRIBUTED_OPTIMIZER_BYTES, ffn_activation_widths,
    sharded_activation_widths, replicated_activation_widths, attention_score_bytes, layer_activation_bytes,
    recompute_working_bytes, logit_bytes, state_bytes_per_parameter,
    distributed_optimizer_bytes_per_parameter, DROPOUT_MASK_BYTES, DROPOUT_ARCHITECTURES,
)
from hetopt.costmodel.kernels import (  # noqa: F401
    LOSS_FORWARD_BYTES, LOSS_BACKWARD_BYTES, loss_traffic_bytes, efficiency, compute_time_s, gemm_efficiency,
    gemm_time_s, gemm_operand_widths, gemm_traffic_bytes, attention_time_s, FLASH_SCORE_BACKWARD_PER_FORWARD,
    NORM_BYTES, RESIDUAL_BYTES, RESIDUALS_PER_LAYER, FFN_ACTIVATION_BYTES, SCORE_BYTES, SCORE_DROPOUT_BYTES,
    score_elementwise_widths, elementwise_widths, elementwise_bytes, memory_time_s, GEMM_TILES, gemm_waves,
    dense_gemm_shapes, quantization_flops, GPU_KERNEL_S, LAYER_KERNELS, UNFUSED_ATTENTION_KERNELS,
    FLASH_ATTENTION_KERNELS, EMBEDDING_KERNELS, HEAD_KERNELS, layer_kernels, kernels_time_s,
)
from hetopt.costmodel.host import (  # noqa: F401
    HOST_LAYER_FORWARD_S, HOST_LAYER_BACKWARD_S, HOST_STACKS, DEFAULT_HOST, HOST_MOE_LAYER,
    HOST_LOCAL_EXPERT, host_floor_s, HOST_LAUNCH_S, STACKS_MEASURED_ON_GPUS, STACKS_WITHOUT_LAUNCHES,
)
from hetopt.costmodel.optimizer import (  # noqa: F401
    OPTIMIZER_STEP_BYTES, FP32_OPTIMIZER_STEP_BYTES, optimizer_step_s, ZERO3_TENSOR_GATHER_COPY_BYTES,
    ZERO3_TENSOR_SCATTER_COPY_BYTES, zero3_tensor_copies_s, list_copies_s, FUSED_STEP_PASSES,
    FP32_FUSED_STEP_PASSES, MULTI_TENSOR_ELEMENTS,
)
from hetopt.costmodel.network import (  # noqa: F401
    TP_ALLREDUCES_PER_PASS, EMBEDDING_TP_ALLREDUCES, HEAD_TP_ALLREDUCES, LINK_EFFICIENCY, SHM_EFFICIENCY,
    TCP_EFFICIENCY, TRANSPORTS, RDMA_MIN_BANDWIDTH, network_efficiency, intra_link_efficiency,
    link_efficiency, RING_BASE_LATENCY_S, HOP_LATENCY_S, NET_POST_OVERHEAD_S, DEFAULT_NET_POST_OVERHEAD_S,
    SIMPLE_POST_FACTOR, ring_step_floor_s, intra_hop_latency_s, ring_latency_s, ring_hop_latency_s,
    ring_allreduce_s, ring_allgather_s, ring_reduce_scatter_s, boundary_bytes, tp_layer_comm_s,
    p2p_transfer_s, HANDOVERS, DEFAULT_HANDOVER, PIPE_MASK_BYTES, pipe_mask_bytes, pipeline_link_s,
    DataParallelComm, exposed_s, data_parallel_comm, is_rdma, intra_hardware, fabric, tp_collective_s,
)
from hetopt.costmodel.nccl import Fabric, collective_s  # noqa: F401  (NCCL's tuner: algorithm and protocol by size)
from hetopt.costmodel.running import Running  # noqa: F401  (how a framework runs a layout)

__all__ = [
    "Running",
    "ATTENTION_SCORE_BYTES", "BACKWARD_PER_FORWARD", "TRAINING_PER_FORWARD", "CHECKPOINT_WIDTHS",
    "DISTRIBUTED_OPTIMIZER_BYTES", "ELEMENT_BYTES", "FLASH_PRECISIONS", "FP32_OPTIMIZER_STEP_BYTES",
    "element_bytes", "gradient_bytes", "matmul_flops", "DataParallelComm", "exposed_s",
    "EMBEDDING_TP_ALLREDUCES", "FFN_TENSORS", "FLASH_SCORE_BACKWARD_PER_FORWARD", "FP32_GRADIENT_BYTES",
    "GRADIENT_BYTES", "HEAD_TP_ALLREDUCES", "LOGIT_BYTES", "LOSS_BACKWARD_BYTES", "LOSS_FORWARD_BYTES",
    "RECOMPUTE_MODES", "REPLICATED_ACTIVATION_WIDTHS", "REPLICATED_DROPOUT_WIDTHS", "SOFTMAX_OUTPUT_BYTES",
    "attention_score_bytes", "replicated_activation_widths", "TP_ALLREDUCES_PER_PASS", "WEIGHT_BYTES",
    "ZERO_STAGES", "ZERO3_TENSOR_GATHER_COPY_BYTES", "ZERO3_TENSOR_SCATTER_COPY_BYTES",
    "zero3_tensor_copies_s", "DROPOUT_ARCHITECTURES", "DROPOUT_MASK_BYTES", "FFN_ACTIVATION_BYTES",
    "HOP_LATENCY_S", "NORMS_PER_LAYER", "NORM_BYTES", "RESIDUALS_PER_LAYER", "RESIDUAL_BYTES",
    "RING_BASE_LATENCY_S", "ring_hop_latency_s", "SCORE_BYTES", "SCORE_DROPOUT_BYTES",
    "attention_score_flops", "attention_time_s", "elementwise_bytes", "elementwise_widths",
    "score_elementwise_widths", "gemm_efficiency", "gemm_operand_widths", "gemm_traffic_bytes",
    "gemm_time_s", "host_floor_s", "HOST_LAYER_FORWARD_S", "HOST_LAYER_BACKWARD_S", "HOST_STACKS",
    "HOST_MOE_LAYER", "HOST_LOCAL_EXPERT", "DEFAULT_HOST", "intra_hop_latency_s", "memory_time_s",
    "parameter_tensors", "ring_latency_s", "boundary_bytes", "compute_time_s", "data_parallel_comm",
    "distributed_optimizer_bytes_per_parameter", "DEFAULT_PRECISION", "PRECISIONS", "hardware_precision",
    "precision_problem", "efficiency", "ffn_activation_widths", "head_backward_flops", "ffn_matrices",
    "head_forward_flops", "head_parameters", "input_embedding_parameters", "layer_activation_bytes",
    "layer_backward_flops", "layer_forward_flops", "layer_parameters", "logit_bytes", "loss_traffic_bytes",
    "p2p_transfer_s", "pipe_mask_bytes", "HANDOVERS", "DEFAULT_HANDOVER", "PIPE_MASK_BYTES",
    "pipeline_link_s", "recompute_working_bytes", "ring_allgather_s", "ring_allreduce_s",
    "ring_reduce_scatter_s", "sharded_activation_widths", "state_bytes_per_parameter", "tp_layer_comm_s",
    "elements_of", "check_recompute", "OPTIMIZER_STEP_BYTES", "optimizer_step_s", "LINK_EFFICIENCY",
    "SHM_EFFICIENCY", "TCP_EFFICIENCY", "TRANSPORTS", "RDMA_MIN_BANDWIDTH", "network_efficiency",
    "intra_link_efficiency", "link_efficiency", "NET_POST_OVERHEAD_S", "DEFAULT_NET_POST_OVERHEAD_S",
    "SIMPLE_POST_FACTOR", "ring_step_floor_s", "is_rdma", "intra_hardware", "fabric", "tp_collective_s",
    "Fabric", "collective_s", "GEMM_TILES", "gemm_waves", "dense_gemm_shapes", "quantization_flops",
    "GPU_KERNEL_S", "LAYER_KERNELS", "UNFUSED_ATTENTION_KERNELS", "FLASH_ATTENTION_KERNELS", "EMBEDDING_KERNELS",
    "HEAD_KERNELS", "layer_kernels", "kernels_time_s", "HOST_LAUNCH_S", "STACKS_MEASURED_ON_GPUS", "list_copies_s",
    "STACKS_WITHOUT_LAUNCHES",
    "FUSED_STEP_PASSES", "FP32_FUSED_STEP_PASSES", "MULTI_TENSOR_ELEMENTS",
]
