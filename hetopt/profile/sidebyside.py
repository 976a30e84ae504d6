"""Sailor's measured runs priced by hetopt from Sailor's own profiles, beside Sailor's simulator.

    hetopt profile sailor SAILOR [--sailor-sim SIM.json] [--profiles-out DIR] [--json]

``SAILOR`` is a checkout of github:eth-easl/sailor (commit cf2c8e3): its profiles are imported
(``hetopt profile import sailor``: the simulator's ``simulations/profiles_tmp.json`` and its
network file, the same inputs its simulator reads) into a temporary folder, and the runs are
the shipped published sets ``sailor-gh200`` (homogeneous GH200 rows, priced as ``hetopt validate
--profile`` prices them) and ``sailor-mit`` (heterogeneous rows, :mod:`hetopt.profile.hetero`).
``SIM.json`` holds Sailor's simulator's time of each run (``{"validation file": seconds}``,
the file as its published row's source names it), computed outside hetopt by running Sailor's
own simulator (``Simulator.simulate_iteration_time``) on the run's plan from an unmodified
Sailor checkout; hetopt neither ships nor runs any of Sailor. Without ``--sailor-sim`` the
per-run table has hetopt's columns only, and the per-group summary, taken over the runs all
three priced, is empty.

Per group: the median of |predicted / measured − 1| and Spearman's rank correlation between
predicted and measured times, for hetopt from the profiles, hetopt's analytic model alone, and
Sailor's simulator (docs/validation.md, "Side by side with Sailor").
"""

from __future__ import annotations

import json
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hetopt.catalog import instances_dir
from hetopt.profile.format import merge, write_profile
from hetopt.profile.importers import import_sailor
from hetopt.profile.measured import Measured

#: The profiles imported from a Sailor checkout: (catalog GPU, Sailor's GPU, catalog model, Sailor's
#: model, precision). The GH200 runs' matmuls ran in TF32 (sailor-gh200.toml says why); the MIT
#: runs mix Turing GPUs without TF32, priced in fp32.
SAILOR_PROFILES = (
    ("GH200", "GH-96", "opt-350m", "OPT-350", "tf32"),
    ("GH200", "GH-96", "gpt-neo-2.7b", "GPT-Neo-2.7", "tf32"),
    ("RTX-3090", "RTX-3090", "opt-350m", "OPT-350", "fp32"),
    ("RTX-2080", "RTX-2080", "opt-350m", "OPT-350", "fp32"),
    ("Titan-RTX", "Titan-RTX", "opt-350m", "OPT-350", "fp32"),
)
PROFILES_TMP = "sailor/Planner/simulations/profiles_tmp.json"
NETWORK = "sailor/providers/multizone_bandwidths_het.json"


@dataclass(frozen=True)
class Run:
    """One measured run and its predicted times (None: not priced)."""

    id: str
    group: str
    source: str
    layout: str
    measured_s: float
    hetopt_profile_s: float | None
    hetopt_analytic_s: float | None
    sailor_s: float | None = None
    priced_from: tuple[str, ...] = ()


def import_profiles(sailor: Path, folder: Path) -> Measured:
    """Sailor's profiles and network curves as one hetopt profile (written to ``folder`` too)."""
    profiles = []
    for gpu, sgpu, model, smodel, precision in SAILOR_PROFILES:
        files = [str(sailor / PROFILES_TMP)] + ([str(sailor / NETWORK)] if model == "opt-350m" else [])
        p = import_sailor(files, gpu=gpu, model=model, precision=precision, sailor_gpu=sgpu, sailor_model=smodel,
                          source=f"eth-easl/sailor cf2c8e3 {PROFILES_TMP} [{smodel}][{sgpu}]")
        write_profile(p, folder / f"sailor-{smodel}-{sgpu}.toml")
        profiles.append(p)
    return Measured.of(merge(profiles))


def _validation_file(source: str) -> str:
    """The run's file inside Sailor's validation folder, as its row's source names it."""
    return source.split("validation/")[-1].split(",")[0].split()[0].rstrip(":")


