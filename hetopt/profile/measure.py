"""``hetopt profile``: measure a model's parts, the optimizer step, collectives and the host on this machine.

The settings are listed first (:func:`settings`), one part per setting, never a stage of
several; each is checked against the device's memory by the cost model's estimate
(:func:`estimate_bytes`) and refused before it runs when it cannot fit. Rows are appended to the
profile file as they are measured: a stop (Ctrl-C) keeps them and a rerun skips them.

Examples
--------
>>> from hetopt.workload import ModelConfig
>>> tiny = ModelConfig("tiny", "gpt", 2, 64, 4, 256, 512, 32)
>>> todo = settings(Options(model=tiny, gpu="cpu", microbatches=(1, 2), tps=(1,), recompute=("none",)))
>>> [s.label() for s in todo][:3]
['layer tp1 b1 s32 none fp32', 'layer tp1 b2 s32 none fp32', 'embedding tp1 b1 s32 none fp32']
"""

from __future__ import annotations

import datetime
import getpass
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

from hetopt import costmodel as cm
from hetopt.errors import InputError
from hetopt.interrupt import stop_requested
from hetopt.profile.format import (COLLECTIVES, PARTS, CollectiveRow, HostRow, LayerRow, OptimizerRow, Profile, Provenance,
                                   collective_values, header_text, host_values, layer_values, optimizer_values, read_profile,
                                   table_text)
from hetopt.workload import ModelConfig

#: Message sizes of the collective curves by default: 4 KiB to 64 MiB, every 4x (log-spaced,
#: as nccl-tests sweeps them; pricing interpolates log-log between them).
DEFAULT_SIZES = tuple(4096 * 4 ** k for k in range(8))
#: Parameter counts of the optimizer-step curve by default (pricing is linear between them).
DEFAULT_PARAMETERS = (10 ** 5, 10 ** 6, 10 ** 7)
#: Runs timed per setting after the warm-up ones; the row is their median.
DEFAULT_REPEATS, DEFAULT_WARMUP = 5, 2
#: Bytes the runtime and allocator keep besides a part's own (a CUDA context is ~0.5 GiB).
CONTEXT_BYTES = 0.5 * 2 ** 30


@dataclass(frozen=True)
class Options:
    """What ``hetopt profile`` measures (the command's flags)."""

    model: ModelConfig
    gpu: str
    microbatches: tuple[int, ...] = (1, 2, 4)
    tps: tuple[int, ...] = (1,)
    recompute: tuple[str, ...] = ("none", "full")
    precision: str = "fp32"
    seq: int | None = None
    parts: tuple[str, ...] = PARTS
    collectives: tuple[str, ...] = COLLECTIVES
    sizes: tuple[int, ...] = DEFAULT_SIZES
    ranks: int = 2
    parameters: tuple[int, ...] = DEFAULT_PARAMETERS
    stack: str = cm.DEFAULT_HOST
    device: str = "cpu"
    memory_bytes: float | None = None
    warmup: int = DEFAULT_WARMUP
    repeats: int = DEFAULT_REPEATS
    host: bool = True
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def sequence(self) -> int:
        return self.seq or self.model.sequence


@dataclass(frozen=True)
class Setting:
    """One thing to measure: a part at one setting, an optimizer step, a collective, or the host."""

    kind: str  # "layer", "optimizer", "collective", "host"
    part: str = ""
    tp: int = 1
    microbatch: int = 0
    seq: int = 0
    recompute: str = "none"
    precision: str = "fp32"
    parameters: int = 0
    op: str = ""
    nbytes: int = 0

    def label(self) -> str:
        if self.kind == "layer":
            return f"{self.part} tp{self.tp} b{self.microbatch} s{self.seq} {self.recompute} {self.precision}"
        if self.kind == "optimizer":
            return f"optimizer {self.parameters} parameters"
        if self.kind == "collective":
            return f"{self.op} {self.nbytes} bytes"
        return "host"


def check_options(o: Options) -> None:
    """Refuse settings that cannot be measured, naming the field."""
    cfg = o.model
    if cfg.architecture != "gpt" or cfg.experts > 1:
        raise InputError(f"model: hetopt profile measures dense GPT layers; {cfg.name} is {cfg.architecture}"
                         + (" with experts" if cfg.experts > 1 else ""), field="model")
    for t in o.tps:
        if t < 1 or cfg.heads % t or cfg.ffn % t:
            raise InputError(f"tp {t}: must divide the model's {cfg.heads} heads and FFN width {cfg.ffn}", field="tp")
    if any(b < 1 for b in o.microbatches) or not o.microbatches:
        raise InputError(f"microbatch {o.microbatches}: give micro-batch sizes >= 1", field="microbatch")
    if o.ranks < 2:
        raise InputError(f"ranks {o.ranks}: a collective needs 2 ranks or more", field="ranks")
    if o.precision not in cm.PRECISIONS:
        raise InputError(f"precision {o.precision}: one of {', '.join(cm.PRECISIONS)}", field="precision")
    if not o.device.startswith("cuda") and o.precision == "fp16":
        raise InputError("precision fp16: runs on CUDA only (use fp32 or bf16 on the CPU)", field="precision")


