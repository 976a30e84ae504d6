"""What the user's training framework can run: ``hetopt plan --runtime``.

The built-in parallelizer searches every recomputation mode, ZeRO stage, EP, CP and
offloading choice, and prices the attention, overlap and sequence parallelism of a current
runtime. A framework that lacks some of them (Megatron-LM of 2021: no selective
recomputation, no distributed optimizer, no FlashAttention, no sequence parallelism) can only
run plans without them, so ``--runtime`` holds the search to what it has:

    hetopt plan ... --runtime "recompute=none,full zero=0 flash=no sp=no overlap=no"

Keys: ``recompute`` and ``zero`` take the modes and stages the framework has (comma lists);
``flash``, ``overlap``, ``sp``, ``tpoverlap``, ``zero3gather``, ``precision`` (bf16,
fp16, fp32 or tf32: the training state it keeps, its element size and matmul peak), ``gradreduce`` (fp32 or half: the bytes of its
data-parallel gradient reduction) and ``handover`` (split or deepspeed: how a micro-batch
crosses between pipeline stages, ``cm.HANDOVERS``) and ``host`` (torch2 or torch1: the
software stack whose host issues the ops, ``cm.HOST_STACKS``) say how it runs, with the
meanings and spellings of ``--layout`` (:mod:`hetopt.planner.layout`); ``ep``, ``cp`` and
``offload`` (yes/no) whether it has expert parallelism, context parallelism and activation
offloading. A key left out keeps the built-in parallelizer's default (everything searched,
a current runtime's behaviour).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hetopt import costmodel as cm
from hetopt.errors import InputError
from hetopt.planner.builtin import BuiltinParallelizer
from hetopt.planner.layout import (GRAD_REDUCES, OVERLAP_VALUES, ZERO3_GATHERS, GivenLayout, IslandBlock, key_values,
                                   layout_error, precision_value)

#: The keys of a ``--runtime`` string.
RUNTIME_KEYS = ("recompute", "zero", "flash", "overlap", "sp", "tpoverlap", "zero3gather", "precision", "gradreduce", "handover",
                "host", "ep", "cp", "offload")
#: The yes/no keys of a ``--runtime`` string and the :class:`Runtime` field each sets.
SWITCH_FIELDS = (("flash", "flash"), ("overlap", "overlap"), ("sp", "sequence_parallel"), ("tpoverlap", "tp_overlap"),
                 ("ep", "expert_parallel"), ("cp", "context_parallel"), ("offload", "offload"))
#: The ``--layout`` keys that say how a framework runs; with ``--runtime`` they belong there.
LAYOUT_RUNTIME_KEYS = ("overlap", "flash", "sp", "tpoverlap", "zero3gather", "precision", "gradreduce", "handover", "host")


@dataclass(frozen=True)
class Runtime:
    """A framework's capabilities and behaviour (the defaults: everything, as the built-in parallelizer searches).

    Examples
    --------
    >>> rt = parse_runtime("recompute=none,full zero=0 flash=no")
    >>> par = rt.parallelizer(BuiltinParallelizer())
    >>> par.recompute, par.zero_stages, par.flash_attention
    (('none', 'full'), (0,), False)
    """

    recompute: tuple[str, ...] = cm.RECOMPUTE_MODES
    zero: tuple[int, ...] = cm.ZERO_STAGES
    flash: bool = True
    overlap: bool = True
    sequence_parallel: bool = True
    tp_overlap: bool = False
    zero3_per_tensor: bool = False
    precision: str | None = None  # None: the hardware's (cm.hardware_precision)
    grad_fp32: bool = False  # gradients reduced in fp32 (``gradreduce=fp32``)
    handover: str = cm.DEFAULT_HANDOVER  # how a micro-batch crosses between stages (``handover=``, cm.HANDOVERS)
    host: str = cm.DEFAULT_HOST  # the stack whose host issues the ops (``host=``, cm.HOST_STACKS)
    expert_parallel: bool = True
    context_parallel: bool = True
    offload: bool = True

    def text(self) -> str:
        """The ``--runtime`` string of what differs from the defaults ("" when nothing does).

        Examples
        --------
        >>> parse_runtime("flash=no zero=1,0").text()
        'zero=0,1 flash=no'
        """
        default, words = Runtime(), {True: "yes", False: "no"}
        parts = []
        if self.recompute != default.recompute:
            parts.append(f"recompute={','.join(self.recompute)}")
        if self.zero != default.zero:
            parts.append(f"zero={','.join(map(str, self.zero))}")
        for key, field in SWITCH_FIELDS:
            if getattr(self, field) != getattr(default, field):
                parts.append(f"{key}={words[getattr(self, field)]}")
        if self.zero3_per_tensor:
            parts.append("zero3gather=tensor")
        if self.precision:
            parts.append(f"precision={self.precision}")
        if self.grad_fp32:
            parts.append("gradreduce=fp32")
        if self.handover != cm.DEFAULT_HANDOVER:
            parts.append(f"handover={self.handover}")
        if self.host != cm.DEFAULT_HOST:
            parts.append(f"host={self.host}")
        return " ".join(parts)

    def parallelizer(self, par: BuiltinParallelizer) -> BuiltinParallelizer:
        """``par`` searching only what this runtime has, priced as it runs."""
        runs = par.running(overlap=self.overlap, flash=self.flash, sequence_parallel=self.sequence_parallel,
                           tp_overlap=self.tp_overlap, zero3_per_tensor=self.zero3_per_tensor, precision=self.precision,
                           grad_fp32=self.grad_fp32, handover=self.handover, host=self.host)
        return replace(runs, recompute=self.recompute, zero_stages=self.zero,
                       expert_parallel=self.expert_parallel, fsep=par.fsep and self.expert_parallel,
                       cp=par.cp if self.context_parallel else (1,), offload=par.offload and self.offload)

    def layout(self, layout: GivenLayout) -> GivenLayout:
        """``layout`` run by this runtime: its runtime flags set to this one's.

        Raises
        ------
        InputError
            When the layout uses what the runtime lacks (the plan could not be compared with it).
        """
        lacks = [
            (layout.recompute not in self.recompute, f"recompute={layout.recompute}", f"recompute={','.join(self.recompute)}"),
            (layout.zero not in self.zero, f"zero={layout.zero}", f"zero={','.join(map(str, self.zero))}"),
            (layout.ep > 1 and not self.expert_parallel, f"ep={layout.ep}", "ep=no"),
            (layout.cp > 1 and not self.context_parallel, f"cp={layout.cp}", "cp=no"),
            (layout.offload and not self.offload, "offload=1", "offload=no"),
        ]
        for bad, used, allowed in lacks:
            if bad:
                raise layout_error(f"layout {used}: the runtime's {allowed} does not have it (give a layout the runtime can run)")
        return replace(layout, overlap=self.overlap, flash=self.flash, sequence_parallel=self.sequence_parallel,
                       tp_overlap=self.tp_overlap, zero3_per_tensor=self.zero3_per_tensor, precision=self.precision,
                       grad_fp32=self.grad_fp32, handover=self.handover, host=self.host)

    def layouts(self, given: GivenLayout | tuple[IslandBlock, ...]) -> GivenLayout | tuple[IslandBlock, ...]:
        """:meth:`layout` of one layout or of every island's."""
        if isinstance(given, tuple):
            return tuple(replace(b, layout=self.layout(b.layout)) for b in given)
        return self.layout(given)


