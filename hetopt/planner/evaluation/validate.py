"""Predicted against published training throughput (``hetopt validate``).

A published measurement set (``instances/published/*.toml``, read by
:mod:`hetopt.planner.evaluation.published`) names models, homogeneous clusters and measured runs, each
with the layout its authors ran. For every run this prices the
published layout with the cost model (``formulations/costmodel.md``) and prints predicted /
published throughput, per row, per group and overall, with the median and the worst row.
A ratio above 1 means the model is optimistic.

Nothing here is fitted to the rows: the command only measures how far the cost model is
from reality.

Examples
--------
>>> rows = validate(load_published(), only=["mlm-t1-18.4b"])
>>> rows[0].measurement.layout.tp, rows[0].priced is not None
(8, True)
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from hetopt.units import BITS_PER_BYTE, GBPS, GIB
from hetopt.hardware import GIGA
from hetopt.interrupt import stop_requested
from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
from hetopt.planner.setup.layout import price_layout
from hetopt.planner.parallelizer.protocol import PartialPlan
from hetopt.planner.setup.cluster import Cluster, cluster_from_data
from hetopt.planner.answer import HeteroPlan
from hetopt.planner.steps import plan
# the reading of the sets lives in published.py; its names are re-exported here for callers
# that price what they read (``validate.load_published`` and friends)
from hetopt.planner.evaluation.published import (ASSUMED_RUNTIME, CURRENT_RUNTIME_FROM, LOWER_IS_BETTER,
                                      UNSTATED_MICROBATCHES, Measurement, default_published, layout_text,
                                      load_published, publication_year, publisher_flops, select_only,
                                      throughput)


@dataclass(frozen=True)
class Row:
    """A measurement and what the cost model predicts for its published layout."""

    measurement: Measurement
    priced: PartialPlan | None
    predicted: float | None  # in the measurement's metric
    reason: str = ""
    planned: "HeteroPlan | None" = None  # hetopt plan on the row's cluster (with --plan)
    #: the layout is over the GPU's memory under the model: ``priced`` is its time as if the
    #: memory were there (the run ran, so the memory model over-counts it; ``reason`` says by how much)
    over_memory: bool = False

    @property
    def plan_predicted(self) -> float | None:
        """The planner's plan in the measurement's metric (None: not planned or no plan)."""
        if self.planned is None or self.planned.iteration_time_s is None:
            return None
        return throughput(self.measurement, self.planned.iteration_time_s)

    @property
    def plan_speedup(self) -> float | None:
        """Published layout's time / the plan's time under the same model (≥ 1: the plan is no slower).

        None when the published layout is over memory under the model: the plan is searched
        among layouts that fit, so the two are not compared."""
        if self.priced is None or self.plan_predicted is None or self.over_memory:
            return None
        return self.priced.iteration_time_s / self.planned.iteration_time_s

    @property
    def ratio(self) -> float | None:
        """Predicted / published throughput, published / predicted time (> 1: the model is optimistic)."""
        return _ratio(self.measurement, self.predicted)

    @property
    def error(self) -> float | None:
        """The prediction's absolute error relative to the published figure, |predicted − published| /
        published, in the row's own metric (0.1: 10% off, in either direction); None when not priced."""
        if self.predicted is None:
            return None
        return abs(self.predicted - self.measurement.value) / self.measurement.value

    @property
    def predicted_memory(self) -> float | None:
        """The model's peak memory per GPU for the published layout, bytes (its largest stage's
        static bytes and activations in flight, ``PartialPlan.peak_bytes``); None when not priced."""
        return None if self.priced is None else self.priced.peak_bytes

    @property
    def memory_ratio(self) -> float | None:
        """Predicted over measured peak memory per GPU (> 1: the model counts more than the run
        used); None when the row states no measured peak or is not priced."""
        measured = self.measurement.peak_memory_bytes
        if measured is None or self.predicted_memory is None:
            return None
        return self.predicted_memory / measured

    @property
    def plan_ratio(self) -> float | None:
        """The plan's predicted figure over the published one, as ``ratio`` (> 1: the plan claims
        more than the run measured: the planner's gain under the model, or the model's optimism)."""
        return _ratio(self.measurement, self.plan_predicted)


