"""The planner's answer by the 1F1B schedule: a proven bound and re-ranking by simulation.

The pipeline family minimizes the closed form T = Σ t + Σ c + (M − 1)·β (Tangram's model).
It is not a lower bound of the simulated 1F1B time (``formulations/pipeline.md``, "Where the
closed form and the simulator part"): it overestimates a slow stage that is not the last
one and a slow link, and underestimates the bubbles a link's latency adds in every steady
cycle. This module keeps the family's objective and, per micro-batch size:

* :func:`path_bound` — a lower bound of one plan's simulated time: the longest of a few
  paths in the schedule's precedence graph (each a chain of operations that must run one
  after another, so the makespan is at least its length);
* :func:`relaxed_instance` — the same instance with every stage's time replaced by
  max(F, B) and every link by c/2: its family optimum is at most the simulated time of
  every plan of the original (proof in the formulation), so the DP gives a proven lower
  bound over all plans;
* :func:`rerank` — best-first search over option subsets: each node's closed-form optimum
  is simulated (the candidates, in the family's order), each node's relaxed optimum bounds
  every plan in it; it stops when the best simulated time is at most every open node's
  bound (then the plan is proven best by simulated time) or when its budget is spent.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hetopt import solvers
from hetopt.family import Deadline
from hetopt.pipeline.plan import blocks_from_choices, build_solution
from hetopt.pipeline.problem import PipelineInstance, PipelineSolution, evaluate
from hetopt.pipeline.simulate import MAX_SIMULATED_OPERATIONS, simulation_size
from hetopt.result import Result, Status, relative_gap

#: Most composition solves (DP runs on an option subset, closed form and relaxed counted
#: apart, the relaxed root included) one micro-batch size's re-ranking may start. Each costs
#: about one composition (0.2–1 s on the shipped clusters, on the loaded 2-core test
#: machine), and the relaxed bound rarely closes the proof there (formulations/pipeline.md),
#: so more runs buy little: 4 is the bound, and one or two more candidates (each with all
#: its block orders). A count, not a time share, so the same input gives the same plan.
#: Past it the plan is the best simulated candidate so far, FEASIBLE with the least open bound.
MAX_RERANK_SOLVES = 4

#: Most block orders of one candidate's options simulated (K! for K blocks: 5 blocks). The
#: option-removal search covers every plan but the orders of the candidate's own options;
#: beyond this count they stay unexplored and the proof does not close.
MAX_BLOCK_ORDERS = 120

#: What the planner's iteration time is: the 1F1B simulation (default) or the closed form.
TIME_MODELS = ("simulated", "closed-form")
#: ``stats["time_model"]`` of a result whose objective is the simulated time.
SIMULATED = "1F1B simulation"


def path_bound(forward_s: Sequence[float], backward_s: Sequence[float], link_after_s: Sequence[float],
               microbatches: int) -> float:
    """A lower bound of :func:`~hetopt.pipeline.simulate.simulate_1f1b`'s makespan, in O(S).

    The longest of: for each stage s, the path "micro-batch 0 forward up to s, then every
    operation of s with the idle its first and last backwards must wait for (the round trip
    R_s through the stages and links behind it, less the work s does meanwhile), then
    micro-batch M − 1's gradients back to stage 0"; and for each link, "micro-batch 0 up to
    the link, M one-way transfers of c/2 on its channel, micro-batch M − 1 to the end and
    back". Every piece is a chain the simulator must respect, so the bound never exceeds
    the simulated time (``tests/planner/test_schedule.py``); on uniform stages with free
    links it equals it.

    Examples
    --------
    >>> path_bound([1.0] * 3, [2.0] * 3, [0.0] * 3, 4)
    18.0
    """
    S, M = len(forward_s), microbatches
    t = [f + b for f, b in zip(forward_s, backward_s)]
    c = [float(link_after_s[s]) if s < S - 1 else 0.0 for s in range(S)]
    whole = sum(t) + sum(c)  # A: micro-batch 0's forward and backward pass
    best = whole
    head_t = head_c = 0.0  # Σ_{r<s} t_r, Σ_{l<s} c_l
    for s in range(S):
        behind = whole - head_t - head_c - t[s]  # R_s: Σ_{r>s} t_r + Σ_{l>=s} c_l
        k = min(S - s - 1, M - 1)  # operations of s between F(0) and B(0), and between F(M−1) and B(M−1)
        g1 = max(0.0, behind - k * forward_s[s])
        g2 = max(0.0, behind - k * backward_s[s])
        idle = g1 + g2 if k <= M - 2 else max(g1, g2)  # the two waits are disjoint unless s runs all forwards first
        best = max(best, head_t + head_c + M * t[s] + idle)
        best = max(best, whole + (M - 1) * c[s] / 2.0)
        head_t += t[s]
        head_c += c[s]
    return best


def relaxed_instance(instance: PipelineInstance) -> PipelineInstance:
    """The instance whose closed form lower-bounds the simulated time of every plan.

    Each stage becomes (F, B) → (max(F, B), 0) and each link c → c/2; layers, memory and
    roles are unchanged, so the plans are the same. For a plan π, the relaxed closed form
    Σ max(F, B) + Σ c/2 + (M − 1)·max(max_s max(F_s, B_s), max c/2) is at most the simulated
    time: Σ max(F, B) + Σ c/2 ≤ A(π), and stage s's path in :func:`path_bound` is at least
    A(π) + (M − 1)·max(F_s, B_s), each link's A(π) + (M − 1)·c/2.

    Examples
    --------
    >>> from hetopt.pipeline.problem import GIB, PipelineIsland, PipelineOption, StagePlan
    >>> inst = PipelineInstance("x", 1, 4, (PipelineIsland("a", 1, 8 * GIB),),
    ...     (PipelineOption(0, 1, (StagePlan(1, 1.0, 2.0, GIB, GIB),)),), ((0.0,),))
    >>> relaxed_instance(inst).options[0].stages[0].time_s
    2.0
    """
    options = tuple(
        replace(o, stages=tuple(replace(st, forward_s=max(st.forward_s, st.backward_s), backward_s=0.0) for st in o.stages))
        for o in instance.options
    )
    links = tuple(tuple(c / 2.0 for c in row) for row in instance.link_s)
    return replace(instance, name=f"{instance.name}-relaxed", options=options, link_s=links)


def simulated_lower_bound(work_flops: float, island_flops: Sequence[float], microbatches: int) -> float:
    """A lower bound on the simulated 1F1B time of every plan with ``microbatches`` micro-batches.

    The closed form's bound (``compose.pipeline_lower_bound``, min over k of
    (M − 1 + k)·(W/M)/(F_1 + … + F_k)) bounds T, not the schedule, which can be up to 17%
    below it (``tests/planner/test_schedule.py``). Here: every stage s has
    makespan ≥ Σ_{r<s} t_r + M·t_s (:func:`path_bound`'s path without its waits), and
    stage s does at most t_s·f_s of the W/M FLOPs of a micro-batch, f_s its GPUs' FLOP/s
    (at most its island's F). The most work a pipeline of makespan X fits is then c·X, with
    c from the back over islands by F descending (one stage per island and the fastest first
    do the most): c ← max(c, F/M + c·(1 − 1/M)). So X ≥ (W/M)/c. Also every plan has
    X ≥ A + (M − 1)·max(F_s, B_s) ≥ Σ t + (M − 1)/2·max t (:func:`relaxed_instance`), the
    closed form's shape with (M − 1)/2: its bound min over k of (M − 1)/2 + k over the k
    fastest islands' FLOP/s. The larger of the two.

    Examples
    --------
    >>> simulated_lower_bound(100.0, [10.0], 4)  # one island: the ideal
    10.0
    >>> simulated_lower_bound(100.0, [10.0, 10.0], 1)  # one micro-batch: the fastest island alone
    10.0
    >>> round(simulated_lower_bound(100.0, [10.0, 10.0], 100), 3)  # many: close to the ideal W / ΣF
    5.025
    """
    if microbatches < 1 or work_flops < 0 or not island_flops or min(island_flops) <= 0:
        raise ValueError("need M >= 1, W >= 0 and positive island FLOP/s")
    M, c = microbatches, 0.0
    for f in sorted(island_flops):  # from the back of the pipeline: the slowest island last
        c = max(c, f / M + c * (1.0 - 1.0 / M))
    per, total, shape = work_flops / M, 0.0, math.inf
    for k, f in enumerate(sorted(island_flops, reverse=True), start=1):
        total += f
        shape = min(shape, ((M - 1) / 2.0 + k) * per / total)
    return max(per / c, shape)


def relaxed_time(solution: PipelineSolution, microbatches: int) -> float:
    """The closed form of ``solution``'s pipeline in :func:`relaxed_instance` (without building it).

    Examples
    --------
    >>> from hetopt.pipeline.problem import StageReport
    >>> st = StageReport(0, "a", 0, 1, 1, 1.0, 2.0, 3.0, 1, 0.0, 1.0)
    >>> relaxed_time(PipelineSolution((), stages=(st, st), link_s=(1.0,)), 4)
    10.5
    """
    stage = [max(s.forward_s, s.backward_s) for s in solution.stages]
    links = [c / 2.0 for c in solution.link_s]
    return sum(stage) + sum(links) + (microbatches - 1) * max(max(stage), max(links, default=0.0))


def subset(instance: PipelineInstance, removed: frozenset[int]) -> tuple[PipelineInstance, list[int]]:
    """The instance without the options in ``removed``, and the kept options' original indices."""
    keep = [o for o in range(len(instance.options)) if o not in removed]
    return replace(instance, options=tuple(instance.options[o] for o in keep)), keep


@dataclass
class Reranked:
    """One micro-batch size's plan by simulated time (see :func:`rerank`)."""

    solution: PipelineSolution | None  # the best simulated candidate (None: no simulation)
    simulated_s: float
    analytic_s: float
    bound_s: float  # a proven lower bound of every plan's simulated time (NaN: none)
    proven: bool  # no plan simulates faster than ``solution``
    candidates: int  # plans simulated
    solves: int
    note: str = ""  # why the proof did not close, or why nothing was simulated


def _solve(instance: PipelineInstance, removed: frozenset[int], deadline: Deadline) -> tuple[Result, list[int]]:
    inst, keep = subset(instance, removed)
    if not inst.options:
        return Result(problem="pipeline", method="dp", status=Status.INFEASIBLE), keep
    limit = deadline.seconds_left()  # 0 with a stop requested: the dp answers at once
    return solvers.solve(inst, "dp", time_limit=None if limit is None else max(limit, 1e-3)), keep


def rerank(instance: PipelineInstance, composed: Result, deadline: Deadline,
           max_solves: int = MAX_RERANK_SOLVES, budget_s: float | None = None, exhaustive: bool = False,
           search: bool = True) -> Reranked:
    """The best plan of ``instance`` by simulated 1F1B time, with a proven bound.

    Parameters
    ----------
    instance
        The composition instance.
    composed
        The family's (closed-form) optimum of ``instance``, OPTIMAL.
    deadline
        No new solve starts after it.
    max_solves
        Most DP runs (closed form and relaxed), the relaxed root's included.
    budget_s
        Seconds for the search after the relaxed root (None: up to ``deadline``).
    exhaustive
        Search even when the relaxed bound cannot close the proof at the root (False: then
        only the block orders of ``composed``'s options are simulated, no DP runs, and the
        bound is left to the caller, NaN).
    search
        False: only the block orders of ``composed``'s options, never a search (for instances
        whose options are not all plain 1F1B stages).

    Returns
    -------
    Reranked
        ``proven`` when the best simulated time is at most the relaxed optimum of every
        option subset not yet explored (then no plan of the instance simulates faster).

    Examples
    --------
    >>> from hetopt import load
    >>> from hetopt.catalog import instances_dir
    >>> inst = load(instances_dir() / "pipeline" / "tiny.toml")
    >>> r = rerank(inst, solvers.solve(inst, "dp"), Deadline(None), exhaustive=True)
    >>> r.bound_s <= r.simulated_s
    True
    """
    first = composed.solution
    if math.isnan(first.simulated_s):
        return Reranked(None, math.nan, composed.objective, math.nan, False, 0, 0,
                        first.simulation_note or "the 1F1B simulation declined")
    budget = deadline if budget_s is None else Deadline(min(budget_s, deadline.remaining()))
    found = _Candidates(instance, first)
    if not exhaustive:
        # the relaxed closed form of a plan is at least the relaxed optimum: below the best
        # simulated time, the root's bound cannot close the proof, and the search's DP runs
        # (each about one composition) would only add candidates; planning keeps its time
        found.simulate_orders(found.root, math.nan)
        if not search:
            return found.answer(math.nan, False, 0, f"only the composition's block orders were simulated ({INTERLEAVED} "
                                "in other options)")
        if relaxed_time(found.best, instance.microbatches) < found.best_sim:
            return found.answer(math.nan, False, 0, "the relaxed bound (formulations/pipeline.md) is below the best "
                                "simulated time, so it cannot prove it; the candidates were the composition's optimum and "
                                f"its {found.candidates} block orders")
        # the search counts its own candidates and simulates every set again, with bounds; the
        # best plan found so far stays the incumbent
        found.seen_sets.clear()
        found.candidates = 0
    relaxed = relaxed_instance(instance)
    root_bound, _ = _solve(relaxed, frozenset(), deadline)  # the bound: worth the caller's whole deadline
    if root_bound.status is not Status.OPTIMAL:
        found.simulate_orders(found.root, math.nan)
        return found.answer(math.nan, False, 1, f"no bound: the relaxed composition is {root_bound.status.value}")
    found.simulate_orders(found.root, root_bound.objective)
    return _branch_and_bound(instance, relaxed, found, root_bound.objective, budget, max_solves)


class _Candidates:
    """The plans simulated so far: the best, how many, and the option sets whose every block
    order was simulated (a bound below which some were not: ``unordered``)."""

    def __init__(self, instance: PipelineInstance, first: PipelineSolution) -> None:
        self.instance = instance
        self.best, self.best_sim, self.candidates = first, first.simulated_s, 0
        self.root = tuple(b.option for b in first.blocks)
        self.seen_sets: set[frozenset[int]] = set()
        self.unordered = math.inf  # least bound of option sets with too many block orders to simulate

    def simulate_orders(self, chosen: tuple[int, ...], bound: float) -> None:
        """Every feasible block order of ``chosen``'s options, simulated (the search's children miss them)."""
        key = frozenset(chosen)
        if key in self.seen_sets:
            return
        self.seen_sets.add(key)
        if math.factorial(len(chosen)) > MAX_BLOCK_ORDERS:
            self.unordered = min(self.unordered, bound)
            orders = [chosen]
        else:
            orders = list(itertools.permutations(chosen))
        for order in orders:
            if order == self.root:  # the composition's own plan, simulated already
                self.candidates += 1
                continue
            blocks = blocks_from_choices(self.instance, order)
            if not evaluate(self.instance, PipelineSolution(blocks)).feasible:
                continue
            sol = build_solution(self.instance, blocks)
            self.candidates += 1
            if not math.isnan(sol.simulated_s) and sol.simulated_s < self.best_sim:
                self.best, self.best_sim = sol, sol.simulated_s

    def answer(self, bound: float, proven: bool, solves: int, note: str) -> Reranked:
        return Reranked(self.best, self.best_sim, self.best.iteration_time_s, bound, proven, self.candidates, solves, note)


def _branch_and_bound(instance: PipelineInstance, relaxed: PipelineInstance, found: _Candidates, root_bound: float,
                      budget: Deadline, max_solves: int) -> Reranked:
    """Best-first over option subsets, from the relaxed root's bound, until the best simulated
    time is at most every open node's bound (proven), or the solves or the budget run out."""
    # open nodes: (a lower bound of every plan in it, tie, removed options, its relaxed optimum is known,
    # its closed-form optimum or None); a child starts with its parent's bound and is refined
    # by its own relaxed optimum when it comes first (lazily: most are never reached)
    heap: list[tuple[float, int, frozenset[int], bool, tuple[int, ...] | None]] = [
        (root_bound, 0, frozenset(), True, found.root)]
    seen_nodes, tie, note, solves = {frozenset()}, 1, "", 1
    while heap:
        bound, _, removed, refined, chosen = heap[0]
        if found.best_sim <= bound:
            break  # every open node's plans simulate at least ``bound``
        if solves >= max_solves or budget.expired():
            why = "its time share" if budget.expired() else f"at most {max_solves} compositions"
            note = (f"re-ranking stopped after {found.candidates} simulated candidates ({why}); plans not simulated may "
                    f"reach {bound:.4g} s")
            break
        heapq.heappop(heap)
        if not refined:
            low, _ = _solve(relaxed, removed, budget)
            solves += 1
            if low.status is Status.INFEASIBLE or (low.status is Status.OPTIMAL and low.objective >= found.best_sim):
                continue  # empty, or nothing in it simulates faster than the best
            better = max(bound, low.objective) if low.status is Status.OPTIMAL else bound
            heapq.heappush(heap, (better, tie, removed, True, None))
            tie += 1
            continue
        if chosen is None:  # the node's closed-form optimum: the next candidate
            cand, keep = _solve(instance, removed, budget)
            solves += 1
            if cand.status is Status.INFEASIBLE:
                continue
            if cand.status is not Status.OPTIMAL:
                heapq.heappush(heap, (bound, tie, removed, True, None))
                note = f"re-ranking stopped: a composition is {cand.status.value}; plans not simulated may reach {bound:.4g} s"
                break
            chosen = tuple(keep[b.option] for b in cand.solution.blocks)
            # the children below hold every plan of the node but the block orders of ``chosen``'s options
            found.simulate_orders(chosen, bound)
        for o in chosen:  # the node's plans avoiding o, over every o: all of its plans but ``chosen``'s orders
            child = removed | {o}
            if child not in seen_nodes:
                seen_nodes.add(child)
                heapq.heappush(heap, (bound, tie, child, False, None))
                tie += 1
    open_bound = min(min((h[0] for h in heap), default=math.inf), found.unordered)
    if found.unordered < found.best_sim and not note:
        note = (f"a candidate has more than {MAX_BLOCK_ORDERS} block orders, not all simulated; they may reach "
                f"{found.unordered:.4g} s")
    proven = found.best_sim <= open_bound
    return found.answer(min(open_bound, found.best_sim), proven, solves, "" if proven else note)


#: Why a plan with an interleaved option keeps its closed form.
INTERLEAVED = ("interleaved 1F1B: its stages are shaped so that the closed form gives the interleaved schedule's "
               "time; the simulator runs plain 1F1B")


def rescore(instance: PipelineInstance, composed: Result | None, deadline: Deadline,
            unsimulable: frozenset[int] = frozenset()) -> Result | None:
    """The composition's result restated in simulated 1F1B time (the planner's objective).

    An OPTIMAL closed-form composition becomes OPTIMAL in simulated time only when
    :func:`rerank` proves it, else FEASIBLE with its bound and the reason. A pipeline too
    large to simulate (``MAX_SIMULATED_OPERATIONS``) keeps the closed form and its status;
    ``stats["time_model"]`` says which time the result carries, and why. So does a plan using
    an option of ``unsimulable`` (interleaved whole-model plans, ``builtin.interleaved_stages``);
    with such options in the instance, no search runs (its bounds assume plain 1F1B).

    Examples
    --------
    >>> from hetopt import load
    >>> from hetopt.catalog import instances_dir
    >>> inst = load(instances_dir() / "pipeline" / "tiny.toml")
    >>> rescore(inst, solvers.solve(inst, "dp"), Deadline(None)).stats["time_model"]
    '1F1B simulation'
    """
    if composed is None or composed.status is not Status.OPTIMAL or composed.solution is None:
        return composed
    sol = composed.solution
    if simulation_size(len(sol.stages), instance.microbatches) > MAX_SIMULATED_OPERATIONS or math.isnan(sol.simulated_s):
        why = sol.simulation_note or f"the 1F1B simulation exceeds {MAX_SIMULATED_OPERATIONS:,} operations"
        return replace(composed, stats={**composed.stats, "time_model": f"closed form ({why})"})
    if any(b.option in unsimulable for b in sol.blocks):
        return replace(composed, stats={**composed.stats, "time_model": f"closed form ({INTERLEAVED})"})
    r = rerank(instance, composed, deadline, exhaustive=False, search=not unsimulable)
    if r.solution is None:
        return replace(composed, stats={**composed.stats, "time_model": f"closed form ({r.note})"})
    bound = r.simulated_s if r.proven else (None if math.isnan(r.bound_s) else r.bound_s)
    stats = {**composed.stats, "time_model": SIMULATED, "rerank_candidates": r.candidates, "rerank_solves": r.solves,
             "analytic_optimum_s": composed.objective}
    if r.proven:
        return replace(composed, objective=r.simulated_s, bound=bound, gap=0.0, solution=r.solution, stats=stats)
    return replace(composed, status=Status.FEASIBLE, objective=r.simulated_s, bound=bound,
                   gap=None if bound is None else relative_gap(r.simulated_s, bound), solution=r.solution,
                   stats={**stats, "rerank_note": r.note},
                   reason=f"not proven best by simulated 1F1B time ({r.candidates} candidates simulated)")
