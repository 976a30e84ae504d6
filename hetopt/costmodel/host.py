"""The host's floor: the least time the host takes to issue a layer's ops, by software stack.

Part of the cost model (:mod:`hetopt.costmodel`); every formula, constant and source is in
``formulations/costmodel.md``. SI units: FLOPs, bytes, seconds, bytes/s.
"""

from __future__ import annotations

from hetopt.costmodel.flops import check_recompute


#: Host seconds eager PyTorch takes to issue one transformer layer, forward and backward:
#: Python, the dispatcher and autograd for Megatron's op sequence (29 forward ops, 52 backward
#: nodes), measured with the kernels made negligible by ``python -m hetopt.generate.host_overhead``
#: (one-element CPU tensors, torch 2.13, one thread of the project's 2-core Intel Xeon test
#: machine, median of 5; two runs: 136-138 µs and 205-206 µs). A lower bound of the real host
#: time: CUDA's launch of each kernel is not in it, nor an older framework's slower dispatch.
HOST_LAYER_FORWARD_S = 1.37e-4

HOST_LAYER_BACKWARD_S = 2.05e-4


#: The host's (forward, backward) seconds per layer by software stack (``host=`` in a layout or
#: a runtime, ``host`` in a published row). ``torch2``, the default: today's eager PyTorch, the
#: measurement above. ``torch1``: a PyTorch 1.x stack, measured on Megatron-LM v1.1.5 layers in
#: DeepSpeed v0.3.13's pipeline module (AMP's runs, 2021), read off that stack's own per-layer profile
#: on a T4 and a V100 by ``python -m hetopt.generate.stack_host``: the profiled forward less this
#: model's kernels (the GPU's fixed time a kernel and the GEMMs' waves included since issue 41),
#: 3.35 ms on the T4 and 3.15 ms on the V100, whose kernels differ 3.1-fold (the mean, 3.25 ms;
#: 3.31 before those terms); the backward in today's proportion (×1.50), 4.86 ms. ``cudagraph``:
#: today's PyTorch with the layers' kernels captured once and replayed as CUDA graphs (Megatron-Core's
#: ``--cuda-graph-impl local``, formerly ``--enable-cuda-graph``: "CUDA Graphs reduce kernel-launch
#: overhead by recording GPU operations once and replaying the recording on subsequent iterations",
#: Megatron-Core documentation, "CUDA Graph"; ``torch.compile(mode="reduce-overhead")``, "reduces the
#: overhead of python with CUDA graphs", torch.compile's documentation): the host issues one graph
#: launch where it issued a layer's ops, so it adds nothing per layer and launches no kernel
#: (:data:`STACKS_WITHOUT_LAUNCHES`); the GPU's own time a kernel (``GPU_KERNEL_S``) stays, and the
#: optimizer step and the ZeRO copies outside the layers' graphs are launched as before. Seconds.
HOST_STACKS = {"torch2": (HOST_LAYER_FORWARD_S, HOST_LAYER_BACKWARD_S), "torch1": (3.25e-3, 4.86e-3),
               "cudagraph": (0.0, 0.0)}

#: The stack a layout or runtime that does not say runs on.
DEFAULT_HOST = "torch2"

#: Host seconds a PyTorch op spends on the CUDA path that the CPU-tensor measurement of
#: ``torch2`` does not include (the caching allocator, the device guard and stream, the driver's
#: launch), per kernel or collective launched: an eager ``add`` of two 512×512 tensors on an
#: A100 host is submitted in 8 µs an op (back to back, one synchronization at the end:
#: flagos-ai/Torch-FL PR #27, "cuda_sub", NVIDIA A100, July 2026), where the same op on CPU
#: tensors takes about 2 µs (pytorch/pytorch issue #41383, a PyTorch maintainer's figure for
#: ``x*x`` without autograd): 6 µs. Cross-checks: the driver's ``cuLaunchKernel`` alone takes
#: 3.0-3.3 µs (meta-pytorch/tritonbench PR #1017, GB200 host), and Meta's Holistic Trace Analysis
#: documentation puts the CPU side of a launch in PyTorch traces at usually 5-20 µs.
HOST_LAUNCH_S = 8e-6 - 2e-6

#: The stacks whose per-layer time was measured on GPU hosts, launches included (``torch1``: read
#: off AMP's per-layer profiles on a T4 and a V100); the others' launches are added (``host_floor_s``).
STACKS_MEASURED_ON_GPUS = ("torch1",)

