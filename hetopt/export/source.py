"""Read a hetopt result document (``hetopt plan --json``, ``hetopt solve --json``) for export.

The exporters never see the raw JSON: this module checks it once and turns it into two small
views, :class:`PlanView` (the planner's composed pipeline, its stages grouped by island) and
:class:`AllocationView` (an allocation result: every GPU's batch, micro-batches and state
share). Anything else, or a result without a solution, is an :class:`~hetopt.errors.InputError`
naming the file and what to give instead.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hetopt.errors import InputError
from hetopt.costmodel import hardware_precision
from hetopt.costmodel.running import Running
from hetopt.costmodel.stage_shape import StageGpus
from hetopt.hardware import load_gpus
from hetopt.runtimes import Job, Shape

#: Statuses whose result carries a solution to export (``hetopt.result.Status`` values).
SOLVED = ("OPTIMAL", "FEASIBLE")
#: Keys every ``hetopt plan --json`` document has (``hetopt.planner.answer.HeteroPlan``).
PLAN_KEYS = ("cluster", "model", "global_batch", "microbatch_size", "microbatches", "seq", "status", "islands", "stages")
#: The planner's layout text of one island's partial plan, ``tp2 pp3 dp2 selective zero1 sp``
#: (``hetopt.planner.parallelizer.protocol.PartialPlan.layout``), with ``vpp<n>`` after ``pp`` for an
#: interleaved plan (``tp8 pp4 vpp2 dp32 selective zero1 sp``) and, at the end, the expert,
#: context parallelism and offloading suffixes ``ep<e>`` (``ep<e> fsep``: fully sharded),
#: ``cp<c>`` and ``offload`` when the plan uses them (``tp2 pp1 dp4 none zero1 sp ep4 fsep cp2 offload``).
_LAYOUT = re.compile(r"^tp(\d+) pp(\d+)(?: vpp(\d+))? dp(\d+) (none|selective|full) zero([0-3])( sp)?"
                     r"(?: ep(\d+)( fsep)?)?(?: cp(\d+))?( offload)?$")
#: The planner's FSDP alternative's detail, ``FSDP, per-GPU batch A100 4×8; H100 1×4, 7×4
#: (batch×GPUs, total 64)`` (``hetopt.planner.alternatives.baselines.fsdp_batches``).
_FSDP_DETAIL = re.compile(r"^FSDP, per-GPU batch (.+) \(batch×GPUs, total (\d+)\)$")


@dataclass(frozen=True)
class Layout(StageGpus):
    """One island's Megatron-style layout: t, its stages p, d, virtual stages, recomputation, ZeRO, SP;
    the experts' parallel degree e (``fsep``: fully sharded EP), the context-parallel degree c and
    activation offloading. A stage has t·c·d GPUs (``hetopt.costmodel.stage_shape.StageGpus``);
    its micro-batch is split over the d replicas, and c splits each sample's sequence."""

    tp: int
    pp: int
    dp: int
    vpp: int
    recompute: str
    zero: int
    sequence_parallel: bool
    ep: int = 1
    fsep: bool = False
    cp: int = 1
    offload: bool = False


@dataclass(frozen=True)
class Block:
    """The consecutive stages of the pipeline on one island."""

    island: str
    gpu: str
    layout: Layout
    first_stage: int
    stage_layers: tuple[int, ...]
    island_gpus: int  # GPUs the island has (the plan may use fewer)
    island_nodes: int
    members: tuple[str, ...] = ()  # the island's nodes by name, as the cluster file names them

    @property
    def gpus_per_node(self) -> int:
        """GPUs of one of the island's nodes (0 when the document does not say)."""
        return self.island_gpus // self.island_nodes if self.island_nodes else 0


