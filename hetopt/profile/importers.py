"""Measurements of other tools into a profile (``hetopt profile import nccl-tests|sailor|metis``).

What maps to what, and what is left out (docs/formats.md, "Importers"):

* **nccl-tests** (``all_reduce_perf`` and friends, any version's table): each row's size in
  bytes and its out-of-place time in µs become a ``[[collective]]`` row of the test's
  operation (from the "Collective test starting" line or the file name), over the ranks the
  "Rank" lines list, inside a node or across nodes as ``--scope`` says. Left out: the in-place
  columns, algbw/busbw (derived from the time), rows of 0 bytes, broadcast/reduce/gather/
  scatter tests (no term of the cost model uses them).
* **Sailor** (``sailor_planner/profiles/MODEL/GPU/profile.json``, or its simulator's
  ``simulations/profiles_tmp.json`` with ``--sailor-model`` and ``--sailor-gpu``, which holds
  every model and GPU; the two agree but for GPT-Neo-2.7 on GH-96, whose planner file holds an
  OPT-350 profile): ``{mbs: {tp: {layer: [forward s, backward s, update s]}}}``
  with layer 0 the embedding, 1..L the transformer layers and L+1 the head. Each (mbs, tp)
  becomes three ``[[layer]]`` rows (the embedding, the median of the transformer layers, the
  head), measured with their TP collectives (``includes = ["tp_collectives"]``), without
  recomputation, at the model's sequence; each distinct per-GPU parameter count's update time
  becomes an ``[[optimizer]]`` row. Left out: per-layer differences among the transformer
  layers (the median is kept), memory (Sailor's profile has none; its ``llm_info.json`` is a
  model of memory, not a measurement). Its network file (``providers/multizone_bandwidths_het.json``)
  gives ``send_recv`` rows across nodes: its fitted curve of one GPU to one GPU of the same type
  (``--sailor-gpu``: Sailor's name of the GPU), sampled at 1 MiB to 1 GiB; left out: the curves of
  2-8 GPUs per node and between GPU types or zones.
* **Metis** (``DeviceType.GPU_tpT_bsB.json`` in Metis's repository, ``mbsB_tmpT.json`` in
  Sailor's Metis baseline): ``execution_time.layer_compute_total_ms`` (forward + backward per
  layer, embedding first, head last) is split 1 : 2 into forward and backward (the cost
  model's ``BACKWARD_PER_FORWARD``), with ``execution_memory.layer_memory_total_mb`` as the
  peak; ``optimizer_time_ms`` over the model's parameters on one GPU of the TP group is an
  ``[[optimizer]]`` row. Left out: ``batch_generator_time_ms``, the per-layer parameter and
  activation byte counts (the cost model's own), and the split of forward and backward
  (not measured by Metis).

Examples
--------
>>> text = '''# Collective test starting: all_reduce_perf
... #  Rank  0 Group  0 Pid 1 on h device  0 [0x07] GPU
... #  Rank  1 Group  0 Pid 1 on h device  1 [0x0a] GPU
... #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
...         1024           256     float     sum      -1    12.50    0.08    0.08      0    12.00    0.09    0.09      0
... '''
>>> [(r.op, r.ranks, r.nbytes, round(r.time_s * 1e6, 3)) for r in parse_nccl_tests(text, "x.txt", gpu="A100-SXM4-80GB")]
[('all_reduce', 2, 1024.0, 12.5)]
"""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

from hetopt import costmodel as cm
from hetopt.errors import InputError
from hetopt.files import check_size
from hetopt.profile.format import US, CollectiveRow, LayerRow, OptimizerRow, Profile, Provenance, _no_repeats
from hetopt.readers.fields import Fields

#: nccl-tests binaries and the collective each times (the cost model's names).
NCCL_TESTS = {"all_reduce": "all_reduce", "allreduce": "all_reduce", "all_gather": "all_gather", "allgather": "all_gather",
              "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter", "sendrecv": "send_recv",
              "send_recv": "send_recv", "alltoall": "all_to_all", "all_to_all": "all_to_all"}
