"""``hetopt generate``, ``profile``, ``list`` and ``export``: the catalogs and instances
written, measured profiles read, a plan turned into a runtime's files."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from rich.console import Console

from hetopt.commands.common import (EXIT_INTERRUPTED, EXIT_OK, Args, plan_flag_error)
from hetopt.errors import InputError
from hetopt.tables import print_table, rows_table
from hetopt.terminal import progress


#: ``hetopt generate NAME``: the module whose ``write(folder, ...)`` rewrites the shipped files,
#: and the folder under ``instances/``. ``pipeline`` writes the planner's ``planner-*`` files,
#: ``pipeline-synthetic`` the synthetic generator's (``tangram-*``, ``scale-*``, ...) beside them.
GENERATORS = {
    "allocation": ("hetopt.generate.allocation", "allocation"),
    "pipeline": ("hetopt.generate.pipeline", "pipeline"),
    "pipeline-synthetic": ("hetopt.pipeline.synthetic", "pipeline"),
    "clusters": ("hetopt.generate.clusters", "clusters"),
    "islands": ("hetopt.islands.generate", "islands"),
    "replicas": ("hetopt.generate.replicas", "replicas"),
}


#: ``hetopt profile``'s parts, collectives and importers (hetopt.profile's names, kept here so the
#: parser does not import them; tests/profile/test_cli.py checks the two agree).
PROFILE_PARTS = ("layer", "embedding", "head")
PROFILE_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "send_recv", "all_to_all")
IMPORTERS = ("nccl-tests", "sailor", "metis")


def cmd_generate(args: Args, out: Console) -> int:
    import importlib
    from pathlib import Path

    from hetopt.catalog import instances_dir

    module_name, folder = GENERATORS[args.family]
    module = importlib.import_module(module_name)
    target = Path(args.out) if args.out else instances_dir() / folder
    if target.exists() and not target.is_dir():
        raise InputError(f"--out {target}: exists and is not a folder (give a folder name)")
    # only the allocation generator reads Cephalo's profiles
    if args.profiles and args.family != "allocation":
        raise InputError(f"--profiles {args.profiles}: only `hetopt generate allocation` reads profiles "
                         f"(the {args.family} generator reads none)")
    extra = (Path(args.profiles) if args.profiles else None,) if args.family == "allocation" else ()
    try:
        for path in module.write(target, *extra):
            out.print(str(path), highlight=False)
    except OSError as exc:  # the folder cannot be made or written (permissions, a full disk)
        raise InputError(f"--out {target}: cannot write ({exc.strerror or exc})") from None
    except InputError as exc:
        raise plan_flag_error(exc) from None  # "profiles ..." -> "--profiles ..."
    return EXIT_OK


def cmd_profile(args: Args, out: Console) -> int:
    from hetopt.planner.setup.request import as_model
    from hetopt.profile import command as pc
    from hetopt.profile.measure import Options, device_memory, run

    if args.model is None or args.out is None:
        raise InputError("hetopt profile: give --model and --out (or `hetopt profile import ...`)")
    device = args.device
    if device is None:
        device = "cpu"
        with contextlib.suppress(ImportError):
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
    gpu = args.gpu or "cpu"
    if args.gpu is None and device.startswith("cuda"):
        import torch

        gpu = torch.cuda.get_device_name()
    try:
        o = Options(model=as_model(args.model), gpu=gpu, microbatches=pc.parse_ints(args.microbatch, "microbatch"),
                    tps=pc.parse_ints(args.tp, "tp"), recompute=pc.parse_names(args.recompute, "recompute", ("none", "full")),
                    precision=args.precision, seq=args.seq, parts=pc.parse_names(args.parts, "parts", PROFILE_PARTS),
                    collectives=pc.parse_names(args.collectives, "collectives", PROFILE_COLLECTIVES),
                    sizes=pc.parse_sizes(args.sizes), ranks=args.ranks, parameters=pc.parse_ints(args.parameters, "parameters"),
                    stack=args.stack, device=device,
                    memory_bytes=None if args.memory_gib is None else args.memory_gib * 2 ** 30,
                    warmup=args.warmup, repeats=args.repeats)
        target = Path(args.out)
        if args.dry_run:
            for line in pc.dry_run_lines(o, target, device_memory(o)):
                out.print(line, highlight=False)
            return EXIT_OK
        with progress(out, "profile", show=True) as bar:
            report = run(o, target, on_step=lambda done, total, label: bar.update(done, total, f"profile {label}"))
    except InputError as exc:
        raise plan_flag_error(exc) from None
    for line in report.refused:
        print(f"hetopt profile: refused before running: {line}", file=sys.stderr)
    out.print(pc.summary_line(report, target), highlight=False)
    return EXIT_INTERRUPTED if report.stopped else EXIT_OK


def cmd_profile_sailor(args: Args, out: Console) -> int:
    from hetopt.profile.sidebyside import report

    print(report(args.checkout, sailor_sim=args.sailor_sim, profiles_out=args.profiles_out, as_json=args.json))
    return EXIT_OK


def cmd_profile_import(args: Args, out: Console) -> int:
    from hetopt.profile import importers

    profile = importers.IMPORT[args.kind](args.files, gpu=args.gpu, model=args.model, precision=args.precision,
                                          scope=args.scope, source=args.source, sailor_gpu=args.sailor_gpu,
                                          sailor_model=args.sailor_model)
    from hetopt.profile.format import write_profile

    write_profile(profile, args.out)
    out.print(f"{profile.rows} rows ({len(profile.layers)} layer, {len(profile.optimizer)} optimizer, "
              f"{len(profile.collectives)} collective) imported into {args.out}", highlight=False)
    return EXIT_OK


def cmd_list(args: Args, out: Console) -> int:
    from hetopt.listing import CATALOGS, by_type_text

    rows = CATALOGS[args.what]()
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    if args.what == "clusters":  # one line per cluster: the node kinds as text
        rows = [dict(r, by_type=by_type_text(r["by_type"])) for r in rows]
        for r in rows:
            r["nodes × GPUs by type"] = r.pop("by_type")
            r["description"] = r.pop("description")
    print_table(out, rows_table(rows))
    return EXIT_OK


def cmd_export(args: Args, out: Console) -> int:
    from hetopt.export import export_file, write_output

    if args.out is not None and Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError(f"-o {args.out}: exists and is not a folder (give a folder name)")
    try:  # the plan alone: it carries its model's shape and its cluster's nodes
        result = export_file(args.file, args.to, allow_gaps=args.allow_gaps, alternative=args.alternative)
    except InputError as exc:
        raise plan_flag_error(exc) from None  # "to ..." -> "--to ..."
    if args.out is not None:
        for path in write_output(result, args.out):
            out.print(str(path), highlight=False)
    else:
        for name, text in result.files.items():
            sys.stdout.write(f"==> {name} <==\n{text}\n")
    for gap in result.gaps:
        print(f"hetopt: gap: {gap}", file=sys.stderr)
    return EXIT_OK
