"""Published, measured training runs: the measurement sets of ``instances/published`` read.

A set (the format is documented at the top of ``megatron-sc21.toml`` and in
``docs/formats.md``) names models, homogeneous clusters and measured runs, each with the
layout its authors ran and the runtime it ran on. This module reads them into
:class:`Measurement` rows and says what a row's figure means (:func:`publisher_flops`,
:func:`throughput`); :mod:`hetopt.planner.evaluation.validate` prices them, and
:mod:`hetopt.planner.evaluation.coverage` reads what the calibration sets measured.

Examples
--------
>>> rows = load_published()
>>> len(rows), rows[0].layout.tp >= 1
(21, True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from hetopt.catalog import CALIBRATION_SETS, instances_dir
from hetopt.costmodel import TRANSPORTS, hardware_precision, precision_problem
from hetopt.costmodel import running as run
from hetopt.costmodel.running import Running
from hetopt.units import BITS_PER_BYTE, GIB
from hetopt.checks import MAX_GLOBAL_BATCH, MAX_SEQ
from hetopt.errors import InputError
from hetopt.hardware import GIGA, GpuType, load_gpus
from hetopt.hardware import gpu as find_gpu
from hetopt.files import read_toml
from hetopt.planner.setup.layout import GivenLayout, UnsupportedLayout, check_layout, contradiction
from hetopt.planner.parallelizer.protocol import IslandSpec
from hetopt.planner.setup.framework import LAYOUT_RUNTIME_KEYS, Framework, parse_runtime
from hetopt.readers.fields import Fields
from hetopt.workload import ModelConfig, ffn_matrices, load_model, model_from_fields
from hetopt.planner.setup.cluster import resolve

#: The metrics a measurement may state, and how a predicted iteration time becomes each.
METRICS = ("tflops_per_gpu", "samples_per_s", "tokens_per_s", "tokens_per_s_per_gpu", "iteration_time_s", "mfu")
#: Of those, the ones where less is better: their ratio is published / predicted, so that a
#: ratio above 1 always means the model is optimistic.
LOWER_IS_BETTER = ("iteration_time_s",)
#: Accepted ranges, so every ratio is finite and positive: a published value in its metric's
#: units, a cluster's network in Gb/s (the cluster files' floor), batch and sequence as
#: ``hetopt plan`` takes them.
VALUE_RANGE = (1e-6, 1e15)
MIN_INTER_GBPS = 1e-6
#: FLOP-count conventions of ``tflops_per_gpu``: Megatron's eq. 3 (Narayanan et al. SC'21),
#: 96·B·s·l·h²·(1 + s/6h + V/16lh) per iteration, which counts the recomputed forward; and
#: Megatron-Core's ``num_floating_point_operations`` (megatron/training/training.py as of
#: core r0.8, July 2024), 12·B·s·l·h²·((1 + g/n + s/h)·w/h + (f/h)·k·γ + V/(2lh)) with g/n the
#: KV heads per head, w the attention width, f the FFN width, k the experts per token and
#: γ = 3/2 for a SwiGLU FFN: three passes, no recomputation, no causal halving of the scores
#: (for GPT shapes 72·B·s·l·h²·(1 + s/6h + V/12lh)).
FLOP_CONVENTIONS = ("megatron-eq3", "megatron-core")
#: The largest measured peak memory a row may state, GiB per GPU (a sanity limit: no GPU has more).
MAX_PEAK_MEMORY_GIB = 4096
#: Micro-batch sizes (samples per replica) tried when the publication does not state it:
#: the layout is then priced at its best micro-batch size under the model.
UNSTATED_MICROBATCHES = (1, 2, 4, 8)
#: The ``--runtime`` keys a row's ``runtime`` may name: what its framework could have run
#: (``validate --plan`` searches only that). How the run ran (overlap, attention, sequence
#: parallelism, ...) is the layout's, and the plan runs the same way.
ROW_RUNTIME_KEYS = ("recompute", "zero", "ep", "cp", "offload")
#: How-it-ran keys a row may leave out (``zero3_gather`` only matters for ZeRO-3 rows);
#: ``validate`` lists the rows that leave any of them out (docs/formats.md).
ASSUMED_RUNTIME = ("overlap", "flash_attention", "sequence_parallel", "zero3_gather", "host")
#: The publication year from which a row that leaves those keys out is priced as a current
#: runtime runs (:data:`CURRENT_RUNTIME`). The features are dated: FlashAttention (Dao et al.,
#: May 2022) entered the training frameworks in 2023 (Megatron-LM, llm-foundry, GPT-NeoX);
#: sequence parallelism is Korthikanti et al. (May 2022), whose own runs state it; overlapped
#: gradient reduction in Megatron-LM is its 2023 distributed optimizer, and DeepSpeed's
#: pipeline engine reduces after the flush; FSDP's per-layer gathers came with PyTorch 1.11
#: (2022), DeepSpeed's 2021 ZeRO-3 gathered tensor by tensor; PyTorch 2.0 came in March 2023,
#: and the host's time per layer of the one PyTorch 1.x stack measured (``cm.HOST_STACKS``,
#: ``torch1``) is the earlier runs' floor. Runs published before 2023 (Megatron SC'21, MT-NLG,
#: BLOOM, OPT, GPT-NeoX) ran without them.
CURRENT_RUNTIME_FROM = 2023
#: A row's value of each left-out key (the ``ASSUMED_RUNTIME`` ones; the others take the
#: defaults of :class:`~hetopt.costmodel.running.Running`): by a current runtime, and by the
#: runtimes before CURRENT_RUNTIME_FROM.
CURRENT_RUNTIME = Running()
EARLIER_RUNTIME = Running(overlap=False, flash=False, sequence_parallel=False, zero3_per_tensor=True, host="torch1")
#: How a source dates a run: an author-year citation ("Smith et al. 2022"), a year in
#: parentheses or an ISO date ("(2022)", "(2023-10-17)"), a month and year ("October 2023"), a
#: year written 'YY (SC'21) or an arXiv identifier (2104.04473: April 2021). A bare four-digit
#: number is not read as a year (a batch of 2016 is not a date).
_MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
_YEARS = (
    re.compile(r"et al\.?,? (20[1-3]\d)\b"),
    re.compile(r"\((20[1-3]\d)(?=[),;\-])"),
    re.compile(r"\b(20[1-3]\d)-[01]\d-[0-3]\d\b"),
    re.compile(rf"\b(?:{_MONTHS})[a-z]*\.? (20[1-3]\d)\b"),
)
_SHORT_YEAR = re.compile(r"(?<=[A-Za-z]['’])(\d\d)\b")
_ARXIV = re.compile(r"arXiv[:\s]*(\d\d)[01]\d\.\d{4,5}", re.IGNORECASE)


def publication_year(source: str) -> int | None:
    """The earliest year a row's ``source`` names (None when it names none).

    Examples
    --------
    >>> publication_year("Narayanan et al. SC'21, Table 1, row 1.7B")
    2021
    >>> publication_year("Smith et al. 2022 (arXiv 2201.11990): global batch 1920 on 2,240 GPUs")
    2022
    >>> publication_year("arXiv 2407.21783 Table 4: 16,384 GPUs, 2048 sequences"), publication_year("commit f2e5db402c")
    (2024, None)
    >>> publication_year("README at 061f2c7 (2023-10-17): GlobalBatchSize 2016"), publication_year("GlobalBatchSize 2016")
    (2023, None)
    """
    years = [int(y) for pattern in _YEARS for y in pattern.findall(source)]
    years += [2000 + int(y) for y in _SHORT_YEAR.findall(source)]
    years += [2000 + int(y) for y in _ARXIV.findall(source)]
    return min(years) if years else None


def dated_earlier(year: int | None) -> bool:
    """Whether a run of ``year`` ran on the runtimes before :data:`CURRENT_RUNTIME_FROM` (an undated one did not).

    Examples
    --------
    >>> dated_earlier(2021), dated_earlier(2024), dated_earlier(None)
    (True, False, False)
    """
    return year is not None and year < CURRENT_RUNTIME_FROM


@dataclass(frozen=True)
class Measurement:
    """One published, measured training run."""

    id: str
    group: str
    source: str
    model: ModelConfig
    island: IslandSpec
    global_batch: int
    seq: int
    metric: str
    value: float
    flops: str
    best: bool
    layout: GivenLayout
    #: what the row's framework could run: the plan of ``validate --plan`` is held to it
    runtime: Framework = Framework()
    #: why the cost model cannot price the published layout ('' when it can): a layout that ran
    #: but lies outside the model (:class:`~hetopt.planner.setup.layout.UnsupportedLayout`)
    unsupported: str = ""
    #: the runtime keys the row leaves out (``ASSUMED_RUNTIME``), priced as the runtimes of its
    #: year ran (:data:`CURRENT_RUNTIME_FROM`)
    assumed: tuple[str, ...] = ()
    #: the publication year its source names (:func:`publication_year`; None: none named)
    year: int | None = None
    #: the rows of one setting (the same model, cluster, batch and sequence; different layouts)
    #: are ranked against each other (:func:`rank_settings`); the file's ``setting`` key, or
    #: those four by default
    setting: str = ""
    #: the run's measured peak memory per GPU, bytes: the device's used memory as ``nvidia-smi``
    #: reports it (the CUDA context, NCCL's buffers and the caching allocator's reserve included),
    #: the largest over the run's GPUs; the file's ``peak_memory_gib`` (None: not stated).
    #: ``validate`` compares it with the model's peak (issue 41)
    peak_memory_bytes: float | None = None

    @property
    def earlier_runtime(self) -> bool:
        """Whether the keys it leaves out are priced as the runtimes before CURRENT_RUNTIME_FROM ran."""
        return dated_earlier(self.year)

    @property
    def gpus(self) -> int:
        """GPUs of the run's cluster."""
        return self.island.gpus