#: Precision of the imported rows when ``--precision`` is not given: Sailor's and Metis's
#: profiles are measured with Megatron-DeepSpeed's defaults (no --fp16/--bf16: fp32, TF32
#: matmuls where the GPU has them, docs/formats.md).
SAILOR_PRECISION = "fp32"


def _text(path: Path) -> str:
    if not path.is_file():
        raise InputError(f"{path}: no such file (check the path)")
    check_size(path, "an imported file")
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror})") from None


def _nccl_op(text: str, source: str) -> str:
    m = re.search(r"Collective test starting:\s*(\w+?)_perf", text)
    name = m.group(1) if m else Path(source).stem.lower()
    for key in sorted(NCCL_TESTS, key=len, reverse=True):
        if key in name.replace("-", "_") or key in name:
            return NCCL_TESTS[key]
    raise InputError(f"{source}: which nccl-tests binary wrote it? no 'Collective test starting' line and no test in the "
                     f"file name (name the file after the binary, e.g. all_reduce_perf.txt; known: "
                     f"{', '.join(sorted(set(NCCL_TESTS.values())))})")


def parse_nccl_tests(text: str, source: str, *, gpu: str, scope: str = "intra") -> list[CollectiveRow]:
    """The ``[[collective]]`` rows of one nccl-tests output (see the module's docstring)."""
    op = _nccl_op(text, source)
    ranks = len(re.findall(r"^#\s+Rank\s+\d+", text, flags=re.M))
    header = next((line for line in text.splitlines() if line.startswith("#") and " size " in line and " time " in line), None)
    if header is None:
        raise InputError(f"{source}: no nccl-tests table (its '#  size  count  type ... time' header line is missing)")
    if ranks < 2:
        raise InputError(f"{source}: the output lists {ranks} rank(s); a collective needs 2 or more (keep the "
                         "'# Using devices' lines of the output)")
    columns = header.lstrip("#").split()
    at = columns.index("time")
    rows: dict[float, CollectiveRow] = {}
    for line in text.splitlines():
        words = line.split()
        if line.startswith("#") or len(words) <= at or not words[0].isdigit():
            continue
        size = float(words[0])
        try:
            time_us = float(words[at])
        except ValueError:
            continue  # a row cut short or an error line inside the table
        if size <= 0 or time_us < 0:
            continue
        rows.setdefault(size, CollectiveRow(gpu, op, scope, ranks, size, time_us * US))
    if not rows:
        raise InputError(f"{source}: no measured rows in the nccl-tests table")
    return list(rows.values())


def import_nccl_tests(files: list[str], *, gpu: str, scope: str = "intra", source: str = "", **_: object) -> Profile:
    """A profile of the collective curves of nccl-tests outputs."""
    rows = []
    for f in files:
        rows += parse_nccl_tests(_text(Path(f)), f, gpu=gpu, scope=scope)
    return _checked(Profile(_provenance("nccl-tests", files, source), collectives=tuple(rows)))


def _provenance(kind: str, files: list[str], source: str) -> Provenance:
    return Provenance(measured_by=f"imported from {kind} by hetopt profile import", measured_at="see source",
                      source=source or ", ".join(files), note=f"hetopt profile import {kind}")


def _checked(p: Profile) -> Profile:
    """Refuse a profile whose rows say two things of one setting (the reader's rule)."""
    top = Fields({}, p.source or "imported profile")
    _no_repeats(top, "layer", p.layers, lambda r: r.key + (r.microbatch,))
    _no_repeats(top, "collective", p.collectives, lambda r: r.key + (r.nbytes,))
    return p


def _model(name: str | None, kind: str):
    from hetopt.planner.request import as_model

    if name is None:
        raise InputError(f"model: importing {kind} profiles needs --model (the model they measured: a file or a name "
                         "in instances/models/)", field="model")
    return as_model(name)