@dataclass(frozen=True)
class PlanView:
    """The parts of a plan an exporter needs; layers and batches in the plan's own units."""

    cluster: str
    model: str
    global_batch: int
    microbatch_size: int  # m: samples of one micro-batch over all replicas of a stage
    microbatches: int  # M = B / m
    seq: int
    status: str
    blocks: tuple[Block, ...]
    fsdp_detail: str | None  # the cephalo-fsdp alternative's detail, when it found a plan
    #: how the plan runs, every setting it was priced under (its ``running``; a document of an
    #: earlier version: its flat keys, the defaults for those it lacks), the precision set (a
    #: document without one: the hardware's, bf16 unless a GPU lacks BF16)
    running: Running = Running(precision="bf16")
    #: the runtime the plan was searched for (``hetopt plan --target``), or None
    target: str | None = None
    #: what the plan priced, for the export's README: its iteration time and each stage's peak memory
    iteration_time_s: float | None = None
    stage_memory_gib: tuple[float, ...] = ()

    @property
    def precision(self) -> str:
        """The mixed precision the plan is priced in (``running.precision``)."""
        return self.running.precision or "bf16"

    @property
    def stage_layers(self) -> tuple[int, ...]:
        """Layers of every stage, front to back."""
        return tuple(n for b in self.blocks for n in b.stage_layers)

    @property
    def layers(self) -> int:
        """Transformer layers of the model (the stages' sum)."""
        return sum(self.stage_layers)


@dataclass(frozen=True)
class GpuShare:
    """One GPU of an allocation: its type, batch = micro-batch size × count, state share."""

    type: str
    batch: int
    microbatch_size: int | None
    microbatches: int | None
    state_share: float | None


@dataclass(frozen=True)
class AllocationView:
    """An FSDP allocation: every GPU in rank order; ``exact`` False when only batches are known."""

    gpus: tuple[GpuShare, ...]
    global_batch: int
    status: str
    exact: bool
    origin: str  # "allocation result" or "plan's cephalo-fsdp alternative"
    model: str | None = None
    seq: int | None = None
    #: From a plan: what its composed pipeline uses beyond TP/PP/DP, per island, e.g.
    #: ``("a100-0+1 ep4 cp4",)`` (the FSDP alternative exported instead uses none of it).
    breadth: tuple[str, ...] = ()


def breadth_text(lay: Layout) -> str:
    """The expert, context parallelism and offloading part of a layout ('' without them).

    Examples
    --------
    >>> breadth_text(Layout(1, 1, 2, 1, "none", 1, False, ep=4, fsep=True, cp=2, offload=True))
    'ep4 fsep cp2 offload'
    >>> breadth_text(Layout(1, 1, 2, 1, "none", 1, False))
    ''
    """
    parts = [f"ep{lay.ep}" + (" fsep" if lay.fsep else "")] if lay.ep > 1 else []
    parts += [f"cp{lay.cp}"] if lay.cp > 1 else []
    parts += ["offload"] if lay.offload else []
    return " ".join(parts)


def read_document(path: str | Path) -> dict[str, Any]:
    """The JSON object in ``path``.

    Raises
    ------
    InputError
        A missing or unreadable file, text that is not JSON, or JSON that is not an object.

    Examples
    --------
    >>> read_document("no-such-file.json")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: no-such-file.json: no such file (give the JSON of `hetopt plan --json` or `hetopt solve --json`)
    """
    from hetopt.files import read_json

    doc = read_json(path, what="a result", hint="give the JSON of `hetopt plan --json` or `hetopt solve --json`")
    if not isinstance(doc, dict):
        raise InputError(f"{path}: not a hetopt result (a JSON {type(doc).__name__}, not an object); "
                         "give the output of `hetopt plan --json` or `hetopt solve --json`")
    return doc


