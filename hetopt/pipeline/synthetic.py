"""A documented synthetic generator of pipeline options, and the shipped instances it writes.

``hetopt generate pipeline-synthetic [--out FOLDER]``
rewrites the generated instances of ``instances/pipeline/`` (``tangram-*``, ``scale-*``,
``tiny-t4-v100``, ``infeasible-*``; not the planner's ``planner-*`` files).

This is a second source of pipeline instances beside the planner's (``hetopt generate
pipeline``): the same hardware, deliberately simpler and independent formulas. The hardware
is the project's one description of it:

* every GPU figure comes from the GPU catalog ``instances/gpus.toml``: the peak is its
  ``training_tflops``, the memory its ``memory_gib``, and the fraction of the peak a whole
  layer sustains its calibrated ``efficiency`` e. That is the asymptote of the planner's
  saturating e·t/(t + t½); ignoring the saturation keeps this model simple and makes it
  optimistic at small micro-batches: at 2048 tokens per replica, the fewest the shipped
  GPT-3 instances give one, its compute times are 0% (T4, L4: t½ = 0) to 18% (A100-80GB:
  t½ = 451 tokens) shorter than the saturating model's;
* every node shape (GPUs per node, intra-node GB/s, network Gb/s) is a shape of
  :mod:`hetopt.shapes`, which reads its GPU figures from the same catalog.

For every island, every slice length k = 1..L and every role, it lays the slice out in a
few ways and keeps the layouts no other layout beats. A layout of a slice of k layers on
an island of G GPUs is (p, t, d, recompute): p inner pipeline stages, every stage
tensor-parallel over t GPUs of one node and data-parallel over d replicas (the largest
divisor of the micro-batch size with p·t·d ≤ G; GPUs beyond p·t·d stay idle), activations
kept or fully recomputed. For a stage of ℓ layers and a micro-batch of m samples (m/d per
replica), on a GPU of peak P and efficiency e:

* forward = ℓ·(m/d)·(24·s·h² + 4·s²·h) / (t · P · e)  +  TP all-reduces over the node's
  intra-node link,
* backward = 2 × the forward compute (+ one more forward with recomputation) + TP
  all-reduces + the once-per-iteration gradient all-reduce over the d replicas (on the
  intra-node link when t·d GPUs fit one node, else on the node's network), spread over
  the M micro-batches,
* static = 16 bytes × (12h² + 13h)·ℓ / t (mixed-precision Adam state, no optimizer
  sharding) + ``RESERVED_GIB`` (+ the embedding on a first block, the head on a last one),
* activation = ℓ × Korthikanti et al.'s bytes per layer, s·b·h·(10 + 24/t + 5·a·s/(h·t))
  with b = m/d, or 2·s·b·h with full recomputation (plus one layer's full activations,
  counted as static, for the layer being recomputed).

Links between islands carry one micro-batch's boundary activations (m·s·h·2 bytes) forward
and as many gradient bytes back, over the slower island's network.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from hetopt.hardware import GpuType, gpu, load_gpus

# The node shapes are the islands family's catalog of machines, so that this generator, the
# islands instances and the planner's cluster files describe the same hardware. A generator
# importing it does not couple the families' solvers: the pipeline solvers never see it.
from hetopt import shapes as machines
from hetopt.shapes import Shape
from hetopt.pipeline.problem import GIB, PipelineIsland, PipelineInstance, PipelineOption, StagePlan

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


@dataclass(frozen=True)
class NodeIsland:
    """An island: ``nodes`` nodes of one node shape of :mod:`hetopt.shapes`.

    The shape must name its GPU catalog entry (``Shape.catalog_gpu``): the GPU's peak,
    efficiency and memory are read from the catalog by that name.
    """

    name: str
    shape: Shape
    nodes: int

    def __post_init__(self) -> None:
        if self.shape.catalog_gpu is None:
            raise ValueError(f"island {self.name!r}: its node shape names no GPU catalog entry (use Shape.from_catalog)")

    @property
    def gpu(self) -> str:
        """The GPU's name in ``instances/gpus.toml``."""
        return str(self.shape.catalog_gpu)

    @property
    def gpus_per_node(self) -> int:
        return self.shape.gpus

    @property
    def intra_gbs(self) -> float:
        """GB/s per direction between GPUs of a node (NVLink or PCIe)."""
        return self.shape.intra_gbs

    @property
    def inter_gbps(self) -> float:
        """Gb/s of a node's network."""
        return self.shape.nic_gbps

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


# Islands of Tangram's clusters (Azure VMs; shapes and sources in hetopt/shapes.py).
def t4_nodes(nodes: int) -> NodeIsland:
    """NC64as_T4_v3 nodes: 4×T4, PCIe 3.0, 32 Gb/s Ethernet."""
    return NodeIsland("t4", machines.NC64AS_T4_V3, nodes)


def v100_16_nodes(nodes: int) -> NodeIsland:
    """NC24s_v3 nodes: 4×V100-16GB PCIe, PCIe 3.0, ⚠ 24 Gb/s Ethernet (an assumption, see the catalog)."""
    return NodeIsland("v100-16", machines.NC24S_V3, nodes)


