"""The host's time per layer of an older software stack, read off its own per-layer profile.

``python -m hetopt.generate.host_overhead`` measures what today's eager PyTorch needs to issue
a GPT layer (``cm.HOST_STACKS["torch2"]``). AMP's runs used a 2021 stack, Megatron-LM v1.1.5
layers inside DeepSpeed v0.3.13's pipeline module, and AMP's authors profiled it themselves:
the wall time of every layer's forward, with a device synchronization after it, at micro-batch
1 on a T4 and on a V100 (``instances/profiles/amp-gpt2-345m-layers.toml``, with its source).

A layer's profiled time is its kernels plus what the stack spends around them. The kernels'
part follows the GPU (this cost model prices a GPT-2 345M layer at 2.3 ms on a T4 and 0.7 ms
on a V100, a factor 3.3); what is left is nearly the same on both (3.2 ms), so it does not
follow the GPU: it is the host's. This module prints, per GPU, the median profiled time, this
model's kernel time and their difference, and the mean difference as the stack's forward host
time per layer. The backward's is not profiled; it is taken in the proportion today's stack
measures (``HOST_LAYER_BACKWARD_S / HOST_LAYER_FORWARD_S``: 52 autograd nodes against 29
forward ops). The two go into ``cm.HOST_STACKS["torch1"]`` (formulations/costmodel.md,
"The host's floor").

Only the TP 1 profiles are read: at TP 2 and 4 the difference also holds the TP all-reduces'
error, which is not the host's.

Examples
--------
>>> rows = derive()
>>> [r["gpu"] for r in rows["per_gpu"]]
['T4', 'V100-SXM2-16GB']
>>> 3.0e-3 < rows["forward_s"] < 3.5e-3
True
"""

from __future__ import annotations

import statistics
import tomllib
from pathlib import Path

from hetopt import costmodel as cm
from hetopt.catalog import instances_dir
from hetopt.costmodel.stage import Layout
from hetopt.hardware import load_gpus
from hetopt.costmodel.running import Running
from hetopt.planner.builtin import BuiltinParallelizer
from hetopt.planner.parallelizer import IslandSpec, Slice, slice_model
from hetopt.workload import ModelConfig

#: The profiled model: GPT-2 345M as AMP's runs define it (24 layers, h 1,024, 16 heads,
#: FFN 4,096, vocabulary 50,304, sequence 1,024; ``instances/published/amp-t4-g4dn.toml``).
GPT2_345M = ModelConfig("amp-gpt2-345m", "gpt", 24, 1024, 16, 4096, 50304, 1024)
#: The profile's micro-batch and sequence (examples/ds_pretrain_gpt2_profile.sh).
MICROBATCH, SEQ = 1, 1024


def profile_file() -> Path:
    """The shipped profile (``instances/profiles/amp-gpt2-345m-layers.toml``)."""
    return instances_dir() / "profiles" / "amp-gpt2-345m-layers.toml"


def kernel_forward_s(gpu_name: str) -> float:
    """This model's forward of one GPT-2 345M layer's kernels on one GPU: TP 1, fp16, attention
    unfused (as Megatron-LM v1.1.5 ran it), micro-batch 1, sequence 1,024."""
    sl = Slice(slice_model(GPT2_345M, seq=SEQ)[1:2])  # the second layer: no embedding, no head
    island = IslandSpec("one", load_gpus()[gpu_name], nodes=1, gpus_per_node=1)
    lay = Layout(tp=1, pp=1, dp=1, split=(1,), recompute="none", zero_stage=0)
    par = BuiltinParallelizer(running=Running(flash=False, sequence_parallel=False, precision="fp16"))
    stage = par.plan(sl, island, lay, microbatch_size=MICROBATCH, microbatches=1).stages[0]
    # one GPU, one stage: no collective, no hand-over; the optimizer step is in the backward.
    # Today's host floor (0.14 ms) is far below a layer's kernels on these GPUs: it sets nothing
    assert not stage.host_bound, f"{gpu_name}: the layer is host-bound, its kernels' time is not its forward"
    return stage.forward_s


def derive(path: Path | None = None) -> dict:
    """Per GPU of the TP 1 profiles: the median profiled layer, this model's kernels and the
    difference; and the stack's forward and backward host time per layer."""
    data = tomllib.loads((path or profile_file()).read_text(encoding="utf-8"))
    per_gpu = []
    for prof in data["profile"]:
        if prof["tp"] != 1:
            continue
        measured = statistics.median(prof["layer_forward_s"])
        kernels = kernel_forward_s(prof["gpu"])
        per_gpu.append({"gpu": prof["gpu"], "profiled_s": measured, "kernels_s": kernels, "host_s": measured - kernels})
    forward = statistics.fmean(r["host_s"] for r in per_gpu)
    backward = forward * cm.HOST_LAYER_BACKWARD_S / cm.HOST_LAYER_FORWARD_S
    return {"per_gpu": per_gpu, "forward_s": forward, "backward_s": backward}


def main() -> int:
    """Print the derivation (``python -m hetopt.generate.stack_host``)."""
    d = derive()
    for r in d["per_gpu"]:
        print(f"{r['gpu']}: profiled {r['profiled_s'] * 1e3:.3f} ms a layer, kernels {r['kernels_s'] * 1e3:.3f} ms, "
              f"host {r['host_s'] * 1e3:.3f} ms")
    print(f"torch1: forward {d['forward_s']:.3g} s, backward {d['backward_s']:.3g} s a layer")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
