"""Printing ``hetopt validate``'s rows for a person (the JSON form is ``validate.rows_to_dict``)."""

from __future__ import annotations

import statistics

from hetopt.planner.validate import (ASSUMED_RUNTIME, CURRENT_RUNTIME_FROM, Row, layout_text, outside_of, rank_settings,
                                     summarize)


def print_rows(rows: list[Row], *, with_plan: bool) -> None:
    """One line per row, the notes on assumed runtimes, unpriced and over-memory rows, the summary."""
    summary = summarize(rows)
    plan_head = f" {'plan':>9} {'speed-up':>8}  plan layout" if with_plan else ""
    print(f"{'id':28} {'GPUs':>5} {'published layout':32} {'metric':>15} {'published':>9} {'predicted':>9} {'ratio':>6}{plan_head}")
    for r in rows:
        m = r.measurement
        pred = "-" if r.predicted is None else f"{r.predicted:.1f}"
        ratio = r.reason if r.ratio is None else f"{r.ratio:.2f}" + ("*" if r.over_memory else "")
        tail = ""
        if r.planned is not None:
            got = "-" if r.plan_predicted is None else f"{r.plan_predicted:.1f}"
            up = "-" if r.plan_speedup is None else f"{r.plan_speedup:.2f}x"
            tail = f" {got:>9} {up:>8}  {', '.join(sorted({st.layout for st in r.planned.stages})) or r.planned.reason}"
        print(f"{m.id:28} {m.gpus:5d} {layout_text(m.layout):32} {m.metric:>15} {m.value:9.1f} {pred:>9} {ratio:>6}{tail}")
    assumed = [r for r in rows if r.measurement.assumed]
    if assumed:
        keys = sorted({k for r in assumed for k in r.measurement.assumed}, key=ASSUMED_RUNTIME.index)
        earlier = sum(r.measurement.earlier_runtime for r in assumed)
        print(f"{len(assumed)} rows do not say how they ran ({', '.join(keys)}): {earlier} dated before {CURRENT_RUNTIME_FROM} by "
              "their source are priced as the runtimes of their time ran (attention unfused, no sequence parallelism, "
              "data-parallel traffic after the backward pass, ZeRO-3 tensor by tensor), the other "
              f"{len(assumed) - earlier} as a current runtime runs (FlashAttention where the GPU has it, sequence "
              "parallelism, overlapped data-parallel traffic, ZeRO-3 layer by layer) (docs/formats.md; --json: "
              "assumed_runtime, year)")
    unsupported = [r for r in rows if r.measurement.unsupported]
    if unsupported:
        print(f"{len(unsupported)} rows not priced: their published layouts are outside the cost model (the reason in the "
              "ratio column; --json: reason)")
    over = [r for r in rows if r.over_memory]
    if over:
        print(f"* {len(over)} rows over the GPU's memory under the model, priced as if they fit (the runs ran: the memory "
              "model over-counts them; --json: reason)")
    outside = {r.measurement.id: outside_of(r.measurement) for r in rows}
    outside = {k: v for k, v in outside.items() if v}
    if outside:
        regimes = sorted({note.split(":")[0] for notes in outside.values() for note in notes})
        print(f"{len(outside)} rows outside the calibration ({'; '.join(regimes)}; --json: outside_calibration)")
    for g, s in summary.items():
        print(f"{g}: {s['rows']} rows, median {s['median']:.2f}, range {s['min']:.2f}..{s['max']:.2f}, worst {s['worst']:.2f}")
    for setting, rank in rank_settings(rows).items():
        rho = "-" if rank["spearman"] is None else f"{rank['spearman']:.2f}"
        print(f"ranking of {setting}: {rank['rows']} layouts, rank correlation {rho}, regret {rank['regret']:.2f} "
              f"(the model picks {rank['pick']}; fastest measured {rank['best']})")
    plans = [r.plan_ratio for r in rows if r.plan_ratio is not None]
    if plans:
        print(f"the plans over the published figures: {len(plans)} rows, median {statistics.median(plans):.2f}, "
              f"range {min(plans):.2f}..{max(plans):.2f} (the planner's claimed gain under the model)")


__all__ = ["print_rows"]
