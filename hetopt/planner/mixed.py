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

import copy
import math
from collections import Counter

from hetopt import costmodel as cm
from hetopt.costmodel.running import Running
from hetopt.planner.budget import mixed_deadline
from hetopt import solvers
from hetopt.budget import Deadline
from hetopt.costmodel.stage import Layout
from hetopt.errors import InputError
from hetopt.mixed.limits import MAX_STATES, state_count
from hetopt.mixed.problem import GpuGroup, MixedInstance, TpTables
from hetopt.planner.answer import Alternative
from hetopt.planner.builtin import BuiltinParallelizer
from hetopt.planner.compose import job_element_bytes, link_matrix, microbatch_candidates
from hetopt.planner.parallelizer import IslandSpec, Slice, divisors
from hetopt.result import Status

#: Atoms per block of the mixed instance: OPT-350M's 24 layers become 6 blocks, so the DP's
#: layer ranges (21) times flights times layouts stay inside its pricing limit.
BLOCK_ATOMS = 4
#: A stage takes a type's GPUs in whole nodes ("node") or one at a time ("gpu"): nodes keep the
#: DP's state small (units per type: 9 × 25 on Sailor's a8v24 against 33 × 97 GPUs) and are
#: how the composed plans take GPUs too.
UNIT = "node"
#: The row's name in the alternatives table.
NAME = "mixed-stages"


def _node_specs(s) -> dict[str, IslandSpec]:
    """One single-node IslandSpec per GPU type of the cluster, and every type's GPU count."""
    nodes = s.cluster.islands.nodes
    specs: dict[str, IslandSpec] = {}
    for node, gpu in zip(nodes, s.cluster.gpu_types):
        if gpu.name not in specs:
            bw = max(float(x) for x in s.cluster.islands.inter[nodes.index(node)])
            specs[gpu.name] = IslandSpec(node.name, gpu, nodes=1, gpus_per_node=node.gpus, inter_bandwidth=bw,
                                         intra_bandwidth=node.intra_bytes_s,
                                         memory=None if node.memory_bytes == gpu.memory_bytes else node.memory_bytes)
    return specs


def _rising(rows: list[list[float]]) -> tuple[tuple[tuple[float, ...], ...], int]:
    """The rows, each raised to the one before it where it dips, and how many entries were raised
    (the family's tables must not decrease with the share)."""
    out, raised = [], 0
    for row in rows:
        if out:
            raised += sum(v < lo for v, lo in zip(row, out[-1]))
            row = [max(v, lo) for v, lo in zip(row, out[-1])]
        out.append(tuple(row))
    return tuple(out), raised