def default_published() -> Path:
    """The Megatron-LM SC'21 calibration set shipped in ``instances/published``."""
    return instances_dir() / "published" / f"{CALIBRATION_SETS[0]}.toml"


def load_published(path: str | Path | None = None, catalog: dict[str, GpuType] | None = None) -> tuple[Measurement, ...]:
    """Read a published measurement set.

    Raises
    ------
    InputError
        With the file, the key path and the fix.
    """
    path = Path(path) if path is not None else default_published()
    top = Fields(read_toml(path), str(path))
    top.reject_unknown(("models", "clusters", "measurement"))
    models = _read_models(top)
    islands = _read_clusters(top, load_gpus() if catalog is None else catalog)
    seen: dict[str, int] = {}
    # a row that states a heterogeneous layout (``[[measurement.stage]]``) is read by load_heterogeneous
    return tuple(_read_measurement(m, k, models, islands, seen)
                 for k, m in enumerate(top.tables("measurement", required=True)) if "stage" not in m.data)


def _read_models(top: Fields) -> dict[str, ModelConfig]:
    """The ``[models]`` tables: a shipped model by name (``catalog``), or one written out."""
    models: dict[str, ModelConfig] = {}
    for key, table in top.table("models", required=True).data.items():
        f = top.table("models").table(key, required=True)
        if "catalog" in table:  # a model of instances/models, by name (nothing else beside it)
            f.reject_unknown(("catalog", "name", "source", "note"))
            try:
                models[key] = load_model(resolve(f.string("catalog"), instances_dir() / "models", "model"))
            except InputError as exc:
                raise f.error("catalog", str(exc)) from None
        else:
            models[key] = model_from_fields(f)
    return models