#: The stacks whose layers' kernels the host does not launch one by one (``cudagraph``: a graph's
#: replay launches them all): no :data:`HOST_LAUNCH_S` a kernel in their floor either.
STACKS_WITHOUT_LAUNCHES = ("cudagraph",)

#: An MoE layer's host time, (forward, backward) in units of a dense layer's, with no local
#: expert: Megatron-Core's router (linear, softmax, top-k), permutation (argsort, gather, per-
#: expert counts and split) and unpermutation (scatter back, weight and sum the k copies) in
#: place of the FFN's ops; and what each local expert's FFN, run in turn as ``SequentialMLP``
#: runs them, adds. Measured by ``python -m hetopt.generate.host_overhead`` in the same run as
#: the dense layer (MoE layers of 1, 2, 4, 8, 16 local experts, top-2; 50 + 3 per expert forward
#: ops against the dense layer's 29; least-squares line; two runs: base 1.63-1.69 and
#: 1.17-1.25, per expert 0.162-0.171 and 0.165-0.169; the means). Dimensionless: it scales
#: with the stack's per-layer time, which assumes an older stack's ops cost alike.
HOST_MOE_LAYER = (1.66, 1.21)

HOST_LOCAL_EXPERT = (0.167, 0.167)


def host_floor_s(layers: float, *, recompute: str = "none", stack: str = DEFAULT_HOST, moe_layers: float = 0,
                 local_experts: float = 0, launches: tuple[float, float] = (0.0, 0.0)) -> tuple[float, float]:
    """The least (forward, backward) seconds ``layers`` transformer layers take per micro-batch,
    whatever their kernels: the host issues every op, and a GPU whose kernels finish sooner
    waits for the next (formulations/costmodel.md, "The host's floor").

    Full recomputation issues the forward again during backward; selective recomputation's
    few attention ops are not counted. ``stack`` names the software stack (``HOST_STACKS``).
    ``moe_layers`` of the ``layers`` are MoE layers with ``local_experts`` experts each on the
    GPU: each takes ``HOST_MOE_LAYER`` + ``local_experts`` · ``HOST_LOCAL_EXPERT`` dense layers' time.
    ``launches`` (forward, backward): the CUDA kernels and collectives the passes launch (the
    recomputed forward's included), each :data:`HOST_LAUNCH_S` more on a stack measured without a
    GPU (not in :data:`STACKS_MEASURED_ON_GPUS`) whose host launches them (not in :data:`STACKS_WITHOUT_LAUNCHES`).

    Examples
    --------
    >>> fwd, bwd = host_floor_s(24)  # GPT-2 345M's 24 layers: 3.3 ms and 4.9 ms of issuing
    >>> round(fwd * 1e3, 2), round(bwd * 1e3, 2)
    (3.29, 4.92)
    >>> host_floor_s(1, recompute="full")[1] == HOST_LAYER_BACKWARD_S + HOST_LAYER_FORWARD_S
    True
    >>> host_floor_s(2, stack="torch1")
    (0.0065, 0.00972)
    >>> [round(t * 1e6, 1) for t in host_floor_s(2, moe_layers=1, local_experts=8)]  # one dense, one MoE of 8 experts
    [547.5, 726.9]
    >>> [round(t * 1e6, 1) for t in host_floor_s(1, launches=(16, 32))]  # a layer's 16 and 32 launches
    [233.0, 397.0]
    >>> host_floor_s(24, stack="cudagraph", launches=(16, 32))  # the layers replayed as CUDA graphs
    (0.0, 0.0)
    """
    check_recompute(recompute)
    if stack not in HOST_STACKS:
        raise ValueError(f"unknown host stack {stack!r} (valid: {', '.join(HOST_STACKS)})")
    per_forward, per_backward = HOST_STACKS[stack]
    launch = 0.0 if stack in STACKS_MEASURED_ON_GPUS + STACKS_WITHOUT_LAUNCHES else HOST_LAUNCH_S
    if moe_layers:
        dense = layers - moe_layers
        forward = (dense + moe_layers * (HOST_MOE_LAYER[0] + local_experts * HOST_LOCAL_EXPERT[0])) * per_forward
        backward = (dense + moe_layers * (HOST_MOE_LAYER[1] + local_experts * HOST_LOCAL_EXPERT[1])) * per_backward
    else:
        forward, backward = layers * per_forward, layers * per_backward
    backward += forward if recompute == "full" else 0.0
    return forward + launch * launches[0], backward + launch * launches[1]