def _json(path: Path):
    try:
        return json.loads(_text(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None


def _files(files: list[str], pattern: str) -> list[Path]:
    out = []
    for f in files:
        p = Path(f)
        out += sorted(p.rglob(pattern)) if p.is_dir() else [p]
    if not out:
        raise InputError(f"{', '.join(files)}: no {pattern} file found")
    return out


#: Message sizes at which Sailor's fitted network curves are sampled: 1 MiB to 1 GiB, every 2x
#: (its fit is a polynomial in log2 of the megabytes, made from measurements in that range).
SAILOR_NETWORK_SIZES = tuple(2 ** k for k in range(20, 31))
#: Sailor's zone of its validation runs (every GPU type of its network file is profiled there).
SAILOR_ZONE = "us-central1-a"


def sailor_network_rows(data: dict, path: Path, *, gpu: str, sailor_gpu: str) -> list[CollectiveRow]:
    """``send_recv`` rows across nodes sampled from Sailor's fitted curve of one GPU type
    (``providers/multizone_bandwidths_het.json``: zone → GPU → GPUs → zone → GPU → GPUs →
    [coefficients of GB/s in log2(MB)]), one GPU sending to one GPU of another node of its type."""
    try:
        coeffs = data[SAILOR_ZONE][sailor_gpu]["1"][SAILOR_ZONE][sailor_gpu]["1"][0]
        coeffs = [float(c) for c in coeffs]
    except (KeyError, TypeError, ValueError, IndexError):
        raise InputError(f"{path}: no network curve of {sailor_gpu!r} to itself in {SAILOR_ZONE} (give --sailor-gpu "
                         f"as Sailor names the GPU: {', '.join(sorted(data.get(SAILOR_ZONE, {})))})") from None
    rows = []
    for size in SAILOR_NETWORK_SIZES:
        x = math.log2(size / 1e6)
        gbs = sum(c * x ** (len(coeffs) - i - 1) for i, c in enumerate(coeffs))
        if gbs > 0:
            rows.append(CollectiveRow(gpu, "send_recv", "inter", 2, float(size), size / 1e9 / gbs))
    return rows


def import_sailor(files: list[str], *, gpu: str, model: str | None = None, precision: str | None = None, source: str = "",
                  sailor_gpu: str | None = None, sailor_model: str | None = None, **_: object) -> Profile:
    """A profile of Sailor's per-GPU profiles, and of its network file (see the module's docstring)."""
    precision = precision or SAILOR_PRECISION
    layers, optimizer, network, seen = [], [], [], set()
    paths = _files(files, "profile.json")
    for path in [p for p in paths if p.name == "multizone_bandwidths_het.json"]:
        network += sailor_network_rows(_json(path), path, gpu=gpu, sailor_gpu=sailor_gpu or gpu)
    paths = [p for p in paths if p.name != "multizone_bandwidths_het.json"]
    cfg = _model(model, "Sailor") if paths else None
    for path in paths:
        data = _json(path)
        if isinstance(data, dict) and sailor_model is not None:
            # the simulator's profiles_tmp.json: {model: {GPU: {mbs: {tp: ...}}}}
            try:
                data = data[sailor_model][sailor_gpu or gpu]
            except (KeyError, TypeError):
                raise InputError(f"{path}: no profile of model {sailor_model!r} on {sailor_gpu or gpu!r} (Sailor's names: "
                                 f"{', '.join(sorted(data))}; give --sailor-model and --sailor-gpu as Sailor names them)") from None
        if not isinstance(data, dict):
            raise InputError(f"{path}: a Sailor profile is a table {{mbs: {{tp: {{layer: [fwd, bwd, update]}}}}}}")
        for mbs, by_tp in data.items():
            for tp, by_layer in by_tp.items():
                where = f"{path}: [{mbs!r}][{tp!r}]"
                try:
                    b, t = int(mbs), int(tp)
                    times = [by_layer[str(i)] for i in range(len(by_layer))]
                    times = [(float(f), float(bw), float(u)) for f, bw, u in times]
                except (ValueError, KeyError, TypeError):
                    raise InputError(f"{where}: expected layers 0..N each [forward s, backward s, update s]") from None
                if len(times) != cfg.layers + 2:
                    raise InputError(f"{where}: {len(times)} layers, but {cfg.name} has {cfg.layers} + embedding + head "
                                     "(is --model the model Sailor profiled?)")
                body = times[1:-1]
                fwd = statistics.median(x[0] for x in body)
                bwd = statistics.median(x[1] for x in body)
                common = dict(gpu=gpu, model=cfg.name, tp=t, microbatch=b, seq=cfg.sequence, recompute="none",
                              precision=precision, hidden=cfg.hidden, includes=("tp_collectives",))
                layers += [LayerRow(part="embedding", forward_s=times[0][0], backward_s=times[0][1], **common),
                           LayerRow(part="layer", forward_s=fwd, backward_s=bwd, **common),
                           LayerRow(part="head", forward_s=times[-1][0], backward_s=times[-1][1], **common)]
                counts = ((cm.input_embedding_parameters(cfg), times[0][2]), (cm.layer_parameters(cfg, 0), body[0][2]),
                          (cm.head_parameters(cfg, with_embedding=False), times[-1][2]))
                for params, update in counts:
                    n = float(params) / t
                    if (n, precision) not in seen:
                        seen.add((n, precision))
                        optimizer.append(OptimizerRow(gpu, precision, n, update))
    return _checked(Profile(_provenance("Sailor", files, source), layers=tuple(layers), optimizer=tuple(optimizer),
                            collectives=tuple(network)))


_METIS_NAME = (re.compile(r"mbs(\d+)_tmp(\d+)\.json$"), re.compile(r"_tp(\d+)_bs(\d+)\.json$"))


def _metis_setting(path: Path) -> tuple[int, int]:
    """(micro-batch, TP) from a Metis profile's name."""
    m = _METIS_NAME[0].search(path.name)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = _METIS_NAME[1].search(path.name)
    if m:
        return int(m.group(2)), int(m.group(1))
    raise InputError(f"{path}: not a Metis profile name (DeviceType.GPU_tpT_bsB.json or mbsB_tmpT.json)")


def import_metis(files: list[str], *, gpu: str, model: str | None = None, precision: str | None = None, source: str = "",
                 **_: object) -> Profile:
    """A profile of Metis's per-GPU profiles (see the module's docstring)."""
    cfg = _model(model, "Metis")
    precision = precision or SAILOR_PRECISION
    layers, optimizer = [], []
    share = 1.0 / (1.0 + cm.BACKWARD_PER_FORWARD)  # the forward's part of forward + backward
    for path in _files(files, "*.json"):
        b, t = _metis_setting(path)
        data = _json(path)
        try:
            total = [float(x) * 1e-3 for x in data["execution_time"]["layer_compute_total_ms"]]
            memory = [float(x) * 2 ** 20 for x in data["execution_memory"]["layer_memory_total_mb"]]
            step = float(data["execution_time"]["optimizer_time_ms"]) * 1e-3
            param_bytes = float(data["model"]["parameters"]["total_parameters_bytes"])
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{path}: expected execution_time.layer_compute_total_ms, optimizer_time_ms, "
                             "execution_memory.layer_memory_total_mb and model.parameters.total_parameters_bytes") from None
        if len(total) != cfg.layers + 2 or len(memory) != len(total):
            raise InputError(f"{path}: {len(total)} layers, but {cfg.name} has {cfg.layers} + embedding + head "
                             "(is --model the model Metis profiled?)")
        body = list(zip(total[1:-1], memory[1:-1]))
        parts = (("embedding", total[0], memory[0]), ("layer", statistics.median(x for x, _ in body),
                                                      statistics.median(m for _, m in body)), ("head", total[-1], memory[-1]))
        for part, both, peak in parts:
            layers.append(LayerRow(gpu, cfg.name, part, t, b, cfg.sequence, "none", precision, share * both,
                                   (1 - share) * both, peak, cfg.hidden, ("tp_collectives",)))
        # Metis counts 4 bytes per parameter (fp32); one GPU steps its 1/t
        optimizer.append(OptimizerRow(gpu, precision, param_bytes / 4 / t, step))
    # one optimizer row per parameter count: the profiles of other micro-batches step the same weights
    unique = {}
    for r in optimizer:
        unique.setdefault(r.parameters, r)
    return _checked(Profile(_provenance("Metis", files, source), layers=tuple(layers), optimizer=tuple(unique.values())))


#: ``hetopt profile import KIND``: the importers by name.
IMPORT = {"nccl-tests": import_nccl_tests, "sailor": import_sailor, "metis": import_metis}

__all__ = ["IMPORT", "NCCL_TESTS", "import_metis", "import_nccl_tests", "import_sailor", "parse_nccl_tests"]