def _read_clusters(top: Fields, catalog: dict[str, GpuType]) -> dict[str, IslandSpec]:
    """The ``[clusters]`` tables, each a homogeneous island of catalog GPUs."""
    islands: dict[str, IslandSpec] = {}
    clusters = top.table("clusters", required=True)
    for key in clusters.data:
        c = clusters.table(key, required=True)
        if "nodes_by_gpu" in c.data:  # a mixed cluster: its rows are heterogeneous (load_heterogeneous)
            continue
        c.reject_unknown(("gpu", "nodes", "gpus_per_node", "inter_gbps", "p2p", "transport", "note"))
        try:
            gpu_type = find_gpu(catalog, c.string("gpu"))
        except InputError as exc:
            raise c.error("gpu", str(exc)) from None
        islands[key] = IslandSpec(
            key, gpu_type, nodes=c.integer("nodes", minimum=1, maximum=100_000),
            gpus_per_node=c.integer("gpus_per_node", minimum=1, maximum=64),
            inter_bandwidth=c.number("inter_gbps", minimum=MIN_INTER_GBPS) * GIGA / BITS_PER_BYTE,
            p2p=c.boolean("p2p", None), transport=c.string("transport", None, choices=TRANSPORTS),
        )
    return islands


def _read_layout(lay: Fields, gpu: GpuType, era: Running) -> GivenLayout:
    """A row's ``layout`` table; how it ran, where it does not say, as the runtimes of its ``era`` ran."""
    lay.reject_unknown(("tp", "pp", "dp", "b", "recompute", "zero", "vpp", "ep", "fsep", "cp", "offload")
                       + tuple(k.file for k in run.KEYS))
    zero = lay.integer("zero", 0, minimum=0, maximum=3)
    if zero != 3:  # ZeRO-3's gathers: an era's way only where there is ZeRO-3
        era = replace(era, zero3_per_tensor=False)
    stated = {}
    for key in run.KEYS:  # read with the file's own messages
        if key.boolean:
            stated[key.field] = lay.boolean(key.file, getattr(era, key.field))
        else:
            word = lay.string(key.file, None, choices=tuple(key.words))
            stated[key.field] = getattr(era, key.field) if word is None else key.words[word]
    # not stated: the precision of the hardware (bf16 where it has BF16 arithmetic, else fp16)
    stated["precision"] = stated["precision"] or hardware_precision((gpu,))
    if (problem := precision_problem(stated["precision"], (gpu,))) is not None:
        raise lay.error("precision", problem)
    layout = GivenLayout(
        tp=lay.integer("tp", minimum=1), pp=lay.integer("pp", minimum=1), dp=lay.integer("dp", minimum=1),
        microbatch=lay.integer("b", 0, minimum=0), recompute=lay.string("recompute", "none", choices=("none", "selective", "full")),
        zero=zero, vpp=lay.integer("vpp", 1, minimum=0),
        ep=lay.integer("ep", 1, minimum=1), fsep=lay.boolean("fsep", False), cp=lay.integer("cp", 1, minimum=1),
        offload=lay.boolean("offload", False), running=Running(**stated),
    )
    clash = contradiction(layout, gather_given="zero3_gather" in lay.data)
    if clash:  # the same rule as --layout, named by the file's key
        key, reason = clash
        raise lay.error(run.BY_TEXT[key].file if key in run.BY_TEXT else key, reason)
    return layout


