"""Printing a :class:`HeteroPlan` for a person (the JSON form is ``hetopt.jsonout.plain``).

The plan fits the terminal it is printed on, down to 80 columns, and never cuts a name
(docs/cli.md, "The plan on a terminal"):

* each island gets a short id (A, B, ..., Z, AA, ...) in the islands table, the one place its
  full name is printed; the other tables and the alternatives' lines call it by its id;
* every table is fitted to the width with each column at least as wide as its longest word
  (:func:`hetopt.tables.print_table`), or printed one wrapped line per row when it cannot be;
* a stage's layout is shown on the first stage of each island, the stages after it run the same;
* the alternatives' details are lines under their table, and the pruning counters and the
  islands' member nodes print with ``--verbose`` only.
"""

from __future__ import annotations

import re
import string

from rich.console import Console
from rich.table import Table

from hetopt import costmodel as cm
from hetopt.planner.search.outcome import STOPPED
from hetopt.planner.answer import PRICED_BY_PIPELINE
from hetopt.planner.answer import HeteroPlan, comparable
from hetopt.result import Status
from hetopt.tables import add_column, counted, print_table, styled_table


def _f(x, fmt: str = ".4g") -> str:
    return "-" if x is None else format(x, fmt)


def _members(names: list[str], shown: int = 3, noun: str = "nodes") -> str:
    """The first few names of a long list (big islands have hundreds of member nodes)."""
    head = ", ".join(names[:shown])
    return head if len(names) <= shown else f"{head}, ... ({len(names)} {noun})"


def _table(title: str, header: list[str], rows: list[list[str]]) -> Table:
    """The plan's tables (cells already formatted) in the one style of :mod:`hetopt.tables`."""
    table = styled_table(title)
    for k, h in enumerate(header):
        add_column(table, h, numeric=bool(rows) and all(_NUMBER.fullmatch(r[k]) for r in rows))
    for r in rows:
        table.add_row(*r)
    return table


#: A cell that is one number (a time, a count, a speed-up "1.27", or "-" for none).
_NUMBER = re.compile(r"-|[-+]?\d[\d,]*(\.\d+)?([eE][-+]?\d+)?×?")


def island_id(k: int) -> str:
    """The short id of the ``k``-th island (from 0): A ... Z, then AA, AB, ... as spreadsheet columns.

    >>> [island_id(k) for k in (0, 1, 25, 26, 27, 701, 702)]
    ['A', 'B', 'Z', 'AA', 'AB', 'ZZ', 'AAA']
    """
    letters = string.ascii_uppercase
    out = ""
    k += 1
    while k:
        k, r = divmod(k - 1, 26)
        out = letters[r] + out
    return out


class Names:
    """The plan's island names and their short ids; :meth:`short` puts the ids in a text.

    >>> names = Names(["a100-0+1", "a100-0+10"])
    >>> names.short("layers a100-0+1 12, a100-0+10 12 (a100-0+1x)")
    'layers A 12, B 12 (a100-0+1x)'
    """

    def __init__(self, islands: list[str]) -> None:
        self.ids = {name: island_id(k) for k, name in enumerate(islands)}
        # the longest names first, and only whole names (not "a100-0+1" inside "a100-0+10")
        alternatives = "|".join(re.escape(n) for n in sorted(self.ids, key=len, reverse=True))
        self._pattern = re.compile(rf"(?<![\w+.-])(?:{alternatives})(?![\w+.-])") if self.ids else None

    def short(self, text: str) -> str:
        """``text`` with every island name replaced by its id."""
        return text if self._pattern is None else self._pattern.sub(lambda m: self.ids[m.group(0)], text)


def _stage_ranges(indices: list[int]) -> str:
    """Stage numbers as ranges: [0, 1, 2, 5] is "0-2, 5"; none is "-"."""
    if not indices:
        return "-"
    runs, start = [], indices[0]
    for prev, k in zip(indices, indices[1:] + [None]):
        if k != prev + 1:
            runs.append(str(start) if start == prev else f"{start}-{prev}")
            start = k
    return ", ".join(runs)


