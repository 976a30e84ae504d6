"""The mixed-stage alternative: pipeline stages whose data-parallel replicas span GPU types.

Builds a ``mixed`` family instance (``formulations/mixed.md``) from the planner's cluster and
model with the built-in stage prices and solves it with the family's exact ``dp``. A stage
holds, per GPU type, a count of identical replicas taking whole nodes (the family's unit), so
a stage can use every node of the cluster. The tables come from the parallelizer's own prices
of one *block* (``BLOCK_ATOMS`` consecutive atoms of the planner) at a time, on one node of
each GPU type, for each TP degree t dividing the node and each share y = 1..Y, as a one-stage
layout (pp 1, dp 1, no recomputation, ZeRO 0):

* time_g(t, y, block) = that stage's forward + backward seconds; static bytes per GPU at
  y = 1 and activation bytes per GPU, plus the static bytes that grow with y (the head's
  logits workspace), per share (the embedding is priced with the first block, the head with
  the last); Y stops at the first share no block fits alone at one micro-batch in flight, and
  at ⌈b / r_min⌉ (r_min replicas of t GPUs make a whole node);
* gradient bytes of a block = its parameters × the bytes the runtime reduces per gradient;
* a type's ring bandwidth = its node's network as NCCL achieves it (a unit's link); a ring
  across types runs at the slowest; the ring hides behind the last backward (ω = 2/3 of the
  table's time, one bucket per model layer) when the runtime overlaps data-parallel traffic;
* the hand-over λ = the slowest island-to-island link of ``compose.link_matrix``;
* the runtime's reserved bytes come off each block's static bytes and off the capacity (a
  stage holds them once).

Where this approximates the planner's stage prices (said again in ``formulations/mixed.md``):
a stage of several blocks is priced as the sum of its blocks (the parallelizer prices it
whole; fixed per-stage terms such as a TP stage's hand-overs are counted once per block);
the data-parallel reduction is the family's ring over node links (no NCCL step latency, no
ZeRO sharding of the optimizer state, which the composed plan's ``_data_parallel`` has), and
its overlap counts the TP traffic in the table's time as hiding compute; the optimizer step
is priced per replica at dp 1; the static bytes that grow with y are counted once per
micro-batch in flight (exact for the last stage, which holds the head and one micro-batch).
The plan is the family's proven optimum *of these tables*, so the alternative is FEASIBLE as
a plan of the cluster, not OPTIMAL.
"""

from __future__ import annotations

import math
from collections import Counter

from hetopt.costmodel.running import Running
from hetopt.planner.budget import mixed_deadline
from hetopt import solvers
from hetopt.budget import Deadline
from hetopt.errors import InputError
from hetopt.mixed.limits import MAX_STATES, state_count
from hetopt.planner.answer import Alternative
from hetopt.planner.search.compose import microbatch_candidates
from hetopt.planner.alternatives.mixedplan import plan_data
from hetopt.planner.alternatives.mixedtables import BLOCK_ATOMS, UNIT, block_ranges, mixed_instance
from hetopt.result import Status

#: The row's name in the alternatives table.
NAME = "mixed-stages"


def ignored(running: Running) -> tuple[str, ...]:
    """The ``--runtime`` keys of ``running`` the mixed family's plan is priced without: its
    hand-overs are the split one's (``cm.pipeline_link_s``), whatever ``handover`` says; every
    other setting reaches it through the block tables (``par.plan``) and the ring."""
    return ("handover",) if running.handover != Running().handover else ()


def _grouped(reasons: list[tuple[int, str]]) -> str:
    """``b=1, 2: why; b=4: other`` from (size, why) pairs, each reason once.

    >>> _grouped([(1, "DECLINED (x)"), (2, "DECLINED (x)"), (4, "INFEASIBLE")])
    'b=1, 2: DECLINED (x); b=4: INFEASIBLE'
    """
    sizes: dict[str, list[int]] = {}
    for b, why in reasons:
        sizes.setdefault(why, []).append(b)
    return "; ".join(f"b={', '.join(map(str, bs))}: {why}" for why, bs in sizes.items())


