"""The papers' findings (issue part 9), measured on this cost model: a documented benchmark.

``hetopt findings [--json] [--only NAME]`` prints, for each finding, the numbers behind
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

Tangram's MoE results (issue 11), with expert parallelism (EP, FSEP), context parallelism and
activation offloading in the built-in parallelizer:

* **GShard MoE on C1** (2.4B, 7.1B, 10B; sequence 1024, B = 128; T4:V100 at 4:4 and 8:8):
  for 7.1B the best plan uses the V100 island alone; at 10B memory limits the balancing.
* **Mixtral-8x7B and Qwen3-30B-A3B on C2** (sequence 4096, B = 128, m = 4; all layers and
  half of them): 1.4-1.5x over the uniform plan for Mixtral, about 1.1x for Qwen3, more
  layers on the H100s, and a large slowdown for 32-layer Mixtral when the A100s take the
  front of the pipeline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import hetopt
from hetopt.catalog import instances_dir
from hetopt.hardware import load_gpus
from hetopt.interrupt import stop_requested
from hetopt import solvers
from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
from hetopt.planner.setup.cluster import Cluster, load_cluster
from hetopt.planner.search.compose import link_matrix, pipeline_instance
from hetopt.planner.parallelizer.protocol import Slice
from hetopt.planner.setup.configure import choose_islands
from hetopt.planner.steps import plan
from hetopt.workload import ModelConfig, load_model

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


#: Tangram's GShard settings: sequence 1024, global batch 128; T4:V100 GPUs per island.
GSHARD_MODELS = ("gshard-moe-2.4b", "gshard-moe-7.1b", "gshard-moe-10b")
GSHARD_SPLITS = (4, 8)
GSHARD_SEQ, GSHARD_BATCH = 1024, 128
#: Memory use above this share of a GPU's capacity counts as "memory limits the balancing".
MEMORY_BOUND_SHARE = 0.9
#: Tangram's C2 MoE settings: sequence 4096, global batch 128, micro-batch 4.
C2_MODELS = ("mixtral-8x7b", "qwen3-30b-a3b")
C2_SEQ, C2_BATCH, C2_MICROBATCH = 4096, 128, 4
#: Tangram's reported speed-ups over its uniform DP/TP/PP/FSEP plan (full models), and the
#: slack around them within which a measured ratio counts as matching.
C2_REPORTED_SPEEDUP = {"mixtral-8x7b": (1.4, 1.5), "qwen3-30b-a3b": (1.1, 1.1)}
SPEEDUP_SLACK = 0.1
#: "A large slowdown": the A100-first pipeline at least this much slower than the H100-first one.
LARGE_SLOWDOWN = 1.2


def gshard_cluster(per_island: int) -> Cluster:
    """``per_island`` T4s and as many V100s of Tangram's C1 (4 GPUs per VM).

    >>> gshard_cluster(8).gpus
    16
    """
    k = per_island // 4
    c1 = load_cluster("tangram-c1")
    return c1.subset([f"t4-{i}" for i in range(k)] + [f"v100-{i}" for i in range(k)], name=f"c1-t4x{per_island}-v100x{per_island}")


def gshard_c1(models=GSHARD_MODELS, splits=GSHARD_SPLITS) -> Finding:
    """Tangram's GShard MoE results on C1 (T4 + V100), on this cost model."""
    rows = []
    for name in models:
        cfg = _model(name)
        for n in splits:
            p = plan(gshard_cluster(n), cfg, global_batch=GSHARD_BATCH, seq=GSHARD_SEQ, time_model="closed-form")
            alts = {a.name: a for a in p.alternatives}
            v100 = [s for s in p.stages if s.gpu.startswith("V100")]
            rows.append({
                "model": name, "t4:v100": f"{n}:{n}", "status": p.status.value, "composed_s": p.iteration_time_s,
                "single_island_s": alts["single-island"].iteration_time_s if "single-island" in alts else None,
                "t4_layers": sum(s.layers for s in p.stages if s.gpu == "T4"), "v100_layers": sum(s.layers for s in v100),
                "v100_memory_share": max((s.memory_gib / 16 for s in v100), default=None),
                "layouts": "; ".join(sorted({s.layout for s in p.stages})),
            })
    by = {(r["model"], r["t4:v100"]): r for r in rows}
    v100_alone = [by[k] for k in by if k[0] == "gshard-moe-7.1b"]
    holds_71 = bool(v100_alone) and all(r["t4_layers"] == 0 for r in v100_alone)
    big = [by[k] for k in by if k[0] == "gshard-moe-10b"]
    # memory limits: no plan fits at all, or the V100s are full while the T4s take layers
    holds_10 = bool(big) and all(r["status"] == "INFEASIBLE" or (r["v100_memory_share"] is not None and r["t4_layers"] > 0
                                 and r["v100_memory_share"] >= MEMORY_BOUND_SHARE) for r in big)
    for r in rows:
        r["claim_holds"] = holds_71 if r["model"] == "gshard-moe-7.1b" else holds_10 if r["model"] == "gshard-moe-10b" else None
    return Finding(
        "Tangram GShard MoE on C1", "7.1B: the best plan uses the V100 island alone; 10B: memory limits the balancing "
        f"(nothing fits, or the V100 stages are at >= {MEMORY_BOUND_SHARE:.0%} of their 16 GiB while the T4s take layers)",
        holds_71 and holds_10, rows,
        note=f"sequence {GSHARD_SEQ}, B = {GSHARD_BATCH}, micro-batch size chosen by the planner; v100_memory_share is the "
             "fullest V100 stage's memory over 16 GiB",
    )


