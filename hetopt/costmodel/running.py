"""How a training framework runs a layout: the one record of the settings that change a stage's
price but not its layout.

A layout (TP, PP, DP, micro-batch, recomputation, ZeRO, ...) says *what* runs where; a
:class:`Running` says *how* the framework runs it: whether data-parallel traffic overlaps
compute, whether attention is fused, the mixed precision, how a micro-batch crosses between
stages, which software stack issues the ops. Every place that prices, parses, saves or exports
these settings takes one ``Running`` (``--layout``, ``--runtime``, a published row, a plan's
JSON, the built-in parallelizer, :func:`~hetopt.costmodel.stage.price_stage`, the exporters),
and :data:`KEYS` is the one table of their names, spellings, defaults and sources.

Examples
--------
>>> r = Running(overlap=False, precision="fp16")
>>> r.text()
'overlap=no precision=fp16'
>>> from_words({"tpoverlap": "yes", "gradreduce": "fp32"}, "runtime")
{'tp_overlap': True, 'grad_fp32': True}
>>> Running.from_file(r.to_file(), where="plan.json") == r
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from hetopt.costmodel.host import DEFAULT_HOST, HOST_STACKS
from hetopt.costmodel.network import DEFAULT_HANDOVER, HANDOVERS
from hetopt.costmodel.precision import FLASH_PRECISIONS, PRECISIONS, hardware_precision, precision_problem
from hetopt.errors import InputError
from hetopt.hardware import GpuType

#: The spellings of a yes/no value in ``--layout`` and ``--runtime`` (``yes`` and ``no`` are
#: how hetopt writes them back).
YES_NO: Mapping[str, bool] = {"yes": True, "no": False, "true": True, "false": False, "1": True, "0": False, "on": True,
                              "off": False}


@dataclass(frozen=True)
class Key:
    """One setting of :class:`Running`: its names, its values and where its behaviour comes from.

    ``text`` is its key in ``--layout`` and ``--runtime``, ``field`` the record's attribute,
    ``file`` its key in files (published rows, a plan's ``running`` object); ``words`` maps
    each spelling to the value (the first spelling of a value is how it is written back;
    yes/no settings are JSON/TOML booleans in files); ``meaning`` says what it changes in the
    price and ``source`` which runtime argument or code it follows.
    """

    text: str
    field: str
    file: str
    words: Mapping[str, Any]
    meaning: str
    source: str

    @property
    def boolean(self) -> bool:
        """A yes/no setting (a boolean in files)."""
        return self.words is YES_NO

    def word(self, value: Any) -> str:
        """How ``value`` is written in ``--layout``/``--runtime`` (the first spelling of it)."""
        return next(w for w, v in self.words.items() if v == value)

    def choices(self) -> str:
        """The canonical spellings, for messages and help (``yes or no``, ``layer or tensor``)."""
        canonical = list(dict.fromkeys(self.word(v) for v in self.words.values()))
        return ", ".join(canonical[:-1]) + " or " + canonical[-1] if len(canonical) > 1 else canonical[0]


#: The settings, in the order they are written. ``precision`` may be unset (None): the
#: hardware's (:func:`~hetopt.costmodel.precision.hardware_precision`), resolved per GPU by
#: :meth:`Running.on`.
KEYS: tuple[Key, ...] = (
    Key("overlap", "overlap", "overlap", YES_NO,
        "data-parallel and ZeRO traffic overlapped with compute (no: all of it on the critical path)",
        "Megatron-Core --overlap-grad-reduce / --overlap-param-gather; FSDP's prefetching; Megatron-LM 2021 had neither"),
    Key("flash", "flash", "flash_attention", YES_NO,
        "attention as FlashAttention on the GPUs that run it (no: the s x s scores materialized everywhere)",
        "Megatron-Core's fused attention (Transformer Engine / FlashAttention 2); unfused on Volta, Turing, Pascal"),
    Key("sp", "sequence_parallel", "sequence_parallel", YES_NO,
        "Megatron's sequence parallelism with TP > 1 (no: every TP rank runs the element-wise kernels on all tokens)",
        "Megatron-LM --sequence-parallel (Korthikanti et al. 2022)"),
    Key("tpoverlap", "tp_overlap", "tp_comm_overlap", YES_NO,
        "TP traffic hidden behind the adjacent GEMMs in t chunks (needs sequence parallelism)",
        "Megatron-Core --tp-comm-overlap (Transformer Engine userbuffers; off by default there)"),
    Key("zero3gather", "zero3_per_tensor", "zero3_gather", {"layer": False, "tensor": True},
        "ZeRO-3's gathers and reduce-scatters one per layer (FSDP, torchtitan) or one per parameter tensor",
        "DeepSpeed ZeRO-3 (per tensor, Megatron SC'21 Table 2); FSDP / FSDP2 fully_shard per block (per layer)"),
    Key("precision", "precision", "precision", {p: p for p in PRECISIONS},
        "the mixed precision: training-state bytes, element size, matmul peak (unset: bf16 where every GPU has BF16, else fp16)",
        "Megatron-LM --bf16 / --fp16; torchtitan mixed_precision_param; DeepSpeed bf16/fp16 sections"),
    Key("tf32", "tf32", "tf32", {"off": "off", "auto": "auto", "on": "on"},
        "an fp32 run's matmuls in TF32 on the GPUs that have TF32 tensor cores (auto: where the GPU has them, FP32 "
        "elsewhere; on: every GPU must; off: FP32 everywhere, PyTorch's default); no effect in 16 bits",
        "torch.backends.cuda.matmul.allow_tf32 (default False since PyTorch 1.12); NVIDIA's containers set "
        "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1"),
    Key("gradreduce", "grad_fp32", "grad_reduce", {"half": False, "fp32": True},
        "data-parallel gradients reduced in fp32 (4 bytes) or in the parameters' 16 bits",
        "Megatron-LM --accumulate-allreduce-grads-in-fp32; DeepSpeed fp32_allreduce; FSDP2 reduce_dtype"),
    Key("handover", "handover", "handover", {h: h for h in HANDOVERS},
        "how a micro-batch crosses between pipeline stages (split: each TP rank sends its share; deepspeed: "
        "DeepSpeed 2021's engine)",
        "Megatron-LM's p2p_communication (scatter-gather); DeepSpeed v0.3.13 pipe/engine.py"),
    Key("host", "host", "host", {h: h for h in HOST_STACKS},
        "the software stack whose host issues the layers' ops, every stage's floor (torch2: today's eager PyTorch; "
        "torch1: a PyTorch 1.x stack; cudagraph: the layers replayed as CUDA graphs, no floor)",
        "measured by python -m hetopt.generate.host_overhead and hetopt.generate.stack_host; cudagraph: Megatron-Core "
        "--cuda-graph-impl local, torch.compile mode=reduce-overhead"),
)
#: The settings by their ``--layout``/``--runtime`` key.
BY_TEXT: Mapping[str, Key] = {k.text: k for k in KEYS}
#: The ``--layout``/``--runtime`` keys of the settings, in order.
TEXT_KEYS: tuple[str, ...] = tuple(BY_TEXT)


@dataclass(frozen=True)
class Running:
    """How a framework runs a layout (the defaults: a current runtime, as the built-in
    parallelizer prices one). One row of :data:`KEYS` per field.

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> gpus = load_gpus()
    >>> Running().on(gpus["V100-SXM2-32GB"])  # Volta: no BF16, no FlashAttention
    Running(overlap=True, flash=False, sequence_parallel=True, tp_overlap=False, zero3_per_tensor=False, precision='fp16', tf32='off', grad_fp32=False, handover='split', host='torch2')
    >>> Running(precision="fp32").on(gpus["A100-SXM4-80GB"]).flash  # FlashAttention takes 16-bit inputs
    False
    """

    overlap: bool = True
    flash: bool = True
    sequence_parallel: bool = True
    tp_overlap: bool = False
    zero3_per_tensor: bool = False
    precision: str | None = None
    tf32: str = "off"
    grad_fp32: bool = False
    handover: str = DEFAULT_HANDOVER
    host: str = DEFAULT_HOST

    def __post_init__(self) -> None:
        for key in KEYS:
            value = getattr(self, key.field)
            if value is None and key.field == "precision":
                continue
            if value not in key.words.values() or (key.boolean and not isinstance(value, bool)):
                raise ValueError(f"Running.{key.field} must be one of {key.choices()} (got {value!r})")

    def on(self, gpu: GpuType) -> Running:
        """How this framework runs on ``gpu``: the precision, when unset, the GPU's
        (:func:`~hetopt.costmodel.precision.hardware_precision`); an fp32 run's matmuls in TF32
        where ``tf32`` allows it and the GPU has TF32 tensor cores (precision ``tf32`` on that
        GPU: 4-byte elements as fp32, the TF32 peak); and FlashAttention only where the GPU runs
        it (the catalog's ``flash_attention``) in a precision its kernels take
        (``FLASH_PRECISIONS``: a fp32 or tf32 run computes attention unfused).

        Examples
        --------
        >>> from hetopt.hardware import load_gpus
        >>> gpus = load_gpus()
        >>> [Running(precision="fp32", tf32="auto").on(gpus[g]).precision for g in ("A100-SXM4-80GB", "V100-SXM2-32GB")]
        ['tf32', 'fp32']
        """
        precision = self.precision or hardware_precision((gpu,))
        if precision == "fp32" and self.tf32 != "off" and gpu.tf32_flops is not None:
            precision = "tf32"  # tf32="on" on a GPU without it is refused where the job is set up
        flash = self.flash and gpu.flash_attention and precision in FLASH_PRECISIONS
        if precision == self.precision and flash == self.flash:
            return self
        return replace(self, precision=precision, flash=flash)

    def problem(self, gpus: Iterable[GpuType]) -> str | None:
        """Why this framework cannot run on ``gpus`` (a precision a GPU lacks, ``tf32=on`` on a
        GPU without TF32 tensor cores), or None.

        Examples
        --------
        >>> from hetopt.hardware import load_gpus
        >>> Running(precision="fp32", tf32="on").problem([load_gpus()["V100-SXM2-32GB"]])
        'tf32=on: the V100-SXM2-32GB has no TF32 tensor cores (use tf32=auto: TF32 where a GPU has it)'
        """
        gpus = tuple(gpus)
        if self.precision is not None and (problem := precision_problem(self.precision, gpus)) is not None:
            return problem
        if self.precision == "fp32" and self.tf32 == "on":
            lacking = sorted({g.name for g in gpus if g.tf32_flops is None})
            if lacking:
                verb = "has" if len(lacking) == 1 else "have"
                return f"tf32=on: the {', '.join(lacking)} {verb} no TF32 tensor cores (use tf32=auto: TF32 where a GPU has it)"
        return None

    def text(self) -> str:
        """The ``key=value`` words of what differs from the defaults (``""`` when nothing does)."""
        default = Running()
        return " ".join(f"{k.text}={k.word(getattr(self, k.field))}" for k in KEYS
                        if getattr(self, k.field) != getattr(default, k.field) and getattr(self, k.field) is not None)

    def to_file(self) -> dict[str, Any]:
        """Every setting by its file key: booleans for yes/no settings, words for the others
        (``precision`` None when unset). What a plan's JSON saves and :meth:`from_file` reads."""
        out: dict[str, Any] = {}
        for k in KEYS:
            value = getattr(self, k.field)
            out[k.file] = value if k.boolean or value is None else k.word(value)
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (``hetopt.jsonout.plain``): :meth:`to_file`, the files' one spelling."""
        return self.to_file()

    @classmethod
    def from_file(cls, data: Mapping[str, Any], *, where: str, defaults: Running | None = None) -> Running:
        """The settings a file states (its file keys; the others from ``defaults``).

        Raises
        ------
        InputError
            ``where`` and the key: a yes/no setting that is not a boolean, a word that is not one
            of the setting's.

        Examples
        --------
        >>> Running.from_file({"overlap": False, "grad_reduce": "fp32"}, where="row").text()
        'overlap=no gradreduce=fp32'
        >>> Running.from_file({"handover": "ring"}, where="row")
        Traceback (most recent call last):
        ...
        hetopt.errors.InputError: row: handover = 'ring' must be split or deepspeed
        """
        values = {}
        for k in KEYS:
            if k.file not in data:
                continue
            raw = data[k.file]
            if k.field == "precision" and raw is None:
                values[k.field] = None
            elif k.boolean:
                if not isinstance(raw, bool):
                    raise InputError(f"{where}: {k.file} = {raw!r} must be true or false", field=k.file)
                values[k.field] = raw
            else:
                word = raw.lower() if isinstance(raw, str) else raw
                if word not in k.words:
                    raise InputError(f"{where}: {k.file} = {raw!r} must be {k.choices()}", field=k.file)
                values[k.field] = k.words[word]
        return replace(defaults or cls(), **values)

    def with_words(self, words: Mapping[str, str], option: str) -> Running:
        """This record with the ``--layout``/``--runtime`` words ``words`` set (see :func:`from_words`)."""
        return replace(self, **from_words(words, option)) if words else self


def from_words(words: Mapping[str, str], option: str) -> dict[str, Any]:
    """The fields the running keys of ``--layout``/``--runtime`` words set (other keys ignored).

    Raises
    ------
    InputError
        ``field=option``: "OPTION KEY=VALUE: must be ..." for a value that is not one of the key's.

    Examples
    --------
    >>> from_words({"sp": "no", "precision": "FP16", "tp": "8"}, "layout")
    {'sequence_parallel': False, 'precision': 'fp16'}
    >>> from_words({"zero3gather": "block"}, "layout")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: layout zero3gather=block: must be layer or tensor
    """
    out: dict[str, Any] = {}
    for text, value in words.items():
        key = BY_TEXT.get(text)
        if key is None:
            continue
        word = value.lower()
        if word not in key.words:
            raise InputError(f"{option} {text}={value}: must be {key.choices()}", field=option)
        out[key.field] = key.words[word]
    return out


def help_keys() -> str:
    """The settings and their values in one line, for ``--layout`` and ``--runtime`` help.

    >>> help_keys().split(", ")[:2]
    ['overlap=yes|no', 'flash=yes|no']
    """
    return ", ".join(f"{k.text}={k.choices().replace(' or ', '|').replace(', ', '|')}" for k in KEYS)


def help_text() -> str:
    """One line per setting, for ``--layout`` and ``--runtime`` help and the docs (generated,
    so that every key is listed)."""
    default = Running()
    lines = []
    for k in KEYS:
        value = getattr(default, k.field)
        shown = "the hardware's" if value is None else k.word(value)
        lines.append(f"{k.text}={k.choices().replace(' or ', '|').replace(', ', '|')} (default {shown}): {k.meaning}")
    return "\n".join(lines)


assert [f.name for f in fields(Running)] == [k.field for k in KEYS], "one row of KEYS per field of Running"

__all__ = ["BY_TEXT", "KEYS", "Key", "Running", "TEXT_KEYS", "YES_NO", "from_words", "help_keys", "help_text"]