def _print_islands(p: HeteroPlan, names: Names, out: Console, verbose: bool) -> None:
    """The islands with their ids, GPUs and the stages each runs (``-``: none)."""
    on = {i["name"]: [k for k, s in enumerate(p.stages) if s.island == i["name"]] for i in p.islands}
    unused = sum(1 for v in on.values() if not v) if p.stages else 0
    title = "islands" + (f" ({counted(unused, 'island')} without a stage)" if unused else "")
    print_table(out, _table(title, ["id", "island", "GPU", "nodes", "GPUs", "stages"],
                            [[names.ids[i["name"]], i["name"], i["gpu"], str(i["nodes"]), str(i["gpus"]),
                              _stage_ranges(on[i["name"]])] for i in p.islands]))
    if verbose:
        for i in p.islands:
            out.print(f" {names.ids[i['name']]} members: {', '.join(i['members'])}", highlight=False, markup=False)


def _print_stages(p: HeteroPlan, names: Names, out: Console) -> None:
    """One row per stage; an island's layout on its first stage (its other stages run the same)."""
    # EP, CP and offloading only where a stage uses them (a dense model's plan has none)
    beyond = any(s.ep > 1 or s.cp > 1 or s.offload for s in p.stages)
    rows = []
    for k, s in enumerate(p.stages):
        first = k == 0 or (p.stages[k - 1].island, p.stages[k - 1].layout) != (s.island, s.layout)
        last = s.first_layer + s.layers - 1
        rows.append([str(k), names.ids.get(s.island, s.island), f"{s.first_layer}-{last}" if s.layers > 1 else str(last),
                     s.layout if first else "",
                     *([f"{s.ep}{' fsep' if s.fsep else ''}", str(s.cp), "yes" if s.offload else "no"] * beyond),
                     str(s.gpus), _f(s.time_s), _memory(s.memory_gib, s.capacity_gib), str(s.in_flight)])
    title = (f"composed pipeline: {counted(len(p.stages), 'stage')}, "
             f"{counted(p.microbatches, 'pipeline micro-batch')} of {counted(p.microbatch_size, 'sample')} "
             "(a stage's dp replicas split each)")
    print_table(out, _table(title, ["stage", "island", "layers", "layout", *(["EP", "CP", "offload"] * beyond), "GPUs",
                                    "time_s", "memory_gib of", "in flight"], rows))
    out.print("layout: TP PP DP, recompute, ZeRO" + ("; on an island's first stage, its other stages run the same"
                                                    if any(not r[3] for r in rows) else ""), highlight=False)


def _cut_by(p: HeteroPlan) -> str:
    """What cut an answer short: Ctrl-C when the plan says it was stopped by it, else the limit."""
    return STOPPED if p.reason.startswith(STOPPED) else "cut by the time limit"


def _print_replicas(p: HeteroPlan, out: Console, names: Names | None = None) -> None:
    """The data-parallel replicas beside the single pipeline (``hetopt plan --replicas``)."""
    names = names or Names([])
    r = p.replicas
    line = f"replicas: status {r.status.value}"
    if r.status.has_solution:
        line += (f", bound {_f(r.bound_s)} s (the ideal), gap {_f(r.gap, '.3g')}; the replicas family's dp: "
                 f"{r.method_status} over {counted(r.candidates, 'candidate')}")
    out.print(line + (f": {names.short(r.reason)}" if r.reason else ""), highlight=False)
    if not r.status.has_solution:
        return
    print_table(out, _table(
        "data-parallel replicas (units: " + ", ".join(f"{s['name']}×{s['count']}" for s in r.shapes) + ")",
        ["units", "islands", "pipeline", "micro-batches", "samples", "time_s"],
        [[x.units, names.short(x.islands), x.stages, str(x.microbatches), str(x.samples), _f(x.time_s)]
         for x in r.replicas],
    ))
    speedup = ""
    if p.iteration_time_s and comparable(p.status, r.status):
        speedup = f", {p.iteration_time_s / r.iteration_time_s:.2f}× the single pipeline"
    elif p.iteration_time_s:  # a proven time beside a cut one: the ratio would mislead
        cut = "the single pipeline" if p.status != Status.OPTIMAL else "the replicas"
        speedup = f"; no speed-up shown: {cut} was {_cut_by(p)} ({p.status.value} and {r.status.value})"
    out.print(f"replicas iteration {_f(r.iteration_time_s)} s (slowest replica + sync {_f(r.sync_s)} s), "
              f"efficiency {_f(100 * r.efficiency, '.1f')}% of the ideal{speedup}", highlight=False)


