"""The papers' findings (issue part 9), measured on this cost model: a documented benchmark.

``python -m hetopt.planner.findings [--json]`` prints, for each finding, the numbers behind
it and whether it holds here. The tests (``tests/planner/test_findings.py``) assert the
findings that hold; the ones that do not are reported as such, with their numbers, and the
README says why. Nothing here is tuned to make a finding hold.

* **Tangram Fig. 8** (GPT-3 6.7B on 16 GPUs of C1, T4:V100 from 16:0 to 0:16): the composed
  plan is never slower than a Tangram baseline (single island, uniform or
  compute-proportional layers) and the V100 island takes more layers as V100s are added.
* **Tangram Fig. 11** (GPT-3 13B on C3): adding the 4×V100-16GB VM to 4×A100-80GB +
  8×V100-32GB does not lower the iteration time; measured over several global batches.
* **Cephalo Fig. 9** (Cluster A, the measured allocation instances): the A6000 gets the
  largest batch and state share, the L4s about half its batch, a P40 more state than a P100.

And one what-if that is not the paper's: how much slower the V100-16GB GPUs would have to
be for Fig. 11's finding to hold here.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import asdict, dataclass, field

import hetopt
from hetopt.catalog import instances_dir
from hetopt.hardware import load_gpus
from hetopt.planner.cluster import Cluster, load_cluster
from hetopt.planner.plan import plan
from hetopt.workload import load_model

#: The Tangram baselines: compositions restricted to one island or a fixed layer split, so
#: the exact composition can never be slower (Cephalo's FSDP is a different execution model).
TANGRAM_BASELINES = ("single-island", "uniform-layers", "compute-proportional")
#: Relative slack for "never slower" comparisons of floating-point times.
RTOL = 1e-9
#: (global batch, micro-batch size) settings of the Fig. 11 measurement.
FIG11_SETTINGS = ((16, 1), (32, 2), (64, 2), (128, 2), (256, 2))
#: The measured Cluster A instances of Fig. 9 (``instances/allocation``).
FIG9_INSTANCES = tuple(
    f"cephalo-a-{m}-b{b}-measured" for m in ("gpt3-2.7b", "llama-3.2-3b", "vit-g-14") for b in (128, 256)
)
#: "About half": the L4's batch over the A6000's within this range.
HALF_RANGE = (0.35, 0.65)


@dataclass
class Finding:
    """One finding: its name, the claim, whether it holds here, and the rows behind it."""

    name: str
    claim: str
    holds: bool
    rows: list[dict] = field(default_factory=list)
    note: str = ""


def _model(name: str):
    return load_model(instances_dir() / "models" / f"{name}.toml")


def tangram_fig8_cluster(v100_nodes: int) -> Cluster:
    """16 GPUs of Tangram's C1: ``4 - v100_nodes`` T4 VMs and ``v100_nodes`` V100 VMs (4 GPUs each).

    >>> tangram_fig8_cluster(1).gpus
    16
    """
    c1 = load_cluster("tangram-c1")
    names = [f"t4-{i}" for i in range(4 - v100_nodes)] + [f"v100-{i}" for i in range(v100_nodes)]
    return c1.subset(names, name=f"c1-t4x{4 * (4 - v100_nodes)}-v100x{4 * v100_nodes}")


def fig8(global_batch: int = 64, microbatch_size: int = 2) -> Finding:
    """Tangram Fig. 8 on this cost model (five plans of GPT-3 6.7B)."""
    cfg = _model("gpt3-6.7b")
    rows = []
    for k in range(5):
        # Tangram's figure, by Tangram's objective (the closed form the composition minimizes)
        p = plan(tangram_fig8_cluster(k), cfg, global_batch=global_batch, microbatch_size=microbatch_size,
                 time_model="closed-form")
        alts = {a.name: a.iteration_time_s for a in p.alternatives}
        baselines = [alts[n] for n in TANGRAM_BASELINES if alts.get(n) is not None]
        rows.append({
            "t4": 16 - 4 * k, "v100": 4 * k, "status": p.status.value, "composed_s": p.iteration_time_s,
            "best_baseline_s": min(baselines, default=None), "fsdp_s": alts.get("cephalo-fsdp"),
            "v100_layers": sum(s.layers for s in p.stages if s.gpu.startswith("V100")),
        })
    never_slower = all(
        r["composed_s"] is not None and (r["best_baseline_s"] is None or r["composed_s"] <= r["best_baseline_s"] * (1 + RTOL))
        for r in rows
    )
    layers = [r["v100_layers"] for r in rows]
    more_layers = all(a < b for a, b in zip(layers, layers[1:]))
    return Finding(
        "Tangram Fig. 8", "the composed plan is never slower than a Tangram baseline; the V100 island takes more layers "
        "as V100s are added", never_slower and more_layers, rows,
        note=f"GPT-3 6.7B, B = {global_batch}, m = {microbatch_size}",
    )


def fig11(settings=FIG11_SETTINGS) -> Finding:
    """Tangram Fig. 11 on this cost model: C3's A100 + V100-32GB islands with and without the V100-16GB one."""
    cfg = _model("gpt3-13b")
    c3 = load_cluster("tangram-c3")
    without = c3.subset(["a100-80gb", "v100-32gb"])
    with_16 = c3.subset(["a100-80gb", "v100-32gb", "v100-16gb"])
    rows = []
    for batch, m in settings:
        a = plan(without, cfg, global_batch=batch, microbatch_size=m, alternatives=False)
        b = plan(with_16, cfg, global_batch=batch, microbatch_size=m, alternatives=False)
        used = [s for s in b.stages if s.island == "v100-16gb"]
        rows.append({
            "global_batch": batch, "microbatch": m, "without_s": a.iteration_time_s, "with_s": b.iteration_time_s,
            "ratio": b.iteration_time_s / a.iteration_time_s, "v100_16gb_layers": sum(s.layers for s in used),
        })
    holds = all(r["with_s"] >= r["without_s"] * (1 - RTOL) for r in rows)
    return Finding(
        "Tangram Fig. 11", "adding the 4xV100-16GB VM to 4xA100-80GB + 8xV100-32GB does not lower the iteration time",
        holds, rows, note="GPT-3 13B; ratio = with / without (below 1: the island helps)",
    )


