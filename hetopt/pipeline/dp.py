"""Tangram's composition, exact: a branch and bound over bottleneck thresholds around the table DP.

With c_0 < … < c_{m−1} the values the bottleneck β = max(max t, max c) can take and D(i) the
least Σ t + Σ c of a pipeline with β ≤ c_i (``dp_table._run``), T* = min_i D(i) + (M − 1)·c_i.
D is non-increasing in i, so an interval of thresholds [a, b] whose D is known to be at least
d costs at least d + (M − 1)·c_a. The search starts from the greedy's plan as the incumbent
and from τ_0, the least feasible threshold (bisection on the cost-free DP of
``dp_feasible.py``); it keeps the unsettled thresholds as intervals, drops every interval
whose bound reaches the incumbent, and evaluates D in the most promising one:

* a run at c_i that finds a plan with β = c_j ≤ c_i settles [j, i] (D is constant there, and
  the plan's own T is the best of it) and tells the thresholds below j that D ≥ D(i);
* a run gets a budget (the interval's floor plus a step that doubles after each failure,
  at most incumbent − (M − 1)·c_a) and drops the states a cover bound (``bound.py``) proves
  cannot finish under it; one that finds nothing proves D ≥ budget on [a, i], which settles
  it when the budget was the incumbent's.

A search stopped by the time limit reports its incumbent with the least interval bound as
``Result.bound``, refined threshold by threshold (:meth:`_Search.bound`). With a
``cutoff`` the search starts as if a plan of that value were known. The proofs are in
``formulations/pipeline.md``.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from hetopt.checks import check_cutoff, check_gap_limit
from hetopt.family import Deadline, conclude, no_solution
from hetopt.pipeline import dp_table
from hetopt.pipeline.advice import after_dp_declines
from hetopt.pipeline.bound import front_bound, least_over_thresholds, pipeline_bound, unused_front_bound, unused_front_work
from hetopt.pipeline.dp_feasible import feasible
from hetopt.pipeline.dp_table import MAX_USAGE_STATES, _prepare, _run, _Timeout, _TooLarge
from hetopt.pipeline.heuristic import greedy_plan
from hetopt.pipeline.options import GENERIC_INFEASIBLE, bottleneck_candidates, why_infeasible
from hetopt.pipeline.plan import blocks_from_choices, build_solution
from hetopt.pipeline.problem import PipelineInstance, PipelineSolution, evaluate
from hetopt.result import Result, Status, bound_within_gap

#: Relative slack added to every run's budget: D and T add the same times in different
#: orders, so a plan at exactly the incumbent's value may round a few ulps either way;
#: the budget is widened by far more than that (a wider budget only keeps more states).
BUDGET_RTOL = 1e-9
#: Most cells of the per-usage-vector pruning bound H (usage vectors × (L + 1), 8 bytes each):
#: 5e7 = 400 MB, beside a run's own tables; beyond it the runs prune with the cover bound of
#: all islands instead (scale-16x128 needs 8.5e5).
MAX_BOUND_CELLS = 50_000_000
#: ... and most element operations to compute it (numpy, ~1 ns each: well under a second;
#: scale-16x128 needs at most 1.1e8 at τ = ∞, far less near its optimum).
MAX_BOUND_WORK = 300_000_000
#: A run's budget is the interval's floor on D plus a step, doubled after each run that
#: finds nothing under it (which raises the floor by the step): small budgets keep few DP
#: states. The first step is this fraction of the floor (the cover bound is usually within
#: a few tens of percent of D on the shipped instances, so one or two doublings suffice) ...
FIRST_STEP_RTOL = 0.25
#: ... and at least this fraction of the interval's bound on T (a floor of 0 still moves) ...
MIN_STEP_RTOL = 1e-4
#: ... and at least this many seconds (every time may be 0).
MIN_STEP_S = 1e-6
#: Most interval splits a stopped search makes to refine its bound (one pipeline bound each,
#: 10-100 ms on the datacenter's instances; about log₂ of the thresholds per interval closes one).
TIGHTEN_SPLITS = 256


@dataclass
class _Interval:
    """Thresholds c_lo..c_hi (indices) not settled yet; D ≥ ``floor`` on all of them."""

    lo: int
    hi: int
    floor: float  # a known lower bound on D over the interval (0 when none is known)
    evaluated_above: bool  # D was computed at hi + 1 (floor is that value)
    step: float = 0.0  # how far above the floor the next run's budget goes (0: not set yet)
    bottom_first: bool = False  # lo is the least feasible threshold τ_0, not evaluated yet


class _Search:
    """The intervals, the incumbent and the bound; see the module docstring."""

    def __init__(self, instance: PipelineInstance, prep, cands: list[float], deadline: Deadline, stats: dict, *,
                 max_cells: int = dp_table.MAX_DP_CELLS, max_bound_cells: int = MAX_BOUND_CELLS,
                 cutoff: float = math.inf, gap_limit: float = 0.0) -> None:
        self.instance, self.prep, self.cands, self.deadline, self.stats = instance, prep, cands, deadline, stats
        self.max_cells, self.max_bound_cells, self.cutoff = max_cells, max_bound_cells, cutoff
        self.gap_limit = gap_limit  # a plan must beat the incumbent's T by it to matter
        self.M = instance.microbatches
        self.best_t, self.best_plan = math.inf, None
        self.open: list[_Interval] = []
        self._relaxed: dict[int, float] = {}
        self._usage: np.ndarray | None = None

    # -- bounds -------------------------------------------------------------------------
    def relaxed(self, i: int) -> float:
        """R_{c_i}, the pipeline bound: a lower bound on D(i) (inf: no choice of options makes a pipeline)."""
        if i not in self._relaxed:
            self._relaxed[i] = pipeline_bound(self.instance, self.prep.kinds, self.prep.options, self.cands[i])
        return self._relaxed[i]

    def lower(self, iv: _Interval) -> float:
        """A lower bound on D(j) + (M − 1)·c_j for every j in the interval."""
        return max(iv.floor, self.relaxed(iv.hi)) + (self.M - 1) * self.cands[iv.lo]

    @property
    def aim(self) -> float:
        """What a plan must beat to matter: the incumbent's T less the gap limit, or the cutoff when
        lower (inf: neither)."""
        within = self.best_t if self.gap_limit == 0.0 or math.isinf(self.best_t) else bound_within_gap(self.best_t, self.gap_limit)
        return min(within, self.cutoff)

    def bound(self, splits: int = 0) -> float | None:
        """The proven lower bound on T*: the least open interval's bound or :attr:`aim` (intervals
        were dropped against it); None when neither is known. With ``splits``, the intervals are
        refined threshold by threshold first (for a search that stopped): an interval's bound
        takes R at its top and c at its bottom, while each index i in it has
        f(i) ≥ max(floor, R_{c_i}) + (M − 1)·c_i (:func:`~hetopt.pipeline.bound.least_over_thresholds`,
        at most ``splits`` splits and within the deadline)."""
        if not self.open and self.best_plan is None and math.isinf(self.cutoff):
            return None
        least = least_over_thresholds([(iv.lo, iv.hi, iv.floor) for iv in self.open], self.relaxed, self.cands, self.M,
                                      stop_at=self.aim, splits=splits, deadline=self.deadline)
        return min(least, self.aim)

    # -- the incumbent ------------------------------------------------------------------
    def offer(self, plan: list[int], *, greedy: bool = False) -> None:
        """Keep ``plan`` if it is better; on a tie prefer a DP plan to the greedy's, then the smaller
        bottleneck (the plan the ascending scan of earlier versions returned)."""
        t = evaluate(self.instance, _bare(self.instance, plan)).objective
        key = (t, greedy, self.bottleneck_index(plan))
        if self.best_plan is None or key < self._best_key:
            self.best_t, self.best_plan, self._best_key = t, plan, key

    def bottleneck_index(self, plan: list[int]) -> int:
        """Index of β(plan) among the candidates (β is one of them by construction)."""
        inst = self.instance
        opts = [inst.options[o] for o in plan]
        beta = max(o.max_time_s for o in opts)
        for a, b in zip(opts, opts[1:]):
            beta = max(beta, inst.link_s[a.island][b.island])
        return bisect.bisect_left(self.cands, beta)

    # -- the search ---------------------------------------------------------------------
    def start(self) -> None:
        """The first interval: from the least feasible threshold up to where D ≥ R_∞ alone
        makes every candidate at least the incumbent."""
        m = len(self.cands)
        if math.isinf(self.relaxed(m - 1)):
            return  # no choice of options covers the model: infeasible (why_infeasible says so first)
        lo, hi = 0, m - 1  # least i with R_{c_i} finite: R is non-increasing in i
        while lo < hi:
            mid = (lo + hi) // 2
            if math.isinf(self.relaxed(mid)):
                lo = mid + 1
            else:
                hi = mid
        top = m - 1
        if math.isfinite(self.aim) and self.M > 1:
            # D(i) ≥ R_∞ for every i, so thresholds with R_∞ + (M − 1)·c_i ≥ incumbent (or cutoff) are settled
            slack = self.aim - self.relaxed(m - 1)
            top = min(top, bisect.bisect_right(self.cands, slack / (self.M - 1)))
        if lo > top:
            return
        # the τ_0 found below is evaluated first: with many micro-batches (M − 1)·τ dominates
        # T, so its plan is usually close to the optimum and makes the budgets above it small
        iv = _Interval(lo, top, 0.0, False, bottom_first=True)
        self.open.append(iv)  # open from here on: a deadline in the bisection below leaves it in the bound
        # the least feasible threshold τ_0, by bisection on the cost-free DP (feasibility is
        # monotone in τ); the greedy's plan proves its own bottleneck feasible
        hi = min(self.bottleneck_index(self.best_plan), top) if self.best_plan is not None else top
        if self.best_plan is None and not self.feasible(hi):
            self.open.remove(iv)  # no pipeline at all: every threshold is settled
            return
        while iv.lo < hi:
            mid = (iv.lo + hi) // 2
            if self.feasible(mid):
                hi = mid
            else:
                iv.lo = mid + 1

    def remaining(self, i: int):
        """The pruning bound of a run at c_i: per usage vector when that table is small enough,
        else the cover bound of all islands for every vector (weaker, as valid)."""
        small = self.prep.usage_count * (self.instance.layers + 1) <= self.max_bound_cells
        if small and unused_front_work(self.instance, self.prep.kinds, self.prep.options, self.cands[i]) <= MAX_BOUND_WORK:
            if self._usage is None:  # the usage vectors as one array, made once per search
                self._usage = np.array(self.prep.usage, dtype=np.int64).reshape(len(self.prep.usage), len(self.prep.kinds))
            return unused_front_bound(self.instance, self.prep.kinds, self.prep.options, self.cands[i], self._usage)
        return front_bound(self.instance, self.prep.kinds, self.prep.options, self.cands[i])[None, :]

    def feasible(self, i: int) -> bool:
        self.stats["feasibility_runs"] += 1
        return feasible(self.instance, self.prep, self.cands[i], self.deadline, max_cells=self.max_cells)

    def prune(self) -> None:
        self.open = [iv for iv in self.open if self.lower(iv) < self.aim]

    def budget(self, iv: _Interval, i: int) -> tuple[float, bool]:
        """The budget of a run at c_i in ``iv``, and whether it is the incumbent's (a run that
        finds nothing under it settles [lo, i])."""
        base = max(iv.floor, self.relaxed(i))
        probe = base + iv.step
        if math.isinf(self.aim):
            return probe, False
        cap = self.aim - (self.M - 1) * self.cands[iv.lo] + BUDGET_RTOL * abs(self.aim)
        return (cap, True) if cap <= probe else (probe, False)

    def step(self) -> bool:
        """Evaluate one threshold; False when every interval is settled."""
        self.prune()
        if not self.open:
            return False
        # the bottom τ_0 until it is evaluated, then the least bound first
        iv = next((iv for iv in self.open if iv.bottom_first), None) or min(self.open, key=self.lower)
        if iv.step <= 0.0:
            iv.step = max(FIRST_STEP_RTOL * max(iv.floor, self.relaxed(iv.hi)), MIN_STEP_RTOL * self.lower(iv), MIN_STEP_S)
        # the top of an interval whose D is only bounded from below first (its plan settles a
        # stretch below it and gives the rest a floor), otherwise bisect
        i = iv.lo if iv.bottom_first else (iv.lo + iv.hi) // 2 if iv.evaluated_above else iv.hi
        budget, final = self.budget(iv, i)
        remaining = self.remaining(i)
        try:
            run = _run(self.instance, self.prep, self.cands[i], self.deadline, budget=budget, remaining=remaining,
                       max_cells=self.max_cells)
        except _TooLarge:
            # the budget kept too many states: try again with a smaller one (it still raises the floor)
            self.stats["runs_too_large"] += 1
            iv.step /= 4.0
            if iv.step < MIN_STEP_RTOL * self.lower(iv):
                raise
            return True
        self.stats["thresholds_tried"] += 1
        self.stats["states_memoized"] += run.cells
        self.stats["states_pruned"] += run.pruned
        self.stats["usage_tables"] = max(self.stats["usage_tables"], run.tables)
        self.open.remove(iv)  # only now: a run stopped by the deadline leaves its interval open for the bound
        if i < iv.hi:
            self.open.append(_Interval(i + 1, iv.hi, iv.floor, iv.evaluated_above, iv.step))
        if run.plan is None:
            # D(i) ≥ budget, so D ≥ budget on [lo, i]; with the incumbent's budget or when the
            # budget dropped nothing (D(i) = ∞) nothing there beats the incumbent
            if run.cut and not final:
                self.open.append(_Interval(iv.lo, i, max(iv.floor, budget), iv.evaluated_above, 2.0 * iv.step, iv.bottom_first))
            return True
        self.offer(run.plan)
        j = min(self.bottleneck_index(run.plan), i)
        if iv.lo < j:
            self.open.append(_Interval(iv.lo, j - 1, max(iv.floor, run.value), True, 0.0))
        return True


def solve_dp(instance: PipelineInstance, *, time_limit: float | None = None, max_cells: int = dp_table.MAX_DP_CELLS,
             max_bound_cells: int = MAX_BOUND_CELLS, max_usage_states: int = MAX_USAGE_STATES,
             cutoff: float | None = None, gap_limit: float = 0.0) -> Result:
    """Solve by a branch and bound over bottleneck thresholds around the table DP.

    Parameters
    ----------
    instance
        The composition instance.
    time_limit
        Seconds for the whole call (None: no limit).
    max_cells
        Most cells one DP run may hold at once (:data:`~hetopt.pipeline.dp_table.MAX_DP_CELLS`).
    max_bound_cells
        Most cells of the per-usage-vector pruning bound; beyond it the runs prune with the
        cover bound of all islands (:data:`MAX_BOUND_CELLS`).
    max_usage_states
        Most usage vectors Π (n_K + 1) the DP lists; beyond it the DP declines
        (:data:`~hetopt.pipeline.dp_table.MAX_USAGE_STATES`).
    cutoff
        Seek only plans faster than this T (seconds), as Gurobi's ``Cutoff``: a caller that
        already holds a plan this fast (the planner, from another micro-batch size) learns
        sooner that this instance has none. When the search proves none is, the result is the
        best plan it knows (the greedy's) as FEASIBLE with ``bound`` = the cutoff, or, with
        no plan known, INFEASIBLE with that bound and the reason "no pipeline faster than the
        cutoff". None: no cutoff.
    gap_limit
        The relative gap, in [0, 1), at which the search stops (as HiGHS's ``mip_rel_gap``): it
        then seeks only plans faster than the incumbent's T·(1 − gap_limit), and a search that
        ends returns FEASIBLE with that bound (OPTIMAL only at 0, the default).

    Returns
    -------
    Result
        OPTIMAL, INFEASIBLE (with the reason), FEASIBLE with the bound of the unsettled
        thresholds when the time limit stops the search after a plan was found (the greedy's
        plan counts), TIME_LIMIT before one, DECLINED when the usage vectors or one run's
        tables exceed ``max_usage_states`` / ``max_cells`` (FEASIBLE with the bound when a
        plan is known by then). ``stats``: thresholds_tried (DP runs), thresholds,
        states_memoized (finite cells left over all runs), states_pruned (cells dropped by
        the budgets), usage_tables (most tables one run made), options_skipped (fit no
        position in memory), kinds, usage_states (Π (n_K + 1)), island_subsets (2^islands,
        what a state per subset would need), link_classes, behind_cap.

    Examples
    --------
    >>> import hetopt
    >>> from hetopt.catalog import instances_dir
    >>> r = hetopt.solve(hetopt.load(instances_dir() / "pipeline" / "tiny.toml"), "dp")
    >>> r.status.name, r.gap
    ('OPTIMAL', 0.0)
    """
    cutoff, gap_limit = math.inf if cutoff is None else check_cutoff(cutoff, "cutoff"), check_gap_limit(gap_limit)
    deadline = Deadline(time_limit)
    reason = why_infeasible(instance)
    if reason is not None:
        return no_solution(problem="pipeline", method="dp", status=Status.INFEASIBLE, deadline=deadline, reason=reason)
    prep = _prepare(instance, max_usage_states)
    cands = bottleneck_candidates(instance)
    hosts = sum(len(m) for m in prep.kinds)
    stats = {
        "thresholds_tried": 0, "thresholds": len(cands), "states_memoized": 0, "states_pruned": 0, "usage_tables": 0, "runs_too_large": 0, "feasibility_runs": 0,
        "options_skipped": prep.skipped, "kinds": len(prep.kinds), "usage_states": prep.usage_count,
        "island_subsets": 2**hosts, "link_classes": int(prep.link.shape[1]), "behind_cap": prep.cap,
    }
    if not prep.listed:
        return no_solution(
            problem="pipeline", method="dp", status=Status.DECLINED, deadline=deadline, stats=stats,
            reason=f"the DP would list {prep.usage_count:.3g} usage vectors (tables of up to "
            f"{prep.cells * (instance.layers + 1):.3g} cells), above {max_usage_states:.3g}: "
            f"{len(prep.kinds)} distinct island kinds are too many for the DP; {after_dp_declines(instance)}",
        )
    search = _Search(instance, prep, cands, deadline, stats, max_cells=max_cells, max_bound_cells=max_bound_cells,
                     cutoff=cutoff, gap_limit=gap_limit)
    plan = greedy_plan(instance, deadline)
    if plan is not None:
        search.offer(plan, greedy=True)
    try:
        search.start()
        while search.step():
            pass
    except _Timeout:
        return _stopped(instance, search, deadline, stats, "time limit reached before the DP found a pipeline")
    except _TooLarge:
        return _stopped(instance, search, deadline, stats, None, max_cells)
    if search.best_plan is None:
        cut = math.isfinite(cutoff)
        return no_solution(
            problem="pipeline", method="dp", status=Status.INFEASIBLE, deadline=deadline, stats=stats,
            bound=cutoff if cut else None,
            reason=f"no pipeline faster than the cutoff {cutoff:.6g} s" if cut else GENERIC_INFEASIBLE.format(layers=instance.layers)
        )
    if search.best_t > cutoff * (1 + BUDGET_RTOL):  # every plan below the cutoff ruled out; the greedy's is above it
        return _conclude(instance, search.best_plan, deadline, False, cutoff, stats,
                         f"no pipeline faster than the cutoff {cutoff:.6g} s; this plan (the greedy's) is above it")
    if gap_limit > 0.0:  # the thresholds were settled against T·(1 − gap_limit) only
        return _conclude(instance, search.best_plan, deadline, False, search.bound(), stats,
                         f"within the gap limit {gap_limit:g}")
    return _conclude(instance, search.best_plan, deadline, True, None, stats)


def _stopped(instance, search: _Search, deadline, stats, timeout_reason: str | None,
             max_cells: int = dp_table.MAX_DP_CELLS) -> Result:
    """The search did not finish: FEASIBLE with the bound when a plan is known, else no solution.
    The bound is refined threshold by threshold with what is left of the time (``TIGHTEN_SPLITS``)."""
    bound = search.bound(TIGHTEN_SPLITS)
    if search.best_plan is not None:
        return _conclude(instance, search.best_plan, deadline, False, bound, stats)
    if timeout_reason is not None:
        return no_solution(problem="pipeline", method="dp", status=Status.TIME_LIMIT, deadline=deadline, stats=stats,
                           bound=bound, reason=timeout_reason)
    return no_solution(
        problem="pipeline", method="dp", status=Status.DECLINED, deadline=deadline, stats=stats, bound=bound,
        reason=f"one DP run would hold more than {max_cells:.3g} cells before any pipeline was found; "
               f"{after_dp_declines(instance)}",
    )


def _bare(instance: PipelineInstance, plan: list[int]) -> PipelineSolution:
    return PipelineSolution(blocks_from_choices(instance, plan))


def _conclude(instance, plan, deadline, optimal, bound, stats, reason: str = "") -> Result:
    return conclude(
        problem="pipeline", method="dp", instance=instance,
        solution=build_solution(instance, blocks_from_choices(instance, plan)), evaluate=evaluate, deadline=deadline,
        proven_optimal=optimal, bound=bound, stats=stats, reason=reason
    )