def _memory(memory_gib: float, capacity_gib: float | None) -> str:
    """A stage's memory per GPU against its capacity: ``11.4 of 12``."""
    return _f(memory_gib, ".3g") + ("" if capacity_gib is None else f" of {capacity_gib:.3g}")


def print_plan(p: HeteroPlan, out: Console, *, verbose: bool = False) -> None:
    """The islands, the composed pipeline, its speed and efficiency, the alternatives; with
    ``verbose`` also the islands' member nodes and each micro-batch size's pruning counters."""
    names = Names([i["name"] for i in p.islands])
    precision = f", {p.precision}" if p.precision else ""
    out.print(f"[bold]{p.model}[/bold] on [bold]{p.cluster}[/bold]: global batch {p.global_batch}, sequence {p.seq}{precision}",
              highlight=False)
    if p.islands:
        _print_islands(p, names, out, verbose)
    if p.left_out:
        out.print(f"left out of the composition: {_members(p.left_out, 6, 'islands')}", highlight=False)
    out.print(p.status_line, highlight=False, markup=False)
    if p.status.has_solution:
        _print_stages(p, names, out)
        if p.memory:  # what each stage's memory holds beyond its tensors
            parts = ", ".join(f"{part['what']} {part['gib']:.3g}" for part in p.memory["parts"])
            out.print(f"memory_gib: per GPU, with a headroom of {p.memory['headroom_gib']:.3g} GiB ({parts}), of the "
                      "nodes' memory_gib", highlight=False)
        if any(" vpp" in s.layout for s in p.stages):
            out.print("interleaved (vpp v): each stage shows what the 1F1B closed form sees, the slowest at its full time "
                      "and the others at 1/v of theirs, with activations scaled to Megatron's warm-up "
                      "(formulations/costmodel.md, Interleaved 1F1B)", highlight=False)
        if p.unfused_attention and p.precision and p.precision not in cm.FLASH_PRECISIONS:
            out.print(f"attention unfused: FlashAttention's kernels take fp16 and bf16 only, not {p.precision}", highlight=False)
        elif p.unfused_attention:
            out.print(f"attention unfused on {', '.join(p.unfused_attention)}: FlashAttention does not run on "
                      f"{'this GPU' if len(p.unfused_attention) == 1 else 'these GPUs'} (the catalog's flash_attention)",
                      highlight=False)
        if p.outside_calibration:
            out.print("outside the calibration (priced by the same physics, but no measured run says how far off): "
                      + "; ".join(p.outside_calibration), highlight=False)
        out.print(
            f"iteration {_f(p.iteration_time_s)} s ({_time_model(p)}), "
            f"{_f(p.throughput_samples_s)} samples/s, {_f(p.tflops_per_gpu, '.3g')} TFLOPs per GPU, "
            f"efficiency {_f(100 * p.efficiency, '.1f')}% of the ideal {_f(p.ideal_time_s)} s",
            highlight=False,
        )
    if p.cost is not None:
        out.print(_cost_line(p.cost), highlight=False, markup=False)
    if p.cost_search is not None:
        _print_cost_search(p.cost_search, out, names)
    if p.replicas is not None:
        _print_replicas(p, out, names)
    if p.alternatives:
        _print_alternatives(p, out, names)
    if p.launchability is not None:
        out.print(p.launchability["summary"], highlight=False)
    if p.runtime is not None:
        out.print(f"runtime: {p.runtime or 'as searched by default'} (the plan and your layout are held to it)", highlight=False)
    if p.given_layout is not None:
        _print_given_layout(p, out)
    _print_planning(p, out, verbose)


