"""A layout the user gives (``hetopt plan --layout "tp=8 pp=8 dp=12 mbs=1 recompute=full zero=1"``), priced.

Users hold an existing configuration; pricing it with the same cost model as the plan tells
them what it costs and how much faster the plan is. The published layouts of
``hetopt validate`` are priced by the same function.

The layout is Megatron-style on one homogeneous island: tensor parallelism t inside a node,
p pipeline stages with the layers split evenly (the extra layers at the back, as
``builtin.even_split``), d data-parallel replicas each taking ``mbs`` samples per
micro-batch, so a micro-batch is m = mbs·d samples and the iteration runs B / m of them.

Examples
--------
>>> parse_layout("tp=2 pp=1 dp=2 mbs=1 recompute=full")
GivenLayout(tp=2, pp=1, dp=2, microbatch=1, recompute='full', zero=0, vpp=1, ep=1, fsep=False, cp=1, offload=False, split=None, running=Running(overlap=True, flash=True, sequence_parallel=True, tp_overlap=False, zero3_per_tensor=False, precision=None, tf32='off', grad_fp32=False, handover='split', host='torch2'))
>>> parse_layout("tp=1 pp=3 dp=1 split=4+4+3").split
(4, 4, 3)
>>> parse_layout("tp=8 pp=1 dp=4 sp=no").text()
'tp=8 pp=1 dp=4 mbs=? recompute=none zero=0 sp=no'
>>> parse_layout("tp=2 pp=2 dp=1 vpp=2").vpp
2
>>> parse_layout("tp=1 pp=2 dp=4 ep=4 fsep=1 cp=2 offload=yes").text()
'tp=1 pp=2 dp=4 mbs=? recompute=none zero=0 ep=4 fsep=1 cp=2 offload=1'
>>> parse_layout("tp=1 pp=1 dp=64 zero=3 zero3gather=tensor").running.zero3_per_tensor
True
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from hetopt import costmodel as cm
from hetopt.costmodel import running as run
from hetopt.costmodel.running import Running
from hetopt.errors import InputError
from hetopt.parallelism import context as ctx
from hetopt.parallelism import expert as ex
from hetopt.parallelism import offload as off
from hetopt.planner.builtin import BuiltinParallelizer, Layout, even_split, interleave_degrees
from hetopt.planner.parallelizer import IslandSpec, PartialPlan, Slice
from hetopt.units import GIB
from hetopt.workload import ModelConfig

#: The layout keys of a ``--layout`` string, as Megatron-LM's arguments name the same things:
#: tensor / pipeline / data parallel sizes, micro-batch size per replica, recomputation,
#: ZeRO stage (Megatron's distributed optimizer is stage 1) and virtual pipeline stages;
#: expert-parallel size (``fsep``: fully sharded), context-parallel size, activation offloading,
#: the layers of each stage. How the framework runs it (``overlap``, ``flash``, ...) is the rest
#: of :data:`LAYOUT_KEYS`: :data:`hetopt.costmodel.running.KEYS`, one table for every reader.
SHAPE_KEYS = ("tp", "pp", "dp", "mbs", "recompute", "zero", "vpp", "ep", "fsep", "cp", "offload", "split")
#: Every key of a ``--layout`` string.
LAYOUT_KEYS = SHAPE_KEYS + run.TEXT_KEYS
#: Spellings of a yes/no value (``offload``, ``fsep``, and the running settings' yes/no keys).
SWITCHES = run.YES_NO


@dataclass(frozen=True)
class GivenLayout:
    """A Megatron-style layout: t, p, d (0: not stated, derived from the GPUs), the micro-batch per
    replica (0: not stated), recomputation, ZeRO; and how the framework runs it (``running``)."""

    tp: int
    pp: int
    dp: int
    microbatch: int = 0
    recompute: str = "none"
    zero: int = 0
    vpp: int = 1  # virtual pipeline stages per GPU (Megatron's interleaved 1F1B); 0: interleaved, degree not stated
    ep: int = 1
    fsep: bool = False
    cp: int = 1
    offload: bool = False
    #: layers of each stage (``split=4+4+4+3``, as Megatron-LM's uneven pipeline layouts run);
    #: None: even, the extra layers at the back (``builtin.even_split``)
    split: tuple[int, ...] | None = None
    #: how the framework runs it (precision None: the hardware's, set where the layout is priced)
    running: Running = Running()

    def text(self) -> str:
        """The layout in ``--layout`` form (EP, CP and offloading only when used; the running
        settings that differ from a current runtime's, bf16 left unsaid)."""
        mbs = f"mbs={self.microbatch}" if self.microbatch else "mbs=?"
        shown = self.running if self.running.precision != cm.DEFAULT_PRECISION else replace(self.running, precision=None)
        tail = f" {shown.text()}" if shown.text() else ""
        vpp = f" vpp={self.vpp}" if self.vpp > 1 else ""
        more = (f" ep={self.ep}" + (" fsep=1" if self.fsep else "")) if self.ep > 1 else ""
        more += f" cp={self.cp}" if self.cp > 1 else ""
        more += " offload=1" if self.offload else ""
        more += f" split={'+'.join(map(str, self.split))}" if self.split else ""
        return f"tp={self.tp} pp={self.pp}{vpp} dp={self.dp} {mbs} recompute={self.recompute} zero={self.zero}{tail}{more}"

    def builtin_layout(self, layers: int) -> Layout:
        """The built-in parallelizer's layout of ``layers`` layers: split as given, or evenly over the pp stages.

        Raises
        ------
        InputError
            A given split whose stages are not pp or whose layers are not ``layers``.
        """
        if self.split is not None and (len(self.split) != self.pp or sum(self.split) != layers):
            raise layout_error(f"layout split={'+'.join(map(str, self.split))}: must be pp={self.pp} stages of "
                               f"{layers} layers in all")
        return Layout(self.tp, self.pp, self.dp, self.split or even_split(layers, self.pp), self.recompute, self.zero, self.vpp,
                      ep=self.ep, fsep=self.fsep, cp=self.cp, offload=self.offload)

    def runtime(self, par: BuiltinParallelizer) -> BuiltinParallelizer:
        """``par`` pricing the framework this layout ran on (:attr:`running`)."""
        return par.run_as(self.running)

    def with_running(self, **changes) -> GivenLayout:
        """This layout run with some settings changed (fields of :class:`Running`).

        >>> parse_layout("tp=2 pp=1 dp=2").with_running(flash=False).text()
        'tp=2 pp=1 dp=2 mbs=? recompute=none zero=0 flash=no'
        """
        return replace(self, running=replace(self.running, **changes))


@dataclass(frozen=True)
class PricedLayout:
    """A given layout under the cost model: its iteration time, or why it does not fit."""

    layout: GivenLayout
    plan: PartialPlan | None
    reason: str = ""
    #: without a plan that fits: the fastest one priced over the GPU's memory, its time as if
    #: the memory were there (a published run that ran fits; its layout is still priced)
    over_memory: PartialPlan | None = None

    @property
    def iteration_time_s(self) -> float | None:
        """1F1B iteration time, Σ t + (M − 1) · max t; None when it does not fit."""
        return None if self.plan is None else self.plan.iteration_time_s

    def to_dict(self) -> dict:
        """Plain data for JSON."""
        out = {"layout": self.layout.text(), "iteration_time_s": self.iteration_time_s, "fits": self.plan is not None,
               "reason": self.reason}
        if self.plan is None and self.over_memory is not None:
            # not a plan: what the layout would take if the GPU had the memory the model says it needs
            out["over_memory_iteration_time_s"] = self.over_memory.iteration_time_s
        if self.plan is not None:
            out["microbatch"] = self.plan.microbatch_size // self.plan.dp
            out["peak_memory_gib"] = self.plan.peak_bytes / GIB
            out["gpus"] = self.plan.gpus
        return out


def key_values(parts: list[str], keys: tuple[str, ...], option: str, text: str) -> dict[str, str]:
    """``key=value`` words of an option's string (``layout``, ``runtime``: the field the
    messages name), each key once.

    Raises
    ------
    InputError
        Naming the option and the word: not key=value, an unknown key (with the known ones),
        a key given twice.

    Examples
    --------
    >>> key_values(["tp=8", "pp=2"], LAYOUT_KEYS, "layout", "tp=8 pp=2")
    {'tp': '8', 'pp': '2'}
    """
    values: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not value:
            raise InputError(f"{option} {part}: expected key=value (keys: {', '.join(keys)})", field=option)
        if key not in keys:
            raise InputError(f"{option} {part}: unknown key {key!r} (keys: {', '.join(keys)})", field=option)
        if key in values:
            raise InputError(f"{option} {part}: {key} is given twice (in {text!r})", field=option)
        values[key] = value
    return values


def _whole(text: str, key: str, value: str) -> int:
    try:
        if not value.isascii():  # int() reads any script's digits ("١" is 1); a layout is written in ASCII
            raise ValueError(value)
        return int(value)
    except ValueError:
        raise layout_error(f"layout {key}={value}: must be a whole number (in {text!r})") from None


def parse_layout(text: str) -> GivenLayout:
    """Read ``"tp=8 pp=8 dp=12 mbs=1 recompute=full zero=1"`` (any order; tp and pp required).

    ``dp`` left out is 0, derived where the layout is priced as Megatron-LM derives it: the
    GPUs over tp·pp·cp (:func:`derive_dp`).

    Raises
    ------
    InputError
        An unknown key or a value out of range, naming it.
    """
    values = key_values(text.replace(",", " ").split(), LAYOUT_KEYS, "layout", text)
    missing = [k for k in ("tp", "pp") if k not in values]
    if missing:
        raise layout_error(f"layout {text!r}: give {', '.join(missing)} (e.g. \"tp=8 pp=4 dp=2 mbs=1\"; dp may be left out)")
    sizes = {k: _whole(text, k, values[k]) for k in ("tp", "pp", "dp", "mbs", "zero", "vpp", "ep", "cp") if k in values}
    switches = {}
    for key in ("fsep", "offload"):
        if key in values:
            if values[key].lower() not in SWITCHES:
                raise layout_error(f"layout {key}={values[key]}: must be 1 or 0 (yes/no, true/false)")
            switches[key] = SWITCHES[values[key].lower()]
    for key in ("tp", "pp", "dp", "mbs", "ep", "cp"):
        if key in sizes and sizes[key] < 1:
            raise layout_error(f"layout {key}={sizes[key]}: must be >= 1")
    if sizes.get("vpp", 1) < 1:
        raise layout_error(f"layout vpp={sizes['vpp']}: must be >= 1")
    zero = sizes.get("zero", 0)
    if zero not in cm.ZERO_STAGES:
        raise layout_error(f"layout zero={zero}: must be one of {', '.join(map(str, cm.ZERO_STAGES))}")
    recompute = values.get("recompute", "none")
    if recompute not in cm.RECOMPUTE_MODES:
        raise layout_error(f"layout recompute={recompute}: must be one of {', '.join(cm.RECOMPUTE_MODES)}")
    running = Running().with_words(values, "layout")
    split = None
    if "split" in values:
        parts = values["split"].split("+")
        if not all(p.isascii() and p.isdigit() and int(p) >= 1 for p in parts):
            raise layout_error(f"layout split={values['split']}: give each stage's layers joined by +, e.g. split=4+4+3")
        split = tuple(int(p) for p in parts)
        if len(split) != sizes["pp"]:
            raise layout_error(f"layout split={values['split']}: {len(split)} stages, but pp={sizes['pp']}")
    layout = GivenLayout(sizes["tp"], sizes["pp"], sizes.get("dp", 0), sizes.get("mbs", 0), recompute, zero,
                         vpp=sizes.get("vpp", 1), ep=sizes.get("ep", 1), fsep=switches.get("fsep", False),
                         cp=sizes.get("cp", 1), offload=switches.get("offload", False), split=split, running=running)
    clash = contradiction(layout, gather_given="zero3gather" in values)
    if clash:
        key, reason = clash
        raise layout_error(f"layout {key}={values[key]}: {reason}")
    return layout


def contradiction(layout: GivenLayout, *, gather_given: bool) -> tuple[str, str] | None:
    """The first key of a given layout that contradicts the others, and why (None: none does).

    The one rule for ``--layout`` and a published row's layout (``hetopt.planner.validate``),
    each naming the key in its own spelling: ``fsep`` needs an EP degree, and a ZeRO-3 gather
    mode (``gather_given``: the key was written) needs ZeRO-3. The key is the ``--layout`` one.

    Examples
    --------
    >>> contradiction(parse_layout("tp=1 pp=1 dp=4 zero=3"), gather_given=True) is None
    True
    >>> contradiction(parse_layout("tp=1 pp=1 dp=4 zero=1"), gather_given=True)[1]
    'only ZeRO-3 gathers parameters (give zero=3, got zero=1)'
    """
    if layout.fsep and layout.ep == 1:
        return "fsep", "fully sharded EP needs an expert-parallel degree (give ep > 1)"
    if gather_given and layout.zero != 3:
        return "zero3gather", f"only ZeRO-3 gathers parameters (give zero=3, got zero={layout.zero})"
    return None


def layout_error(message: str) -> InputError:
    """A bad ``layout`` (the request's field; ``hetopt plan`` names its flag)."""
    return InputError(message, field="layout")


class UnsupportedLayout(InputError):
    """A layout that can run but that this cost model does not price: a TP group across nodes,
    a CP ring that leaves a node or runs without FlashAttention, interleaving on a split the
    search does not make, offloading on a GPU without a host-link figure. ``hetopt plan
    --layout`` exits 2 with it like any bad layout; ``validate`` lists such a published row
    as not priced instead of refusing the whole file (the run ran as published)."""

    def __init__(self, message: str = "", *, field: str | None = "layout") -> None:
        super().__init__(message, field=field)


def derive_dp(layout: GivenLayout, island: IslandSpec) -> GivenLayout:
    """``layout`` with dp derived from the island's GPUs when it was left out, as Megatron-LM
    derives its data-parallel size: world size / (tp · pp · cp).

    >>> from hetopt.planner.parallelizer import IslandSpec
    >>> from hetopt.hardware import load_gpus
    >>> island = IslandSpec("a100", load_gpus()["A100-SXM4-80GB"], 4, 8, inter_bandwidth=25e9)
    >>> derive_dp(parse_layout("tp=8 pp=1 mbs=1"), island).dp
    4
    >>> derive_dp(parse_layout("tp=8 pp=1 dp=2"), island).dp  # given: kept (fewer GPUs than the island is allowed)
    2

    Raises
    ------
    InputError
        When tp·pp·cp does not divide the island's GPUs.
    """
    if layout.dp:
        return layout
    group = layout.tp * layout.pp * layout.cp
    if island.gpus % group:
        what = "tp·pp" if layout.cp == 1 else "tp·pp·cp"
        raise layout_error(f"layout {what} = {group}: does not divide the {island.gpus} GPUs of {island.name}, "
                           "so dp cannot be derived; give dp")
    return replace(layout, dp=island.gpus // group)


def check_layout(layout: GivenLayout, island: IslandSpec, cfg: ModelConfig, global_batch: int, *, seq: int | None = None) -> None:
    """Refuse a layout the island or the model cannot hold, with the reason.

    Raises
    ------
    InputError
        :class:`UnsupportedLayout` where the layout can run but the cost model does not price
        it, else a plain InputError. E.g. "tp=16 exceeds the 8 GPUs of a node", heads not divisible by t, more stages
        than layers, more GPUs than the island has, a micro-batch that does not divide B;
        an EP degree that does not divide the experts, a CP degree that does not split the
        sequence (``seq``, default the model's) into 2·cp chunks or whose ring leaves a node or
        runs without FlashAttention, offloading on a GPU without a host-link figure.
    """
    t, p, d, c = layout.tp, layout.pp, layout.dp, layout.cp
    if t > island.gpus_per_node:
        raise UnsupportedLayout(f"layout tp={t}: exceeds the {island.gpus_per_node} GPUs of a node of {island.name} (a TP group stays in a node)")
    if island.gpus_per_node % t:
        raise UnsupportedLayout(f"layout tp={t}: must divide the {island.gpus_per_node} GPUs of a node of {island.name}")
    if cfg.heads % t:
        raise layout_error(f"layout tp={t}: must divide the {cfg.heads} attention heads of {cfg.name}")
    if p > cfg.layers:
        raise layout_error(f"layout pp={p}: more stages than the {cfg.layers} layers of {cfg.name}")
    if t * p * d * c > island.gpus:
        what = "tp·pp·dp" if c == 1 else "tp·pp·dp·cp"
        raise layout_error(f"layout {what} = {t * p * d * c}: more GPUs than the {island.gpus} of {island.name}")
    if layout.running.tp_overlap and not layout.running.sequence_parallel:
        raise layout_error("layout tpoverlap=yes: Megatron-Core's TP overlap needs sequence parallelism (drop sp=no)")
    v = layout.vpp
    if v != 1 and p == 1:
        raise layout_error(f"layout vpp={v}: interleaving needs pp >= 2 (got pp=1)")
    if v == 0 and not interleave_degrees(cfg.layers, p):
        raise UnsupportedLayout(f"layout vpp=0 pp={p}: the {cfg.layers} layers of {cfg.name} allow no interleaving "
                                f"on {p} stages (a virtual stage needs a layer)")
    if v > 1 and v not in interleave_degrees(cfg.layers, p):
        small, large = cfg.layers // p, -(-cfg.layers // p)
        rule = f"stages of {small} layers: vpp must divide {small}" if small == large else \
            f"stages of {small} to {large} layers: vpp must divide {large} and be at most {small}"
        valid = ", ".join(map(str, interleave_degrees(cfg.layers, p))) or "none"
        raise UnsupportedLayout(f"layout vpp={v} pp={p}: the {cfg.layers} layers of {cfg.name} give {rule} (valid: {valid})")
    if v != 1 and layout.microbatch and (global_batch // (layout.microbatch * d)) % p:
        raise layout_error(f"layout vpp={v}: the interleaved schedule needs the micro-batches per iteration "
                         f"({global_batch // (layout.microbatch * d)}) to be a multiple of pp={p}")
    why = ex.layout_problem(cfg, tp=t, ep=layout.ep, cp=c, dp=d)
    if why:
        raise layout_error(f"layout {why}")
    why = ctx.sequence_problem(seq or cfg.sequence, c)
    if why:
        raise layout_error(f"layout {why}")
    why = ctx.flash_problem(c, island.gpu, layout.running.flash)
    if why:
        raise UnsupportedLayout(f"layout {why}")
    if why := ctx.placement_problem(c, t, island.gpus_per_node):
        raise UnsupportedLayout(f"layout {why} ({island.name})")
    if layout.offload and (why := off.host_problem(island.gpu)):
        raise UnsupportedLayout(f"layout {why}")
    if layout.microbatch and global_batch % (layout.microbatch * d):
        raise layout_error(f"layout mbs={layout.microbatch} dp={d}: a micro-batch of {layout.microbatch * d} samples "
                         f"must divide the global batch {global_batch}")


def price_layout(
    layout: GivenLayout,
    island: IslandSpec,
    cfg: ModelConfig,
    *,
    global_batch: int,
    seq: int | None = None,
    microbatches_tried: tuple[int, ...] = (1, 2, 4, 8),
    parallelizer: BuiltinParallelizer | None = None,
) -> PricedLayout:
    """The layout priced by the cost model (``formulations/costmodel.md``).

    A layout without a micro-batch size (``microbatch`` = 0) is priced at its best one of
    ``microbatches_tried`` under the model; one interleaved without a degree (``vpp`` = 0, a
    published run that names the schedule but not v) at its best of
    :func:`~hetopt.planner.builtin.interleave_degrees`. Returns a PricedLayout without a plan,
    and the reason, when it fits in memory at none of them.

    Raises
    ------
    InputError
        When :func:`check_layout` refuses it.
    """
    seq = seq or cfg.sequence
    layout = derive_dp(layout, island)
    check_layout(layout, island, cfg, global_batch, seq=seq)
    par = layout.runtime(parallelizer or BuiltinParallelizer())
    whole = Slice(par.slice_model(cfg, seq=seq))
    best, why = None, f"no micro-batch size of {', '.join(map(str, microbatches_tried))} per replica divides the global batch"
    over: PartialPlan | None = None
    degrees = interleave_degrees(cfg.layers, layout.pp) if layout.vpp == 0 else (layout.vpp,)
    for v, b in itertools.product(degrees, (layout.microbatch,) if layout.microbatch else microbatches_tried):
        m = b * layout.dp
        if global_batch % m or (v > 1 and (global_batch // m) % layout.pp):
            continue
        lay = replace(layout, vpp=v).builtin_layout(cfg.layers)
        plan = par.plan(whole, island, lay, microbatch_size=m, microbatches=global_batch // m)
        if plan.behind is not None and plan.behind < 0:
            if over is None or plan.iteration_time_s < over.iteration_time_s:
                over = plan
                why = f"does not fit in memory at mbs={b}: {plan.peak_bytes / GIB:.1f} GiB per GPU of {island.memory_bytes / GIB:.0f}"
            continue
        if best is None or plan.iteration_time_s < best.iteration_time_s:
            best = plan
    return PricedLayout(layout, best, "" if best else why, None if best else over)


# ---- one layout per island (heterogeneous clusters) ------------------------------------


@dataclass(frozen=True)
class IslandBlock:
    """One island's part of a given heterogeneous pipeline: ``layers`` consecutive layers laid out as ``layout``."""

    island: str
    layers: int
    layout: GivenLayout

    def text(self) -> str:
        return f"{self.island}: layers={self.layers} {self.layout.text()}"


def with_precision(layout: GivenLayout | tuple[IslandBlock, ...], precision: str) -> GivenLayout | tuple[IslandBlock, ...]:
    """``layout`` (or every island's) with ``precision`` where it names none.

    Examples
    --------
    >>> with_precision(parse_layout("tp=1 pp=1 dp=2"), "fp16").running.precision, with_precision(parse_layout("tp=1 pp=1 dp=2 precision=bf16"), "fp16").running.precision
    ('fp16', 'bf16')
    """
    if isinstance(layout, tuple):
        return tuple(replace(b, layout=with_precision(b.layout, precision)) for b in layout)
    if layout.running.precision:
        return layout
    return replace(layout, running=replace(layout.running, precision=precision))


def given_runtime(layout: GivenLayout | tuple[IslandBlock, ...], par: BuiltinParallelizer) -> BuiltinParallelizer:
    """``par`` set to the framework a given layout runs on (one layout, or every island's, which must agree).

    The running keys (:data:`hetopt.costmodel.running.KEYS`) say what the user's framework
    does; one training job runs one framework, so per-island layouts that name two are refused.

    Examples
    --------
    >>> given_runtime(parse_layout("tp=1 pp=1 dp=2 flash=no"), BuiltinParallelizer()).running.flash
    False
    """
    layouts = [b.layout for b in layout] if isinstance(layout, tuple) else [layout]
    if len({x.running for x in layouts}) > 1:
        differ = [k.text for k in run.KEYS if len({getattr(x.running, k.field) for x in layouts}) > 1]
        raise layout_error(f"layout: the islands' layouts run differently ({', '.join(differ)} differ); one job runs one "
                           "framework: give the same values on every island")
    return layouts[0].runtime(par)


def parse_island_layouts(text: str) -> tuple[IslandBlock, ...]:
    """Read ``"t4: layers=2 tp=2 pp=1 dp=2 mbs=1; a100-80gb: layers=38 tp=1 pp=2 dp=2 mbs=1"``.

    One ``ISLAND: layers=K <layout>`` per island, front of the pipeline first, separated by
    ``;``; island names as ``hetopt plan`` prints them. Interleaving (vpp > 1) is for a model
    on one island only.

    Raises
    ------
    InputError
        A part without ``ISLAND:``, without ``layers=K``, or with a bad layout, naming it.

    Examples
    --------
    >>> [(b.island, b.layers, b.layout.tp) for b in parse_island_layouts("a: layers=2 tp=2 pp=1 dp=1; b: layers=6 tp=1 pp=2 dp=1")]
    [('a', 2, 2), ('b', 6, 1)]
    """
    out = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        name, sep, rest = part.partition(":")
        if not sep or not name.strip():
            raise layout_error(f"layout {part!r}: give the island first, as \"ISLAND: layers=K tp=.. pp=.. dp=..\"")
        words = rest.split()
        counts = [w for w in words if w.startswith("layers=")]
        if len(counts) != 1:
            raise layout_error(f"layout {part!r}: give the island's layer count once, layers=K")
        layers = _whole(part, "layers", counts[0].partition("=")[2])
        if layers < 1:
            raise layout_error(f"layout {part!r}: layers={layers} must be >= 1")
        layout = parse_layout(" ".join(w for w in words if not w.startswith("layers=")))
        if layout.vpp > 1:
            raise layout_error(f"layout {part!r}: vpp={layout.vpp}: interleaving is priced for a model on one island only")
        out.append(IslandBlock(name.strip(), layers, layout))
    if not out:
        raise layout_error("layout: empty (give \"ISLAND: layers=K tp=.. pp=.. dp=..; ...\")")
    return tuple(out)


@dataclass(frozen=True)
class PricedPipeline:
    """A given heterogeneous pipeline under the cost model (``solution`` None: it does not fit, ``reason`` why)."""

    blocks: tuple[IslandBlock, ...]
    microbatch_size: int
    solution: object | None  # hetopt.pipeline.problem.PipelineSolution
    iteration_time_s: float | None
    reason: str = ""

    def to_dict(self) -> dict:
        """Plain data for JSON."""
        out = {"layout": "; ".join(b.text() for b in self.blocks), "iteration_time_s": self.iteration_time_s,
               "fits": self.solution is not None, "reason": self.reason, "microbatch_size": self.microbatch_size}
        if self.solution is not None:
            out["simulated_s"] = self.solution.simulated_or_none
            out["peak_memory_gib"] = max(st.memory_bytes for st in self.solution.stages) / GIB
            out["gpus"] = sum(st.gpus for st in self.solution.stages)
        return out


def price_island_layouts(
    blocks: tuple[IslandBlock, ...],
    islands: list[IslandSpec],
    links: Callable[[int], tuple[tuple[float, ...], ...]],
    cfg: ModelConfig,
    *,
    global_batch: int,
    seq: int | None = None,
    parallelizer: BuiltinParallelizer | None = None,
    microbatches_tried: tuple[int, ...] = (1, 2, 4, 8),
) -> PricedPipeline:
    """A pipeline of one given layout per island, priced by the pipeline family's closed form.

    Each island's layers are one slice laid out as given (layers split evenly over its
    stages) by the built-in parallelizer's stage prices, so the time is exactly what the
    composition would charge for those blocks; ``links(m)`` gives c(i, j) at micro-batch m.
    The micro-batch m = mbs·dp must be the same on every island; without mbs anywhere the
    best of ``microbatches_tried`` × lcm(dp) is taken.

    Raises
    ------
    InputError
        An unknown or repeated island, layer counts that do not add up to the model's, a
        layout an island cannot hold, or micro-batches that differ between islands.
    """
    from hetopt.pipeline.plan import build_solution
    from hetopt.pipeline.problem import Block, PipelineInstance, evaluate, PipelineSolution
    from hetopt.planner.compose import below_resolution

    par = parallelizer or BuiltinParallelizer()
    seq = seq or cfg.sequence
    index = {x.name: i for i, x in enumerate(islands)}
    seen = set()
    blocks = tuple(replace(b, layout=derive_dp(b.layout, islands[index[b.island]])) if b.island in index else b
                   for b in blocks)
    for b in blocks:
        if b.island not in index:
            raise layout_error(f"layout {b.island}: not an island of this cluster (its islands: {', '.join(index)})")
        if b.island in seen:
            raise layout_error(f"layout {b.island}: given twice (an island hosts one block)")
        seen.add(b.island)
        check_layout(b.layout, islands[index[b.island]], cfg, global_batch, seq=seq)
        if b.layout.pp > b.layers:
            raise layout_error(f"layout {b.island}: pp={b.layout.pp} is more stages than its {b.layers} layers")
    if sum(b.layers for b in blocks) != cfg.layers:
        raise layout_error(f"layout: the islands' layers add up to {sum(b.layers for b in blocks)}, "
                         f"not the {cfg.layers} layers of {cfg.name}")
    stated = {b.layout.microbatch * b.layout.dp for b in blocks if b.layout.microbatch}
    if len(stated) > 1 or (stated and any(not b.layout.microbatch for b in blocks)):
        raise layout_error("layout: mbs·dp must be the same micro-batch on every island (give mbs on all or none): "
                         + ", ".join(f"{b.island} {b.layout.microbatch or '?'}×{b.layout.dp}" for b in blocks))
    lcm = math.lcm(*(b.layout.dp for b in blocks))
    sizes = sorted(stated) if stated else sorted({k * lcm for k in microbatches_tried})
    atoms = par.slice_model(cfg, seq=seq)
    best = PricedPipeline(blocks, 0, None, None, f"no micro-batch of {', '.join(map(str, sizes))} samples divides the global batch")
    for m in sizes:
        if global_batch % m:
            continue
        M = global_batch // m
        options, placed, first = [], [], 0
        for k, b in enumerate(blocks):
            lay = b.layout.builtin_layout(b.layers)  # vpp is 1 here (parse_island_layouts)
            partial = b.layout.runtime(par).plan(Slice(atoms[first:first + b.layers]), islands[index[b.island]], lay, microbatch_size=m, microbatches=M)
            options.append(partial.to_option(index[b.island]))
            placed.append(Block(index[b.island], k, first, b.layers))
            first += b.layers
        with below_resolution(cfg):
            instance = PipelineInstance(f"given-{cfg.name}-m{m}", cfg.layers, M, tuple(x.to_island() for x in islands),
                                        tuple(options), links(m))
        ev = evaluate(instance, PipelineSolution(tuple(placed)))
        if not ev.feasible:
            if best.solution is None:
                best = PricedPipeline(blocks, m, None, None, f"m={m}: " + "; ".join(ev.violations[:2]))
            continue
        if best.iteration_time_s is None or ev.objective < best.iteration_time_s:
            best = PricedPipeline(blocks, m, build_solution(instance, placed), ev.objective)
    return best


__all__ = ["LAYOUT_KEYS", "GivenLayout", "IslandBlock", "PricedLayout", "PricedPipeline", "UnsupportedLayout", "check_layout", "contradiction", "derive_dp", "given_runtime", "key_values", "parse_island_layouts",
           "parse_layout", "price_island_layouts", "price_layout"]