def v100_32_node() -> NodeIsland:
    """One ND40rs_v2: 8×V100-32GB SXM2, NVLink2, 100 Gb/s EDR InfiniBand."""
    return NodeIsland("v100-32", machines.ND40RS_V2, 1)


def a100_80_node() -> NodeIsland:
    """One NC96ads_A100_v4: 4×A100-80GB PCIe, PCIe 4.0, 80 Gb/s Ethernet."""
    return NodeIsland("a100-80", machines.NC96ADS_A100_V4, 1)


@dataclass(frozen=True)
class Workload:
    """What the options depend on besides the island: model, micro-batch size m, M."""

    model: Model
    microbatch_size: int
    microbatches: int


def _split(k: int, p: int) -> list[int]:
    """k layers over p stages, the extra layers at the back (back stages hold fewer micro-batches)."""
    return [k // p + (1 if q >= p - k % p else 0) for q in range(p)]


def _stage(spec: NodeIsland, gpu: GpuType, work: Workload, ell: int, tp: int, dp: int, recompute: bool, head: bool,
           embed: bool) -> StagePlan:
    mdl = work.model
    rate = gpu.training_flops * gpu.efficiency  # FLOP/s one GPU sustains on a whole layer (P·e)
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


def _layouts(spec: NodeIsland, work: Workload, k: int):
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


def island_options(spec: NodeIsland, island: int, work: Workload, *, roles: bool, gpu: GpuType) -> list[PipelineOption]:
    """The options of one island: every slice length, role and layout no other layout beats.

    A layout is dropped when another with the same slice, role and number of inner stages
    is no slower in total and in its slowest stage and fits with at least as many stages
    behind it (the DP, the MILP and CP-SAT would never prefer it).

    Parameters
    ----------
    spec : NodeIsland
        The island's node shape and node count.
    island : int
        The island's index in the instance (the options' ``island``).
    work : Workload
        Model, micro-batch size and micro-batches per iteration.
    roles : bool
        Emit first/middle/last/whole options (embedding and head placed); else role ``any``.
    gpu : GpuType
        The island's GPU (``spec.gpu``'s catalog entry): peak, efficiency and memory.

    Returns
    -------
    list[PipelineOption]
        The kept options, slice lengths ascending.

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> work = Workload(TINY, microbatch_size=4, microbatches=8)
    >>> opts = island_options(t4_nodes(1), 0, work, roles=False, gpu=load_gpus()["T4"])
    >>> sorted({o.layers for o in opts}) == list(range(1, TINY.layers + 1))
    True
    """
    L, M = work.model.layers, work.microbatches
    probe = PipelineInstance("probe", L, M, (PipelineIsland(spec.name, spec.gpus, gpu.memory_bytes),), (), ((0.0,),))
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
                    _stage(spec, gpu, work, ell, tp, dp, recompute, head=head and q == p - 1, embed=embed and q == 0)
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


def synthetic_islands() -> list[NodeIsland]:
    """One node of each of 8 GPU types, as node shapes of :mod:`hetopt.shapes`.

    The 4×L4 and 4×A6000 nodes are assumed shapes (⚠ see the catalog: PCIe 4.0, 50 Gb/s).

    Examples
    --------
    >>> [(s.name, s.gpu, s.gpus) for s in synthetic_islands()][-2:]
    [('l4', 'L4', 4), ('a6000', 'A6000', 4)]
    """
    return [
        t4_nodes(1),
        v100_16_nodes(1),
        v100_32_node(),
        a100_80_node(),
        NodeIsland("a100-40", machines.A100_40_NODE, 1),  # ND96asr_v4-like: NVLink3, 8×200 Gb/s HDR
        NodeIsland("h100", machines.H100_NODE, 1),  # ND96isr_H100_v5-like: NVLink4, 8×400 Gb/s NDR
        NodeIsland("l4", machines.L4_QUAD, 1),
        NodeIsland("a6000", machines.A6000_QUAD, 1),
    ]


def build_instance(
    name: str, work: Workload, specs: list[NodeIsland], *, roles: bool = True, description: str = "",
    catalog: Mapping[str, GpuType] | None = None,
) -> PipelineInstance:
    """An instance from island specs: options from :func:`island_options`, links from the networks.

    Parameters
    ----------
    name, description : str
        The instance's name and one-line description.
    work : Workload
        Model, micro-batch size m and micro-batches M.
    specs : list[NodeIsland]
        The islands, in file order.
    roles : bool
        Whether options carry first/middle/last/whole roles (embedding and head placed).
    catalog : Mapping[str, GpuType], optional
        The GPU catalog; default the shipped ``instances/gpus.toml``.

    Returns
    -------
    PipelineInstance
        Islands with their GPU count and per-GPU memory, the kept options, and link
        round-trip times 2·m·s·h·2 bytes / the slower island's network bandwidth.

    Raises
    ------
    InputError
        When an island's GPU is not in the catalog.

    Examples
    --------
    >>> inst = build_instance("t", Workload(TINY, 4, 8), [t4_nodes(1), v100_16_nodes(1)])
    >>> [(i.name, i.gpus, i.memory_bytes / GIB) for i in inst.islands]
    [('t4', 4, 16.0), ('v100-16', 4, 16.0)]
    """
    catalog = load_gpus() if catalog is None else catalog
    mdl = work.model
    gpus = [gpu(catalog, sp.gpu, where=f"island {sp.name!r}") for sp in specs]
    islands = tuple(PipelineIsland(sp.name, sp.gpus, g.memory_bytes) for sp, g in zip(specs, gpus))
    options = []
    for i, (sp, g) in enumerate(zip(specs, gpus)):
        options += island_options(sp, i, work, roles=roles, gpu=g)
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


def shipped_instances(catalog: Mapping[str, GpuType] | None = None) -> list[PipelineInstance]:
    """Every generated instance shipped in ``instances/pipeline/`` (not the planner's ``planner-*``).

    Parameters
    ----------
    catalog : Mapping[str, GpuType], optional
        The GPU catalog; default the shipped ``instances/gpus.toml``.

    Returns
    -------
    list[PipelineInstance]
        The Tangram-shaped, scale, tiny and infeasible instances.
    """
    catalog = load_gpus() if catalog is None else catalog
    out = []
    w67 = Workload(GPT3_6_7B, MICROBATCH_SIZE, 128)
    for t4, v100 in ((16, 16), (12, 4), (8, 8), (4, 12)):
        out.append(build_instance(
            f"tangram-gpt3-6.7b-t4x{t4}-v100x{v100}", w67, [t4_nodes(t4 // 4), v100_16_nodes(v100 // 4)],
            description=f"GPT-3 6.7B (32 layers), M = 128, on {t4}×T4 + {v100}×V100-16GB (Tangram Fig. 8 shape)", catalog=catalog,
        ))
    w13 = Workload(GPT3_13B, MICROBATCH_SIZE, 128)
    c3 = [a100_80_node(), v100_32_node(), v100_16_nodes(1), t4_nodes(1)]
    for count in (2, 3, 4):
        tag = "-".join(("a100x4", "v100-32x8", "v100-16x4", "t4x4")[:count])
        out.append(build_instance(
            f"tangram-gpt3-13b-{tag}", w13, c3[:count],
            description=f"GPT-3 13B (40 layers), M = 128, on {count} islands of Tangram's C3 (Fig. 11 and 13 shape)", catalog=catalog,
        ))
    out.append(build_instance(
        "scale-8x96", Workload(DEEP_96, MICROBATCH_SIZE, 256), synthetic_islands(), roles=False,
        description="8 islands of 8 different GPU types, 96 layers, M = 256: the DP's scaling target", catalog=catalog,
    ))
    sixteen = [replace(sp, name=f"{sp.name}-{r}") for r in ("a", "b") for sp in synthetic_islands()]
    out.append(build_instance(
        "scale-16x128", Workload(DEEP_128, MICROBATCH_SIZE, 256), sixteen, roles=False,
        description="16 islands (2 of each of 8 GPU types), 128 layers, M = 256: where methods stop scaling", catalog=catalog,
    ))
    out.append(build_instance(
        "tiny-t4-v100", Workload(TINY, 4, 8), [t4_nodes(1), v100_16_nodes(1)],
        description="6 small layers on two 4-GPU islands: small enough for bruteforce", catalog=catalog,
    ))
    out.append(build_instance(
        "infeasible-gpt3-13b-t4x4", Workload(GPT3_13B, MICROBATCH_SIZE, 128), [t4_nodes(1)],
        description="GPT-3 13B on 4×T4: 13B parameters × 16 bytes do not fit 64 GB", catalog=catalog,
    ))
    return out


def _num(x: float) -> str:
    """A float as TOML text that reads back to the same float."""
    return repr(float(x))


def to_toml(instance: PipelineInstance) -> str:
    """The instance as a pipeline TOML file (GiB and seconds; floats round-trip exactly)."""
    lines = [
        "# Written by `hetopt generate pipeline-synthetic` (hetopt/pipeline/synthetic.py: the model; GPUs from",
        "# instances/gpus.toml, node shapes from hetopt/shapes.py); do not edit by hand.",
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


def write(folder: str | Path) -> list[Path]:
    """Write every instance of :func:`shipped_instances` into ``folder``, one ``NAME.toml`` each.

    ``hetopt generate pipeline-synthetic`` calls it with ``instances/pipeline/``; files of
    other names there (the planner's ``planner-*``, the hand-written ``tiny``) are left alone.

    Parameters
    ----------
    folder : str or Path
        Created if missing.

    Returns
    -------
    list[Path]
        The paths written.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for inst in shipped_instances():
        path = folder / f"{inst.name}.toml"
        path.write_text(to_toml(inst), encoding="utf-8")
        paths.append(path)
    return paths