def kind(doc: dict[str, Any], source: str) -> str:
    """``"plan"`` or the solve result's family (``allocation``, ``pipeline``, ``islands``, ...).

    Raises
    ------
    InputError
        Neither a plan nor a single solve result (e.g. a crosscheck or bench document).

    Examples
    --------
    >>> kind({"problem": "allocation", "status": "OPTIMAL", "solution": {}}, "r.json")
    'allocation'
    """
    if all(k in doc for k in PLAN_KEYS):
        return "plan"
    if isinstance(doc.get("problem"), str) and "status" in doc and "solution" in doc:
        return doc["problem"]
    if "results" in doc and "agree" in doc:
        raise InputError(f"{source}: a crosscheck result, not one answer; export the JSON of "
                         "`hetopt plan --json` or `hetopt solve FILE --method M --json`")
    if "stages" in doc and "problem" not in doc:  # a plan with keys taken out
        missing = [k for k in PLAN_KEYS if k not in doc]
        raise InputError(f"{source}: a plan without {', '.join(map(repr, missing))} (the file was edited; "
                         "re-run `hetopt plan --json`)")
    raise InputError(f"{source}: not a hetopt result (no 'stages' of a plan, no 'problem' and 'solution' of a solve); "
                     "give the output of `hetopt plan --json` or `hetopt solve --json`")


def _need(doc: dict, key: str, typ: type | tuple[type, ...], source: str, where: str = "") -> Any:
    value = doc.get(key)
    if not isinstance(value, typ) or isinstance(value, bool):  # JSON true is no count
        raise InputError(f"{source}: {where}{key}: missing or not a {getattr(typ, '__name__', typ)} "
                         "(the file was edited or is not a hetopt result; re-run the command that wrote it)")
    return value


def check_solved(doc: dict[str, Any], source: str) -> str:
    """The status, when it carries a solution.

    Raises
    ------
    InputError
        INFEASIBLE, TIME_LIMIT, DECLINED, ERROR: nothing to export, with the result's reason.
    """
    status = _need(doc, "status", str, source)
    if status not in SOLVED:
        reason = doc.get("reason") or "no reason given"
        replicas = doc.get("replicas")
        if isinstance(replicas, dict) and replicas.get("status") in SOLVED:
            # `plan --replicas` found replicas but no composed pipeline: say why export stops
            raise InputError(f"{source}: the composed pipeline has no solution (status {status}: {reason}); "
                             f"its data-parallel replicas plan ({replicas['status']}) runs one job per replica, "
                             "which export does not write yet: re-plan with a longer --time-limit for a "
                             "composed pipeline to export")
        raise InputError(f"{source}: the result has no solution to export (status {status}: {reason}); "
                         "re-plan (e.g. a longer --time-limit, a smaller batch or more GPUs)")
    return status


def parse_layout(text: str, source: str, where: str) -> Layout:
    """A stage's ``layout`` text as :class:`Layout`.

    Raises
    ------
    InputError
        Text that is not the planner's layout form.

    Examples
    --------
    >>> parse_layout("tp2 pp3 dp2 selective zero1 sp", "p.json", "stages[0].")
    Layout(tp=2, pp=3, dp=2, vpp=1, recompute='selective', zero=1, sequence_parallel=True, ep=1, fsep=False, cp=1, offload=False)
    >>> parse_layout("tp8 pp4 vpp2 dp32 none zero1 sp", "p.json", "stages[0].").vpp
    2
    >>> lay = parse_layout("tp2 pp1 dp4 none zero1 sp ep4 fsep cp2 offload", "p.json", "stages[0].")
    >>> lay.ep, lay.fsep, lay.cp, lay.offload, lay.stage_gpus
    (4, True, 2, True, 16)
    """
    m = _LAYOUT.match(text) if isinstance(text, str) else None
    if m is None:
        raise InputError(f"{source}: {where}layout: {text!r} is not a planner layout "
                         "(expected e.g. 'tp2 pp4 dp1 none zero1'; re-run `hetopt plan --json`)")
    tp, pp, vpp, dp, rc, zero, sp, ep, fsep, cp, offload = m.groups()
    counts = {"tp": int(tp), "pp": int(pp), "vpp": int(vpp or 1), "dp": int(dp), "ep": int(ep or 1), "cp": int(cp or 1)}
    zeros = [k for k, v in counts.items() if v < 1]
    if zeros:
        raise InputError(f"{source}: {where}layout: {text!r} has {zeros[0]}{counts[zeros[0]]} "
                         "(every degree is at least 1; re-run `hetopt plan --json`)")
    return Layout(counts["tp"], counts["pp"], counts["dp"], counts["vpp"], rc, int(zero), bool(sp),
                  counts["ep"], bool(fsep), counts["cp"], bool(offload))