def _print_given_layout(p: HeteroPlan, out: Console) -> None:
    """``--layout``: the given layout's time beside the plan's, or why it does not fit."""
    g = p.given_layout
    if g["fits"]:
        speed = ""
        if "plan_speedup" in g:  # the layout is priced, not searched; a cut plan is still at least this fast
            speed = f"; the plan is {'' if p.status == Status.OPTIMAL else 'at least '}{g['plan_speedup']:.2f}× faster"
        size = f"mbs={g['microbatch']}" if "microbatch" in g else f"micro-batch {g['microbatch_size']}"
        # a layout on fewer GPUs than the plan's islands leaves the rest idle: say so beside the speed-up
        total = sum(i["gpus"] for i in p.islands)
        idle = (f"; it uses {g['gpus']} of the {total} GPUs, {total - g['gpus']} idle"
                if g.get("gpus") and g["gpus"] < total else "")
        out.print(f"your layout {g['layout']} ({size}): {_f(g['iteration_time_s'])} s per iteration, "
                  f"{_f(g['peak_memory_gib'], '.1f')} GiB per GPU{idle}{speed}", highlight=False)
    else:
        over = (f" (priced as if it fit: {_f(g['over_memory_iteration_time_s'])} s per iteration)"
                if "over_memory_iteration_time_s" in g else "")
        out.print(f"your layout {g['layout']}: {g['reason']}{over}", highlight=False)


def _print_planning(p: HeteroPlan, out: Console, verbose: bool) -> None:
    """Where the planning time went; with ``verbose``, each micro-batch size's pruning counters."""
    t = p.timing_s
    if not t:
        return
    sizes = list(p.enumeration)
    out.print(
        f"planning: islands {t['islands_s']:.2f} s, enumeration {t['enumeration_s']:.2f} s, "
        f"composition {t['composition_s']:.2f} s, alternatives {t.get('alternatives_s', 0.0):.2f} s"
        + (f", replicas {t['replicas_s']:.2f} s" if "replicas_s" in t else "")
        + (f", unrestricted plan {t['unrestricted_s']:.2f} s" if "unrestricted_s" in t else "")
        + (f"; micro-batch sizes {', '.join(map(str, sizes))}" if sizes else "")
        + ("" if verbose or not sizes else " (--verbose: how each was pruned)"),
        highlight=False,
    )
    if not verbose:
        return
    # sizes skipped before their enumeration (the cost model's bound) have no counters; those
    # ruled out after it (the composition's bound, or the dp's cutoff) have theirs, printed below
    skipped = {m: s["skipped_bound_s"] for m, s in p.enumeration.items() if "skipped_bound_s" in s and "pairs" not in s}
    if skipped:
        out.print(f"  micro-batch sizes {', '.join(map(str, skipped))}: skipped, their lower bounds "
                  f"({min(skipped.values()):.4g} s and up) cannot beat the plan"
                  + ("" if p.iteration_time_s is None or min(skipped.values()) >= p.iteration_time_s
                     else " by more than the gap limit"), highlight=False)
    for m, s in p.enumeration.items():
        if m in skipped:
            continue
        if "not_planned" in s:
            out.print(f"  micro-batch {m}: {s['not_planned']}", highlight=False)
            continue
        pruned = ", ".join(f"{k} {v}" for k, v in s["pruned"].items())
        out.print(f"  micro-batch {m}: {s['pairs']} (slice, island) pairs, pruned {pruned}; "
                  f"{s.get('unreachable', 0)} need more islands; {s['queried']} queried, {counted(s['plans'], 'plan')}"
                  + (f"; ruled out: proven none faster than {s['skipped_bound_s']:.4g} s" if "skipped_bound_s" in s else ""),
                  highlight=False)


def _cost_line(cost: dict) -> str:
    """The plan's cost in one line, or which GPU types have no price."""
    if cost["unpriced"]:
        return (f"cost: not priced, no price for {', '.join(cost['unpriced'])} (give [price] usd_per_gpu_hour in the "
                "cluster file)")
    return (f"cost: ${cost['usd_per_iteration']:.4g} per iteration, ${cost['usd_per_million_tokens']:.4g} per million "
            f"tokens (${cost['usd_per_hour']:.4g} per hour for the {cost['gpus']} GPUs of the islands it runs on)")