def half_layers(cfg: ModelConfig) -> ModelConfig:
    """The model with half its layers (Tangram's smaller MoE variants)."""
    return dataclasses.replace(cfg, layers=cfg.layers // 2, name=f"{cfg.name} ({cfg.layers // 2} layers)")


def ordered_time(cluster: Cluster, cfg: ModelConfig, front: str, *, seq: int = C2_SEQ, global_batch: int = C2_BATCH,
                 microbatch_size: int = C2_MICROBATCH) -> float | None:
    """The best two-island pipeline whose first island is the one of GPU type ``front`` (exact over the split).

    Every split point k gives the front island the first k layers and the other island the
    rest; the pipeline family's ``dp`` picks the split and both layouts. None if nothing fits.
    """
    found = solvers.solve(cluster.islands)
    chosen = choose_islands(cluster, found, None)
    specs = chosen.specs
    if len(specs) != 2:
        raise ValueError(f"{cluster.name} forms {len(specs)} islands, not 2")
    first = next(i for i, s in enumerate(specs) if s.gpu.name.startswith(front))
    second = 1 - first
    par = BuiltinParallelizer().for_gpus(s.gpu for s in specs)  # one job, one precision, as hetopt plan
    atoms = par.slice_model(cfg, seq=seq)
    m, M = microbatch_size, global_batch // microbatch_size
    plans: dict[int, list] = {first: [], second: []}
    for k in range(1, len(atoms)):
        plans[first] += par.parallelize(Slice(atoms[:k]), specs[first], microbatch_size=m, microbatches=M, global_batch=global_batch)
        plans[second] += par.parallelize(Slice(atoms[k:]), specs[second], microbatch_size=m, microbatches=M, global_batch=global_batch)
    links = link_matrix(cluster, chosen.members, cfg, seq, m)
    instance, _ = pipeline_instance("ordered", cfg, specs, plans, links, M, 1.0)
    if not instance.options:
        return None
    r = solvers.solve(instance, "dp")
    return r.objective if r.status.has_solution else None


@dataclass(frozen=True)
class _OneLayout(BuiltinParallelizer):
    """The built-in parallelizer restricted to one (TP, DP, EP, FSEP) choice: a uniform layout."""

    only: tuple = (1, 1, 1, False)

    def layouts(self, slice, island, *, microbatch_size, microbatches=None):
        return [lay for lay in super().layouts(slice, island, microbatch_size=microbatch_size, microbatches=microbatches)
                if (lay.tp, lay.dp, lay.ep, lay.fsep) == self.only]


def uniform_layout_time(cluster: Cluster, cfg: ModelConfig, *, seq: int = C2_SEQ, global_batch: int = C2_BATCH,
                        microbatch_size: int = C2_MICROBATCH) -> tuple[float | None, str]:
    """Tangram's uniform baseline, approximated: one (TP, DP, EP, FSEP) choice on every island,
    layers split by GPU count (as the uniform-layers alternative); pipeline depth,
    recomputation and ZeRO free per island. The best such plan and its choice."""
    from hetopt.family import Deadline
    from hetopt.planner.alternatives.baselines import Setting, _restricted
    from hetopt.planner.search.compose import split_layers
    from hetopt.planner.parallelizer.protocol import divisors

    found = solvers.solve(cluster.islands)
    chosen = choose_islands(cluster, found, None)
    specs = chosen.specs
    counts = split_layers([s.gpus for s in specs], cfg.layers)
    gpn = min(s.gpus_per_node for s in specs)
    best: tuple[float | None, str] = (None, "no uniform layout fits")
    eps = divisors(cfg.experts) if cfg.experts > 1 else [1]
    for tp in divisors(gpn):
        for dp in divisors(microbatch_size):
            for ep in eps:
                for fsep in (False, True) if ep > 1 else (False,):
                    par = _OneLayout(only=(tp, dp, ep, fsep))
                    s = Setting(cluster, cfg, specs, chosen.members, par, par.slice_model(cfg, seq=seq), global_batch, seq,
                                microbatch_size)
                    r = _restricted(s, counts, microbatch_size, Deadline(None))
                    if r is not None and r.status.has_solution and (best[0] is None or r.objective < best[0]):
                        best = (r.objective, f"tp{tp} dp{dp}" + (f" ep{ep}" + (" fsep" if fsep else "") if ep > 1 else ""))
    return best


def moe_c2(models=C2_MODELS, halves=(False, True)) -> Finding:
    """Tangram's Mixtral-8x7B and Qwen3-30B-A3B results on C2 (A100 + H100 NVL), on this cost model."""
    c2 = load_cluster("tangram-c2")
    rows = []
    for name in models:
        for half in halves:
            cfg = half_layers(_model(name)) if half else _model(name)
            # Tangram's objective, as its baseline below is priced: the closed form
            p = plan(c2, cfg, global_batch=C2_BATCH, microbatch_size=C2_MICROBATCH, seq=C2_SEQ, time_model="closed-form")
            alts = {a.name: a.iteration_time_s for a in p.alternatives}
            uniform = alts.get("uniform-layers")
            h100 = sum(s.layers for s in p.stages if s.gpu.startswith("H100"))
            one, choice = uniform_layout_time(c2, cfg)
            row = {
                "model": name, "layers": cfg.layers, "status": p.status.value, "composed_s": p.iteration_time_s,
                "uniform_s": uniform, "speedup": uniform / p.iteration_time_s if uniform and p.iteration_time_s else None,
                "one_layout_s": one, "one_layout": choice,
                "one_layout_speedup": one / p.iteration_time_s if one and p.iteration_time_s else None,
                "h100_layers": h100, "a100_layers": cfg.layers - h100 if p.iteration_time_s else None,
                "layouts": "; ".join(sorted({s.layout for s in p.stages})),
                "a100_front_s": None, "h100_front_s": None,
            }
            if name == "mixtral-8x7b" and not half:
                row["a100_front_s"] = ordered_time(c2, cfg, "A100")
                row["h100_front_s"] = ordered_time(c2, cfg, "H100")
            rows.append(row)
    checks = []
    for r in rows:
        lo, hi = C2_REPORTED_SPEEDUP[r["model"]]
        if r["layers"] == _model(r["model"]).layers:
            s = r["one_layout_speedup"]  # Tangram's baseline is one uniform layout
            checks.append(s is not None and lo - SPEEDUP_SLACK <= s <= hi + SPEEDUP_SLACK)
        checks.append(r["a100_layers"] is not None and r["h100_layers"] > r["a100_layers"])
        if r["a100_front_s"] is not None or r["h100_front_s"] is not None:
            a, h = r["a100_front_s"], r["h100_front_s"]
            checks.append(h is not None and (a is None or a >= LARGE_SLOWDOWN * h))
    return Finding(
        "Tangram MoE on C2", "composed over one uniform layout: 1.4-1.5x (Mixtral), about 1.1x (Qwen3); more layers on the H100s; "
        f"32-layer Mixtral at least {LARGE_SLOWDOWN}x slower with the A100s in front",
        bool(checks) and all(checks), rows,
        note=f"sequence {C2_SEQ}, B = {C2_BATCH}, m = {C2_MICROBATCH}; uniform = the uniform-layers baseline (equal layers "
             "per island, each island's best layout incl. EP/FSEP); one_layout = Tangram's uniform DP/TP/PP/FSEP plan, "
             "approximated: one (TP, DP, EP, FSEP) choice on both islands, equal layers, depth, recomputation and ZeRO per "
             f"island; the claim is checked on one_layout_speedup, within {SPEEDUP_SLACK} of Tangram's range; a100_front_s / h100_front_s: the best pipeline with that island first (None: nothing fits)",
    )


#: The findings by name, as ``hetopt findings --only`` takes them.
FINDINGS = {"fig8": fig8, "fig11": fig11, "fig11-what-if": fig11_what_if, "fig9": fig9, "gshard-c1": gshard_c1,
            "moe-c2": moe_c2}


def run_findings(only: str | None = None, on_start: Callable[[str], None] | None = None) -> list[Finding]:
    """Every finding, or the one named ``only`` (a key of :data:`FINDINGS`); ``on_start(name)``
    before each (for a progress line). Stops after the finding that runs when a stop is
    requested (Ctrl-C: :mod:`hetopt.interrupt`), with the findings done so far."""
    found = []
    for name in [only] if only else list(FINDINGS):
        if on_start is not None:
            on_start(name)
        finding = FINDINGS[name]()
        if stop_requested():  # cut short: its rows are not the finding
            break
        found.append(finding)
    return found


def verdict(f: Finding) -> str:
    """Whether the finding holds here, in words (a what-if reads as what it found)."""
    if f.name.endswith("what-if"):
        return "the island stops helping at a factor tried" if f.holds else "the island helps at every factor tried"
    return f"{'holds' if f.holds else 'does NOT hold'} on this cost model"