#: The stage row's own fields beside its layout text (``hetopt.planner.answer.StageRow``): they
#: must say what the text says.
_ROW_FIELDS = {"ep": lambda lay: lay.ep, "fsep": lambda lay: lay.fsep, "cp": lambda lay: lay.cp,
               "offload": lambda lay: lay.offload}


def _check_row(st: dict, lay: Layout, source: str, where: str) -> None:
    for key, get in _ROW_FIELDS.items():
        if key in st and st[key] != get(lay):
            raise InputError(f"{source}: {where}{key}: {st[key]!r} disagrees with the layout {st.get('layout')!r} "
                             "(the file was edited; re-run `hetopt plan --json`)")


def plan_view(doc: dict[str, Any], source: str) -> PlanView:
    """The plan's stages grouped by island, checked for the counts that must agree.

    Raises
    ------
    InputError
        A plan without a solution, or one whose stages, islands and batches disagree.
    """
    status = check_solved(doc, source)
    global_batch = _need(doc, "global_batch", int, source)
    m = _need(doc, "microbatch_size", int, source)
    big_m = _need(doc, "microbatches", int, source)
    if global_batch < 1 or m < 1 or m * big_m != global_batch:
        raise InputError(f"{source}: microbatch_size {m} × microbatches {big_m} is not global_batch {global_batch} "
                         "(re-run `hetopt plan --json`)")
    islands = {i.get("name"): i for i in _need(doc, "islands", list, source) if isinstance(i, dict)}
    stages = _need(doc, "stages", list, source)
    if not stages:
        raise InputError(f"{source}: stages: empty although status is {status} (re-run `hetopt plan --json`)")
    blocks: list[Block] = []
    current: list[tuple[int, dict, Layout]] = []

    def close() -> None:
        k, first, lay = current[0]
        if first["island"] not in islands:
            raise InputError(f"{source}: stages[{k}].island: {first['island']!r} is not one of the plan's islands "
                             "(re-run `hetopt plan --json`)")
        info = islands[first["island"]]
        blocks.append(Block(first["island"], str(first.get("gpu", "?")), lay, k,
                            tuple(s["layers"] for _, s, _ in current),
                            int(info.get("gpus", 0) or 0), int(info.get("nodes", 0) or 0),
                            tuple(str(n) for n in info.get("members") or ())))

    next_layer = 0
    for k, st in enumerate(stages):
        where = f"stages[{k}]."
        if not isinstance(st, dict):
            raise InputError(f"{source}: stages[{k}]: not an object (re-run `hetopt plan --json`)")
        _need(st, "island", str, source, where)
        layers = _need(st, "layers", int, source, where)
        if _need(st, "first_layer", int, source, where) != next_layer or layers < 1:
            raise InputError(f"{source}: {where}first_layer: stages must tile the layers front to back "
                             f"(expected {next_layer}); re-run `hetopt plan --json`")
        next_layer += layers
        lay = parse_layout(st.get("layout"), source, where)
        _check_row(st, lay, source, where)
        if current and (current[-1][1]["island"] != st["island"] or current[-1][2] != lay):
            close()
            current = []
        current.append((k, st, lay))
    close()
    for b in blocks:
        if len(b.stage_layers) != b.layout.pp:
            raise InputError(f"{source}: stages: island {b.island} holds {len(b.stage_layers)} stages but its layout "
                             f"says pp{b.layout.pp} (re-run `hetopt plan --json`)")
        if m % b.layout.dp:
            raise InputError(f"{source}: microbatch_size {m} is not a multiple of dp{b.layout.dp} on island {b.island} "
                             "(re-run `hetopt plan --json`)")
    fsdp = next((a for a in doc.get("alternatives") or [] if isinstance(a, dict) and a.get("name") == "cephalo-fsdp"), None)
    detail = fsdp.get("detail") if fsdp and fsdp.get("status") in SOLVED else None
    return PlanView(str(doc["cluster"]), str(doc["model"]), global_batch, m, big_m, _need(doc, "seq", int, source),
                    status, tuple(blocks), detail if isinstance(detail, str) else None, _running(doc, blocks, source),
                    doc.get("target") if isinstance(doc.get("target"), str) else None,
                    _number(doc.get("iteration_time_s")),
                    tuple(m for m in (_number(st.get("memory_gib")) for st in stages) if m is not None))


