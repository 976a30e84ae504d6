"""A layout the user gives (``hetopt plan --layout "tp=8 pp=8 dp=12 mbs=1 recompute=full zero=1"``), priced.

Users hold an existing configuration; pricing it with the same cost model as the plan tells
them what it costs and how much faster the plan is. The published layouts of
``python -m hetopt.planner.validate`` are priced by the same function.

The layout is Megatron-style on one homogeneous island: tensor parallelism t inside a node,
p pipeline stages with the layers split evenly (the extra layers at the back, as
``builtin.even_split``), d data-parallel replicas each taking ``mbs`` samples per
micro-batch, so a micro-batch is m = mbs·d samples and the iteration runs B / m of them.

Examples
--------
>>> parse_layout("tp=2 pp=1 dp=2 mbs=1 recompute=full")
GivenLayout(tp=2, pp=1, dp=2, microbatch=1, recompute='full', zero=0, overlap=True, vpp=1, flash=True)
>>> parse_layout("tp=2 pp=2 dp=1 vpp=2").vpp
2
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hetopt import costmodel as cm
from hetopt.errors import InputError
from hetopt.planner.builtin import BuiltinParallelizer, Layout, even_split
from hetopt.planner.parallelizer import IslandSpec, PartialPlan, Slice
from hetopt.units import GIB
from hetopt.workload import ModelConfig

#: The keys of a ``--layout`` string, as Megatron-LM's arguments name the same things:
#: tensor / pipeline / data parallel sizes, micro-batch size per replica, recomputation,
#: ZeRO stage (Megatron's distributed optimizer is stage 1) and virtual pipeline stages.
LAYOUT_KEYS = ("tp", "pp", "dp", "mbs", "recompute", "zero", "vpp", "overlap", "flash")
#: Spellings of the yes/no keys: ``overlap=`` (Megatron-Core's --overlap-grad-reduce /
#: --overlap-param-gather on or off) and ``flash=`` (FlashAttention or materialized scores).
OVERLAP_VALUES = {"yes": True, "true": True, "1": True, "on": True, "no": False, "false": False, "0": False, "off": False}


@dataclass(frozen=True)
class GivenLayout:
    """A Megatron-style layout: t, p, d, the micro-batch per replica (0: not stated), recomputation, ZeRO."""

    tp: int
    pp: int
    dp: int
    microbatch: int = 0
    recompute: str = "none"
    zero: int = 0
    overlap: bool = True  # data-parallel / ZeRO traffic overlaps compute (cm.exposed_s)
    vpp: int = 1  # virtual pipeline stages per GPU (Megatron's interleaved 1F1B)
    flash: bool = True  # attention as FlashAttention (no s×s scores kept)

    def text(self) -> str:
        """The layout in ``--layout`` form."""
        mbs = f"mbs={self.microbatch}" if self.microbatch else "mbs=?"
        tail = ("" if self.overlap else " overlap=no") + ("" if self.flash else " flash=no")
        vpp = f" vpp={self.vpp}" if self.vpp > 1 else ""
        return f"tp={self.tp} pp={self.pp}{vpp} dp={self.dp} {mbs} recompute={self.recompute} zero={self.zero}{tail}"


@dataclass(frozen=True)
class PricedLayout:
    """A given layout under the cost model: its iteration time, or why it does not fit."""

    layout: GivenLayout
    plan: PartialPlan | None
    reason: str = ""

    @property
    def iteration_time_s(self) -> float | None:
        """1F1B iteration time, Σ t + (M − 1) · max t; None when it does not fit."""
        return None if self.plan is None else self.plan.iteration_time_s

    def to_dict(self) -> dict:
        """Plain data for JSON."""
        out = {"layout": self.layout.text(), "iteration_time_s": self.iteration_time_s, "fits": self.plan is not None,
               "reason": self.reason}
        if self.plan is not None:
            out["microbatch"] = self.plan.microbatch_size // self.plan.dp
            out["peak_memory_gib"] = self.plan.peak_bytes / GIB
            out["gpus"] = self.plan.gpus
        return out


def _whole(text: str, key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise InputError(f"--layout {key}={value}: must be a whole number (in {text!r})") from None


def parse_layout(text: str) -> GivenLayout:
    """Read ``"tp=8 pp=8 dp=12 mbs=1 recompute=full zero=1"`` (any order; tp, pp, dp required).

    Raises
    ------
    InputError
        An unknown key or a value out of range, naming it.
    """
    values: dict[str, str] = {}
    for part in text.replace(",", " ").split():
        key, sep, value = part.partition("=")
        if not sep or not value:
            raise InputError(f"--layout {part}: expected key=value (keys: {', '.join(LAYOUT_KEYS)})")
        if key not in LAYOUT_KEYS:
            raise InputError(f"--layout {part}: unknown key {key!r} (keys: {', '.join(LAYOUT_KEYS)})")
        if key in values:
            raise InputError(f"--layout {part}: {key} is given twice (in {text!r})")
        values[key] = value
    missing = [k for k in ("tp", "pp", "dp") if k not in values]
    if missing:
        raise InputError(f"--layout {text!r}: give {', '.join(missing)} (e.g. \"tp=8 pp=4 dp=2 mbs=1\")")
    sizes = {k: _whole(text, k, values[k]) for k in ("tp", "pp", "dp", "mbs", "zero", "vpp") if k in values}
    for key in ("tp", "pp", "dp", "mbs"):
        if key in sizes and sizes[key] < 1:
            raise InputError(f"--layout {key}={sizes[key]}: must be >= 1")
    if sizes.get("vpp", 1) < 1:
        raise InputError(f"--layout vpp={sizes['vpp']}: must be >= 1")
    zero = sizes.get("zero", 0)
    if zero not in cm.ZERO_STAGES:
        raise InputError(f"--layout zero={zero}: must be one of {', '.join(map(str, cm.ZERO_STAGES))}")
    recompute = values.get("recompute", "none")
    if recompute not in cm.RECOMPUTE_MODES:
        raise InputError(f"--layout recompute={recompute}: must be one of {', '.join(cm.RECOMPUTE_MODES)}")
    flags = {}
    for key in ("overlap", "flash"):
        word = values.get(key, "yes").lower()
        if word not in OVERLAP_VALUES:
            raise InputError(f"--layout {key}={values[key]}: must be yes or no")
        flags[key] = OVERLAP_VALUES[word]
    return GivenLayout(sizes["tp"], sizes["pp"], sizes["dp"], sizes.get("mbs", 0), recompute, zero, flags["overlap"],
                       sizes.get("vpp", 1), flags["flash"])


def check_layout(layout: GivenLayout, island: IslandSpec, cfg: ModelConfig, global_batch: int) -> None:
    """Refuse a layout the island or the model cannot hold, with the reason.

    Raises
    ------
    InputError
        E.g. "tp=16 exceeds the 8 GPUs of a node", heads not divisible by t, more stages
        than layers, more GPUs than the island has, a micro-batch that does not divide B.
    """
    t, p, d = layout.tp, layout.pp, layout.dp
    if t > island.gpus_per_node:
        raise InputError(f"--layout tp={t}: exceeds the {island.gpus_per_node} GPUs of a node of {island.name} (a TP group stays in a node)")
    if island.gpus_per_node % t:
        raise InputError(f"--layout tp={t}: must divide the {island.gpus_per_node} GPUs of a node of {island.name}")
    if cfg.heads % t:
        raise InputError(f"--layout tp={t}: must divide the {cfg.heads} attention heads of {cfg.name}")
    if p > cfg.layers:
        raise InputError(f"--layout pp={p}: more stages than the {cfg.layers} layers of {cfg.name}")
    if t * p * d > island.gpus:
        raise InputError(f"--layout tp·pp·dp = {t * p * d}: more GPUs than the {island.gpus} of {island.name}")
    v = layout.vpp
    if v > 1 and p == 1:
        raise InputError(f"--layout vpp={v}: interleaving needs pp >= 2 (got pp=1)")
    if v > 1 and cfg.layers % (p * v):
        raise InputError(f"--layout vpp={v} pp={p}: the {cfg.layers} layers of {cfg.name} must split into pp·vpp = {p * v} "
                         "equal chunks")
    if v > 1 and layout.microbatch and (global_batch // (layout.microbatch * d)) % p:
        raise InputError(f"--layout vpp={v}: the interleaved schedule needs the micro-batches per iteration "
                         f"({global_batch // (layout.microbatch * d)}) to be a multiple of pp={p}")
    if layout.microbatch and global_batch % (layout.microbatch * d):
        raise InputError(f"--layout mbs={layout.microbatch} dp={d}: a micro-batch of {layout.microbatch * d} samples "
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
    ``microbatches_tried`` under the model. Returns a PricedLayout without a plan, and the
    reason, when it fits in memory at none of them.

    Raises
    ------
    InputError
        When :func:`check_layout` refuses it.
    """
    check_layout(layout, island, cfg, global_batch)
    par = parallelizer or BuiltinParallelizer()
    if (par.overlap_communication, par.flash_attention) != (layout.overlap, layout.flash):  # the runtime it ran on
        par = replace(par, overlap_communication=layout.overlap, flash_attention=layout.flash)
    seq = seq or cfg.sequence
    whole = Slice(par.slice_model(cfg, seq=seq))
    best, why = None, f"no micro-batch size of {', '.join(map(str, microbatches_tried))} per replica divides the global batch"
    lay = Layout(layout.tp, layout.pp, layout.dp, even_split(cfg.layers, layout.pp), layout.recompute, layout.zero, layout.vpp)
    for b in (layout.microbatch,) if layout.microbatch else microbatches_tried:
        m = b * layout.dp
        if global_batch % m or (layout.vpp > 1 and (global_batch // m) % layout.pp):
            continue
        plan = par.plan(whole, island, lay, microbatch_size=m, microbatches=global_batch // m)
        if plan.behind is not None and plan.behind < 0:
            why = f"does not fit in memory at mbs={b}: {plan.peak_bytes / GIB:.1f} GiB per GPU of {island.memory_bytes / GIB:.0f}"
            continue
        if best is None or plan.iteration_time_s < best.iteration_time_s:
            best = plan
    return PricedLayout(layout, best, "" if best else why)


__all__ = ["LAYOUT_KEYS", "GivenLayout", "PricedLayout", "check_layout", "parse_layout", "price_layout"]
