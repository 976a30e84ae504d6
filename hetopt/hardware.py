"""GPU types from the catalog ``instances/gpus.toml`` (datasheet figures, with sources there).

Units inside: bytes, FLOP/s, bytes/s. The catalog file uses GiB, TFLOPs and GB/s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hetopt.catalog import instances_dir
from hetopt.errors import InputError
from hetopt.files import read_toml
from hetopt.readers.fields import Fields
from hetopt.units import GIB  # noqa: F401  (re-exported for the catalogs' users)

TERA = 1e12
GIGA = 1e9

#: The analytic latency model's efficiency for a GPU the catalog gives no calibration for:
#: about the median of the calibrated data-center GPUs (see gpus.toml); an assumption.
DEFAULT_EFFICIENCY = 0.4
#: Tokens per micro-batch at which a GPU without calibration reaches half its efficiency.
DEFAULT_HALF_EFFICIENCY_TOKENS = 256.0

GPU_KEYS = (
    "memory_gib", "fp16_tflops", "fp32_tflops", "tf32_tflops", "training_tflops", "memory_gbs", "intra_link",
    "intra_gbs", "profile", "efficiency", "half_efficiency_tokens", "gemm_efficiency",
    "calibration", "attention_efficiency", "host_gbs", "host_cpu", "bf16", "flash_attention",
    "usd_per_hour", "price_source", "arch", "sms",
)
#: Host CPU vendors the catalog's ``host_cpu`` names (``hetopt.costmodel.ring_step_floor_s``).
HOST_CPUS = ("amd", "intel", "arm")
#: GPU generations the catalog's ``arch`` names (NCCL's tuner keys its constants on them:
#: ``hetopt.costmodel.nccl``).
ARCHS = ("pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna2", "cdna3")


@dataclass(frozen=True)
class GpuType:
    """One GPU model's datasheet figures and its two calibrations.

    ``efficiency`` and ``half_efficiency_tokens`` describe a whole transformer layer (GEMMs and
    memory-bound kernels together, e·t/(t + t½)): the allocation instances' analytic latency
    model. ``gemm_efficiency`` is the sustained share of peak of the matrix multiplications
    alone, with the layer's memory-bound traffic and the GEMMs' own operands taken out
    (``hetopt.costmodel``, ``elementwise_bytes`` and ``gemm_traffic_bytes``): the planner's
    cost model, which prices that traffic at the memory bandwidth. Both are fitted to the
    same measured profiles by ``hetopt calibrate``; ``calibration`` says
    where a GPU's figures come from when it has no profile of its own.
    """

    name: str
    memory_bytes: float
    fp16_flops: float
    fp32_flops: float
    training_flops: float
    memory_bandwidth: float
    intra_link: str
    intra_bandwidth: float
    profile: str | None
    efficiency: float
    half_efficiency_tokens: float
    calibrated: bool
    gemm_efficiency: float = DEFAULT_EFFICIENCY
    calibration: str = ""
    #: Share of peak FlashAttention's kernels reach (None: as ``gemm_efficiency``, said in
    #: ``calibration``); the attention scores' FLOPs run at it when attention is flash.
    attention_efficiency: float | None = None
    #: The host link (PCIe to CPU memory), bytes/s per direction; None where the catalog has
    #: no figure (activation offloading then cannot be priced on this GPU).
    host_bandwidth: float | None = None
    #: The host CPU's vendor in the GPU's reference node ("amd", "intel", "arm"; "" not
    #: stated): NCCL's network proxy posts slower on AMD hosts, which sets the least latency
    #: of every step of a ring that spans nodes (``hetopt.costmodel.ring_step_floor_s``).
    host_cpu: str = ""
    #: Whether the part has BF16 arithmetic (Ampere and later); without it training runs in
    #: fp16 (``hetopt.costmodel.hardware_precision``).
    bf16: bool = True
    #: Whether FlashAttention's kernels run on the part (FlashAttention-2: Ampere, Ada, Hopper
    #: and AMD's MI200 / MI300). Where they do not, a runtime that asks for them runs attention
    #: unfused, with its s×s scores in memory (``Running.on``).
    flash_attention: bool = True
    #: On-demand price of one GPU for an hour, US dollars (with its share of the VM it comes in),
    #: and where the figure is from; None where the catalog has no price (a cluster file's
    #: ``[price]`` table may give one)
    usd_per_hour: float | None = None
    price_source: str = ""
    #: Dense TF32 tensor-core FLOP/s (Ampere and later); None where the part has no TF32
    #: (``precision = "tf32"`` is refused there: ``hetopt.costmodel.precision_problem``).
    tf32_flops: float | None = None
    #: The GPU's generation (``ARCHS``; "" not stated): NCCL's tuner keys its latencies and
    #: protocol bandwidths on it (``hetopt.costmodel.nccl``).
    arch: str = ""
    #: Streaming multiprocessors (AMD: compute units), where a GEMM's tiles run in waves of one
    #: tile per SM (``hetopt.costmodel.gemm_waves``); 0 not stated (no wave quantization priced).
    sms: int = 0

    @property
    def sustained_flops(self) -> float:
        """FLOP/s no kernel of the planner's cost model exceeds on this GPU: peak × the larger of
        the GEMM asymptote and FlashAttention's share. The ideal time, the planner's lower
        bounds and its exact prunings all rest on it."""
        return self.training_flops * max(self.gemm_efficiency, self.flash_efficiency)

    @property
    def flash_efficiency(self) -> float:
        """FlashAttention's share of peak: the catalog's figure, else the GEMM asymptote."""
        return self.gemm_efficiency if self.attention_efficiency is None else self.attention_efficiency

    @property
    def uses_fp32(self) -> bool:
        """True where mixed precision runs at the FP32 rate (no useful FP16, e.g. P40)."""
        return self.training_flops == self.fp32_flops


def default_catalog() -> Path:
    """The shipped GPU catalog, ``instances/gpus.toml``."""
    return instances_dir() / "gpus.toml"


def load_gpus(path: str | Path | None = None) -> dict[str, GpuType]:
    """Read the GPU catalog.

    Examples
    --------
    >>> gpus = load_gpus()
    >>> gpus["A100-SXM4-80GB"].fp16_flops / 1e12
    312.0

    Raises
    ------
    InputError
        With the file, the key path and the fix.
    """
    path = default_catalog() if path is None else Path(path)
    top = Fields(read_toml(path), str(path))
    top.reject_unknown(("gpu",))
    catalog = {}
    table = top.table("gpu", required=True)
    for name in table.data:
        f = table.table(name, required=True)
        if "gemm_half_tokens" in f.data:  # a catalog written for the saturating GEMM model
            raise f.error("gemm_half_tokens", "is no longer read: the GEMM knee is its operands' traffic "
                          "(hetopt.costmodel.gemm_efficiency); delete the key")
        f.reject_unknown(GPU_KEYS)
        efficiency = f.number("efficiency", None, positive=True, maximum=1.0)
        half = f.number("half_efficiency_tokens", None, minimum=0.0)
        gemm = f.number("gemm_efficiency", None, positive=True, maximum=1.0)
        catalog[name] = GpuType(
            name=name,
            memory_bytes=f.number("memory_gib", positive=True) * GIB,
            fp16_flops=f.number("fp16_tflops", positive=True) * TERA,
            fp32_flops=f.number("fp32_tflops", positive=True) * TERA,
            training_flops=f.number("training_tflops", positive=True) * TERA,
            memory_bandwidth=f.number("memory_gbs", positive=True) * GIGA,
            intra_link=f.string("intra_link"),
            intra_bandwidth=f.number("intra_gbs", positive=True) * GIGA,
            profile=f.string("profile", None),
            efficiency=DEFAULT_EFFICIENCY if efficiency is None else efficiency,
            half_efficiency_tokens=DEFAULT_HALF_EFFICIENCY_TOKENS if half is None else half,
            calibrated=efficiency is not None,
            # the planner's GEMM calibration; a GPU without one falls back to the whole-layer figures
            gemm_efficiency=(DEFAULT_EFFICIENCY if efficiency is None else efficiency) if gemm is None else gemm,
            calibration=f.string("calibration", ""),
            attention_efficiency=f.number("attention_efficiency", None, positive=True, maximum=1.0),
            host_bandwidth=None if (host := f.number("host_gbs", None, positive=True)) is None else host * GIGA,
            host_cpu=f.string("host_cpu", "", choices=HOST_CPUS),
            bf16=f.boolean("bf16", True),
            flash_attention=f.boolean("flash_attention", True),
            usd_per_hour=f.number("usd_per_hour", None, positive=True),
            price_source=f.string("price_source", ""),
            tf32_flops=None if (tf32 := f.number("tf32_tflops", None, positive=True)) is None else tf32 * TERA,
            arch=f.string("arch", "", choices=ARCHS),
            sms=f.integer("sms", 0, minimum=0, maximum=4096),
        )
    return catalog


@dataclass(frozen=True)
class HeadroomPart:
    """One part of what a training process holds on a GPU beyond its tensors: its GiB and source."""

    what: str
    gib: float
    source: str


#: What training holds on every GPU beyond the tensors the cost model counts (issue 40): the
#: default memory headroom, reserved on every GPU of every plan (``--memory-headroom`` and
#: ``plan(memory_headroom=...)`` replace the sum). Each figure is per GPU (one process each).
HEADROOM_PARTS = (
    # the first CUDA call of a PyTorch process creates its context (the driver's state and the
    # kernels of PyTorch, cuBLAS and cuDNN loaded on the device): 723 MiB measured on one GPU,
    # "~700+MB" depending on the CUDA version and device, in PyTorch's forums
    HeadroomPart("CUDA context", 0.75, "PyTorch forums: discuss.pytorch.org/t/what-is-the-reason-for-pytorchs-gpu-memory-floor/"
                 "73021 (723 MiB) and /t/high-gpu-memory-overhead/81330 (~700+ MB by CUDA version and device)"),
    # NCCL keeps a send and a receive buffer of NCCL_BUFFSIZE (4 MiB by default) per channel for
    # each peer of a ring: 16 channels x 2 neighbours x 2 directions x 4 MiB = 256 MiB for one
    # communicator, and a training rank holds at least two busy ones (data-parallel and
    # tensor- or pipeline-parallel)
    HeadroomPart("NCCL communicators' buffers", 0.5, "NCCL user guide, environment variables: NCCL_BUFFSIZE "
                 "(default 4 MiB per buffer), NCCL_MIN/MAX_NCHANNELS; 2 communicators x 16 channels x 2 peers x 2 "
                 "directions x 4 MiB"),
    # the caching allocator keeps freed blocks in its segments (large ones carved from segments
    # of 20 MiB or more) and cannot always serve a large request from the free space it holds;
    # how much is lost depends on the allocation pattern (ZeRO reports OOM with over 30% of
    # memory free in extreme cases): an assumption of 0.75 GiB, changed with --memory-headroom
    HeadroomPart("caching allocator fragmentation", 0.75, "PyTorch docs, CUDA semantics: memory management "
                 "(max_split_size_mb, expandable_segments); Rajbhandari et al. 2020 (ZeRO) section 3.2, memory "
                 "fragmentation; 0.75 GiB is an assumption"),
)
#: The default headroom, GiB per GPU: the parts' sum.
DEFAULT_HEADROOM_GIB = sum(p.gib for p in HEADROOM_PARTS)
#: The largest headroom accepted, GiB (above every GPU's memory: a typo, not a setting).
MAX_HEADROOM_GIB = 1024.0


#: Words a GPU name may carry that do not tell two catalog entries apart.
#: (the memory type, "80GB HBM3", names no other part; the longer spellings first)
_NOISE_WORDS = ("NVIDIA", "AMD", "TESLA", "INSTINCT", "TENSOR", "CORE", "GPU", "RTX", "QUADRO",
                "HBM3E", "HBM2E", "HBM3", "HBM2")
#: Form factors, by the spelling that names them (SXM4 and SXM5 are both "SXM").
_FORMS = (("SXM", "SXM"), ("PCIE", "PCIE"), ("NVL", "NVL"), ("HGX", "SXM"), ("DGX", "SXM"))


def _name_parts(name: str) -> tuple[str, str | None, int | None]:
    """(family, form factor, memory in GB) read off a GPU name, e.g. "H100 SXM5 80GB" → ("H100", "SXM", 80)."""
    text = name.upper()
    for word in _NOISE_WORDS:
        text = text.replace(word, " ")
    memory = re.search(r"(\d+)\s*G(?:I?B)?\b", text)
    gb = int(memory.group(1)) if memory else None
    if memory:
        text = text[: memory.start()] + " " + text[memory.end():]
    form = next((f for word, f in _FORMS if word in text), None)
    for word, _ in _FORMS:
        text = re.sub(word + r"\d*", " ", text)
    family = re.sub(r"[^A-Z0-9]", "", text)
    return family, form, gb


def gpu(catalog: dict[str, GpuType], name: str, *, where: str = "") -> GpuType:
    """Look a GPU type up by its catalog name or an unambiguous spelling of it.

    Publications and cloud documents spell one part many ways ("H100 SXM5 80GB",
    "NVIDIA H100-SXM", "A100-80GB-SXM4"); a name that is not a catalog key is matched by
    family, form factor and memory, and accepted only when exactly one entry matches. A name
    that matches several is refused with the candidates (issue 40): ``V100-32GB`` is the SXM2
    part or the PCIe one, whose links differ (NVLink or PCIe), and so do the plans; no form
    factor is guessed.

    Raises
    ------
    InputError
        For an unknown name (listing the known names) or an ambiguous one (listing the
        entries it matches).

    Examples
    --------
    >>> cat = load_gpus()
    >>> gpu(cat, "NVIDIA A100 SXM4 80GB").name, gpu(cat, "h100-sxm").name
    ('A100-SXM4-80GB', 'H100-SXM5')
    >>> gpu(cat, "Tesla V100-SXM2-32GB").name, gpu(cat, "RTX A6000").name
    ('V100-SXM2-32GB', 'A6000')
    >>> gpu(cat, "V100-32GB", where="c.toml: node[0].gpu")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: c.toml: node[0].gpu: ambiguous GPU type 'V100-32GB': it matches V100-PCIe-32GB, V100-SXM2-32GB (give one of them)
    """
    if name in catalog:
        return catalog[name]
    family, form, gb = _name_parts(name)
    matches = []
    for entry in catalog.values():
        f2, form2, _ = _name_parts(entry.name)
        if f2 != family or (form is not None and form2 is not None and form2 != form):
            continue
        if gb is not None and round(entry.memory_bytes / GIB) != gb:
            continue
        matches.append(entry)
    if len(matches) == 1:
        return matches[0]
    prefix = f"{where}: " if where else ""
    if matches:
        listed = ", ".join(sorted(e.name for e in matches))
        raise InputError(f"{prefix}ambiguous GPU type {name!r}: it matches {listed} (give one of them)")
    raise InputError(f"{prefix}unknown GPU type {name!r} (give one of: {', '.join(sorted(catalog))})")
