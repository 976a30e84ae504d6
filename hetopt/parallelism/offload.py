"""Activation offloading: a stage's kept activations go to host memory and come back for backward.

Over the GPU's host link (PCIe, ``host_gbs`` in the GPU catalog, per direction), as
ZeRO-Offload moves state and Megatron-Core's fine-grained activation offloading moves
activations: each layer's activations are copied to the host while the next layers
compute, and fetched back ahead of their backward. The copies overlap compute up to the
link's bandwidth: a stage's forward exposes max(0, A/w_host − its forward compute) and its
backward max(0, A/w_host − its backward compute), A the activation bytes one micro-batch
leaves on a GPU. On the GPU stay the layers in transit: ``RESIDENT_LAYERS`` layers of one
micro-batch (double buffering), whatever the number of micro-batches in flight. Host
memory is assumed large enough (a node's CPU memory is several times its GPUs').

Examples
--------
>>> exposed_s(64e9, 32e9, 1.5)
0.5
>>> resident_bytes(8e9, layers=4)
4000000000.0
"""

from __future__ import annotations

from hetopt.hardware import GpuType

#: Layers of one micro-batch whose activations stay on the GPU: the one computed and the one
#: whose copy is in flight (double buffering, as ZeRO-Offload's and Megatron-Core's copies).
RESIDENT_LAYERS = 2


def host_problem(gpu: GpuType) -> str:
    """Why activations cannot be offloaded on ``gpu`` ('' when they can).

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> host_problem(load_gpus()["H100-SXM5"])
    ''
    """
    if gpu.host_bandwidth is None:
        return (f"offload: the GPU catalog has no host-link figure (host_gbs) for {gpu.name} "
                "(add its PCIe bandwidth with a source, or give offload=0)")
    return ""


def exposed_s(nbytes: float, host_bandwidth: float, overlap_s: float) -> float:
    """Seconds a copy of ``nbytes`` over the host link adds beyond ``overlap_s`` of compute.

    Examples
    --------
    >>> exposed_s(16e9, 16e9, 0.25), exposed_s(16e9, 16e9, 2.0)
    (0.75, 0.0)
    """
    return max(0.0, nbytes / host_bandwidth - overlap_s)


def resident_bytes(activation_bytes: float, *, layers: int) -> float:
    """Bytes of one micro-batch's activations that stay on the GPU: ``RESIDENT_LAYERS`` of ``layers``.

    Examples
    --------
    >>> resident_bytes(9.0, layers=1), resident_bytes(9.0, layers=3)
    (9.0, 6.0)
    """
    return activation_bytes * min(layers, RESIDENT_LAYERS) / layers


__all__ = ["RESIDENT_LAYERS", "exposed_s", "host_problem", "resident_bytes"]