def _ratio(m: Measurement, predicted: float | None) -> float | None:
    """Predicted over published in the direction where > 1 is optimistic, for every metric."""
    if predicted is None:
        return None
    return m.value / predicted if m.metric in LOWER_IS_BETTER else predicted / m.value


def price_published(m: Measurement, parallelizer: BuiltinParallelizer | None = None) -> tuple[PartialPlan | None, str, bool]:
    """The published layout priced by the cost model (its best micro-batch when unstated).

    :func:`hetopt.planner.setup.layout.price_layout`, as ``hetopt plan --layout`` prices a given
    layout. Returns (plan, reason, over memory). A layout over the GPU's memory under the
    model at every micro-batch size tried is still priced (the run it describes ran, so its
    time is what is measured here) and flagged, with the memory in the reason; (None,
    reason, False) when nothing could be priced.
    """
    priced = price_layout(m.layout, m.island, m.model, global_batch=m.global_batch, seq=m.seq,
                          microbatches_tried=UNSTATED_MICROBATCHES, parallelizer=parallelizer)
    if priced.plan is None and priced.over_memory is not None:
        return priced.over_memory, priced.reason, True
    return priced.plan, priced.reason, False


def measurement_cluster(m: Measurement) -> Cluster:
    """The row's cluster as ``hetopt plan`` reads one: its nodes on one switch of the node's network."""
    isl = m.island
    node = {"gpu": isl.gpu.name, "gpus": isl.gpus_per_node, "switch": "fabric",
            "intra_gbs": isl.intra_bandwidth / GIGA, "switch_gbps": max(isl.inter_bandwidth, 1.0) * BITS_PER_BYTE / GIGA}
    node |= {key: value for key, value in (("p2p", isl.p2p), ("transport", isl.transport)) if value is not None}
    data = {"name": f"{m.id}-cluster", "node": [dict(node, name=f"node{i}") for i in range(isl.nodes)],
            "network": {"switch": [{"name": "fabric"}]}}
    return cluster_from_data(data, f"{m.id} (cluster {isl.name})")


def plan_published(m: Measurement, *, time_limit: float | None = None) -> HeteroPlan:
    """``hetopt plan`` on the row's cluster, model, batch and sequence, held to the row's runtime
    (``Measurement.runtime``, as ``hetopt plan --runtime``): what the planner would have chosen
    instead of the published layout, on the framework the run had."""
    par = m.runtime.parallelizer(BuiltinParallelizer())
    # the published layout is priced by the closed form: the plan is compared on the same model
    return plan(measurement_cluster(m), m.model, global_batch=m.global_batch, seq=m.seq, parallelizer=par,
                alternatives=False, time_limit=time_limit, time_model="closed-form")


def validate(measurements: tuple[Measurement, ...], *, only: list[str] | None = None, with_plan: bool = False,
             on_row: Callable[[int, int, str], None] | None = None,
             parallelizer: BuiltinParallelizer | None = None) -> list[Row]:
    """Price every measurement's published layout (``only``: these ids); ``with_plan``: also
    run the planner on each row's cluster. ``on_row(done, total, id)`` before each row (for a
    progress line). A stop requested meanwhile (Ctrl-C) ends the rows before the one it cut.
    ``parallelizer`` prices the layouts (``validate --profile``: one with a measured profile)."""
    rows = []
    chosen = [m for m in measurements if not only or m.id in only]
    for i, m in enumerate(chosen):
        if on_row is not None:
            on_row(i, len(chosen), m.id)
        planned = plan_published(m) if with_plan else None
        if stop_requested():  # the plan of this row was cut short
            break
        if m.unsupported:
            rows.append(Row(m, None, None, f"not priced: {m.unsupported}", planned))
            continue
        priced, why, over = price_published(m, parallelizer)
        rows.append(Row(m, priced, None if priced is None else throughput(m, priced.iteration_time_s), why, planned, over))
    return rows


