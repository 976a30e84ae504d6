"""The profile file: measurements of the user's own GPUs, read and written (docs/formats.md, "Profiles").

A profile is a TOML file, ``format = "hetopt-profile"``, ``version = 1``, with its provenance
(who measured, when, on which GPU, driver, torch / CUDA / NCCL) and rows, each an array of
tables appended as it is measured (so an interrupted run keeps what it measured and a rerun
resumes after it):

* ``[[layer]]``: one part of a model (``part``: a transformer ``layer``, the ``embedding`` or
  the ``head``) on one GPU type: forward and backward milliseconds and the peak memory of one
  micro-batch, per (``tp``, ``microbatch``, ``seq``, ``recompute``, ``precision``);
* ``[[optimizer]]``: the optimizer step's milliseconds for a parameter count on one GPU type;
* ``[[collective]]``: one collective (``op``) of ``bytes`` over ``ranks`` GPUs inside a node or
  across nodes (``scope``), its microseconds;
* ``[[host]]``: the host's microseconds to issue one layer's ops, forward and backward.

Everything is read into frozen dataclasses (hashable: a profile is part of a pricing context).
Units are in the key names (CONVENTIONS §2) and converted to SI here, once.

Examples
--------
>>> p = parse_profile({"format": "hetopt-profile", "version": 1,
...     "provenance": {"measured_by": "me", "measured_at": "2026-12-05"},
...     "layer": [{"gpu": "cpu", "model": "tiny", "part": "layer", "tp": 1, "microbatch": 2, "seq": 64,
...                "recompute": "none", "precision": "fp32", "forward_ms": 1.5, "backward_ms": 3.0}]}, "p.toml")
>>> p.layers[0].forward_s, p.layers[0].key
(0.0015, ('cpu', 'tiny', 'layer', 1, 64, 'none', 'fp32'))
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from hetopt.checks import MAX_SEQ
from hetopt.costmodel import PRECISIONS, RECOMPUTE_MODES
from hetopt.errors import InputError
from hetopt.files import read_toml, toml_value
from hetopt.readers.fields import Fields

#: The ``format`` key every profile names, and the versions this reader takes.
FORMAT = "hetopt-profile"
VERSIONS = (1,)
#: The model parts a layer row measures: a transformer layer, the input embedding, the output
#: head (with its loss).
PARTS = ("layer", "embedding", "head")
#: The collectives of a ``[[collective]]`` row: NCCL's names (nccl-tests' binaries without ``_perf``);
#: ``send_recv`` is one point-to-point send of ``bytes`` between two ranks.
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "send_recv", "all_to_all")
#: Where a collective's ranks are: one node (its GPU links) or one rank per node (the network).
SCOPES = ("intra", "inter")
#: What a layer row's times may already contain besides the layer's kernels: the TP collectives
#: (a TP layer measured with its all-reduces, as Sailor and Metis measure it).
INCLUDES = ("tp_collectives",)
#: Recomputation modes and precisions: the cost model's.
RECOMPUTE = RECOMPUTE_MODES
#: Upper limits of a row's figures, so that a typo is an error and not a plan (CONVENTIONS §5):
#: an hour per layer, a TiB per GPU, 1024-way TP, 2^40 bytes per message.
MAX_MS = 3.6e6
MAX_MIB = 2.0 ** 20
MAX_TP = 1024
MAX_RANKS = 1 << 20
MAX_BYTES = float(1 << 40)
MAX_MICROBATCH = 1 << 20
MS, US, MIB = 1e-3, 1e-6, float(1 << 20)


@dataclass(frozen=True)
class Provenance:
    """Who measured, when, on what (strings as written; '' where the file leaves one out)."""

    measured_by: str
    measured_at: str
    gpu_name: str = ""
    driver: str = ""
    torch: str = ""
    cuda: str = ""
    nccl: str = ""
    backend: str = ""
    hostname: str = ""
    source: str = ""  # an imported profile: where its figures come from (repository, commit, path)
    licence: str = ""
    note: str = ""


@dataclass(frozen=True)
class LayerRow:
    """One part of a model measured on one GPU type at one setting; times in seconds, memory in bytes."""

    gpu: str
    model: str
    part: str
    tp: int
    microbatch: int
    seq: int
    recompute: str
    precision: str
    forward_s: float
    backward_s: float
    peak_bytes: float | None = None
    hidden: int | None = None  # the model's hidden size, checked against the planned model's
    includes: tuple[str, ...] = ()

    @property
    def key(self) -> tuple:
        """Everything but the micro-batch a row is looked up by (interpolation runs along the micro-batch)."""
        return (self.gpu, self.model, self.part, self.tp, self.seq, self.recompute, self.precision)


@dataclass(frozen=True)
class OptimizerRow:
    """The optimizer step over ``parameters`` parameters on one GPU, seconds."""

    gpu: str
    precision: str
    parameters: float
    step_s: float


@dataclass(frozen=True)
class CollectiveRow:
    """One collective of ``nbytes`` over ``ranks`` ranks (``scope``), seconds."""

    gpu: str
    op: str
    scope: str
    ranks: int
    nbytes: float
    time_s: float

    @property
    def key(self) -> tuple:
        return (self.gpu, self.op, self.scope, self.ranks)


@dataclass(frozen=True)
class HostRow:
    """The host's seconds to issue one layer's ops, forward and backward, under a software stack."""

    gpu: str
    stack: str
    forward_s: float
    backward_s: float


@dataclass(frozen=True)
class Profile:
    """A profile file read (every row kept in file order)."""

    provenance: Provenance
    layers: tuple[LayerRow, ...] = ()
    optimizer: tuple[OptimizerRow, ...] = ()
    collectives: tuple[CollectiveRow, ...] = ()
    hosts: tuple[HostRow, ...] = ()
    source: str = field(default="", compare=False)

    @property
    def rows(self) -> int:
        return len(self.layers) + len(self.optimizer) + len(self.collectives) + len(self.hosts)

    def gpus(self) -> tuple[str, ...]:
        """The GPU types the profile measured, in order of first appearance."""
        seen: dict[str, None] = {}
        for rows in (self.layers, self.optimizer, self.collectives, self.hosts):
            for r in rows:
                seen.setdefault(r.gpu, None)
        return tuple(seen)


def read_profile(path: str | Path) -> Profile:
    """Read and check a profile file.

    Raises
    ------
    InputError
        One line naming the file, the key path and the fix.
    """
    return parse_profile(read_toml(path), str(path))


def parse_profile(data: dict, source: str) -> Profile:
    """A profile from its TOML data (``source`` names it in messages); see :func:`read_profile`."""
    top = Fields(data, source)
    top.reject_unknown(("format", "version", "provenance", "layer", "optimizer", "collective", "host"))
    if data.get("format") != FORMAT:
        raise top.error("format", f"must be {FORMAT!r} (got {data.get('format')!r}): is this a hetopt profile? "
                                  "write one with `hetopt profile` or `hetopt profile import`")
    version = top.integer("version")
    if version not in VERSIONS:
        raise top.error("version", f"version {version} is not read by this hetopt (it reads {', '.join(map(str, VERSIONS))}): "
                                   "upgrade hetopt or measure again")
    prov = top.table("provenance", required=True)
    names = [f.name for f in fields(Provenance)]
    prov.reject_unknown(names)
    provenance = Provenance(**{n: prov.string(n) if n in ("measured_by", "measured_at") else prov.string(n, "")
                               for n in names})
    layers = tuple(_layer(f) for f in top.tables("layer"))
    optimizer = tuple(_optimizer(f) for f in top.tables("optimizer"))
    collectives = tuple(_collective(f) for f in top.tables("collective"))
    hosts = tuple(_host(f) for f in top.tables("host"))
    _no_repeats(top, "layer", layers, lambda r: r.key + (r.microbatch,))
    _no_repeats(top, "optimizer", optimizer, lambda r: (r.gpu, r.precision, r.parameters))
    _no_repeats(top, "collective", collectives, lambda r: r.key + (r.nbytes,))
    _no_repeats(top, "host", hosts, lambda r: (r.gpu, r.stack))
    return Profile(provenance, layers, optimizer, collectives, hosts, source=source)



def _no_repeats(top: Fields, name: str, rows: tuple, key) -> None:
    """Two rows of one setting would make the profile say two things: refuse the second."""
    seen: dict[tuple, int] = {}
    for i, r in enumerate(rows):
        k = key(r)
        if k in seen:
            raise top.error(f"{name}[{i}]", f"measures the same setting as {name}[{seen[k]}] "
                                            "(keep one of them: a rerun of `hetopt profile` resumes instead of repeating)")
        seen[k] = i


def _layer(f: Fields) -> LayerRow:
    f.reject_unknown(("gpu", "model", "part", "tp", "microbatch", "seq", "recompute", "precision", "forward_ms",
                      "backward_ms", "peak_memory_mib", "hidden", "includes", "note"))
    includes = f.strings("includes", ())
    for name in includes:
        if name not in INCLUDES:
            raise f.error("includes", f"unknown {name!r} (known: {', '.join(INCLUDES)})")
    peak = f.number("peak_memory_mib", None, minimum=0.0, maximum=MAX_MIB)
    return LayerRow(
        gpu=f.string("gpu"), model=f.string("model"), part=f.string("part", choices=PARTS),
        tp=f.integer("tp", minimum=1, maximum=MAX_TP), microbatch=f.integer("microbatch", minimum=1, maximum=MAX_MICROBATCH),
        seq=f.integer("seq", minimum=1, maximum=MAX_SEQ), recompute=f.string("recompute", choices=RECOMPUTE),
        precision=f.string("precision", choices=PRECISIONS),
        forward_s=f.number("forward_ms", minimum=0.0, maximum=MAX_MS) * MS,
        backward_s=f.number("backward_ms", minimum=0.0, maximum=MAX_MS) * MS,
        peak_bytes=None if peak is None else peak * MIB, hidden=f.integer("hidden", None, minimum=1, maximum=1 << 20),
        includes=tuple(includes),
    )


def _optimizer(f: Fields) -> OptimizerRow:
    f.reject_unknown(("gpu", "precision", "parameters", "step_ms", "note"))
    return OptimizerRow(f.string("gpu"), f.string("precision", choices=PRECISIONS),
                        f.number("parameters", minimum=1.0, maximum=1e15), f.number("step_ms", minimum=0.0, maximum=MAX_MS) * MS)


def _collective(f: Fields) -> CollectiveRow:
    f.reject_unknown(("gpu", "op", "scope", "ranks", "bytes", "time_us", "note"))
    return CollectiveRow(f.string("gpu"), f.string("op", choices=COLLECTIVES), f.string("scope", choices=SCOPES),
                         f.integer("ranks", minimum=2, maximum=MAX_RANKS), f.number("bytes", minimum=1.0, maximum=MAX_BYTES),
                         f.number("time_us", minimum=0.0, maximum=MAX_MS * 1e3) * US)


def _host(f: Fields) -> HostRow:
    f.reject_unknown(("gpu", "stack", "layer_forward_us", "layer_backward_us", "note"))
    return HostRow(f.string("gpu"), f.string("stack"), f.number("layer_forward_us", minimum=0.0, maximum=MAX_MS * 1e3) * US,
                   f.number("layer_backward_us", minimum=0.0, maximum=MAX_MS * 1e3) * US)


# ---- writing ---------------------------------------------------------------------------------


def table_text(name: str, values: dict, *, array: bool = True) -> str:
    """``[[name]]`` (or ``[name]``) and its keys, Nones left out."""
    head = f"[[{name}]]" if array else f"[{name}]"
    return "\n".join([head] + [f"{k} = {toml_value(v)}" for k, v in values.items() if v is not None]) + "\n\n"


def header_text(provenance: Provenance) -> str:
    """The top of a profile file: format, version and the provenance table."""
    prov = {f.name: getattr(provenance, f.name) for f in fields(Provenance) if getattr(provenance, f.name)}
    return f'format = "{FORMAT}"\nversion = {VERSIONS[-1]}\n\n' + table_text("provenance", prov, array=False)


def layer_values(r: LayerRow) -> dict:
    return {"gpu": r.gpu, "model": r.model, "part": r.part, "tp": r.tp, "microbatch": r.microbatch, "seq": r.seq,
            "recompute": r.recompute, "precision": r.precision, "forward_ms": r.forward_s / MS,
            "backward_ms": r.backward_s / MS, "peak_memory_mib": None if r.peak_bytes is None else r.peak_bytes / MIB,
            "hidden": r.hidden, "includes": list(r.includes) or None}


def optimizer_values(r: OptimizerRow) -> dict:
    return {"gpu": r.gpu, "precision": r.precision, "parameters": r.parameters, "step_ms": r.step_s / MS}


def collective_values(r: CollectiveRow) -> dict:
    return {"gpu": r.gpu, "op": r.op, "scope": r.scope, "ranks": r.ranks, "bytes": r.nbytes, "time_us": r.time_s / US}


def host_values(r: HostRow) -> dict:
    return {"gpu": r.gpu, "stack": r.stack, "layer_forward_us": r.forward_s / US, "layer_backward_us": r.backward_s / US}


def profile_text(p: Profile) -> str:
    """The whole profile as TOML text (what :func:`read_profile` reads back to an equal Profile)."""
    parts = [header_text(p.provenance)]
    parts += [table_text("layer", layer_values(r)) for r in p.layers]
    parts += [table_text("optimizer", optimizer_values(r)) for r in p.optimizer]
    parts += [table_text("collective", collective_values(r)) for r in p.collectives]
    parts += [table_text("host", host_values(r)) for r in p.hosts]
    return "".join(parts)


def write_profile(p: Profile, path: str | Path) -> None:
    """Write ``p`` to ``path`` (replacing it)."""
    Path(path).write_text(profile_text(p), encoding="utf-8")


def merge(profiles: list[Profile]) -> Profile:
    """One profile of several (their rows in order; the first one's provenance)."""
    if not profiles:
        raise InputError("profile: give at least one profile file", field="profile")
    return Profile(profiles[0].provenance, sum((p.layers for p in profiles), ()), sum((p.optimizer for p in profiles), ()),
                   sum((p.collectives for p in profiles), ()), sum((p.hosts for p in profiles), ()),
                   source=", ".join(p.source for p in profiles))
