"""A documented synthetic generator of pipeline options, and the shipped instances it writes.

Until the end-to-end planner exists, this stands in for Tangram's homogeneous parallelizer:
for every island, every slice length k = 1..L and every role, it lays the slice out in a
few ways and keeps the layouts no other layout beats. Figures come from
``REFERENCE-FIGURES.md`` (datasheet dense FP16 tensor TFLOPs and memory [NV], node shapes
of the Azure VMs of Tangram's Table 3 [AZ]); the formulas are the GPT ones listed there.

A layout of a slice of k layers on an island of G GPUs is (p, t, d, recompute): p inner
pipeline stages, every stage tensor-parallel over t GPUs of one node and data-parallel
over d replicas (the largest divisor of the micro-batch size with p·t·d ≤ G; GPUs beyond
p·t·d stay idle), activations kept or fully recomputed. For a stage
of ℓ layers and a micro-batch of m samples (m/d per replica):

* forward = ℓ·(m/d)·(24·s·h² + 4·s²·h) / (t · peak · efficiency)  +  TP all-reduces,
* backward = 2 × the forward compute (+ one more forward with recomputation) + TP
  all-reduces + the once-per-iteration gradient all-reduce over the d replicas, spread
  over the M micro-batches,
* static = 16 bytes × (12h² + 13h)·ℓ / t (mixed-precision Adam state, no optimizer
  sharding) + ``RESERVED_GIB`` (+ the embedding on a first block, the head on a last one),
* activation = ℓ × Korthikanti et al.'s bytes per layer, s·b·h·(10 + 24/t + 5·a·s/(h·t))
  with b = m/d, or 2·s·b·h with full recomputation (plus one layer's full activations,
  counted as static, for the layer being recomputed).

Links between islands carry one micro-batch's boundary activations (m·s·h·2 bytes) forward
and as many gradient bytes back, over the slower island's inter-node network.

``python -m hetopt.pipeline.generate [FOLDER]`` rewrites the shipped instances.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

from hetopt.pipeline.problem import GIB, Island, PipelineInstance, PipelineOption, StagePlan

#: Bytes of training state per parameter: mixed-precision Adam (2 weights + 2 gradients +
#: 12 fp32 master/momentum/variance; ZeRO paper), no optimizer sharding.
STATE_BYTES_PER_PARAM = 16
#: Bytes per activation element and per gradient element crossing a link (fp16).
ELEMENT_BYTES = 2
#: Per-GPU memory no plan may use: CUDA context, allocator fragmentation, NCCL buffers.
#: 1 GiB is the usual order of the CUDA context plus NCCL's default buffers.
RESERVED_GIB = 1.0
#: Inner pipeline depths a layout may have ("1, 2 or 4 inner stages").
INNER_STAGES = (1, 2, 4)
#: Roles the generator emits when ``roles=True``: the first block holds the embedding,
#: the last the output head, a whole pipeline both.
ROLE_VARIANTS = ("first", "middle", "last")

#: Fraction of the dense FP16 tensor peak a whole GPT layer reaches, per GPU type.
#: REFERENCE-FIGURES.md measures fp16 forward efficiency of GPT layers (Cephalo's
#: profiles): V100-16GB 0.24 (2.7B) and 0.32 (6.7B), T4 0.14 (2.7B) and 0.06 (6.7B),
#: L4 0.13, A6000 0.26 (6.7B). The A100 and H100 values are assumptions (⚠): no layer
#: measurement is at hand, their measured matmul peaks are 87% and 80% of spec [MLE],
#: and a whole layer (attention, norms) runs at about half of that.
LAYER_EFFICIENCY = {"T4": 0.10, "V100": 0.30, "L4": 0.13, "A6000": 0.26, "A100": 0.45, "H100": 0.40}


@dataclass(frozen=True)
class Gpu:
    """A GPU type: dense FP16 tensor TFLOPs and memory from the datasheet [NV]."""

    name: str
    tflops: float
    memory_gib: float
    family: str  # key of LAYER_EFFICIENCY


#: Datasheet figures (REFERENCE-FIGURES.md, "GPUs").
GPUS = {
    "T4": Gpu("T4", 65.0, 16.0, "T4"),
    "V100-16GB-PCIe": Gpu("V100-16GB-PCIe", 112.0, 16.0, "V100"),
    "V100-32GB-SXM2": Gpu("V100-32GB-SXM2", 125.0, 32.0, "V100"),
    "A100-80GB-PCIe": Gpu("A100-80GB-PCIe", 312.0, 80.0, "A100"),
    "A100-40GB-SXM4": Gpu("A100-40GB-SXM4", 312.0, 40.0, "A100"),
    "L4": Gpu("L4", 121.0, 24.0, "L4"),
    "A6000": Gpu("A6000", 154.8, 48.0, "A6000"),
    "H100-SXM5": Gpu("H100-SXM5", 989.0, 80.0, "H100"),
}


@dataclass(frozen=True)
class IslandSpec:
    """An island: ``nodes`` × ``gpus_per_node`` GPUs of one type.

    ``intra_gbs``: GB/s per direction between GPUs of a node (NVLink or PCIe);
    ``inter_gbps``: Gb/s of a node's network (REFERENCE-FIGURES.md, "Node shapes").
    """

    name: str
    gpu: str
    nodes: int
    gpus_per_node: int
    intra_gbs: float
    inter_gbps: float

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class Model:
    """A GPT model: layers L, hidden h, heads a, sequence s, vocabulary V."""

    name: str
    layers: int
    hidden: int
    heads: int
    sequence: int = 2048
    vocab: int = 50304  # GPT-3's 50257, padded by Megatron

    @property
    def layer_params(self) -> int:
        """12h² + 13h."""
        return 12 * self.hidden**2 + 13 * self.hidden

    @property
    def layer_flops(self) -> float:
        """Forward FLOPs of one layer per sample: 24·s·h² + 4·s²·h."""
        s, h = self.sequence, self.hidden
        return 24 * s * h * h + 4 * s * s * h

    def activation_bytes(self, samples: float, tp: int, recompute: bool) -> float:
        """Korthikanti et al.: activation bytes of one layer (TP without sequence parallelism)."""
        s, h, a = self.sequence, self.hidden, self.heads
        if recompute:
            return 2 * s * samples * h
        return s * samples * h * (10 + 24 / tp + 5 * a * s / (h * tp))


# Island shapes of Tangram's clusters (Azure VMs; REFERENCE-FIGURES.md "Node shapes").
def t4_nodes(nodes: int) -> IslandSpec:
    """NC64as_T4_v3: 4×T4 per node, PCIe 3.0 x16 (16 GB/s), 32 Gb/s Ethernet."""
    return IslandSpec("t4", "T4", nodes, 4, 16.0, 32.0)


def v100_16_nodes(nodes: int) -> IslandSpec:
    """NC24s_v3: 4×V100-16GB PCIe per node, PCIe 3.0 (16 GB/s); network not stated (⚠ 32 Gb/s taken)."""
    return IslandSpec("v100-16", "V100-16GB-PCIe", nodes, 4, 16.0, 32.0)


def v100_32_node() -> IslandSpec:
    """ND40rs_v2: 8×V100-32GB SXM2, NVLink2 (150 GB/s per direction), 100 Gb/s EDR InfiniBand."""
    return IslandSpec("v100-32", "V100-32GB-SXM2", 1, 8, 150.0, 100.0)


def a100_80_node() -> IslandSpec:
    """NC96ads_A100_v4: 4×A100-80GB PCIe, PCIe 4.0 (32 GB/s per direction), 80 Gb/s Ethernet."""
    return IslandSpec("a100-80", "A100-80GB-PCIe", 1, 4, 32.0, 80.0)


@dataclass(frozen=True)
class Workload:
    """What the options depend on besides the island: model, micro-batch size m, M."""

    model: Model
    microbatch_size: int
    microbatches: int


def _split(k: int, p: int) -> list[int]:
    """k layers over p stages, the extra layers at the back (back stages hold fewer micro-batches)."""
    return [k // p + (1 if q >= p - k % p else 0) for q in range(p)]


def _stage(spec: IslandSpec, work: Workload, ell: int, tp: int, dp: int, recompute: bool, head: bool, embed: bool) -> StagePlan:
    gpu, mdl = GPUS[spec.gpu], work.model
    rate = gpu.tflops * 1e12 * LAYER_EFFICIENCY[gpu.family]  # FLOP/s one GPU sustains
    samples = work.microbatch_size / dp  # per replica
    compute = ell * samples * mdl.layer_flops / (tp * rate)
    head_compute = samples * 2 * mdl.sequence * mdl.hidden * mdl.vocab / (tp * rate) if head else 0.0
    # Megatron: two all-reduces of the layer output per layer and pass, ring over t GPUs
    boundary = samples * mdl.sequence * mdl.hidden * ELEMENT_BYTES
    tp_comm = 0.0 if tp == 1 else ell * 2 * 2 * (tp - 1) / tp * boundary / (spec.intra_gbs * 1e9)
    # gradient all-reduce over the d replicas, once per iteration, spread over the micro-batches
    grads = ELEMENT_BYTES * mdl.layer_params * ell / tp
    dp_bw = spec.intra_gbs * 1e9 if tp * dp <= spec.gpus_per_node else spec.inter_gbps * 1e9 / 8
    dp_comm = 0.0 if dp == 1 else 2 * (dp - 1) / dp * grads / dp_bw / work.microbatches
    forward = compute + head_compute + tp_comm
    backward = 2 * (compute + head_compute) + tp_comm + dp_comm + (compute + tp_comm if recompute else 0.0)
    params = mdl.layer_params * ell + (mdl.vocab * mdl.hidden if embed else 0) + (mdl.vocab * mdl.hidden if head else 0)
    static = STATE_BYTES_PER_PARAM * params / tp + RESERVED_GIB * GIB
    if recompute:  # the layer being recomputed holds its full activations
        static += mdl.activation_bytes(samples, tp, recompute=False)
    if head:  # fp32 logits of the micro-batch, sharded over t
        static += 4 * samples * mdl.sequence * mdl.vocab / tp
    activation = ell * mdl.activation_bytes(samples, tp, recompute)
    return StagePlan(ell, forward, backward, static, activation, tp * dp)


def _layouts(spec: IslandSpec, work: Workload, k: int):
    """(p, t, d, recompute) layouts: d the widest data parallelism that divides the micro-batch
    and fits the island (an option may leave GPUs of its island idle, e.g. 8 of 12)."""
    for p in INNER_STAGES:
        if p > k:
            continue
        for tp in (1, 2, 4, 8):
            if tp > spec.gpus_per_node or p * tp > spec.gpus:
                continue
            dp = max(d for d in range(1, work.microbatch_size + 1) if work.microbatch_size % d == 0 and p * tp * d <= spec.gpus)
            for recompute in (False, True):
                yield p, tp, dp, recompute


def island_options(spec: IslandSpec, island: int, work: Workload, *, roles: bool, memory_gib: float) -> list[PipelineOption]:
    """The options of one island: every slice length, role and layout no other layout beats.

    A layout is dropped when another with the same slice, role and number of inner stages
    is no slower in total and in its slowest stage and fits with at least as many stages
    behind it (the DP, the MILP and CP-SAT would never prefer it).
    """
    L, M = work.model.layers, work.microbatches
    probe = PipelineInstance("probe", L, M, (Island(spec.name, spec.gpus, memory_gib * GIB),), (), ((0.0,),))
    kept: list[PipelineOption] = []
    for k in range(1, L + 1):
        variants = (("whole",) if k == L else ()) + (ROLE_VARIANTS if roles else ())
        if not roles:
            variants = ("any",)
        for role in variants:
            embed, head = role in ("first", "whole", "any") and roles, role in ("last", "whole") and roles
            found: dict[int, list[tuple[float, float, float, PipelineOption]]] = {}
            for p, tp, dp, recompute in _layouts(spec, work, k):
                split = _split(k, p)
                stages = tuple(
                    _stage(spec, work, ell, tp, dp, recompute, head=head and q == p - 1, embed=embed and q == 0)
                    for q, ell in enumerate(split)
                )
                opt = PipelineOption(island, k, stages, role)
                trial = PipelineInstance("probe", L, M, probe.islands, (PipelineOption(0, k, stages, role),), ((0.0,),))
                lim = trial.behind_limits[0]
                if lim is not None and lim < 0:
                    continue
                reach = math.inf if lim is None else lim
                found.setdefault(p, []).append((opt.total_time_s, opt.max_time_s, -reach, opt))
            for cands in found.values():
                for n, a in enumerate(cands):
                    beaten = any(
                        all(x <= y for x, y in zip(b[:3], a[:3])) and (b[:3] != a[:3] or m < n)
                        for m, b in enumerate(cands)
                        if m != n
                    )
                    if not beaten:
                        kept.append(a[3])
    return kept


def synthetic_islands() -> list[IslandSpec]:
    """One node of every GPU type, with the node shapes of REFERENCE-FIGURES.md (⚠ L4 and A6000
    nodes are not listed there: 4 GPUs on PCIe 4.0 and 50 Gb/s, Cephalo's cluster A, are taken)."""
    return [
        t4_nodes(1),
        v100_16_nodes(1),
        v100_32_node(),
        a100_80_node(),
        IslandSpec("a100-40", "A100-40GB-SXM4", 1, 8, 300.0, 1600.0),  # ND96asr_v4: NVLink3, 8×200 Gb/s HDR
        IslandSpec("h100", "H100-SXM5", 1, 8, 450.0, 3200.0),  # ND96isr_H100_v5: NVLink4, 8×400 Gb/s NDR
        IslandSpec("l4", "L4", 1, 4, 32.0, 50.0),
        IslandSpec("a6000", "A6000", 1, 4, 32.0, 50.0),
    ]


def build_instance(
    name: str, work: Workload, specs: list[IslandSpec], *, roles: bool = True, description: str = ""
) -> PipelineInstance:
    """An instance from island specs: options from :func:`island_options`, links from the networks."""
    mdl = work.model
    islands = tuple(Island(sp.name, sp.gpus, GPUS[sp.gpu].memory_gib * GIB) for sp in specs)
    options = []
    for i, sp in enumerate(specs):
        options += island_options(sp, i, work, roles=roles, memory_gib=GPUS[sp.gpu].memory_gib)
    boundary = work.microbatch_size * mdl.sequence * mdl.hidden * ELEMENT_BYTES  # activations one way
    n = len(specs)
    link = [[0.0] * n for _ in range(n)]
    for a in range(n):
        for b in range(n):
            if a != b:
                bandwidth = min(specs[a].inter_gbps, specs[b].inter_gbps) * 1e9 / 8
                link[a][b] = 2 * boundary / bandwidth  # activations forward, gradients back
    return PipelineInstance(name, mdl.layers, work.microbatches, islands, tuple(options),
                            tuple(tuple(r) for r in link), 1.0, description)


GPT3_6_7B = Model("GPT-3 6.7B", 32, 4096, 32)
GPT3_13B = Model("GPT-3 13B", 40, 5120, 40)
#: GPT-3 175B's depth at 6.7B's width: the DP's difficulty grows with depth and islands,
#: not width, and a 175B-wide layer does not fit the smaller islands at all.
DEEP_96 = Model("96-layer GPT (175B depth, h = 4096)", 96, 4096, 32)
DEEP_128 = Model("128-layer GPT (h = 4096)", 128, 4096, 32)
TINY = Model("tiny GPT (6 layers, h = 1024)", 6, 1024, 16, sequence=1024)

#: Micro-batch size m (samples) of the shipped instances: divisible by every data-parallel
#: width the layouts use, and 128 × 8 = 1024 samples per iteration.
MICROBATCH_SIZE = 8


def shipped_instances() -> list[PipelineInstance]:
    """Every generated instance shipped in ``instances/pipeline/``."""
    out = []
    w67 = Workload(GPT3_6_7B, MICROBATCH_SIZE, 128)
    for t4, v100 in ((16, 16), (12, 4), (8, 8), (4, 12)):
        out.append(build_instance(
            f"tangram-gpt3-6.7b-t4x{t4}-v100x{v100}", w67, [t4_nodes(t4 // 4), v100_16_nodes(v100 // 4)],
            description=f"GPT-3 6.7B (32 layers), M = 128, on {t4}×T4 + {v100}×V100-16GB (Tangram Fig. 8 shape)",
        ))
    w13 = Workload(GPT3_13B, MICROBATCH_SIZE, 128)
    c3 = [a100_80_node(), v100_32_node(), v100_16_nodes(1), t4_nodes(1)]
    for count in (2, 3, 4):
        tag = "-".join(("a100x4", "v100-32x8", "v100-16x4", "t4x4")[:count])
        out.append(build_instance(
            f"tangram-gpt3-13b-{tag}", w13, c3[:count],
            description=f"GPT-3 13B (40 layers), M = 128, on {count} islands of Tangram's C3 (Fig. 11 and 13 shape)",
        ))
    out.append(build_instance(
        "scale-8x96", Workload(DEEP_96, MICROBATCH_SIZE, 256), synthetic_islands(), roles=False,
        description="8 islands of 8 different GPU types, 96 layers, M = 256: the DP's scaling target",
    ))
    sixteen = [IslandSpec(f"{sp.name}-{r}", sp.gpu, sp.nodes, sp.gpus_per_node, sp.intra_gbs, sp.inter_gbps)
               for r in ("a", "b") for sp in synthetic_islands()]
    out.append(build_instance(
        "scale-16x128", Workload(DEEP_128, MICROBATCH_SIZE, 256), sixteen, roles=False,
        description="16 islands (2 of each of 8 GPU types), 128 layers, M = 256: where methods stop scaling",
    ))
    out.append(build_instance(
        "tiny-t4-v100", Workload(TINY, 4, 8), [t4_nodes(1), v100_16_nodes(1)],
        description="6 small layers on two 4-GPU islands: small enough for bruteforce",
    ))
    out.append(build_instance(
        "infeasible-gpt3-13b-t4x4", Workload(GPT3_13B, MICROBATCH_SIZE, 128), [t4_nodes(1)],
        description="GPT-3 13B on 4×T4: 13B parameters × 16 bytes do not fit 64 GB",
    ))
    return out


def _num(x: float) -> str:
    """A float as TOML text that reads back to the same float."""
    return repr(float(x))


def to_toml(instance: PipelineInstance) -> str:
    """The instance as a pipeline TOML file (GiB and seconds; floats round-trip exactly)."""
    lines = [
        "# Written by `python -m hetopt.pipeline.generate`; see hetopt/pipeline/generate.py for the model.",
        'problem = "pipeline"',
        f'name = "{instance.name}"',
        f'description = "{instance.description}"',
        f"layers = {instance.layers}",
        f"microbatches = {instance.microbatches}",
        f"memory_fraction = {_num(instance.memory_fraction)}",
        "default_link_s = 0.0",
        "",
    ]
    for isl in instance.islands:
        lines += ["[[island]]", f'name = "{isl.name}"', f"gpus = {isl.gpus}", f"memory_gib = {_num(isl.memory_bytes / GIB)}", ""]
    n = len(instance.islands)
    for a in range(n):
        for b in range(a + 1, n):
            lines += ["[[link]]", f'a = "{instance.islands[a].name}"', f'b = "{instance.islands[b].name}"',
                      f"time_s = {_num(instance.link_s[a][b])}", ""]
    for opt in instance.options:
        stages = ", ".join(
            f"{{ layers = {s.layers}, forward_s = {_num(s.forward_s)}, backward_s = {_num(s.backward_s)}, "
            f"static_gib = {_num(s.static_bytes / GIB)}, activation_gib = {_num(s.activation_bytes / GIB)}, gpus = {s.gpus} }}"
            for s in opt.stages
        )
        lines += ["[[option]]", f'island = "{instance.islands[opt.island].name}"', f"layers = {opt.layers}",
                  f'role = "{opt.role}"', f"stage = [{stages}]", ""]
    return "\n".join(lines)


def write_instances(folder: str | Path = "instances/pipeline") -> list[Path]:
    """Write every shipped generated instance into ``folder``; returns the paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for inst in shipped_instances():
        path = folder / f"{inst.name}.toml"
        path.write_text(to_toml(inst), encoding="utf-8")
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    """``python -m hetopt.pipeline.generate [FOLDER]``: regenerate the shipped instances."""
    parser = argparse.ArgumentParser(prog="python -m hetopt.pipeline.generate", description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="instances/pipeline")
    args = parser.parse_args(argv)
    for path in write_instances(args.folder):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