def _number(value: Any) -> float | None:
    """A finite JSON number as float, else None (a figure the export only reports)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def shapes(plan: PlanView) -> list[tuple[str, Shape]]:
    """Every island's part of the plan as the runtimes' rules see it (``hetopt.runtimes``), front first.

    Examples
    --------
    >>> lay = Layout(2, 2, 1, 1, "none", 1, True)
    >>> plan = PlanView("c", "m", 8, 1, 8, 128, "OPTIMAL", (Block("a", "A100-SXM4-80GB", lay, 0, (3, 2), 4, 1),), None)
    >>> [(name, s.tp, s.stage_layers, s.whole_model, s.bf16) for name, s in shapes(plan)]
    [('a', 2, (3, 2), True, True)]
    """
    catalog = load_gpus()
    out = []
    for b in plan.blocks:
        lay = b.layout
        gpu = catalog.get(b.gpu)
        out.append((b.island, Shape(tp=lay.tp, pp=lay.pp, dp=lay.dp, vpp=lay.vpp, recompute=lay.recompute, zero=lay.zero,
                                    sequence_parallel=lay.sequence_parallel, stage_layers=b.stage_layers,
                                    whole_model=len(plan.blocks) == 1, bf16=gpu is not None and gpu.bf16, ep=lay.ep,
                                    fsep=lay.fsep, cp=lay.cp, offload=lay.offload)))
    return out


def job_of(plan: PlanView, model: Any = None) -> Job:
    """The job-wide facts of a plan for the runtimes' rules (``model``: its ModelConfig, if known)."""
    return Job(precision=plan.precision, seq=plan.seq, experts=None if model is None else model.experts,
               tied_embeddings=None if model is None else model.tied_embeddings)


#: The flat keys of plans written before ``running`` (read for one release): each by the file
#: key of the setting it stated.
OLD_RUNNING_KEYS = {"precision": "precision", "overlap": "overlap", "grad_reduce_fp32": "grad_reduce",
                    "handover": "handover", "host": "host"}


def _running(doc: dict[str, Any], blocks: list[Block], source: str) -> Running:
    """How the plan runs: its ``running`` object; a document of an earlier version, its flat keys
    (``precision``, ``overlap``, ``grad_reduce_fp32``, ``handover``, ``host``), the defaults for
    the rest; without a precision, the hardware's."""
    if "running" in doc and not isinstance(doc["running"], dict):
        raise InputError(f"{source}: running: must be an object (re-run `hetopt plan --json`)")
    if "running" in doc:
        stated, where = doc["running"], f"{source}: running"
    else:
        stated = {new: doc[key] for key, new in OLD_RUNNING_KEYS.items() if doc.get(key) not in (None, "")}
        if isinstance(stated.get("grad_reduce"), bool):
            stated["grad_reduce"] = "fp32" if stated["grad_reduce"] else "half"
        where = source
    try:
        running = Running.from_file(stated, where=where)
    except InputError as exc:
        raise InputError(f"{exc} (re-run `hetopt plan --json`)", field=exc.field) from None
    if running.precision is None:
        catalog = load_gpus()
        running = replace(running, precision=hardware_precision([catalog[b.gpu] for b in blocks if b.gpu in catalog]))
    return running