def hetero_rows(rows, measured=None) -> list[dict]:
    """Heterogeneous rows (:func:`~hetopt.planner.evaluation.published.load_heterogeneous`) priced by
    :func:`hetopt.profile.hetero.price_hetero` (``measured``: a profile where it covers), as
    ``validate --json`` lists rows: the predicted time, the ratio published / predicted (> 1: the
    model is optimistic), the predicted and the measured peak memory."""
    from hetopt.profile.hetero import price_hetero

    out = []
    for m in rows:
        price = price_hetero(m, measured)
        t = price.iteration_time_s
        out.append({"id": m.id, "group": m.group, "gpus": m.gpus, "metric": m.metric, "published": m.value,
                    "predicted": t, "ratio": m.value / t, "layout": m.text(), "reason": "", "heterogeneous": True,
                    "predicted_peak_gib": price.peak_bytes / 2 ** 30,
                    "published_peak_gib": None if m.peak_memory_bytes is None else m.peak_memory_bytes / 2 ** 30,
                    "priced_from": {"profile": list(price.profile_terms), "analytic": list(price.analytic_terms)}})
    return out


def summarize(rows: list[Row]) -> dict[str, dict]:
    """Per group, over the best published rows and overall: rows, median and worst ratio
    (worst = farthest from 1 in log), and the mean absolute error (``mae``: the mean of
    :attr:`Row.error`, |predicted − published| / published in each row's metric), which shows
    a set's spread where the median hides it (a set half 0.7 and half 1.3 has median 1.0).

    Examples
    --------
    >>> rows = validate(load_published(), only=["mlm-t1-1.7b", "mlm-t1-3.6b"])
    >>> s = summarize(rows)["all"]
    >>> s["rows"], round(s["mae"], 6) == round(sum(r.error for r in rows) / 2, 6)
    (2, True)
    """
    import math

    groups: dict[str, list[Row]] = {}
    for r in rows:
        if r.ratio is not None:
            groups.setdefault(r.measurement.group, []).append(r)
            if r.measurement.best:  # the best published figure of each setting, without the foils
                groups.setdefault("best published", []).append(r)
            groups.setdefault("all", []).append(r)
    out = {}
    for g, members in groups.items():
        v = [r.ratio for r in members]
        out[g] = {"rows": len(v), "median": statistics.median(v), "worst": max(v, key=lambda x: abs(math.log(x))),
                  "min": min(v), "max": max(v), "mae": statistics.fmean(r.error for r in members)}
    return out


#: The band a predicted peak memory should fall in around the measured one (issue 41): within
#: ±10% of it, and never more than 5% below it (a model that counts less than a run used would
#: call a layout that does not fit a fit).
MEMORY_BAND = 0.10
MEMORY_SHORTFALL = 0.05


def memory_summary(rows: list[Row]) -> dict | None:
    """Over the rows that state their measured peak memory and are priced: predicted / measured
    (median, min, max), the mean absolute error, how many lie within ±``MEMORY_BAND`` and how many
    more than ``MEMORY_SHORTFALL`` below (the model would call a run that ran over the GPU's memory a
    fit, or a run's layout that does not fit a fit); None when no row states one.

    Examples
    --------
    >>> memory_summary(validate(load_published(), only=["mlm-t1-1.7b"])) is None  # SC'21 states no memory
    True
    """
    ratios = [r.memory_ratio for r in rows if r.memory_ratio is not None]
    if not ratios:
        return None
    return {"rows": len(ratios), "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "mae": statistics.fmean(abs(x - 1.0) for x in ratios),
            "within": sum(abs(x - 1.0) <= MEMORY_BAND + 1e-12 for x in ratios),
            "below": sum(x < 1.0 - MEMORY_SHORTFALL - 1e-12 for x in ratios)}


#: Fewest priced rows a setting needs for its ranking to be reported (a rank correlation of two
#: rows is ±1 whatever the model does).
MIN_RANKED_ROWS = 3


