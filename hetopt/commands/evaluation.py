"""``hetopt validate``, ``findings``, ``scaling`` and ``calibrate``: the cost model held against
published runs and the planner's findings."""

from __future__ import annotations

import itertools
import json

from rich.console import Console

from hetopt.commands.common import (EXIT_OK, Args, plan_flag_error)
from hetopt.errors import InputError
from hetopt.tables import markdown_lines, show
from hetopt.terminal import progress


#: ``hetopt findings --only`` (the keys of ``hetopt.planner.evaluation.findings.FINDINGS``; the test
#: ``tests/planner/test_findings.py`` holds them equal, so the CLI starts without the planner).
FINDING_NAMES = ("fig8", "fig11", "fig11-what-if", "fig9", "gshard-c1", "moe-c2")


def cmd_findings(args: Args, out: Console) -> int:
    from dataclasses import asdict

    from hetopt.planner.evaluation import findings

    names = [args.only] if args.only else list(FINDING_NAMES)
    with progress(out, "findings", len(names), show=not args.json) as bar:
        def started(name: str) -> None:
            bar.update(names.index(name), len(names), f"finding {name}")

        found = findings.run_findings(args.only, on_start=started)
    if args.json:
        print(json.dumps([asdict(f) for f in found], indent=2))
        return EXIT_OK
    for f in found:
        claim = f"claim: {f.claim}" + (f" ({f.note})" if f.note else "")
        show(out, f.rows, title=f"{f.name}: {findings.verdict(f)}", caption=claim, digits=4, markdown=args.markdown)
        out.print()
    return EXIT_OK


def _counts(text: str, flag: str) -> list[int]:
    """Comma-separated whole numbers >= 1 of a flag."""
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise InputError(f"{flag} {text}: give whole numbers >= 1, comma-separated (e.g. 1,2,4)")
    return counts


def cmd_scaling(args: Args, out: Console) -> int:
    from hetopt.budget import check_time_limit
    from hetopt.pipeline.scaling import scaling_rows

    islands, layers = _counts(args.islands, "--islands"), _counts(args.layers, "--layers")
    try:
        limit = check_time_limit(args.time_limit)
    except InputError as exc:
        raise InputError(f"--time-limit: {exc.detail}") from None
    cells = len(islands) * len(layers)
    rows: list[dict] = []
    with progress(out, "scaling", cells, show=not args.markdown) as bar:
        ran = itertools.count()

        def started(n: int, L: int) -> None:
            bar.update(next(ran), cells, f"dp on {n} islands, {L} layers")

        for row in scaling_rows(islands, layers, time_limit=limit, on_cell=started):
            if args.markdown:  # a row as soon as it is measured
                lines = markdown_lines([row])
                print("\n".join(lines if not rows else lines[2:]), flush=True)
            rows.append(row)
    if not args.markdown:
        show(out, rows, title="dp wall time (s) by islands and layers")
    return EXIT_OK


def cmd_calibrate(args: Args, out: Console) -> int:
    from pathlib import Path

    from hetopt.generate.calibrate import calibration_lines

    for line in calibration_lines(None if args.profiles is None else Path(args.profiles)):
        print(line)
    return EXIT_OK


def cmd_validate(args: Args, out: Console) -> int:
    from hetopt.catalog import instances_dir
    from hetopt.planner.evaluation import published
    from hetopt.planner.evaluation import validate
    from hetopt.planner.evaluation import validate_report
    from hetopt.planner.setup.cluster import resolve

    try:
        path = None if args.file is None else resolve(args.file, instances_dir() / "published", "published measurement set")
        measurements = published.load_published(path)
        # rows stating a heterogeneous layout stage by stage (docs/formats.md), priced beside the others
        hetero_all = published.load_heterogeneous(path or published.default_published())
        only = published.select_only([*measurements, *hetero_all], args.only, path or published.default_published())
    except InputError as exc:
        raise plan_flag_error(exc) from None  # "only ..." -> "--only ..."
    parallelizer = measured = None
    if args.profile:
        from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
        from hetopt.profile.command import load_measured

        measured = load_measured(args.profile)
        parallelizer = BuiltinParallelizer(measured=measured)
    hetero = [m for m in hetero_all if only is None or m.id in only]
    with progress(out, "validate", show=not args.json) as bar:
        rows = validate.validate(measurements, only=only, with_plan=args.plan, parallelizer=parallelizer,
                                 on_row=lambda done, total, name: bar.update(done, total, f"validate {name}"))
    mixed = validate.hetero_rows(hetero, measured)
    if args.json:
        doc = validate.rows_to_dict(rows)
        doc["rows"] += mixed
        print(json.dumps(doc, indent=2, allow_nan=False))
    else:
        if rows:
            validate_report.print_rows(rows, with_plan=args.plan, out=out, markdown=args.markdown)
        if mixed:
            keys = ("id", "layout", "published", "predicted", "ratio", "published_peak_gib", "predicted_peak_gib")
            show(out, [{k: r[k] for k in keys} for r in mixed], markdown=args.markdown)
    return EXIT_OK
