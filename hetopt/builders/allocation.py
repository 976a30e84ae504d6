"""The allocation instance builder: catalogs and the analytic cost model to an ``AllocationInstance``.

Below the planner (CONVENTIONS §1: instance builders sit below it, generators that write
files above it): ``planner/fsdp.py`` builds Cephalo's FSDP alternative with it and
``hetopt/generate/allocation.py`` writes the shipped ``cephalo-*-analytic`` files with it.
The formulas and every constant are in ``formulations/allocation.md`` ("Instances").
"""

from __future__ import annotations

from hetopt.allocation.problem import AllocationInstance, GpuGroup, Latency
from hetopt.costmodel import BACKWARD_PER_FORWARD, LOGIT_BYTES, element_bytes, gradient_bytes, matmul_flops
from hetopt.costmodel.running import Running
from hetopt.hardware import GpuType
from hetopt.units import GIB
from hetopt.workload import (
    STATE_BYTES_PER_PARAMETER,
    ModelConfig,
    embedding_parameters,
    head_forward_flops,
    layer_activation_bytes,
    layer_forward_flops,
    layer_parameters,
    parameters,
)

#: The analytic instances' usable memory fraction φ (the allocation problem's default).
ANALYTIC_MEMORY_FRACTION = 0.8
#: Per-GPU communication buffers (Cephalo's optimizer's assumption, from the profiles' README).
COMM_BUFFERS_BYTES = 2 * GIB
#: Cephalo's overhead per extra accumulated micro-batch, seconds.
ACCUMULATION_OVERHEAD_S = 0.010
#: Uneven-shard communication overhead o (the problem's default).
UNEVEN_SHARD_OVERHEAD = 0.25
#: FSDP units held unsharded at once: the one being computed and the one prefetched.
UNSHARDED_UNITS = 2
#: Bytes per parameter of an unsharded unit in 16 bits: weights (2) and gradients (2); twice the
#: element size in another precision (``unit_bytes_per_parameter``).
UNIT_BYTES_PER_PARAMETER = 4
#: Table points written for analytic latencies (the line continues them exactly).
TABLE_POINTS = 8


def fsdp_collective_s(params: float, gpus: int, network_gbps: float, bytes_per_parameter: float = 2.0) -> float:
    """Ring AllGather (or ReduceScatter) of the parameters (or gradients) over the slowest link, seconds.

    (N − 1)/N · P · w bytes / bandwidth, w the bytes of one element (2 in 16 bits): every GPU
    receives all shards but its own.

    >>> fsdp_collective_s(1e9, 8, 100.0) == 7 / 8 * 2e9 / 12.5e9
    True
    """
    return (gpus - 1) / gpus * bytes_per_parameter * params / (network_gbps * 1e9 / 8.0)


def sequence_length(cfg: ModelConfig, seq: int) -> int:
    """The tokens per sample: ``seq``, or a ViT's own patch count."""
    return cfg.sequence if cfg.architecture == "vit" else seq  # a ViT's length is its patch count


def analytic_group(cfg: ModelConfig, gpu: GpuType, seq: int, count: int, running: Running | None = None) -> GpuGroup:
    """``count`` GPUs of one type as an allocation group, from the analytic model (SI units).

    f(m) = (L·F_layer + F_head) / (peak · e) · (m + t½ / s), g = 2 f; β = buffers + two
    unsharded FSDP units (see formulations/allocation.md, "Instances"). The peak and the
    unit's bytes are those of the precision ``running`` runs in on this GPU
    (:meth:`~hetopt.costmodel.running.Running.on`: an fp32 run's TF32 where it is allowed);
    the default, the hardware's 16 bits.
    """
    precision = (running or Running()).on(gpu).precision
    flops = cfg.layers * layer_forward_flops(cfg, seq) + head_forward_flops(cfg, seq)
    slope = flops / (matmul_flops(gpu, precision) * gpu.efficiency)  # seconds per sample at full efficiency
    intercept = slope * gpu.half_efficiency_tokens / seq
    unit = max(layer_parameters(cfg), embedding_parameters(cfg))
    base = COMM_BUFFERS_BYTES + UNSHARDED_UNITS * 2 * element_bytes(precision) * unit
    forward = tuple(slope * m + intercept for m in range(1, TABLE_POINTS + 1))
    return GpuGroup(
        type=gpu.name,
        count=count,
        memory_bytes=gpu.memory_bytes,
        memory_base_bytes=base,
        forward=Latency(forward, slope, intercept),
        backward=Latency(
            tuple(BACKWARD_PER_FORWARD * x for x in forward), BACKWARD_PER_FORWARD * slope, BACKWARD_PER_FORWARD * intercept
        ),
    )


def analytic_allocation(
    name: str, groups: list[tuple[GpuType, int]], cfg: ModelConfig, batch: int, seq: int, network_gbps: float,
    running: Running | None = None,
) -> AllocationInstance:
    """The analytic allocation instance of a cluster (GPU types and counts) and a model, run as
    ``running`` says (None: the hardware's 16 bits): its precision sets each GPU's peak, the
    element bytes of the activations, the gathered parameters and the unsharded units, and with
    ``gradreduce`` the bytes of the gradients' reduce-scatter. Adam's state is 16 bytes a
    parameter in every precision (16-bit weights and gradients with fp32 master weights, m and
    v; or fp32 weights, gradients, m and v)."""
    seq = sequence_length(cfg, seq)
    n = sum(count for _, count in groups)
    params = parameters(cfg)
    job = running or Running()
    precision = job.precision or ("bf16" if all(gpu.bf16 for gpu, _ in groups) else "fp16")
    element = element_bytes(precision)
    return AllocationInstance(
        name=name,
        global_batch=batch,
        groups=tuple(analytic_group(cfg, gpu, seq, count, job) for gpu, count in groups),
        activation_bytes_per_sample=analytic_activation_bytes(cfg, seq, element),
        state_bytes=float(STATE_BYTES_PER_PARAMETER * params),
        memory_fraction=ANALYTIC_MEMORY_FRACTION,
        accumulation_overhead_s=ACCUMULATION_OVERHEAD_S,
        allgather_s=fsdp_collective_s(params, n, network_gbps, element),
        reducescatter_s=fsdp_collective_s(params, n, network_gbps, gradient_bytes(precision, job.grad_fp32)),
        uneven_shard_overhead=UNEVEN_SHARD_OVERHEAD,
        layers=cfg.layers,
    )


def analytic_activation_bytes(cfg: ModelConfig, seq: int, element: int = 2) -> float:
    """Activation bytes per sample under FSDP with per-layer checkpointing, ``element`` bytes an
    activation (2 in 16 bits, 4 in fp32 and tf32).

    Every layer keeps its input (element·s·h), one layer at a time is recomputed with its full
    set s·h·(34 + 5·a·s/h) [Korthikanti et al., 16-bit; scaled by element / 2], and the loss
    keeps fp32 logits and their gradient (8·s·V) in every precision.
    """
    scale = element / 2
    return (cfg.layers * element * seq * cfg.hidden + scale * layer_activation_bytes(cfg, seq)
            + LOGIT_BYTES * seq * cfg.vocab)