def runtime_error(message: str) -> InputError:
    """A bad ``runtime`` (the request's field; ``hetopt plan`` names its flag)."""
    return InputError(message, field="runtime")


def parse_runtime(text: str) -> Runtime:
    """Read ``"recompute=none,full zero=0,1 flash=no overlap=no sp=no"``.

    Raises
    ------
    InputError
        One line naming the key and the fix: an unknown or repeated key, a value outside its
        choices, an empty list.

    Examples
    --------
    >>> parse_runtime("zero=0,1 ep=no").zero
    (0, 1)
    >>> parse_runtime("recompute=partial")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: runtime recompute=partial: each must be one of none, selective, full
    """
    # commas join a key's choices here ("zero=0,1"), so they do not split words as in --layout
    values = key_values(text.replace(" ,", ",").replace(", ", ",").split(), RUNTIME_KEYS, "runtime", text)
    if not values:
        raise runtime_error(f"runtime {text!r}: give at least one key (keys: {', '.join(RUNTIME_KEYS)})")
    rt = Runtime()
    if "recompute" in values:
        modes = tuple(dict.fromkeys(values["recompute"].lower().split(",")))
        bad = [m for m in modes if m not in cm.RECOMPUTE_MODES]
        if bad or not modes:
            raise runtime_error(f"runtime recompute={values['recompute']}: each must be one of {', '.join(cm.RECOMPUTE_MODES)}")
        rt = replace(rt, recompute=tuple(m for m in cm.RECOMPUTE_MODES if m in modes))
    if "zero" in values:
        try:
            stages = tuple(dict.fromkeys(int(z) for z in values["zero"].split(",")))
        except ValueError:
            stages = (-1,)
        if not stages or any(z not in cm.ZERO_STAGES for z in stages):
            raise runtime_error(f"runtime zero={values['zero']}: each must be one of {', '.join(map(str, cm.ZERO_STAGES))}")
        rt = replace(rt, zero=tuple(z for z in cm.ZERO_STAGES if z in stages))
    flags = {}
    for key, field in SWITCH_FIELDS:
        if key in values:
            word = values[key].lower()
            if word not in OVERLAP_VALUES:
                raise runtime_error(f"runtime {key}={values[key]}: must be yes or no")
            flags[field] = OVERLAP_VALUES[word]
    if "zero3gather" in values:
        gather = values["zero3gather"].lower()
        if gather not in ZERO3_GATHERS:
            raise runtime_error(f"runtime zero3gather={values['zero3gather']}: must be layer or tensor")
        flags["zero3_per_tensor"] = ZERO3_GATHERS[gather]
    if "precision" in values:
        flags["precision"] = precision_value(values, "runtime")
    if "gradreduce" in values:
        reduce = values["gradreduce"].lower()
        if reduce not in GRAD_REDUCES:
            raise runtime_error(f"runtime gradreduce={values['gradreduce']}: must be fp32 or half")
        flags["grad_fp32"] = GRAD_REDUCES[reduce]
    if "handover" in values:
        handover = values["handover"].lower()
        if handover not in cm.HANDOVERS:
            raise runtime_error(f"runtime handover={values['handover']}: must be {' or '.join(cm.HANDOVERS)}")
        flags["handover"] = handover
    if "host" in values:
        host = values["host"].lower()
        if host not in cm.HOST_STACKS:
            raise runtime_error(f"runtime host={values['host']}: must be {' or '.join(cm.HOST_STACKS)}")
        flags["host"] = host
    return replace(rt, **flags)


def layout_names_runtime(text: str) -> list[str]:
    """The runtime keys a ``--layout`` string writes (with ``--runtime`` they must not be there).

    Examples
    --------
    >>> layout_names_runtime("tp=8 pp=1 dp=4 flash=no; x: layers=2 tp=1 pp=1 dp=1 sp=no")
    ['flash', 'sp']
    """
    keys = {part.partition("=")[0] for part in text.replace(";", " ").replace(",", " ").split()}
    return [k for k in LAYOUT_RUNTIME_KEYS if k in keys]


__all__ = ["LAYOUT_RUNTIME_KEYS", "RUNTIME_KEYS", "Runtime", "layout_names_runtime", "parse_runtime"]