def _row_names(m: Fields, k: int, models: dict[str, ModelConfig], seen: dict[str, int]) -> tuple[str, str, str]:
    """Row ``k``'s id, model and cluster names: the id checked unique (and recorded in ``seen``),
    the model checked defined; the cluster is the caller's to check."""
    ident = m.string("id")
    if ident in seen:
        raise m.error("id", f"{ident!r} also names measurement[{seen[ident]}] (every row needs its own id)")
    seen[ident] = k
    model, cluster = m.string("model"), m.string("cluster")
    if model not in models:
        raise m.error("model", f"unknown model {model!r} (defined: {', '.join(models)})")
    return ident, model, cluster


def _read_measurement(m: Fields, k: int, models: dict[str, ModelConfig], islands: dict[str, IslandSpec],
                      seen: dict[str, int]) -> Measurement:
    """Measurement ``k``: its model, cluster, layout (checked as ``--layout`` is), metric and value."""
    m.reject_unknown(("id", "group", "source", "model", "cluster", "global_batch", "seq", "metric", "value", "flops", "best",
                      "layout", "runtime", "note", "setting", "peak_memory_gib"))
    ident, model, cluster = _row_names(m, k, models, seen)
    if cluster not in islands:
        raise m.error("cluster", f"unknown cluster {cluster!r} (defined: {', '.join(islands)})")
    source = m.string("source", "")
    year = publication_year(source)
    lay = m.table("layout", required=True)
    isl = islands[cluster]
    layout = _read_layout(lay, isl.gpu, EARLIER_RUNTIME if dated_earlier(year) else CURRENT_RUNTIME)
    # the world as Megatron-Core counts it: CP multiplies it, EP is carved out of the tp·cp·dp
    # GPUs of a stage (hetopt.parallelism.expert.layout_problem)
    world = layout.tp * layout.pp * layout.dp * layout.cp
    if world != isl.gpus:
        what = "tp·pp·dp" if layout.cp == 1 else "tp·pp·dp·cp"
        raise lay.error(None, f"{what} = {world} but cluster {cluster!r} has {isl.gpus} GPUs")
    global_batch = m.integer("global_batch", minimum=1, maximum=MAX_GLOBAL_BATCH)
    seq = m.integer("seq", models[model].sequence, minimum=1, maximum=MAX_SEQ)
    unsupported = ""
    try:
        check_layout(layout, isl, models[model], global_batch, seq=seq)
    except UnsupportedLayout as exc:  # the run ran: the row is listed, not priced
        unsupported = exc.detail
    except InputError as exc:  # the same rule as --layout, named by the file's key
        raise lay.error(None, exc.detail) from None
    metric = m.string("metric", choices=METRICS)
    if metric == "mfu" and isinstance(m.data.get("value"), (int, float)) and m.data["value"] > 1:
        raise m.error("value", f"mfu is a fraction of the GPU's peak (0.38, not 38); got {m.data['value']}")
    return Measurement(
        id=ident, group=m.string("group", "ungrouped"), source=source,
        model=models[model], island=isl, global_batch=global_batch,
        seq=seq, metric=metric,
        value=m.number("value", minimum=VALUE_RANGE[0], maximum=VALUE_RANGE[1]),
        flops=m.string("flops", FLOP_CONVENTIONS[0], choices=FLOP_CONVENTIONS), best=m.boolean("best", True),
        layout=layout, runtime=_row_runtime(m, layout), unsupported=unsupported,
        # ZeRO-3's gathers matter to ZeRO-3 rows only; today's host is no assumption for a current row
        assumed=tuple(k for k in ASSUMED_RUNTIME if k not in lay.data and (k != "zero3_gather" or layout.zero == 3)
                      and (k != "host" or dated_earlier(year))),
        year=year, setting=m.string("setting", f"{model} on {cluster}, batch {global_batch}, sequence {seq}"),
        peak_memory_bytes=None if (peak := m.number("peak_memory_gib", None, positive=True, maximum=MAX_PEAK_MEMORY_GIB)) is None
        else peak * GIB,
    )


