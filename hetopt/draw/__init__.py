"""Pictures of results: ``hetopt draw RESULT.json -o FILE.svg|png`` and ``--draw FILE``.

One module per kind of picture (:mod:`~hetopt.draw.pipeline`, :mod:`~hetopt.draw.allocation`,
:mod:`~hetopt.draw.islands`, :mod:`~hetopt.draw.plan`, and :mod:`~hetopt.draw.gantt` for a plan's
schedule), each a function
``render(document, title, source) -> matplotlib.figure.Figure``: ``document`` is the plain JSON
a result prints with ``--json`` (each module says which fields it reads), ``title`` the name in
the picture's title, ``source`` the file name its messages give; a field missing or malformed
raises :class:`~hetopt.errors.InputError` naming it. This module picks the kind, checks the
target file and saves.

matplotlib is an optional extra (``pip install -e ".[plot]"``): importing this module does
not import it, so the command line can check its arguments (and say what to install) first.
No screen is used: figures are built as :class:`matplotlib.figure.Figure` objects without
pyplot and saved through the Agg (PNG) and SVG canvases.
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hetopt.errors import InputError

#: The kind of picture of each result: the solve families by their ``problem``, and the plan.
#: Values are the modules that draw them (imported only when drawing, as they import matplotlib).
KINDS = {
    "allocation": "hetopt.draw.allocation",
    "islands": "hetopt.draw.islands",
    "pipeline": "hetopt.draw.pipeline",
    "plan": "hetopt.draw.plan",
}
#: The Gantt chart of a result's 1F1B schedule (``hetopt draw --gantt``), by the kind of result:
#: a plan's (its own picture shows the stages over the islands), a pipeline's (its picture is one).
GANTT = {"plan": "hetopt.draw.gantt", "pipeline": "hetopt.draw.pipeline"}

#: The file types a picture is written as, by suffix (lower case).
FORMATS = {".svg": "svg", ".png": "png"}

#: What to run when matplotlib is missing: the editable install of a clone, or the package.
INSTALL_HINT = 'pip install -e ".[plot]" (or pip install "hetopt[plot]")'


@dataclass(frozen=True)
class Picture:
    """A written picture: its ``kind``, ``path`` and size in pixels (SVG: points at 72 per inch)."""

    kind: str
    path: Path
    width_px: int
    height_px: int


def require_matplotlib(what: str = "draw") -> None:
    """Check that the ``plot`` extra is installed.

    Raises
    ------
    InputError
        When matplotlib cannot be imported; the message says what to install.

    Examples
    --------
    >>> require_matplotlib()  # with the plot extra installed: nothing happens
    """
    try:
        import matplotlib  # noqa: F401 - only whether it imports
    except ImportError:
        raise InputError(f"{what} needs matplotlib, an optional extra: {INSTALL_HINT}") from None


def check_target(path: str, flag: str = "-o") -> Path:
    """The picture file, checked before any work: a .svg or .png file in an existing, writable folder.

    Parameters
    ----------
    path
        The file name given.
    flag
        The option that gave it, for messages (``-o``, ``--draw``).

    Raises
    ------
    InputError
        Another suffix, a folder, a missing folder or an unwritable place.

    Examples
    --------
    >>> check_target("pipeline.pdf")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: -o pipeline.pdf: a picture is written as .svg or .png (e.g. pipeline.svg)
    """
    from hetopt.files import writable_file

    return writable_file(path, flag, "picture.svg", tuple(FORMATS), "a picture")


def kind_of(document: Any, source: str = "result") -> str:
    """The kind of picture a result document makes.

    ``hetopt solve --json`` documents name their family in ``problem``; ``hetopt plan
    --json`` documents have ``stages``, ``islands`` and ``alternatives``.

    Raises
    ------
    InputError
        Not a result of ``solve`` or ``plan``, a family without a picture, or a result
        without a solution; the message names ``source``.

    Examples
    --------
    >>> kind_of({"problem": "pipeline", "status": "OPTIMAL", "solution": {"stages": []}})
    'pipeline'
    >>> kind_of({"problem": "allocation", "status": "INFEASIBLE", "solution": None}, "r.json")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: r.json: solution: none (status INFEASIBLE): there is no plan to draw
    """
    if not isinstance(document, dict):
        raise InputError(f"{source}: not a hetopt result (give the JSON of hetopt solve --json or hetopt plan --json)")
    if "problem" in document and "results" in document:
        raise InputError(f"{source}: a crosscheck result has no single plan to draw "
                         f"(draw one method's result: hetopt solve FILE --method M --json)")
    if "problem" in document:
        problem = document["problem"]
        if problem not in KINDS or problem == "plan":
            known = ", ".join(k for k in KINDS if k != "plan")
            raise InputError(f"{source}: problem: no picture for {problem!r} "
                             f"(pictures exist for {known}, and hetopt plan results)")
        if not isinstance(document.get("solution"), dict):
            raise InputError(f"{source}: solution: none (status {document.get('status', '?')}): there is no plan to draw")
        return problem
    if all(key in document for key in ("stages", "islands", "alternatives")):
        from hetopt.planfile import check_plan

        # read alone, as export reads it: this format version, finite numbers, its own model shape
        check_plan(document, source)
        if not document["stages"]:
            raise InputError(f"{source}: stages: none (status {document.get('status', '?')}): there is no plan to draw")
        return "plan"
    raise InputError(f"{source}: not a hetopt result: no 'problem' key and no plan "
                     f"(give the JSON of hetopt solve --json or hetopt plan --json)")


def read_result(path: str) -> Any:
    """The JSON document in ``path``.

    Raises
    ------
    InputError
        A missing or unreadable file, or a file that is not JSON.

    Examples
    --------
    >>> read_result("no-such-result.json")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: no-such-result.json: no such file (give the output of hetopt solve --json or hetopt plan --json)
    """
    from hetopt.files import read_json, read_toml

    if Path(path).suffix.lower() == ".toml":  # an input, never a result: point to what draws it
        try:
            instance = "problem" in read_toml(path)
        except InputError:
            instance = False
        raise InputError(f"{path}: an instance file, not a result: solve it and draw the answer "
                         f"(hetopt solve {path} --draw PICTURE.svg)" if instance else
                         f"{path}: a TOML input, not a result: draw a plan made with it "
                         "(hetopt plan --cluster ... --model ... --draw PICTURE.svg)")
    return read_json(path, what="a result", hint="give the output of hetopt solve --json or hetopt plan --json")


def draw(document: Any, path: str | Path, *, title: str | None = None, source: str = "result",
         gantt: bool = False) -> Picture:
    """Draw a result document (``hetopt solve --json`` or ``hetopt plan --json``) into a file.

    Parameters
    ----------
    document
        The result as plain data (parsed JSON, or ``hetopt.jsonout.result_to_dict(result)``).
    path
        The picture file, ``.svg`` or ``.png`` (see :func:`check_target`).
    title
        The name shown in the picture's title (default: ``source``).
    source
        The file the document came from, for messages.
    gantt
        Draw the 1F1B schedule of a plan or a pipeline result (:data:`GANTT`), kind ``gantt``.

    Returns
    -------
    Picture

    Raises
    ------
    InputError
        A document that is not a drawable result, a field it lacks, a file type other than
        SVG or PNG, matplotlib missing, or ``gantt`` for a result without a schedule.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from hetopt import load, solve
    >>> from hetopt.jsonout import result_to_dict
    >>> from hetopt.catalog import instances_dir
    >>> result = solve(load(instances_dir() / "pipeline" / "tiny.toml"))
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     picture = draw(result_to_dict(result), pathlib.Path(folder) / "tiny.png", title="tiny")
    >>> picture.kind, picture.width_px
    ('pipeline', 1000)
    """
    target = check_target(str(path))
    kind = kind_of(document, source)
    if gantt and kind not in GANTT:
        raise InputError(f"gantt: {source} is {'an' if kind[0] in 'aeiou' else 'a'} {kind} result, which has no 1F1B "
                         f"schedule (a Gantt chart is drawn of {' and '.join(GANTT)} results); draw it without",
                         field="gantt")
    require_matplotlib()
    import matplotlib

    from hetopt.draw import style

    from hetopt.readers.fields import located

    module = importlib.import_module(GANTT[kind] if gantt else KINDS[kind])
    with matplotlib.rc_context(style.RC), located(source), warnings.catch_warnings():  # e.g. the simulator's size limit names the file
        # numbers near the float limit (1e308 s) overflow in matplotlib's transforms: its
        # warning lines are not the one-line answer, its ValueError is the document's fault
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            figure = module.render(document, title or source, source)
            width_px, height_px = style.save(figure, target, FORMATS[target.suffix.lower()])
        except ValueError as exc:
            if "NaN or Inf" not in str(exc):  # matplotlib's overflow has no type of its own: its text tells it
                raise
            raise InputError(f"{source}: a time or size too large to draw ({exc}); give a result hetopt wrote",
                             source=source) from None
    return Picture("gantt" if gantt else kind, target, width_px, height_px)


def draw_file(result_path: str, picture_path: str, *, gantt: bool = False) -> Picture:
    """Draw the result JSON file ``result_path`` into ``picture_path`` (the ``hetopt draw``
    command; ``gantt``: its 1F1B schedule, ``--gantt``).

    Raises
    ------
    InputError
        As :func:`draw` and :func:`read_result`; the target is checked first.

    Examples
    --------
    >>> draw_file("result.json", "picture.jpg")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: -o picture.jpg: a picture is written as .svg or .png (e.g. picture.svg)
    """
    check_target(picture_path)
    document = read_result(result_path)
    return draw(document, picture_path, title=Path(result_path).stem, source=result_path, gantt=gantt)


__all__ = ["FORMATS", "GANTT", "INSTALL_HINT", "KINDS", "Picture", "check_target", "draw", "draw_file", "kind_of", "read_result",
           "require_matplotlib"]