def allocation_view(doc: dict[str, Any], source: str) -> AllocationView:
    """Every GPU of an allocation result, in the result's (rank) order.

    Raises
    ------
    InputError
        No solution, or GPUs whose batch is not micro-batch size × count.
    """
    status = check_solved(doc, source)
    sol = _need(doc, "solution", dict, source)
    rows = _need(sol, "gpus", list, source, "solution.")
    gpus = []
    for i, g in enumerate(rows):
        where = f"solution.gpus[{i}]."
        if not isinstance(g, dict):
            raise InputError(f"{source}: {where[:-1]}: not an object (re-run `hetopt solve --json`)")
        size, count, batch = (_need(g, k, int, source, where) for k in ("microbatch_size", "microbatches", "batch"))
        if size * count != batch:
            raise InputError(f"{source}: {where}batch: {batch} is not microbatch_size {size} × microbatches {count} "
                             "(re-run `hetopt solve --json`)")
        share = _need(g, "state_share", (int, float), source, where)
        gpus.append(GpuShare(str(g.get("type", "?")), batch, size, count, float(share)))
    total = sum(g.batch for g in gpus)
    return AllocationView(tuple(gpus), total, status, True, "allocation result")


def fsdp_from_plan(plan: PlanView, source: str) -> AllocationView:
    """The per-GPU batches of the plan's ``cephalo-fsdp`` alternative (batches only).

    Raises
    ------
    InputError
        The plan has no solved FSDP alternative (planned with ``--no-alternatives``, or
        the alternative found nothing), or its detail is not in the planner's form.

    Examples
    --------
    >>> v = fsdp_from_plan(PlanView("c", "m", 12, 1, 12, 8, "OPTIMAL", (),
    ...                             "FSDP, per-GPU batch V100 1×2, 5×1; A100 5×1 (batch×GPUs, total 12)"), "p.json")
    >>> [(g.type, g.batch) for g in v.gpus]
    [('V100', 1), ('V100', 1), ('V100', 5), ('A100', 5)]
    """
    if plan.fsdp_detail is None:
        raise InputError(f"{source}: the plan has no solved cephalo-fsdp alternative to export to Cephalo "
                         "(plan without --no-alternatives, or export an allocation result of `hetopt solve --json`)")
    m = _FSDP_DETAIL.match(plan.fsdp_detail)
    gpus: list[GpuShare] = []
    try:
        if m is None:
            raise ValueError
        for group in m.group(1).split("; "):
            gpu, _, rest = group.partition(" ")  # catalog GPU names have no spaces
            for part in rest.split(", "):
                b, n = part.split("×")
                gpus.extend(GpuShare(gpu, int(b), None, None, None) for _ in range(int(n)))
        total = int(m.group(2))
    except ValueError:
        raise InputError(f"{source}: alternatives: the cephalo-fsdp detail {plan.fsdp_detail!r} is not in the planner's "
                         "form (re-run `hetopt plan --json`)") from None
    if sum(g.batch for g in gpus) != total:
        raise InputError(f"{source}: alternatives: the cephalo-fsdp batches add up to {sum(g.batch for g in gpus)}, "
                         f"not {total} (re-run `hetopt plan --json`)")
    breadth = tuple(f"{b.island} {breadth_text(b.layout)}" for b in plan.blocks if breadth_text(b.layout))
    return AllocationView(tuple(gpus), total, plan.status, False, "plan's cephalo-fsdp alternative", plan.model, plan.seq,
                          breadth)


def share_text(share: float) -> str:
    """A state share as a short decimal for notes and gap lines.

    Examples
    --------
    >>> share_text(5 / 12)
    '0.4167'
    """
    return f"{share:.4g}" if math.isfinite(share) else str(share)