def _row_runtime(m: Fields, layout: GivenLayout) -> Framework:
    """The row's framework: its ``runtime`` key (``--runtime`` syntax, :data:`ROW_RUNTIME_KEYS`),
    running as the layout says; without the key, every choice a current runtime has."""
    text = m.data.get("runtime")
    if text is None:
        return Framework(running=layout.running)
    if not isinstance(text, str):
        raise m.error("runtime", f"must be a string such as \"recompute=none,full zero=0\" (got {text!r})")
    keys = [part.partition("=")[0] for part in text.split()]
    for key in keys:
        if key in LAYOUT_RUNTIME_KEYS:
            raise m.error("runtime", f"{key}: how the run ran belongs in layout (runtime takes {', '.join(ROW_RUNTIME_KEYS)})")
    try:
        rt = replace(parse_runtime(text), running=layout.running)
        rt.layout(layout)  # the published layout must be one the framework could run
    except InputError as exc:
        raise m.error("runtime", ("the published layout's " if exc.field == "layout" else "") + exc.detail) from None
    return rt


# ---- heterogeneous rows: a layout stated stage by stage ---------------------------------------


@dataclass(frozen=True)
class Replica:
    """One data-parallel replica of a stage: ``tp`` GPUs of one node of ``gpu``."""

    gpu: GpuType
    tp: int


@dataclass(frozen=True)
class HeteroStage:
    """One pipeline stage of a heterogeneous layout: ``layers`` transformer layers (the
    embedding with the first stage, the head with the last) on its replicas."""

    layers: int
    replicas: tuple[Replica, ...]


