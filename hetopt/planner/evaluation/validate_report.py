"""Printing ``hetopt validate``'s rows for a person (the JSON form is ``validate.rows_to_dict``)."""

from __future__ import annotations

import statistics

from rich.console import Console

from hetopt.planner.evaluation.published import ASSUMED_RUNTIME, CURRENT_RUNTIME_FROM, layout_text
from hetopt.planner.evaluation.validate import (MEMORY_BAND, MEMORY_SHORTFALL, Row, memory_summary, outside_of, rank_settings,
                                     summarize)
from hetopt.tables import show


def table_rows(rows: list[Row], *, with_plan: bool) -> list[dict]:
    """One dict per row, the columns of the table ``hetopt validate`` prints."""
    table = []
    for r in rows:
        m = r.measurement
        row = {"id": m.id, "GPUs": m.gpus, "published layout": layout_text(m.layout), "metric": m.metric,
               "published": m.value, "predicted": r.predicted,
               "ratio": r.reason if r.ratio is None else f"{r.ratio:.2f}" + ("*" if r.over_memory else "")}
        if with_plan:
            row["plan"] = r.plan_predicted
            row["speed-up"] = None if r.plan_speedup is None else f"{r.plan_speedup:.2f}x"
            row["plan layout"] = "-" if r.planned is None else \
                (", ".join(sorted({st.layout for st in r.planned.stages})) or r.planned.reason)
        table.append(row)
    return table


def print_rows(rows: list[Row], *, with_plan: bool, out: Console | None = None, markdown: bool = False) -> None:
    """The table (rich on ``out``, or Markdown), the notes on assumed runtimes, unpriced and
    over-memory rows, and the summary lines."""
    summary = summarize(rows)
    table = table_rows(rows, with_plan=with_plan)
    show(out, table, digits=4, markdown=markdown or out is None)

    def say(line: str) -> None:  # on a terminal, wrapped at its width
        if out is None or markdown:
            print(line)
        else:
            out.print(line, highlight=False)

    assumed = [r for r in rows if r.measurement.assumed]
    if assumed:
        keys = sorted({k for r in assumed for k in r.measurement.assumed}, key=ASSUMED_RUNTIME.index)
        earlier = sum(r.measurement.earlier_runtime for r in assumed)
        say(f"{len(assumed)} rows do not say how they ran ({', '.join(keys)}): {earlier} dated before {CURRENT_RUNTIME_FROM} by "
              "their source are priced as the runtimes of their time ran (attention unfused, no sequence parallelism, "
              "data-parallel traffic after the backward pass, ZeRO-3 tensor by tensor, PyTorch 1.x's host time a "
              "layer), the other "
              f"{len(assumed) - earlier} as a current runtime runs (FlashAttention where the GPU has it, sequence "
              "parallelism, overlapped data-parallel traffic, ZeRO-3 layer by layer) (docs/formats.md; --json: "
              "assumed_runtime, year)")
    unsupported = [r for r in rows if r.measurement.unsupported]
    if unsupported:
        say(f"{len(unsupported)} rows not priced: their published layouts are outside the cost model (the reason in the "
              "ratio column; --json: reason)")
    over = [r for r in rows if r.over_memory]
    if over:
        say(f"* {len(over)} rows over the GPU's memory under the model, priced as if they fit (the runs ran: the memory "
              "model over-counts them; --json: reason)")
    outside = {r.measurement.id: outside_of(r.measurement) for r in rows}
    outside = {k: v for k, v in outside.items() if v}
    if outside:
        regimes = sorted({note.split(":")[0] for notes in outside.values() for note in notes})
        say(f"{len(outside)} rows outside the calibration ({'; '.join(regimes)}; --json: outside_calibration)")
    for g, s in summary.items():
        say(f"{g}: {s['rows']} rows, median {s['median']:.2f}, mean absolute error {100 * s['mae']:.1f}%, range {s['min']:.2f}..{s['max']:.2f}, worst {s['worst']:.2f}")
    for setting, rank in rank_settings(rows).items():
        rho = "-" if rank["spearman"] is None else f"{rank['spearman']:.2f}"
        say(f"ranking of {setting}: {rank['rows']} layouts, rank correlation {rho}, regret {rank['regret']:.2f} "
              f"(the model picks {rank['pick']}; fastest measured {rank['best']})")
    memory = memory_summary(rows)
    if memory:
        say(f"peak memory: {memory['rows']} rows state their measured peak, predicted / measured median "
            f"{memory['median']:.2f}, range {memory['min']:.2f}..{memory['max']:.2f}, mean absolute error "
            f"{100 * memory['mae']:.1f}%; {memory['within']} within ±{100 * MEMORY_BAND:.0f}%, {memory['below']} more than "
            f"{100 * MEMORY_SHORTFALL:.0f}% below (--json: memory_ratio)")
    plans = [r.plan_ratio for r in rows if r.plan_ratio is not None]
    if plans:
        say(f"the plans over the published figures: {len(plans)} rows, median {statistics.median(plans):.2f}, "
              f"range {min(plans):.2f}..{max(plans):.2f} (the planner's claimed gain under the model)")


__all__ = ["print_rows"]