#: Factors on the V100-16GB's speed (GEMM efficiency and memory bandwidth) in the Fig. 11 what-if.
FIG11_SLOWDOWNS = (1.0, 0.75, 0.5, 0.4, 0.3, 0.2)


def fig11_what_if(factors=FIG11_SLOWDOWNS, global_batch: int = 128, microbatch_size: int = 2) -> Finding:
    """How much slower the V100-16GB GPUs would have to be for Fig. 11's finding to hold.

    Not a finding of the paper: the same comparison as :func:`fig11` with the V100-16GB's
    GEMM efficiency and memory bandwidth scaled by each factor (everything else as calibrated). ``holds``
    says whether the island stops helping at some factor.
    """
    cfg = _model("gpt3-13b")
    base = plan(load_cluster("tangram-c3").subset(["a100-80gb", "v100-32gb"]), cfg, global_batch=global_batch,
                microbatch_size=microbatch_size, alternatives=False).iteration_time_s
    rows = []
    for f in factors:
        gpus = load_gpus()
        v100 = gpus["V100-PCIe-16GB"]
        # slower GPUs: both the GEMM efficiency and the memory bandwidth scaled by f
        gpus["V100-PCIe-16GB"] = dataclasses.replace(v100, gemm_efficiency=v100.gemm_efficiency * f, memory_bandwidth=v100.memory_bandwidth * f)
        cluster = load_cluster("tangram-c3", catalog=gpus).subset(["a100-80gb", "v100-32gb", "v100-16gb"])
        p = plan(cluster, cfg, global_batch=global_batch, microbatch_size=microbatch_size, alternatives=False)
        rows.append({
            "efficiency_factor": f, "without_s": base, "with_s": p.iteration_time_s, "ratio": p.iteration_time_s / base,
            "v100_16gb_layers": sum(s.layers for s in p.stages if s.island == "v100-16gb"),
        })
    return Finding(
        "Tangram Fig. 11, what-if", "the V100-16GB island stops helping when its GPUs are this much slower",
        any(r["with_s"] >= r["without_s"] * (1 - RTOL) for r in rows), rows,
        note=f"GPT-3 13B, B = {global_batch}, m = {microbatch_size}; efficiency_factor scales the GEMM efficiency and the memory bandwidth",
    )


def fig9(instances=FIG9_INSTANCES) -> Finding:
    """Cephalo Fig. 9 on the measured Cluster A instances (allocation family, exact dp)."""
    rows = []
    for name in instances:
        r = hetopt.solve(hetopt.load(instances_dir() / "allocation" / f"{name}.toml"), "dp")
        by: dict[str, list] = {}
        for g in r.solution.gpus:
            by.setdefault(g.type.split("-")[0], []).append(g)
        a6000 = by["A6000"][0]
        others = [g for g in r.solution.gpus if g is not a6000]
        checks = {
            "a6000_largest_batch": all(a6000.batch > g.batch for g in others),
            "a6000_largest_state": all(a6000.state_share > g.state_share for g in others),
            "l4_about_half": all(HALF_RANGE[0] <= g.batch / a6000.batch <= HALF_RANGE[1] for g in by["L4"]),
            "p40_more_state_than_p100": min(g.state_share for g in by["P40"]) > max(g.state_share for g in by["P100"]),
        }
        rows.append({
            "instance": name, "a6000_batch": a6000.batch, "l4_batch": by["L4"][0].batch,
            "a6000_state": a6000.state_share, "max_other_state": max(g.state_share for g in others),
            "p40_state": min(g.state_share for g in by["P40"]), "p100_state": max(g.state_share for g in by["P100"]),
            **checks, "holds": all(checks.values()),
        })
    return Finding(
        "Cephalo Fig. 9", "A6000: largest batch and state share; L4: about half its batch; P40: more state than P100",
        all(r["holds"] for r in rows), rows, note="measured Cluster A instances, exact dp and LP state split",
    )


def _cell(x) -> str:
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.4g}"
    return "-" if x is None else str(x)


def main(argv: list[str] | None = None) -> int:
    """``python -m hetopt.planner.findings [--json] [--only fig8|fig11|fig11-what-if|fig9]``."""
    parser = argparse.ArgumentParser(prog="python -m hetopt.planner.findings", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--only", choices=("fig8", "fig11", "fig11-what-if", "fig9"), help="run one finding")
    args = parser.parse_args(argv)
    runs = {"fig8": fig8, "fig11": fig11, "fig11-what-if": fig11_what_if, "fig9": fig9}
    found = [runs[args.only]()] if args.only else [f() for f in runs.values()]
    if args.json:
        json.dump([asdict(f) for f in found], sys.stdout, indent=2)
        print()
        return 0
    for f in found:
        if f.name.endswith("what-if"):
            verdict = "the island stops helping at a factor tried" if f.holds else "the island helps at every factor tried"
        else:
            verdict = f"{'holds' if f.holds else 'does NOT hold'} on this cost model"
        print(f"## {f.name}: {verdict}")
        print(f"claim: {f.claim}" + (f" ({f.note})" if f.note else ""))
        header = list(f.rows[0])
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in f.rows:
            print("| " + " | ".join(_cell(r[h]) for h in header) + " |")
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