def rank_settings(rows: list[Row]) -> dict[str, dict]:
    """Per setting with at least ``MIN_RANKED_ROWS`` priced rows: how the cost model ranks its layouts.

    A planner is judged by its ranking: it picks the layout the model prices fastest. Per
    setting, over the rows the model prices (not over memory):

    * ``spearman``: Spearman's rank correlation between predicted and published figures (1:
      the model orders the layouts as measured; ties take their mean rank);
    * ``regret``: the measured time of the layout the model ranks first over the best measured
      time (1: the model's pick is the fastest run; 1.25: it runs 25% slower than the best);
    * ``rows``, ``pick`` (its id) and ``best`` (the fastest measured row's id).

    Examples
    --------
    >>> rows = validate(load_published(), only=["mlm-t1-1.7b", "mlm-t1-3.6b"])
    >>> rank_settings(rows)  # two models: no setting with three layouts
    {}
    """
    from scipy.stats import spearmanr

    groups: dict[str, list[Row]] = {}
    for r in rows:
        if r.predicted is not None and not r.over_memory:
            groups.setdefault(r.measurement.setting, []).append(r)
    out = {}
    for setting, group in groups.items():
        if len(group) < MIN_RANKED_ROWS:
            continue
        lower = group[0].measurement.metric in LOWER_IS_BETTER
        # every figure as a time of the setting: a time, or the inverse of a throughput
        measured = [r.measurement.value if lower else 1.0 / r.measurement.value for r in group]
        predicted = [r.predicted if lower else 1.0 / r.predicted for r in group]
        pick = min(range(len(group)), key=lambda i: (predicted[i], i))
        best = min(range(len(group)), key=lambda i: (measured[i], i))
        rho = spearmanr(predicted, measured).statistic
        out[setting] = {"rows": len(group), "spearman": None if rho != rho else float(rho),
                        "regret": measured[pick] / measured[best], "pick": group[pick].measurement.id,
                        "best": group[best].measurement.id}
    return out


def outside_of(m: Measurement) -> list[str]:
    """The row's regimes no calibration covers (``planner/evaluation/coverage.py``): its GPU, its cluster's
    network, its micro-batch (when the row states it)."""
    from hetopt.planner.evaluation.coverage import outside_calibration

    isl = m.island
    tokens = [max(1, m.layout.microbatch * m.seq // m.layout.cp)] if m.layout.microbatch else []
    return outside_calibration([isl.gpu], [isl.inter_bandwidth / GBPS] if isl.nodes > 1 else [], tokens)


def rows_to_dict(rows: list[Row]) -> dict:
    """The rows and their summary as the ``hetopt validate --json`` document."""
    return {
        "rows": [{"id": r.measurement.id, "group": r.measurement.group, "gpus": r.measurement.gpus,
                  "metric": r.measurement.metric, "published": r.measurement.value, "predicted": r.predicted,
                  "ratio": r.ratio, "error": r.error,
                  "peak_memory_gib": None if r.measurement.peak_memory_bytes is None else r.measurement.peak_memory_bytes / GIB,
                  "predicted_memory_gib": None if r.predicted_memory is None else r.predicted_memory / GIB,
                  "memory_ratio": r.memory_ratio, "layout": layout_text(r.measurement.layout),
                  "runtime": r.measurement.runtime.text(),
                  "priced_microbatch": None if r.priced is None else r.priced.microbatch_size // r.priced.dp,
                  "priced_vpp": None if r.priced is None else r.priced.vpp,
                  "reason": r.reason, "over_memory": r.over_memory, "assumed_runtime": list(r.measurement.assumed),
                  "year": r.measurement.year, "earlier_runtime": r.measurement.earlier_runtime,
                  "outside_calibration": outside_of(r.measurement),
                  **({} if r.priced is None or not any(st.measured for st in r.priced.stages) else {
                      "priced_from": sorted({t for st in r.priced.stages for t in st.measured})}),
                  **({} if r.planned is None else {
                      "plan": {"predicted": r.plan_predicted, "ratio": r.plan_ratio, "speedup_over_published": r.plan_speedup,
                               "layouts": sorted({st.layout for st in r.planned.stages}),
                               "microbatch_size": r.planned.microbatch_size, "status": r.planned.status.value}})}
                 for r in rows],
        "summary": summarize(rows),
        "settings": rank_settings(rows),
        "memory": memory_summary(rows),
    }


__all__ = [
    # what this module does: price published layouts, summarize and rank them
    "MEMORY_BAND", "MEMORY_SHORTFALL", "Row", "hetero_rows", "measurement_cluster", "memory_summary", "outside_of",
    "plan_published", "price_published", "rank_settings", "rows_to_dict", "summarize", "validate",
    # re-exported from published.py, for callers that price what they read
    "ASSUMED_RUNTIME", "CURRENT_RUNTIME_FROM", "LOWER_IS_BETTER", "UNSTATED_MICROBATCHES", "Measurement",
    "default_published", "layout_text", "load_published", "publication_year", "publisher_flops", "select_only",
    "throughput",
]