def price_runs(measured: Measured) -> list[Run]:
    """Every run of ``sailor-gh200`` and ``sailor-mit``, priced with and without the profiles."""
    from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
    from hetopt.planner.evaluation.published import load_heterogeneous, load_published, layout_text
    from hetopt.planner.evaluation.validate import validate
    from hetopt.profile.hetero import price_hetero

    runs = []
    gh = instances_dir() / "published" / "sailor-gh200.toml"
    rows = load_published(gh)
    plain = validate(rows)
    profiled = validate(rows, parallelizer=BuiltinParallelizer(measured=measured))
    for a, b in zip(plain, profiled):
        m = a.measurement
        taken = () if b.priced is None else tuple(sorted({t for st in b.priced.stages for t in st.measured}))
        runs.append(Run(m.id, f"GH200 {m.model.name.split(' (')[0]}", m.source, layout_text(m.layout), m.value,
                        b.priced.iteration_time_s if b.priced else None, a.priced.iteration_time_s if a.priced else None,
                        priced_from=taken))
    for r in load_heterogeneous(instances_dir() / "published" / "sailor-mit.toml"):
        p, a = price_hetero(r, measured), price_hetero(r, None)
        runs.append(Run(r.id, "MIT mixed RTX (heterogeneous)", r.source, r.text(), r.value, p.iteration_time_s,
                        a.iteration_time_s, priced_from=p.profile_terms))
    return runs


def with_sailor(runs: list[Run], sim: dict[str, float]) -> list[Run]:
    """The runs with Sailor's simulator's times (by validation file)."""
    from dataclasses import replace

    return [replace(r, sailor_s=sim.get(_validation_file(r.source))) for r in runs]


def _spearman(xs: list[float], ys: list[float]) -> float | None:
    from scipy.stats import spearmanr

    if len(xs) < 3:
        return None
    rho = spearmanr(xs, ys).statistic
    return None if rho != rho else float(rho)


def summary(runs: list[Run]) -> dict[str, dict]:
    """Per group (and all): runs, median |error| and Spearman of each predictor over the runs all three priced."""
    groups: dict[str, list[Run]] = {}
    for r in runs:
        groups.setdefault(r.group, []).append(r)
    groups["all"] = list(runs)
    out = {}
    for g, rs in groups.items():
        both = [r for r in rs if r.hetopt_profile_s and r.hetopt_analytic_s and r.sailor_s]
        row = {"runs": len(both)}
        for name in ("hetopt_profile_s", "hetopt_analytic_s", "sailor_s"):
            pred = [getattr(r, name) for r in both]
            real = [r.measured_s for r in both]
            row[name] = {"median_abs_error": statistics.median(abs(p / m - 1) for p, m in zip(pred, real)) if both else None,
                         "spearman": _spearman(pred, real)}
        out[g] = row
    return out


def markdown(runs: list[Run], summ: dict[str, dict]) -> str:
    """The per-run table and the per-group summary as Markdown."""
    def err(p, m):
        return "-" if not p else f"{p:.3f} ({100 * (p / m - 1):+.0f}%)"
    lines = ["| run | layout | measured s | hetopt, Sailor's profiles | hetopt, analytic | Sailor's simulator |",
             "|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r.id} | {r.layout} | {r.measured_s:.3f} | {err(r.hetopt_profile_s, r.measured_s)} | "
                     f"{err(r.hetopt_analytic_s, r.measured_s)} | {err(r.sailor_s, r.measured_s)} |")
    lines += ["", "| group | runs | median abs. error: hetopt + profiles / analytic / Sailor | Spearman: hetopt + profiles / "
              "analytic / Sailor |", "|---|---|---|---|"]

    def f(x, pct):
        return "-" if x is None else (f"{100 * x:.1f}%" if pct else f"{x:.2f}")
    for g, s in summ.items():
        keys = ("hetopt_profile_s", "hetopt_analytic_s", "sailor_s")
        lines.append(f"| {g} | {s['runs']} | " + " / ".join(f(s[k]["median_abs_error"], True) for k in keys) + " | "
                     + " / ".join(f(s[k]["spearman"], False) for k in keys) + " |")
    return "\n".join(lines)


def report(sailor: str | Path, *, sailor_sim: str | Path | None = None, profiles_out: str | Path | None = None,
           as_json: bool = False) -> str:
    """The side by side as text (Markdown tables, or one JSON document): ``hetopt profile sailor``."""
    folder = Path(profiles_out or tempfile.mkdtemp(prefix="sailor-profiles-"))
    folder.mkdir(parents=True, exist_ok=True)
    runs = price_runs(import_profiles(Path(sailor), folder))
    if sailor_sim:
        runs = with_sailor(runs, json.loads(Path(sailor_sim).read_text()))
    summ = summary(runs)
    if as_json:
        return json.dumps({"runs": [r.__dict__ for r in runs], "summary": summ}, indent=1)
    return markdown(runs, summ)