def settings(o: Options) -> list[Setting]:
    """Everything ``hetopt profile`` would measure, in order (the ``--dry-run`` list)."""
    check_options(o)
    s = o.sequence
    out = []
    for part in o.parts:
        recs = o.recompute if part == "layer" else ("none",)  # only a layer is recomputed
        for tp in o.tps:
            for rc in recs:
                for b in o.microbatches:
                    out.append(Setting("layer", part, tp, b, s, rc, o.precision))
    out += [Setting("optimizer", precision=o.precision, parameters=n) for n in o.parameters]
    out += [Setting("collective", op=op, nbytes=n) for op in o.collectives for n in o.sizes]
    if o.host:
        out.append(Setting("host"))
    return out


def estimate_bytes(o: Options, st: Setting) -> float:
    """The cost model's bytes of one setting on one GPU: the part's training state and one
    micro-batch's activations (the formulas of ``formulations/costmodel.md``, "Memory"), or the
    optimizer's state, plus :data:`CONTEXT_BYTES`."""
    cfg, el = o.model, cm.element_bytes(st.precision or o.precision)
    per_param = cm.state_bytes_per_parameter(0, 1, st.precision or o.precision)
    if st.kind == "optimizer":
        return per_param * st.parameters + CONTEXT_BYTES
    if st.kind != "layer":
        return CONTEXT_BYTES
    b, s, t, h = st.microbatch, st.seq, st.tp, cfg.hidden
    if st.part == "layer":
        params = cm.layer_parameters(cfg, 0) / t
        acts = s * b * (cm.replicated_activation_widths(cfg, el) * h + cm.sharded_activation_widths(cfg, 0, element_bytes=el) / t)
        if st.recompute == "full":  # the layer input kept, the rest rebuilt in backward: its working set once
            acts = s * b * h * el + acts
        else:
            acts += cm.attention_score_bytes(cfg, el) * cfg.heads * s * s * b / t
    elif st.part == "embedding":
        params = cm.input_embedding_parameters(cfg) / t
        acts = s * b * h * el
    else:
        params = cm.head_parameters(cfg, with_embedding=False) / t
        acts = cm.logit_bytes(cfg, s, b, tp=t) + s * b * h * el
    return per_param * params + acts + CONTEXT_BYTES


def device_memory(o: Options, torch=None) -> float:
    """Bytes the device has: ``memory_bytes`` when given, the CUDA device's, or this machine's RAM."""
    if o.memory_bytes is not None:
        return o.memory_bytes
    if o.device.startswith("cuda") and torch is not None:
        return float(torch.cuda.get_device_properties(torch.device(o.device)).total_memory)
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def done_keys(path: Path) -> tuple[set, Profile | None]:
    """The settings a profile file already holds (a rerun resumes after them)."""
    if not path.exists():
        return set(), None
    p = read_profile(path)
    keys = {("layer", r.gpu, r.model.lower(), r.part, r.tp, r.microbatch, r.seq, r.recompute, r.precision) for r in p.layers}
    keys |= {("optimizer", r.gpu, r.precision, int(r.parameters)) for r in p.optimizer}
    keys |= {("collective", r.gpu, r.op, r.scope, r.ranks, int(r.nbytes)) for r in p.collectives}
    keys |= {("host", r.gpu, r.stack) for r in p.hosts}
    return keys, p


def key_of(o: Options, st: Setting, scope: str, ranks: int) -> tuple:
    if st.kind == "layer":
        return ("layer", o.gpu, o.model.name.lower(), st.part, st.tp, st.microbatch, st.seq, st.recompute, st.precision)
    if st.kind == "optimizer":
        return ("optimizer", o.gpu, st.precision, st.parameters)
    if st.kind == "collective":
        return ("collective", o.gpu, st.op, scope, ranks, st.nbytes)
    return ("host", o.gpu, o.stack)


