"""What the user's training framework has and how it runs: ``hetopt plan --runtime``.

The built-in parallelizer searches every recomputation mode, ZeRO stage, EP, CP and
offloading choice, and prices the attention, overlap and sequence parallelism of a current
runtime. A framework that lacks some of them (Megatron-LM of 2021: no selective
recomputation, no distributed optimizer, no FlashAttention, no sequence parallelism) can only
run plans without them, so ``--runtime`` holds the search to what it has:

    hetopt plan ... --runtime "recompute=none,full zero=0 flash=no sp=no overlap=no"

Keys: ``recompute`` and ``zero`` take the modes and stages the framework has (comma lists);
``ep``, ``cp`` and ``offload`` (yes/no) whether it has expert parallelism, context
parallelism and activation offloading; the running settings (``overlap``, ``flash``, ``sp``,
``tpoverlap``, ``zero3gather``, ``precision``, ``gradreduce``, ``handover``, ``host``) say how
it runs, with the meanings and spellings of :data:`hetopt.costmodel.running.KEYS` (the same
table ``--layout`` reads). A key left out keeps the built-in parallelizer's default
(everything searched, a current runtime's behaviour).

:class:`Framework` is the user's own framework; :class:`hetopt.runtimes.Runtime` is a stock
runtime (Megatron-LM, torchtitan, DeepSpeed, Cephalo) and its rules for one job (``--target``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hetopt import costmodel as cm
from hetopt.costmodel import running as run
from hetopt.costmodel.running import Running
from hetopt.errors import InputError
from hetopt.planner.builtin import BuiltinParallelizer
from hetopt.planner.layout import GivenLayout, IslandBlock, key_values, layout_error

#: The keys of a ``--runtime`` string that say what the framework has.
CAPABILITY_KEYS = ("recompute", "zero", "ep", "cp", "offload")
#: Every key of a ``--runtime`` string: what it has, then how it runs (``running.TEXT_KEYS``).
RUNTIME_KEYS = CAPABILITY_KEYS + run.TEXT_KEYS
#: The yes/no capability keys of a ``--runtime`` string and the :class:`Framework` field each sets.
SWITCH_FIELDS = (("ep", "expert_parallel"), ("cp", "context_parallel"), ("offload", "offload"))
#: The ``--layout`` keys that say how a framework runs; with ``--runtime`` they belong there.
LAYOUT_RUNTIME_KEYS = run.TEXT_KEYS


@dataclass(frozen=True)
class Framework:
    """The user's framework: what it has (the defaults: everything, as the built-in parallelizer
    searches) and how it runs (:class:`~hetopt.costmodel.running.Running`).

    Examples
    --------
    >>> fw = parse_runtime("recompute=none,full zero=0 flash=no")
    >>> par = fw.parallelizer(BuiltinParallelizer())
    >>> par.recompute, par.zero_stages, par.running.flash
    (('none', 'full'), (0,), False)
    """

    recompute: tuple[str, ...] = cm.RECOMPUTE_MODES
    zero: tuple[int, ...] = cm.ZERO_STAGES
    expert_parallel: bool = True
    context_parallel: bool = True
    offload: bool = True
    running: Running = Running()

    def text(self) -> str:
        """The ``--runtime`` string of what differs from the defaults ("" when nothing does).

        Examples
        --------
        >>> parse_runtime("flash=no zero=1,0").text()
        'zero=0,1 flash=no'
        """
        default, words = Framework(), {True: "yes", False: "no"}
        parts = []
        if self.recompute != default.recompute:
            parts.append(f"recompute={','.join(self.recompute)}")
        if self.zero != default.zero:
            parts.append(f"zero={','.join(map(str, self.zero))}")
        for key, field in SWITCH_FIELDS:
            if getattr(self, field) != getattr(default, field):
                parts.append(f"{key}={words[getattr(self, field)]}")
        if self.running.text():
            parts.append(self.running.text())
        return " ".join(parts)

    def with_running(self, **changes) -> Framework:
        """This framework run with some settings changed (fields of :class:`Running`)."""
        return replace(self, running=replace(self.running, **changes))

    def parallelizer(self, par: BuiltinParallelizer) -> BuiltinParallelizer:
        """``par`` searching only what this framework has, priced as it runs."""
        return replace(par.run_as(self.running), recompute=self.recompute, zero_stages=self.zero,
                       expert_parallel=self.expert_parallel, fsep=par.fsep and self.expert_parallel,
                       cp=par.cp if self.context_parallel else (1,), offload=par.offload and self.offload)

    def layout(self, layout: GivenLayout) -> GivenLayout:
        """``layout`` run by this framework: its running settings set to this one's.

        Raises
        ------
        InputError
            When the layout uses what the framework lacks (the plan could not be compared with it).
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
        return replace(layout, running=self.running)

    def layouts(self, given: GivenLayout | tuple[IslandBlock, ...]) -> GivenLayout | tuple[IslandBlock, ...]:
        """:meth:`layout` of one layout or of every island's."""
        if isinstance(given, tuple):
            return tuple(replace(b, layout=self.layout(b.layout)) for b in given)
        return self.layout(given)


def runtime_error(message: str) -> InputError:
    """A bad ``runtime`` (the request's field; ``hetopt plan`` names its flag)."""
    return InputError(message, field="runtime")


def parse_runtime(text: str) -> Framework:
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
    fw = Framework()
    if "recompute" in values:
        modes = tuple(dict.fromkeys(values["recompute"].lower().split(",")))
        bad = [m for m in modes if m not in cm.RECOMPUTE_MODES]
        if bad or not modes:
            raise runtime_error(f"runtime recompute={values['recompute']}: each must be one of {', '.join(cm.RECOMPUTE_MODES)}")
        fw = replace(fw, recompute=tuple(m for m in cm.RECOMPUTE_MODES if m in modes))
    if "zero" in values:
        try:
            stages = tuple(dict.fromkeys(int(z) for z in values["zero"].split(",")))
        except ValueError:
            stages = (-1,)
        if not stages or any(z not in cm.ZERO_STAGES for z in stages):
            raise runtime_error(f"runtime zero={values['zero']}: each must be one of {', '.join(map(str, cm.ZERO_STAGES))}")
        fw = replace(fw, zero=tuple(z for z in cm.ZERO_STAGES if z in stages))
    flags = {}
    for key, field in SWITCH_FIELDS:
        if key in values:
            word = values[key].lower()
            if word not in run.YES_NO:
                raise runtime_error(f"runtime {key}={values[key]}: must be yes or no")
            flags[field] = run.YES_NO[word]
    return replace(fw, running=fw.running.with_words(values, "runtime"), **flags)


def layout_names_runtime(text: str) -> list[str]:
    """The runtime keys a ``--layout`` string writes (with ``--runtime`` they must not be there).

    Examples
    --------
    >>> layout_names_runtime("tp=8 pp=1 dp=4 flash=no; x: layers=2 tp=1 pp=1 dp=1 sp=no")
    ['flash', 'sp']
    """
    keys = {part.partition("=")[0] for part in text.replace(";", " ").replace(",", " ").split()}
    return [k for k in LAYOUT_RUNTIME_KEYS if k in keys]


__all__ = ["CAPABILITY_KEYS", "Framework", "LAYOUT_RUNTIME_KEYS", "RUNTIME_KEYS", "layout_names_runtime", "parse_runtime"]