def _too_many_states(s, b: int, max_states: int = MAX_STATES) -> str | None:
    """Why the family's dp would decline the instance of size ``b`` for its states (more than
    ``max_states``), or None."""
    units, per_node = Counter(), {}
    for node, gpu in zip(s.cluster.islands.nodes, s.cluster.gpu_types):
        units[gpu.name] += node.gpus
        per_node[gpu.name] = math.gcd(per_node.get(gpu.name, 0), node.gpus)
    if UNIT == "node":
        units = {name: n // per_node[name] for name, n in units.items()}
    blocks = -(-len(s.atoms) // BLOCK_ATOMS)
    n = state_count(blocks, list(units.values()), s.global_batch // b)
    if n > max_states:
        return (f"{n} states (layers × units used per type × stages after) exceed the dp's limit of {max_states}; "
                f"the cluster has too many nodes per GPU type for the mixed-stages row")
    return None


def mixed_alternative(s, deadline: Deadline, *, max_states: int = MAX_STATES):
    """The ``mixed-stages`` row (``answer.Alternative``): the best plan over the micro-batch
    sizes (the user's, or the composed plan's candidates), within its share of what is left of ``deadline``
    (:func:`hetopt.planner.budget.mixed_deadline`: a quarter, at most 30 s). A size whose instance
    would have more than ``max_states`` dp states (:data:`~hetopt.mixed.limits.MAX_STATES`) is
    declined from the node counts, before any table is priced.

    Its status is FEASIBLE when the family's ``dp`` proved its optimum *of the tables* (the
    tables approximate the planner's stage prices, see the module docstring), else the
    family's status (TIME_LIMIT, DECLINED with the limit named, INFEASIBLE).
    """
    budget = mixed_deadline(deadline)
    best, reasons, statuses, infeasible = None, [], [], []  # infeasible sizes are proofs, not gaps
    # the micro-batch size the user fixed, else the composed plan's candidates (every divisor of
    # the global batch, powers of two first): the tables' rows stop where a share no longer fits,
    # so a large b costs no more than a small one
    sizes = (s.microbatch_size,) if s.microbatch_size else (
        s.microbatch_sizes or tuple(microbatch_candidates(s.global_batch, None)))
    for b in sizes:
        if s.global_batch % b:
            continue
        if budget.expired():
            reasons.append((b, "not tried, its time was spent"))
            statuses.append(Status.TIME_LIMIT)
            continue
        hit = _too_many_states(s, b, max_states)
        if hit is not None:  # decided from the counts, before any table is priced
            reasons.append((b, f"{Status.DECLINED.value} ({hit})"))
            statuses.append(Status.DECLINED)
            continue
        try:
            inst = mixed_instance(s, b)
        except InputError as exc:  # outside the family's ranges (more than MAX_TYPES GPU types, ...)
            reasons.append((b, f"the mixed instance declines the cluster: {exc}"))
            statuses.append(Status.DECLINED)
            continue
        r = solvers.solve(inst, "dp", time_limit=budget.seconds_left())
        if r.status.has_solution and (best is None or r.objective < best[0].objective):
            best = (r, b, inst)
        if r.status is Status.INFEASIBLE:
            infeasible.append((b, f"{r.status.value}" + (f" ({r.reason})" if r.reason else "")))
        elif r.status is not Status.OPTIMAL:
            reasons.append((b, f"{r.status.value}" + (f" ({r.reason})" if r.reason else "")))
            statuses.append(r.status)
    if best is None:
        # the row's status: the first that was not a proof, else INFEASIBLE (every size proven so)
        status = statuses[0] if statuses else Status.INFEASIBLE
        return Alternative(NAME, None, _grouped(reasons + infeasible) or "no micro-batch size divides the global batch",
                           status)
    r, b, inst = best
    used = Counter()
    for stage in r.solution.stages:
        for m in stage.members:
            used[r.solution.names[m.gpu]] += m.replicas * m.degree
    note = "" if not reasons else f" (not every size proven: {_grouped(reasons)})"
    note += stock_runtime_note(r.solution, getattr(s.parallelizer, "target", None))
    return Alternative(NAME, r.objective, f"{r.solution.describe()}, b={b}{note}", Status.FEASIBLE, gpus_by_type=dict(used),
                       running=s.parallelizer.running, ignores=ignored(s.parallelizer.running),
                       plan=plan_data(s, inst, r.solution, block_ranges(len(s.atoms))))


def stock_runtime_note(solution, target: str | None) -> str:
    """What a plan's ``--target`` runtime cannot run of a mixed-stages solution, as one clause
    ("" without a target, or when it runs it all).

    A stock runtime starts one SPMD job: one TP size (Megatron-LM's
    ``--tensor-model-parallel-size``, DeepSpeed's topology, torchtitan's device mesh) and one
    micro-batch size per rank for the whole job (``hetopt.runtimes``); Cephalo runs FSDP with
    per-GPU batches and no TP.

    Examples
    --------
    >>> from hetopt.mixed.problem import Member, MixedSolution, Stage
    >>> sol = MixedSolution((Stage(0, 2, (Member(0, 1, 6, 6), Member(1, 4, 1, 2))),), ("A100", "V100"))
    >>> stock_runtime_note(sol, "megatron")
    '; Megatron-LM cannot run it as one job: TP 1 and 4 in one stage, 1 and 2 samples a replica'
    >>> stock_runtime_note(sol, None)
    ''
    """
    if target is None:
        return ""
    from hetopt.runtimes import RUNTIMES

    runtime = RUNTIMES[target]
    members = [m for st in solution.stages for m in st.members]
    tps = sorted({m.degree for m in members})
    shares = sorted({share for m in members for share in m.shares})
    what = []
    if len(tps) > 1 or (not runtime.pipeline and tps != [1]):
        what.append(f"TP {' and '.join(map(str, tps))} in one stage" if len(tps) > 1 else "TP")
    if len(shares) > 1 and runtime.pipeline:
        what.append(f"{' and '.join(map(str, shares))} samples a replica")
    return f"; {runtime.title} cannot run it as one job: {', '.join(what)}" if what else ""