def provenance(o: Options, torch) -> Provenance:
    """Who, when and on what, as torch reports it."""
    cuda = o.device.startswith("cuda")
    name = torch.cuda.get_device_name(torch.device(o.device)) if cuda else (platform.processor() or platform.machine())
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if cuda else ""
    return Provenance(measured_by=f"{getpass.getuser()} with hetopt profile",
                      measured_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                      gpu_name=name, driver=_driver() if cuda else "", torch=torch.__version__,
                      cuda=torch.version.cuda or "", nccl=nccl, backend="nccl" if cuda else "gloo",
                      hostname=platform.node(), note=f"catalog GPU {o.gpu}, stack {o.stack}")


def _driver() -> str:
    try:
        return Path("/proc/driver/nvidia/version").read_text().split("Kernel Module")[1].split()[0]
    except (OSError, IndexError):
        return ""


@dataclass
class Report:
    """What a run did: rows written, settings skipped (already measured) and refused (over memory)."""

    written: int = 0
    skipped: int = 0
    refused: list[str] = field(default_factory=list)
    stopped: bool = False
    seconds: float = 0.0


def run(o: Options, out: Path, *, on_step=None) -> Report:
    """Measure every setting not yet in ``out``, appending each row as it is measured.

    ``on_step(done, total, label)`` before each setting (a progress line). A stop requested
    meanwhile (Ctrl-C) ends the run after the row being measured; the rows written stay.
    """
    from hetopt.profile import collectives as coll
    from hetopt.profile import layers

    torch = layers.need_torch()
    start = time.perf_counter()
    todo = settings(o)
    done, existing = done_keys(out)
    distributed = coll.under_torchrun()
    ranks = int(os.environ["WORLD_SIZE"]) if distributed else o.ranks
    scope = ("intra" if int(os.environ.get("LOCAL_WORLD_SIZE", ranks)) == ranks else "inter") if distributed else "intra"
    rank0 = not distributed or int(os.environ["RANK"]) == 0
    report = Report()
    capacity = device_memory(o, torch)
    if existing is None and rank0:
        out.write_text(header_text(provenance(o, torch)), encoding="utf-8")

    def append(name: str, values: dict) -> None:
        if rank0:
            with out.open("a", encoding="utf-8") as f:
                f.write(table_text(name, values))
                f.flush()
                os.fsync(f.fileno())
        report.written += 1

    pending = []
    for st in todo:
        if key_of(o, st, scope, ranks) in done:
            report.skipped += 1
        elif st.kind == "layer" and estimate_bytes(o, st) > capacity:
            report.refused.append(f"{st.label()}: {estimate_bytes(o, st) / 2 ** 30:.2f} GiB by the cost model's estimate, "
                                  f"the device has {capacity / 2 ** 30:.2f} GiB")
        else:
            pending.append(st)
    cfg, kw = o.model, dict(device=o.device, warmup=o.warmup, repeats=o.repeats)
    shape = dict(hidden=cfg.hidden, heads=cfg.heads, ffn=cfg.ffn, vocab=cfg.vocab)
    local = [st for st in pending if st.kind != "collective"]
    for i, st in enumerate(local):
        if stop_requested():
            report.stopped = True
            break
        if on_step is not None:
            on_step(i, len(pending), st.label())
        if st.kind == "layer":
            t = layers.time_part(torch, st.part, seq=st.seq, tp=st.tp, microbatch=st.microbatch, recompute=st.recompute,
                                 precision=st.precision, **shape, **kw)
            append("layer", layer_values(LayerRow(o.gpu, cfg.name, st.part, st.tp, st.microbatch, st.seq, st.recompute,
                                                  st.precision, t.forward_s, t.backward_s, t.peak_bytes, cfg.hidden)))
        elif st.kind == "optimizer":
            t = layers.time_optimizer(torch, st.parameters, precision=st.precision, **kw)
            append("optimizer", optimizer_values(OptimizerRow(o.gpu, st.precision, float(st.parameters), t)))
        else:
            t = layers.time_host(torch, **kw)
            append("host", host_values(HostRow(o.gpu, o.stack, t.forward_s, t.backward_s)))
    tasks = [(st.op, st.nbytes) for st in pending if st.kind == "collective"]
    if tasks and not report.stopped and not stop_requested():
        if on_step is not None:
            on_step(len(local), len(pending), f"{len(tasks)} collectives over {ranks} ranks")

        def row(op: str, nbytes: int, seconds: float) -> None:
            append("collective", collective_values(CollectiveRow(o.gpu, op, scope, ranks, float(nbytes), seconds)))

        if distributed:
            coll.run_torchrun(tasks, row, **kw)
        else:
            coll.run_local(tasks, row, ranks=ranks, should_stop=stop_requested, **kw)
    report.stopped = report.stopped or stop_requested()
    report.seconds = time.perf_counter() - start
    return report
