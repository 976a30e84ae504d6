"""Calibrating the analytic latency model against Cephalo's measured layer latencies.

The model: a layer's forward time for a micro-batch of m samples of s tokens is
``m · F / (peak · eff(m·s))`` with ``eff(t) = e · t / (t + t½)``, F the layer's forward FLOPs
per sample. That is a line in m, ``(F / (peak·e)) · (m + t½ / s)``, so one measured forward
line (slope σ, intercept c) gives ``e = F / (peak · σ)`` and ``t½ = s · c / σ``.

For every profiled GPU this takes the median of e and t½ (t½ clamped at 0) over the
reference layers (GPT-3 2.7B, GPT-3 6.7B and Llama-2 7B shapes, every sequence length
measured) in the precision the GPU trains in (fp16, or fp32 where FP16 is crippled).

The planner's GEMM efficiency e_g is fitted to the same slope in the planner's own form
(``hetopt.costmodel.gemm_time_s``): the slope less what the layer's memory-bound kernels and
its GEMMs' token operands move per sample at the datasheet bandwidth is the GEMMs' FLOPs at
e_g. The intercept is what the model charges as the weights' read (once per call); the ratio
of the measured intercept to it is printed as a check, not used.

A GPU with no profile of its own takes its measured matmul peak (``MEASURED_MATMUL_PEAK``,
the best share of peak a sweep of GEMM shapes reaches) times ``SUSTAINED_PER_MATMUL_PEAK``:
the A100's profiled e_g over the A100's measured peak, the one chip measured both ways.
``hetopt calibrate`` prints the values written into ``instances/gpus.toml``.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from hetopt.catalog import instances_dir
from hetopt.generate.profiles import default_profiles_dir, layer_profile, load_latencies
from hetopt.hardware import load_gpus
from hetopt.costmodel import elementwise_bytes, gemm_operand_widths, gemm_traffic_bytes, memory_time_s
from hetopt.workload import layer_forward_flops, layer_parameters, load_model

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

#: The best share of the datasheet dense BF16 peak a sweep of GEMM shapes reaches (Stas Bekman's
#: mamf-finder, stas00/ml-engineering compute/accelerator/README.md): a ceiling, not what a
#: training run's GEMMs sustain.
MEASURED_MATMUL_PEAK = {"A100-SXM4-80GB": 0.87, "H100-SXM5": 0.80, "B200": 0.78, "MI300X": 0.51}
#: The profiles that measure the A100 (GA100) chip, whose median e_g over MEASURED_MATMUL_PEAK
#: gives SUSTAINED_PER_MATMUL_PEAK. They are the PCIe parts (250 W and 300 W against the SXM4's
#: 400 W), so the SXM4 figure is if anything low.
A100_PROFILES = ("a100x40", "a100x80")
#: Catalog GPUs without a profile of their own, and the measured matmul peak each takes.
UNPROFILED = {
    "A100-SXM4-40GB": "A100-SXM4-80GB", "A100-SXM4-80GB": "A100-SXM4-80GB", "A800-SXM4-80GB": "A100-SXM4-80GB",
    "H100-SXM5": "H100-SXM5", "H800-SXM5": "H100-SXM5", "H200": "H100-SXM5", "B200": "B200", "MI300X": "MI300X",
}


def calibrate(profiles: Path | None = None, catalog: Path | None = None) -> dict[str, dict]:
    """Per profile key: the whole-layer and the GEMM-only calibration, and the measurements used.

    ``efficiency`` and ``half_efficiency_tokens`` fit the measured forward line of whole layers;
    ``gemm_efficiency`` fits the same slope after the layer's memory-bound traffic and its
    GEMMs' token operands (``hetopt.costmodel.elementwise_bytes`` and ``gemm_traffic_bytes``,
    at the datasheet memory bandwidth) are taken off it; ``intercept_per_weight_read`` is the
    measured intercept over the weights' read the model charges instead (a check).

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
        effs, halves, used, gemm_effs, intercepts = [], [], [], [], []
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
                width = FP32_BYTES_RATIO if gpu.uses_fp32 else 1
                memory = memory_time_s(width * (elementwise_bytes(cfg, seq) + gemm_traffic_bytes(seq, gemm_operand_widths(cfg), 0.0)), gpu)
                gemm_slope = slope - memory
                if gemm_slope > 0:
                    gemm_effs.append(flops / (gpu.training_flops * gemm_slope))
                    weights = memory_time_s(width * gemm_traffic_bytes(0.0, (0.0, 0.0), layer_parameters(cfg)), gpu)
                    intercepts.append(intercept / weights)
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
                "intercept_per_weight_read": round(statistics.median(intercepts), 2) if intercepts else None,
            }
    return out


def sustained_per_matmul_peak(cal: dict[str, dict]) -> float:
    """The A100's profiled GEMM efficiency (median of ``A100_PROFILES``) over its measured matmul peak.

    Examples
    --------
    >>> 0.5 < sustained_per_matmul_peak(calibrate()) < 1.0
    True
    """
    return statistics.median(cal[k]["gemm_efficiency"] for k in A100_PROFILES) / MEASURED_MATMUL_PEAK["A100-SXM4-80GB"]


def unprofiled_gemm_efficiency(cal: dict[str, dict]) -> dict[str, float]:
    """``gemm_efficiency`` of every ``UNPROFILED`` catalog GPU: its measured matmul peak × the ratio.

    Examples
    --------
    >>> derived = unprofiled_gemm_efficiency(calibrate())
    >>> derived["A100-SXM4-80GB"] > derived["MI300X"]
    True
    """
    ratio = sustained_per_matmul_peak(cal)
    return {gpu: round(MEASURED_MATMUL_PEAK[peak] * ratio, 4) for gpu, peak in UNPROFILED.items()}


def calibration_lines(profiles: Path | None = None) -> list[str]:
    """The catalog lines the profiles give (``hetopt calibrate``): per profiled GPU its efficiency
    figures, then the derived GEMM efficiency of the GPUs without a profile of their own."""
    cal = calibrate(profiles)
    lines = []
    for key, c in cal.items():
        lines.append(
            f"# {key} -> {c['owner']} ({c['dtype']}; {len(c['measurements'])} layers; "
            f"efficiency range {c['efficiency_range'][0]}..{c['efficiency_range'][1]})\n"
            f"efficiency = {c['efficiency']}\nhalf_efficiency_tokens = {c['half_efficiency_tokens']}\n"
            f"gemm_efficiency = {c['gemm_efficiency']}\n"
            f"# measured intercept / the model's weight read: {c['intercept_per_weight_read']}"
        )
    lines.append(f"# no profile of their own: measured matmul peak x {sustained_per_matmul_peak(cal):.4f}")
    for gpu, e in unprofiled_gemm_efficiency(cal).items():
        lines.append(f"# {gpu} (peak {MEASURED_MATMUL_PEAK[UNPROFILED[gpu]]})\ngemm_efficiency = {e}")
    return lines