@dataclass(frozen=True)
class HeteroMeasurement:
    """A measured run whose layout is stated stage by stage (docs/formats.md, "Heterogeneous rows").

    Replica j of stage i feeds replica j of stage i + 1 (as Sailor runs it); every replica runs
    ``global_batch / (microbatch · dp)`` micro-batches of ``microbatch`` samples; each replica
    sits on its own node(s) of ``gpus_per_node`` GPUs, the nodes joined by ``inter_bandwidth``
    (bytes/s of one node's network).
    """

    id: str
    group: str
    source: str
    model: ModelConfig
    global_batch: int
    seq: int
    metric: str
    value: float
    stages: tuple[HeteroStage, ...]
    microbatch: int
    gpus_per_node: int
    inter_bandwidth: float
    layout: GivenLayout  # how the run ran (recompute, zero, overlap, flash, sp, precision, host; tp/pp/dp unused)
    peak_memory_bytes: float | None = None
    transport: str | None = None
    setting: str = ""

    @property
    def dp(self) -> int:
        """Replicas per stage (every stage has as many: Sailor's runs do)."""
        return len(self.stages[0].replicas)

    @property
    def gpus(self) -> int:
        return sum(r.tp for st in self.stages for r in st.replicas)

    def text(self) -> str:
        """The layout in one line: ``S0[12L: RTX-3090 tp8 + RTX-2080 tp8] -> S1[...] b2``."""
        parts = [f"S{i}[{st.layers}L: " + " + ".join(f"{r.gpu.name} tp{r.tp}" for r in st.replicas) + "]"
                 for i, st in enumerate(self.stages)]
        return " -> ".join(parts) + f" b{self.microbatch}"


def load_heterogeneous(path: str | Path, catalog: dict[str, GpuType] | None = None) -> tuple[HeteroMeasurement, ...]:
    """The heterogeneous rows of a published set: rows with ``[[measurement.stage]]`` tables, on a
    cluster with ``nodes_by_gpu`` (docs/formats.md).

    Raises
    ------
    InputError
        With the file, the key path and the fix.
    """
    catalog = load_gpus() if catalog is None else catalog
    top = Fields(read_toml(path), str(path))
    top.reject_unknown(("models", "clusters", "measurement"))
    models = _read_models(top)
    clusters = {}
    for key, table in top.table("clusters", required=True).data.items():
        c = top.table("clusters").table(key, required=True)
        if "nodes_by_gpu" not in c.data:
            continue
        c.reject_unknown(("nodes_by_gpu", "gpus_per_node", "inter_gbps", "transport", "note"))
        nodes = c.table("nodes_by_gpu", required=True)
        by_gpu = {}
        for name in nodes.data:
            try:
                by_gpu[find_gpu(catalog, name).name] = nodes.integer(name, minimum=1, maximum=100_000)
            except InputError as exc:
                raise nodes.error(name, str(exc)) from None
        clusters[key] = (by_gpu, c.integer("gpus_per_node", minimum=1, maximum=64),
                         c.number("inter_gbps", minimum=MIN_INTER_GBPS) * GIGA / BITS_PER_BYTE,
                         c.string("transport", None, choices=TRANSPORTS))
    seen: dict[str, int] = {}
    rows = []
    for k, m in enumerate(top.tables("measurement", required=True)):
        if "stage" in m.data:
            rows.append(_read_hetero(m, k, models, clusters, catalog, seen))
    return tuple(rows)


