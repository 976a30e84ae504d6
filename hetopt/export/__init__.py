"""Export a hetopt answer to a training runtime: Megatron-LM, torchtitan, DeepSpeed, Cephalo.

``export(doc, target)`` turns the JSON of ``hetopt plan --json`` (or, for the FSDP runtimes,
``hetopt solve --json`` of an allocation) into the files the runtime reads, and a list of
*gaps*: one line for every part of the plan the runtime cannot express (a different tensor
parallel size per island, uneven per-GPU batches, ...). The files hold what the runtime can
take; a gap is never dropped silently. One module per target, chosen by name through
:data:`TARGETS`; each says which result kinds it accepts.

Examples
--------
>>> doc = {"problem": "allocation", "status": "OPTIMAL", "solution": {"gpus": [
...     {"type": "A6000", "microbatch_size": 4, "microbatches": 2, "batch": 8, "state_share": 0.6},
...     {"type": "L4", "microbatch_size": 2, "microbatches": 2, "batch": 4, "state_share": 0.4}]}}
>>> out = export(doc, "cephalo")
>>> sorted(out.files), len(out.gaps)
(['cephalo_config.json', 'ranks.txt'], 2)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from hetopt.errors import InputError
from hetopt.export import cephalo, deepspeed, launch, megatron, torchtitan
from hetopt.export.common import FILL_IN
from hetopt.export.source import (PlanView, allocation_view, fsdp_from_plan, job_of, kind, plan_view, read_document,
                                  shapes)
from hetopt.runtimes import RUNTIMES, plan_breaks
from hetopt.workload import ModelConfig

__all__ = ["ExportOutput", "TARGETS", "export", "export_file", "find_model", "write_output"]

#: Every target by name: its module has ``ACCEPTS`` (result kinds), ``HINT`` (what to do with
#: another kind) and ``build(view, model) -> (files, gaps)``.
TARGETS: dict[str, ModuleType] = {"megatron": megatron, "torchtitan": torchtitan, "deepspeed": deepspeed, "cephalo": cephalo}
#: The mode of a written script (``launch.sh``): executable, as its README runs it.
LAUNCH_MODE = 0o755
#: The file listing the gaps, written beside the exported files.
GAPS_FILE = "GAPS.txt"


@dataclass(frozen=True)
class ExportOutput:
    """What an export writes: file name → text, and one line per gap (empty: the runtime takes it all)."""

    target: str
    files: dict[str, str]
    gaps: tuple[str, ...]
    #: what the user fills in (a model spec the runtime does not ship); in the README of a one-job export
    fill_in: tuple[str, ...] = ()
    #: the plan keeps the runtime's rules: one job, with ``launch.sh``, ``hostfile`` and ``README.md``
    one_job: bool = False


def find_model(name: str) -> ModelConfig | None:
    """The shipped model (``instances/models/*.toml``) whose ``name`` is ``name``, or None.

    A plan names its model by the model file's ``name``; the shapes Megatron-LM needs
    (hidden size, heads, FFN width) come from that file.

    Examples
    --------
    >>> find_model("GPT-3 1.3B").hidden
    2048
    >>> find_model("no such model") is None
    True
    """
    from hetopt.catalog import instances_dir
    from hetopt.workload import load_model

    for path in sorted((instances_dir() / "models").glob("*.toml")):
        cfg = load_model(path)
        if cfg.name == name:
            return cfg
    return None


def export(doc: dict[str, Any], target: str, *, source: str = "result", model: ModelConfig | None = None,
           allow_gaps: bool = False) -> ExportOutput:
    """Export one result document to ``target``.

    Parameters
    ----------
    doc : dict
        The JSON object of ``hetopt plan --json`` or ``hetopt solve --json``.
    target : str
        A name in :data:`TARGETS`.
    source : str
        The file name, for messages.
    model : ModelConfig, optional
        The model's shape; default: the shipped model the plan names (none: a gap).
    allow_gaps : bool
        Export a plan that breaks the runtime's rules (``hetopt.runtimes``) anyway, as files per
        island with their gap lines. Without it such a plan is refused: it is not one job.
        A plan that keeps the rules is one job: one file for the runtime, ``launch.sh``,
        ``hostfile`` and ``README.md``.

    Returns
    -------
    ExportOutput

    Raises
    ------
    InputError
        An unknown target, a document that is not a hetopt result, a result kind the target
        cannot take (e.g. an islands result to Megatron-LM), a result without a solution, or
        a ``model`` whose layer count is not the plan's, or a plan that breaks the runtime's
        rules without ``allow_gaps``.

    Examples
    --------
    >>> export({"problem": "islands", "status": "OPTIMAL", "solution": {}}, "megatron", source="r.json")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: r.json: an islands result cannot be exported to megatron (it takes a plan: `hetopt plan ... --json`)
    """
    module = TARGETS.get(target)
    if module is None:
        raise InputError(f"to {target}: unknown target (targets: {', '.join(TARGETS)})", field="to")
    found = kind(doc, source)
    if found not in module.ACCEPTS:
        article = "an" if found[0] in "aeiou" else "a"
        raise InputError(f"{source}: {article} {found} result cannot be exported to {target} ({module.HINT})")
    gaps: list[str] = []
    if found == "plan" and getattr(module, "PLAN_AS_ALLOCATION", False):
        view: Any = fsdp_from_plan(plan_view(doc, source), source)
    elif found == "plan":
        view = plan_view(doc, source)
        given = model is not None
        model = model if given else find_model(view.model)  # else the plan's own model, by its name
        if model is not None and model.layers != view.layers:
            raise InputError(f"--model: {model.name} has {model.layers} layers but the plan's stages hold {view.layers} "
                             "(give the model the plan was made for)" if given else
                             f"{source}: stages hold {view.layers} layers but {view.model} has {model.layers} "
                             "(re-run `hetopt plan --json`)")
        if model is None and module.NEEDS_MODEL:
            gaps.append(f"model: {view.model!r} is not a shipped model; its dimensions are left out "
                        "(give --model FILE, a model file as in instances/models/)")
        runtime = RUNTIMES[target]
        breaks = plan_breaks(runtime, shapes(view), job_of(view, model))
        if breaks and not allow_gaps:
            more = f" (and {len(breaks) - 1} more)" if len(breaks) > 1 else ""
            raise InputError(f"{source}: not one {runtime.title} job: {breaks[0]}{more}; re-plan with `hetopt plan ... "
                             f"--target {target}`, or allow gaps (`--allow-gaps`, allow_gaps=True) for files per island, "
                             "which are not one job as written")
        if not breaks:
            files, notes = module.build(view, model, one_job=True)
            return _one_job(target, module, view, files, *_gaps_and_fill_ins(gaps + notes))
    else:
        view = allocation_view(doc, source)
    files, more = module.build(view, model)
    return ExportOutput(target, files, *_gaps_and_fill_ins(gaps + more))


def _gaps_and_fill_ins(notes: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """An exporter's lines split into gaps and what the user fills in (``FILL_IN``, the prefix dropped)."""
    return (tuple(n for n in notes if not n.startswith(FILL_IN)),
            tuple(n[len(FILL_IN):] for n in notes if n.startswith(FILL_IN)))


def _one_job(target: str, module: ModuleType, view: PlanView, files: dict[str, str], gaps: tuple[str, ...],
             fill_in: tuple[str, ...]) -> ExportOutput:
    """A plan that keeps the runtime's rules, with what launches it (``hetopt.export.launch``)."""
    title = RUNTIMES[target].title
    files = {**files, "launch.sh": launch.launch_script(view, module.LAUNCH_COMMAND, title,
                                                       getattr(module, "ARGS_FILE", None)),
             "hostfile": launch.hostfile(view)}
    priced = {"iteration_time_s": view.iteration_time_s, "memory_gib": list(view.stage_memory_gib)}
    files["README.md"] = launch.readme(view, title, list(files), list(fill_in), priced)
    return ExportOutput(target, files, gaps, fill_in, one_job=True)


def export_file(path: str | Path, target: str, *, model: ModelConfig | None = None, allow_gaps: bool = False) -> ExportOutput:
    """:func:`export` of the result in file ``path``.

    Raises
    ------
    InputError
        As :func:`export`, and a file that is missing or not JSON.

    Examples
    --------
    >>> export_file("missing.json", "megatron")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: missing.json: no such file (give the JSON of `hetopt plan --json` or `hetopt solve --json`)
    """
    return export(read_document(path), target, source=str(path), model=model, allow_gaps=allow_gaps)


def write_output(out: ExportOutput, folder: str | Path) -> list[Path]:
    """Write the files and ``GAPS.txt`` (one line per gap) into ``folder`` (created if missing).

    Returns
    -------
    list of Path
        The files written.

    Raises
    ------
    InputError
        ``folder`` exists and is not a folder, or cannot be created or written.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     [p.name for p in write_output(ExportOutput("x", {"a.json": "{}"}, ("one gap",)), folder)]
    ['a.json', 'GAPS.txt']
    """
    target = Path(folder)
    if target.exists() and not target.is_dir():
        raise InputError(f"-o {folder}: exists and is not a folder (give a folder name)")
    written = []
    try:
        target.mkdir(parents=True, exist_ok=True)
        # a one-job export with nothing missing has no GAPS.txt (its README says what to fill in)
        extra = {} if out.one_job and not out.gaps else {GAPS_FILE: "".join(g + "\n" for g in out.gaps)}
        for name, text in {**out.files, **extra}.items():
            path = target / name
            path.write_text(text, encoding="utf-8")
            if name.endswith(".sh"):  # the README says ./launch.sh: owner rwx, others r-x
                path.chmod(LAUNCH_MODE)
            written.append(path)
    except OSError as exc:
        raise InputError(f"-o {folder}: cannot write ({exc.strerror or exc})") from None
    return written