def _print_cost_search(search: dict, out: Console, names: Names) -> None:
    """Every set of islands planned by price (by their ids; their GPUs are in the islands
    table), how it was settled, and the fastest beside the plan."""
    budget = "" if search["budget_usd_per_hour"] is None else f", budget ${search['budget_usd_per_hour']:.4g} per hour"
    rows = []
    for row in search["sets"]:
        if "skipped_bound" in row:
            unit = "$" if search["objective"] == "cost" else ""
            settled = f"skipped: bound {unit}{row['skipped_bound']:.4g}{'' if unit else ' s'}"
        else:
            settled = row["status"]
        rows.append([" + ".join(names.short(n) for n in row["islands"]), f"{row['usd_per_hour']:.4g}", settled,
                     str(row.get("holds") or "-"), _f(row.get("iteration_time_s")),
                     "-" if row.get("usd_per_iteration") is None else f"{row['usd_per_iteration']:.4g}"])
    print_table(out, _table(f"island sets by {search['objective']}{budget} (a plan pays for every GPU of the islands it "
                            "runs on)", ["islands", "usd_per_hour", "settled", "plan holds", "iteration_s",
                                         "usd_per_iteration"], rows))
    fastest, chosen = search.get("fastest"), search.get("chosen")
    if search["objective"] == "cost" and fastest and chosen:
        # a line of text, which wraps at spaces: the islands' full names
        out.print(f"cheapest: {' + '.join(chosen['islands'])}, ${chosen['objective_value']:.4g} per iteration; fastest: "
                  f"{' + '.join(fastest['islands'])}, {_f(fastest['iteration_time_s'])} s at "
                  f"${fastest['usd_per_iteration']:.4g} per iteration", highlight=False, markup=False)


def _usd(cost: dict | None) -> str:
    """Dollars per iteration, or "-" where a GPU type has no price (or there is no plan)."""
    return "-" if cost is None or cost["usd_per_iteration"] is None else f"{cost['usd_per_iteration']:.4g}"


def _print_alternatives(p: HeteroPlan, out: Console, names: Names) -> None:
    """The alternatives beside the plan: a table of times and speed-ups (only between answers
    both proven or both cut by the limit, :func:`comparable`), then one line each saying what
    it is and, where not the pipeline closed form, the model that priced it."""
    # the cost column where a price is known (a cluster of unpriced GPUs keeps the table as it was)
    priced = any(_usd(c) != "-" for c in [p.cost, *(a.cost for a in p.alternatives)])
    rows = [["tangram-composed", p.status.value, _f(p.iteration_time_s), "1.00" if p.iteration_time_s else "-",
             *[_usd(p.cost)] * priced]]
    details = [("tangram-composed", PRICED_BY_PIPELINE, "this plan")]
    for a in p.alternatives:
        speedup = p.speedups.get(a.name)
        shown = _f(speedup, ".2f") if speedup is None or comparable(p.status, a.status) else "n/c"
        rows.append([a.name, a.status.value, _f(a.iteration_time_s), shown, *[_usd(a.cost)] * priced])
        details.append((a.name, a.priced_by, a.detail))
    print_table(out, _table(f"alternatives, priced by the {PRICED_BY_PIPELINE} unless said (speed-up: the composed "
                            "plan's over each)",
                            ["plan", "status", "iteration_s", "speed-up", *["usd_per_iteration"] * priced], rows))
    for name, priced_by, detail in details:
        by = "" if priced_by == PRICED_BY_PIPELINE else f", priced by the {priced_by}"
        out.print(f" {name}{by}: {names.short(detail)}", highlight=False, markup=False)
    if any(r[3] == "n/c" for r in rows):  # the speed-up column
        out.print(f"n/c: not compared, one of the two was {_cut_by(p)} and the other proven", highlight=False)
    if not p.best:
        return
    best = next((a for a in p.alternatives if a.name == p.best), None)
    if best is not None and best.priced_by != PRICED_BY_PIPELINE:
        out.print(f"best: {p.best}, outside the pipeline search and priced by the {best.priced_by}; the composed "
                  f"plan is the {'proven ' if p.status == Status.OPTIMAL else ''}fastest pipeline", highlight=False)
    else:
        out.print(f"best: {p.best}", highlight=False)


def _time_model(p) -> str:
    """Which time the plan's figures use, with the other one beside it."""
    if p.time_model.startswith("closed form"):
        return f"{p.time_model}; 1F1B simulation " + ("not run" if p.simulated_s is None else f"{_f(p.simulated_s)} s")
    return f"{p.time_model}; closed form {_f(p.analytic_s)} s"