def _read_hetero(m: Fields, k: int, models: dict[str, ModelConfig], clusters: dict, catalog: dict[str, GpuType],
                 seen: dict[str, int]) -> HeteroMeasurement:
    """Heterogeneous row ``k``: its stages and replicas checked against the model and the cluster."""
    m.reject_unknown(("id", "group", "source", "model", "cluster", "global_batch", "seq", "metric", "value", "layout",
                      "stage", "peak_memory_gib", "note", "setting"))
    ident, model, cluster = _row_names(m, k, models, seen)
    if cluster not in clusters:
        raise m.error("cluster", f"unknown mixed cluster {cluster!r} (a heterogeneous row needs a cluster with "
                                 f"nodes_by_gpu; defined: {', '.join(clusters) or 'none'})")
    cfg = models[model]
    by_gpu, gpn, inter, transport = clusters[cluster]
    stages, used = [], {}
    for i, st in enumerate(m.tables("stage", required=True)):
        st.reject_unknown(("layers", "replicas"))
        layers = st.integer("layers", minimum=1, maximum=cfg.layers)
        raw = st.data.get("replicas")
        if not isinstance(raw, list) or not raw or not all(isinstance(r, dict) for r in raw):
            raise st.error("replicas", "give the stage's replicas, e.g. replicas = [{gpu = \"RTX-3090\", tp = 8}]")
        reps = []
        for j, r in enumerate(raw):
            f = Fields(r, st.source, st.key(f"replicas[{j}]"))
            f.reject_unknown(("gpu", "tp"))
            try:
                gpu_type = find_gpu(catalog, f.string("gpu"))
            except InputError as exc:
                raise f.error("gpu", str(exc)) from None
            if gpu_type.name not in by_gpu:
                raise f.error("gpu", f"{gpu_type.name} has no nodes in cluster {cluster!r} (its nodes_by_gpu: "
                                     f"{', '.join(by_gpu)})")
            tp = f.integer("tp", minimum=1, maximum=gpn)
            if cfg.heads % tp:
                raise f.error("tp", f"tp={tp} must divide the model's {cfg.heads} heads")
            used[gpu_type.name] = used.get(gpu_type.name, 0) + 1
            reps.append(Replica(gpu_type, tp))
        stages.append(HeteroStage(layers, tuple(reps)))
    if sum(st.layers for st in stages) != cfg.layers:
        raise m.error("stage", f"the stages' layers add up to {sum(st.layers for st in stages)}, not the {cfg.layers} "
                               f"layers of {cfg.name}")
    if len({len(st.replicas) for st in stages}) > 1:
        raise m.error("stage", "every stage needs as many replicas (replica j of a stage feeds replica j of the next)")
    for name, count in used.items():
        if count > by_gpu[name]:
            raise m.error("stage", f"{count} replicas on {name} nodes, but cluster {cluster!r} has {by_gpu[name]} "
                                   "(each replica runs on a node of its own)")
    lay = m.table("layout", required=True)
    lay.reject_unknown(("b", "recompute", "zero", "overlap", "flash_attention", "sequence_parallel", "precision",
                        "handover", "host"))
    gpus = sorted({r.gpu.name for st in stages for r in st.replicas})
    precision = lay.string("precision", None, choices=tuple(run.BY_TEXT["precision"].words)) or hardware_precision([catalog[g] for g in gpus])
    if (problem := precision_problem(precision, [catalog[g] for g in gpus])) is not None:
        raise lay.error("precision", problem)
    b = lay.integer("b", minimum=1, maximum=MAX_GLOBAL_BATCH)
    global_batch = m.integer("global_batch", minimum=1, maximum=MAX_GLOBAL_BATCH)
    if global_batch % (b * len(stages[0].replicas)):
        raise lay.error("b", f"b · dp = {b * len(stages[0].replicas)} must divide the global batch {global_batch}")
    layout = GivenLayout(tp=1, pp=len(stages), dp=len(stages[0].replicas), microbatch=b,
                         recompute=lay.string("recompute", "none", choices=("none", "selective", "full")),
                         zero=lay.integer("zero", 0, minimum=0, maximum=1),
                         running=Running(overlap=lay.boolean("overlap", True), flash=lay.boolean("flash_attention", True),
                                         sequence_parallel=lay.boolean("sequence_parallel", False), precision=precision,
                                         handover=lay.string("handover", CURRENT_RUNTIME.handover,
                                                             choices=tuple(run.BY_TEXT["handover"].words)),
                                         host=lay.string("host", CURRENT_RUNTIME.host,
                                                         choices=tuple(run.BY_TEXT["host"].words))))
    metric = m.string("metric", "iteration_time_s", choices=LOWER_IS_BETTER)
    peak = m.number("peak_memory_gib", None, minimum=0.0, maximum=1e6)
    seq = m.integer("seq", cfg.sequence, minimum=1, maximum=MAX_SEQ)
    return HeteroMeasurement(
        id=ident, group=m.string("group", "ungrouped"), source=m.string("source", ""), model=cfg,
        global_batch=global_batch, seq=seq, metric=metric,
        value=m.number("value", minimum=VALUE_RANGE[0], maximum=VALUE_RANGE[1]), stages=tuple(stages), microbatch=b,
        gpus_per_node=gpn, inter_bandwidth=inter, layout=layout, peak_memory_bytes=None if peak is None else peak * 2 ** 30,
        transport=transport, setting=m.string("setting", f"{model} on {cluster}, batch {global_batch}, sequence {seq}"),
    )