def mixed_instance(s, microbatch_size: int) -> MixedInstance:
    """The mixed instance of the setting ``s`` (``alternatives.Setting``) for micro-batches of ``microbatch_size``.

    Per type: the allocation unit is a node's GPUs (``UNIT``: a stage takes whole nodes), and
    the tables' rows stop at the largest share y that some block fits alone at one micro-batch
    in flight (a larger share fits no stage), at most b.
    """
    b, M = microbatch_size, s.global_batch // microbatch_size
    counts, per_node = Counter(), {}
    for node, gpu in zip(s.cluster.islands.nodes, s.cluster.gpu_types):
        counts[gpu.name] += node.gpus
        per_node[gpu.name] = math.gcd(per_node.get(gpu.name, 0), node.gpus)
    blocks = [Slice(tuple(s.atoms[i:i + BLOCK_ATOMS])) for i in range(0, len(s.atoms), BLOCK_ATOMS)]
    groups = []
    reserved = s.parallelizer.reserved_bytes
    for name, spec in _node_specs(s).items():
        capacity = spec.memory_bytes - reserved
        unit = per_node[name] if UNIT == "node" else 1
        tables = []
        for t in divisors(spec.gpus_per_node):
            # the built-in parallelizer's memo keeps one price table per (samples, micro-batches) and
            # sums their sizes on every query: a private copy per TP degree keeps that sum small
            # (the prices are the same; the planner's own memo is left as it was)
            par = copy.copy(s.parallelizer) if isinstance(s.parallelizer, BuiltinParallelizer) else s.parallelizer
            rows_t, rows_a, static = [], [], None
            # a replica of t GPUs holds at most ⌈b / r_min⌉ samples, r_min the fewest replicas that
            # make whole units
            most = -(-b // (unit // math.gcd(unit, t)))
            for y in range(1, most + 1):
                stage = [par.plan(block, spec, Layout(t, 1, 1, (len(block.atoms),), "none", 0),
                                  microbatch_size=y, microbatches=M).stages[0] for block in blocks]
                if static is None:
                    # every price holds the runtime's reserved bytes once; a stage of several blocks
                    # holds them once too, so they come off each block and off the capacity
                    static = tuple(st.static_bytes - reserved for st in stage)
                # static bytes that grow with the share (the head's logits workspace) go to the
                # activations: exact for the last stage (one micro-batch in flight), an over-count
                # by the flight elsewhere
                act = [st.activation_bytes + (st.static_bytes - reserved - s0) for st, s0 in zip(stage, static)]
                if all(s0 + a > capacity for s0, a in zip(static, act)):
                    break  # no block fits this share alone: no stage fits it or any larger one
                rows_t.append([st.time_s for st in stage])
                rows_a.append(act)
            if not rows_t:
                continue  # not even one sample fits a block at this TP degree
            time_s, _ = _rising(rows_t)
            activation, _ = _rising(rows_a)
            tables.append(TpTables(t, time_s, static, activation))
        if not tables:
            continue  # the type holds no block at any share: the mixed plans leave it out
        # a unit's link: the node's network when a stage takes whole nodes, else a GPU's share of it
        ring = spec.inter_achieved if unit == spec.gpus_per_node else spec.inter_achieved / spec.gpus_per_node
        groups.append(GpuGroup(name, counts[name], capacity, ring, tuple(tables), unit))
    if not groups:
        raise InputError(f"no GPU type of {s.cluster.name} holds one block ({BLOCK_ATOMS} atoms) of one sample")
    params = [sum(cm.layer_parameters(s.cfg, i) for a in block.atoms for i in range(a.first_layer, a.first_layer + a.layers))
              for block in blocks]
    params[0] += cm.input_embedding_parameters(s.cfg)  # the embedding's and the head's gradients go with their blocks
    params[-1] += cm.head_parameters(s.cfg)
    element = job_element_bytes(s.parallelizer)
    links = link_matrix(s.cluster, s.members, s.cfg, s.seq, b, element)
    link = max((x for row in links for x in row), default=0.0)
    # gradients reduced in fp32 (gradreduce=fp32), else in the run's element size (4 bytes in fp32/tf32)
    grad = (cm.FP32_GRADIENT_BYTES if s.parallelizer.running.grad_fp32
            else cm.GRADIENT_BYTES * element / cm.ACTIVATION_BYTES)
    # the ring hides behind the last micro-batch's backward, in one bucket per model layer, when
    # the runtime overlaps data-parallel traffic (``cm.data_parallel_comm``, ``cm.exposed_s``)
    overlap = (cm.BACKWARD_PER_FORWARD / cm.TRAINING_PER_FORWARD
               if s.parallelizer.running.overlap else 0.0)
    buckets = tuple(sum(a.layers for a in block.atoms) or 1 for block in blocks)
    return MixedInstance(f"{s.cluster.name}-{s.cfg.name}-mixed-b{b}", M, b, len(blocks),
                         tuple(p * grad for p in params), link, min(g.bandwidth for g in groups),
                         tuple(groups), overlap, buckets)


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


def _too_many_states(s, b: int) -> str | None:
    """Why the family's dp would decline the instance of size ``b`` for its states, or None."""
    units, per_node = Counter(), {}
    for node, gpu in zip(s.cluster.islands.nodes, s.cluster.gpu_types):
        units[gpu.name] += node.gpus
        per_node[gpu.name] = math.gcd(per_node.get(gpu.name, 0), node.gpus)
    if UNIT == "node":
        units = {name: n // per_node[name] for name, n in units.items()}
    blocks = -(-len(s.atoms) // BLOCK_ATOMS)
    n = state_count(blocks, list(units.values()), s.global_batch // b)
    if n > MAX_STATES:
        return (f"{n} states (layers × units used per type × stages after) exceed the dp's limit of {MAX_STATES}; "
                f"the cluster has too many nodes per GPU type for the mixed-stages row")
    return None


def mixed_alternative(s, deadline: Deadline):
    """The ``mixed-stages`` row (``answer.Alternative``): the best plan over the micro-batch
    sizes (the user's, or the composed plan's candidates), within its share of what is left of ``deadline``
    (:func:`hetopt.planner.budget.mixed_deadline`: a quarter, at most 30 s).

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
        hit = _too_many_states(s, b)
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
            best = (r, b)
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
    r, b = best
    used = Counter()
    for stage in r.solution.stages:
        for m in stage.members:
            used[r.solution.names[m.gpu]] += m.replicas * m.degree
    note = "" if not reasons else f" (not every size proven: {_grouped(reasons)})"
    note += stock_runtime_note(r.solution, getattr(s.parallelizer, "target", None))
    return Alternative(NAME, r.objective, f"{r.solution.describe()}, b={b}{note}", Status.FEASIBLE, gpus_by_type=dict(used),
                       running=s.parallelizer.running, ignores=ignored(s.parallelizer.running))


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
