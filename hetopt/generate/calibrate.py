"""Calibrating the analytic latency model against Cephalo's measured layer latencies.

The model: a layer's forward time for a micro-batch of m samples of s tokens is
``m · F / (peak · eff(m·s))`` with ``eff(t) = e · t / (t + t½)``, F the layer's forward FLOPs
per sample. That is a line in m, ``(F / (peak·e)) · (m + t½ / s)``, so one measured forward
line (slope σ, intercept c) gives ``e = F / (peak · σ)`` and ``t½ = s · c / σ``.

For every profiled GPU this takes the median of e and t½ (t½ clamped at 0) over the
reference layers (GPT-3 2.7B, GPT-3 6.7B and Llama-2 7B shapes, every sequence length
measured) in the precision the GPU trains in (fp16, or fp32 where FP16 is crippled).
``python -m hetopt.generate.calibrate`` prints the values written into ``instances/gpus.toml``.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from hetopt.catalog import instances_dir
from hetopt.generate.profiles import default_profiles_dir, layer_profile, load_latencies
from hetopt.hardware import load_gpus
from hetopt.costmodel import elementwise_bytes, memory_time_s
from hetopt.workload import layer_forward_flops, load_model

#: fp32 elements take twice the bytes of the 16-bit ones the cost model's traffic counts.
FP32_BYTES_RATIO = 2

#: Cephalo's profiled layers and the published shapes they have (models/ file names).
REFERENCE_LAYERS = {
    "deepspeedgpt_2.7b": "gpt3-2.7b",
    "deepspeedgpt_6.7b": "gpt3-6.7b",
    "deepspeedllama_7b": "llama-2-7b",
}

#: The catalog GPU whose datasheet peak each profile was measured on.
PROFILE_OWNER = {
    "p100": "P100-PCIe-12GB",
    "p40": "P40",
    "t4": "T4",
    "v100x16": "V100-SXM2-16GB",
    "v100-pciex16": "V100-PCIe-16GB",
    "a10g": "A10G",
    "a6000": "A6000",
    "l4": "L4",
    "a100x40": "A100-PCIe-40GB",
    "a100x80": "A100-PCIe-80GB",
    "h100-nvl": "H100-NVL",
}


def calibrate(profiles: Path | None = None, catalog: Path | None = None) -> dict[str, dict]:
    """Per profile key: the whole-layer and the GEMM-only calibration, and the measurements used.

    ``efficiency`` and ``half_efficiency_tokens`` fit the measured forward line of whole layers;
    ``gemm_efficiency`` and ``gemm_half_tokens`` fit the same line after the layer's
    memory-bound traffic (``hetopt.costmodel.elementwise_bytes`` at the datasheet memory
    bandwidth) is taken off its slope.

    Examples
    --------
    >>> cal = calibrate()
    >>> 0.0 < cal["a6000"]["efficiency"] < 1.0
    True
    """
    latencies = load_latencies(profiles or default_profiles_dir())
    gpus = load_gpus(catalog)
    models_dir = instances_dir() / "models"
    out = {}
    for key, owner in PROFILE_OWNER.items():
        gpu = gpus[owner]
        dtype = "float32" if gpu.uses_fp32 else "float16"
        effs, halves, used, gemm_effs, gemm_halves = [], [], [], [], []
        for profiled, shape in REFERENCE_LAYERS.items():
            cfg = load_model(models_dir / f"{shape}.toml")
            for seq in sorted(int(s) for s in latencies.get(profiled, {}).get(key, {})):
                prof = layer_profile(latencies, profiled, key, seq, dtype)
                if prof is None:
                    continue
                slope, intercept = prof.forward_line
                flops = layer_forward_flops(cfg, seq)
                effs.append(flops / (gpu.training_flops * slope))
                halves.append(max(0.0, seq * intercept / slope))
                # the GEMMs alone: the memory-bound kernels' time per sample comes off the slope
                # (fp32 profiles move 4-byte elements, twice the 16-bit bytes)
                memory = memory_time_s(elementwise_bytes(cfg, seq) * (FP32_BYTES_RATIO if gpu.uses_fp32 else 1), gpu)
                gemm_slope = slope - memory
                if gemm_slope > 0:
                    gemm_effs.append(flops / (gpu.training_flops * gemm_slope))
                    gemm_halves.append(max(0.0, seq * intercept / gemm_slope))
                used.append(f"{profiled}@{seq}")
        if effs:
            out[key] = {
                "owner": owner,
                "dtype": dtype,
                "efficiency": round(statistics.median(effs), 4),
                "half_efficiency_tokens": round(statistics.median(halves)),
                "measurements": used,
                "efficiency_range": (round(min(effs), 4), round(max(effs), 4)),
                "gemm_efficiency": round(min(1.0, statistics.median(gemm_effs)), 4),
                "gemm_half_tokens": round(statistics.median(gemm_halves)),
            }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profiles", type=Path, default=None, help="the cephalo-profiles folder")
    args = parser.parse_args(argv)
    for key, c in calibrate(args.profiles).items():
        print(
            f"# {key} -> {c['owner']} ({c['dtype']}; {len(c['measurements'])} layers; "
            f"efficiency range {c['efficiency_range'][0]}..{c['efficiency_range'][1]})\n"
            f"efficiency = {c['efficiency']}\nhalf_efficiency_tokens = {c['half_efficiency_tokens']}\n"
            f"gemm_efficiency = {c['gemm_efficiency']}\ngemm_half_tokens = {c['gemm_half_tokens']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
