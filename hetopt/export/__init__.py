"""Export a hetopt answer to a training runtime: Megatron-LM, torchtitan, DeepSpeed, Cephalo.

``export(plan, to=TARGET, out=FOLDER)`` turns a plan (a :class:`~hetopt.planner.answer.HeteroPlan`,
or the JSON of ``hetopt plan --json``; for the FSDP runtimes also an allocation
:class:`~hetopt.result.Result` or the JSON of ``hetopt solve --json``) into the files the runtime
reads, and a list of
*gaps*: one line for every part of the plan the runtime cannot express (a different tensor
parallel size per island, uneven per-GPU batches, ...). The files hold what the runtime can
take; a gap is never dropped silently. One module per target, chosen by name through
:data:`TARGETS`; each says which result kinds it accepts. A plan is read alone: it carries its
model's shape and its cluster's nodes (``hetopt.planfile``, which refuses another format version,
non-finite numbers and an edited shape). The package itself is callable, so ``import hetopt;
hetopt.export(plan, to="megatron", out="run/")`` is this module's :func:`export`.

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

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from hetopt.errors import InputError
from hetopt.export import cephalo, deepspeed, launch, megatron, running, torchtitan
from hetopt.export.common import FILL_IN
from hetopt.export.source import (PlanView, allocation_view, check_solved, fsdp_from_plan, job_of, kind, plan_view,
                                  read_document, shapes)
from hetopt.jsonout import plain, result_to_dict
from hetopt.planfile import check_plan, check_version, non_finite
from hetopt.result import Result
from hetopt.runtimes import RUNTIMES, plan_breaks

__all__ = ["ExportOutput", "TARGETS", "export", "export_file", "write_output"]

#: Every target by name: its module has ``ACCEPTS`` (result kinds), ``HINT`` (what to do with
#: another kind) and ``build(view, model) -> (files, gaps)``; a runtime that trains only models it
#: ships has ``check_model(model)``, which refuses the others.
TARGETS: dict[str, ModuleType] = {"megatron": megatron, "torchtitan": torchtitan, "deepspeed": deepspeed, "cephalo": cephalo}
#: The mode of a written script (``launch.sh``): executable, as its README runs it.
LAUNCH_MODE = 0o755
#: The file listing the gaps, written beside the exported files.
GAPS_FILE = "GAPS.txt"
#: How a plan exported as files per island runs each setting it was priced under
#: (:mod:`hetopt.export.running`; a one-job export's README holds the same lines).
RUNNING_FILE = "RUNNING.md"


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
    #: files per island: how the plan runs each setting it was priced under
    #: (:func:`hetopt.export.running.readme_section`), written as ``RUNNING.md``
    running: tuple[str, ...] = ()


def export(plan: Any, to: str | None = None, *, out: str | Path | None = None, source: str = "plan",
           allow_gaps: bool = False, target: str | None = None) -> ExportOutput:
    """Export one plan or allocation result to the runtime ``to``.

    Parameters
    ----------
    plan : HeteroPlan, Result or dict
        The planner's answer (``hetopt.plan(...)``) or its JSON (``hetopt plan --json``); for
        Cephalo and DeepSpeed also an allocation result (``hetopt.solve`` or ``hetopt solve
        --json``). A plan document must be of this hetopt's format version and carry its
        model's shape (``hetopt.planfile``); nothing else is read.
    to : str
        A name in :data:`TARGETS` (``target`` is the same, by its older name).
    out : str or Path, optional
        A folder to write the files into (:func:`write_output`); None: nothing written.
    source : str
        The file name, for messages.
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
        An unknown target, a document that is not a hetopt result, a plan of another format
        version, with a number that is not finite or an edited model shape, a result kind the
        target cannot take (e.g. an islands result to Megatron-LM), a result without a solution,
        a model the runtime cannot express (torchtitan: no model it ships of that shape), or a
        plan that breaks the runtime's rules without ``allow_gaps``.

    Examples
    --------
    >>> export({"problem": "islands", "status": "OPTIMAL", "solution": {}}, "megatron", source="r.json")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: r.json: an islands result cannot be exported to megatron (it takes a plan: `hetopt plan ... --json`)
    """
    to = to if to is not None else target
    module = TARGETS.get(to) if isinstance(to, str) else None
    if module is None:
        raise InputError(f"to {to}: unknown target (targets: {', '.join(TARGETS)})", field="to")
    doc = _document(plan, source)
    found = kind(doc, source)
    if found not in module.ACCEPTS:
        article = "an" if found[0] in "aeiou" else "a"
        raise InputError(f"{source}: {article} {found} result cannot be exported to {to} ({module.HINT})")
    if found == "plan":
        result = _export_plan(doc, to, module, source, allow_gaps)
    else:
        where = non_finite(doc)
        if where is not None:
            raise InputError(f"{source}: {where}: not a finite number (NaN or Infinity: the file was edited); re-run "
                             "`hetopt solve --json`")
        files, gaps = module.build(allocation_view(doc, source), None)
        result = ExportOutput(to, files, *_gaps_and_fill_ins(gaps))
    if out is not None:
        write_output(result, out)
    return result


def _document(plan: Any, source: str) -> dict[str, Any]:
    """The plain JSON document of a HeteroPlan, a Result or a dict (as ``--json`` writes it)."""
    if isinstance(plan, dict):
        return plan
    if isinstance(plan, Result):
        return result_to_dict(plan)
    if dataclasses.is_dataclass(plan) and not isinstance(plan, type) and hasattr(plan, "to_dict"):
        return plain(plan)  # a HeteroPlan: the document hetopt plan --json prints
    raise InputError(f"{source}: a {type(plan).__name__}, not a plan: give a HeteroPlan (hetopt.plan), a Result "
                     "(hetopt.solve) or their JSON as a dict")


def _export_plan(doc: dict[str, Any], to: str, module: ModuleType, source: str, allow_gaps: bool) -> ExportOutput:
    """A plan document, read alone (its model from its ``model_shape``), to ``to``'s files."""
    check_version(doc, source)
    check_solved(doc, source)  # a plan without a solution says why before anything else
    model = check_plan(doc, source)
    if hasattr(module, "check_model"):  # a runtime that names its own models (torchtitan): before its rules
        module.check_model(model)
    view: Any = plan_view(doc, source)
    if getattr(module, "PLAN_AS_ALLOCATION", False):
        files, gaps = module.build(fsdp_from_plan(view, source), model)
        return ExportOutput(to, files, *_gaps_and_fill_ins(gaps))
    runtime = RUNTIMES[to]
    breaks = plan_breaks(runtime, shapes(view), job_of(view, model))
    if breaks and not allow_gaps:
        more = f" (and {len(breaks) - 1} more)" if len(breaks) > 1 else ""
        raise InputError(f"{source}: not one {runtime.title} job: {breaks[0]}{more}; re-plan with `hetopt plan ... "
                         f"--target {to}`, or allow gaps (`--allow-gaps`, allow_gaps=True) for files per island, "
                         "which are not one job as written")
    files, notes = module.build(view, model, one_job=not breaks)
    if breaks:  # files per island: how the plan runs goes to RUNNING.md (a one-job README holds it)
        return ExportOutput(to, files, *_gaps_and_fill_ins(notes),
                            running=tuple(running.readme_section(view, to, runtime.title)))
    return _one_job(to, module, view, files, *_gaps_and_fill_ins(notes))


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
    files["README.md"] = launch.readme(view, title, list(files), list(fill_in), priced,
                                       running.readme_section(view, target, title))
    return ExportOutput(target, files, gaps, fill_in, one_job=True)


def export_file(path: str | Path, to: str, *, allow_gaps: bool = False) -> ExportOutput:
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
    return export(read_document(path), to, source=str(path), allow_gaps=allow_gaps)


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
        if out.running:
            extra[RUNNING_FILE] = "\n".join(out.running) + "\n"
        for name, text in {**out.files, **extra}.items():
            path = target / name
            path.write_text(text, encoding="utf-8")
            if name.endswith(".sh"):  # the README says ./launch.sh: owner rwx, others r-x
                path.chmod(LAUNCH_MODE)
            written.append(path)
    except OSError as exc:
        raise InputError(f"-o {folder}: cannot write ({exc.strerror or exc})") from None
    return written


class _CallableModule(type(sys)):
    """This package, callable as its :func:`export`: ``hetopt.export(plan, to=..., out=...)``."""

    def __call__(self, plan: Any, to: str | None = None, **options: Any) -> ExportOutput:
        return export(plan, to, **options)


sys.modules[__name__].__class__ = _CallableModule