def publisher_flops(m: Measurement) -> float:
    """FLOPs of one iteration as the publication counts them (``m.flops``).

    Examples
    --------
    >>> m = next(m for m in load_published() if m.id == "mlm-t1-1.7b")
    >>> round(publisher_flops(m) / 1e15, 2)  # PFLOP per iteration: 137 TFLOP/s per GPU on 32 GPUs is 3.5 s
    15.47
    """
    cfg, B, s = m.model, m.global_batch, m.seq
    l, h, V = cfg.layers, cfg.hidden, cfg.vocab
    if m.flops == "megatron-core":
        groups = cfg.kv_width / cfg.attention_width  # num_query_groups / num_attention_heads
        ffn, k = (cfg.expert_ffn or cfg.ffn, cfg.top_k) if cfg.experts > 1 else (cfg.ffn, 1)
        gated = ffn_matrices(cfg) / 2  # SwiGLU's third matrix: 3/2
        attention = (1 + groups + s / h) * cfg.attention_width / h
        return 12.0 * B * s * l * h * h * (attention + ffn / h * k * gated + V / (2 * l * h))
    return 96.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))


def throughput(m: Measurement, iteration_time_s: float) -> float:
    """The measurement's metric for a run of ``iteration_time_s`` per iteration."""
    B, s, G, T = m.global_batch, m.seq, m.gpus, iteration_time_s
    return {
        "tflops_per_gpu": publisher_flops(m) / T / G / 1e12,
        "samples_per_s": B / T,
        "tokens_per_s": B * s / T,
        "tokens_per_s_per_gpu": B * s / T / G,
        "iteration_time_s": T,
        # model FLOPs utilization: the publisher's FLOPs over the GPUs' peak (the catalog's
        # training_tflops: the dense FP16/BF16 tensor rate the run trains against), a fraction
        "mfu": publisher_flops(m) / T / G / m.island.gpu.training_flops,
    }[m.metric]


def layout_text(lay: GivenLayout) -> str:
    """A published layout in one short line (``tp8 pp8 dp12 b1 full zero1``)."""
    b = lay.microbatch or "?"
    vpp = f" vpp{lay.vpp}" if lay.vpp > 1 else (" vpp?" if lay.vpp == 0 else "")
    more = (f" ep{lay.ep}" + ("fs" if lay.fsep else "") if lay.ep > 1 else "") + (f" cp{lay.cp}" if lay.cp > 1 else "")
    return f"tp{lay.tp} pp{lay.pp}{vpp} dp{lay.dp}{more} b{b} {lay.recompute} zero{lay.zero}" + (" offload" if lay.offload else "")


def select_only(measurements: list[Measurement], only: str | None, source: object) -> list[str] | None:
    """The ids of a comma-separated ``only`` text, each checked against ``measurements``
    (read from ``source``); None: every row.

    Raises
    ------
    InputError
        ``field="only"``: an unknown id (with some known ones) or no id at all.
    """
    if only is None:
        return None
    ids = [i.strip() for i in only.split(",") if i.strip()]
    known = {m.id for m in measurements}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise InputError(f"only {only}: no measurement {', '.join(map(repr, unknown))} in {source} "
                         f"(its ids: {', '.join(sorted(known)[:5])}, ...)", field="only")
    if not ids:
        raise InputError(f"only {only}: give comma-separated measurement ids", field="only")
    return ids
