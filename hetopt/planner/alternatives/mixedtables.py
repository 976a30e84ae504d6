"""The mixed family's instance built from the planner's own prices: blocks of the model's atoms,
one single-node island per GPU type, and per type, TP degree and share a table of per-block
times and memory priced by the built-in parallelizer (the cost model's ``price_stage``).

Read by the ``mixed-stages`` alternative (:mod:`hetopt.planner.alternatives.mixed`), which
solves it, and by a given mixed plan's pricing (:mod:`hetopt.planner.alternatives.mixedplan`),
which cuts its blocks where the given stages start.
"""

from __future__ import annotations

import copy
import math
from collections import Counter

from hetopt import costmodel as cm
from hetopt.costmodel.stage import Layout
from hetopt.errors import InputError
from hetopt.mixed.problem import GpuGroup, MixedInstance, TpTables
from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
from hetopt.planner.parallelizer.protocol import IslandSpec, Slice, divisors
from hetopt.planner.search.compose import job_element_bytes, link_matrix


#: Atoms per block of the mixed instance: OPT-350M's 24 layers become 6 blocks, so the DP's
#: layer ranges (21) times flights times layouts stay inside its pricing limit.
BLOCK_ATOMS = 4
#: A stage takes a type's GPUs in whole nodes ("node") or one at a time ("gpu"): nodes keep the
#: DP's state small (units per type: 9 × 25 on Sailor's a8v24 against 33 × 97 GPUs) and are
#: how the composed plans take GPUs too.
UNIT = "node"

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


def block_ranges(atoms: int, cuts: tuple[int, ...] = ()) -> tuple[tuple[int, int], ...]:
    """The (first, end) atom ranges of the mixed instance's layers: every ``BLOCK_ATOMS`` atoms,
    also cut where a stage of a given plan starts (``cuts``, atom indices).

    >>> block_ranges(10), block_ranges(10, (0, 6))
    (((0, 4), (4, 8), (8, 10)), ((0, 4), (4, 6), (6, 8), (8, 10)))
    """
    bounds = sorted({*range(0, atoms, BLOCK_ATOMS), *(c for c in cuts if 0 < c < atoms), atoms})
    return tuple(zip(bounds[:-1], bounds[1:]))


def mixed_instance(s, microbatch_size: int, *, cuts: tuple[int, ...] = ()) -> MixedInstance:
    """The mixed instance of the setting ``s`` (``alternatives.Setting``) for micro-batches of ``microbatch_size``.

    Per type: the allocation unit is a node's GPUs (``UNIT``: a stage takes whole nodes), and
    the tables' rows stop at the largest share y that some block fits alone at one micro-batch
    in flight (a larger share fits no stage), at most b. Its layers are the blocks of
    :func:`block_ranges` (``cuts``: where the stages of a given plan start, so that each
    stage is whole blocks; none for the alternative's own search).
    """
    b, M = microbatch_size, s.global_batch // microbatch_size
    counts, per_node = Counter(), {}
    for node, gpu in zip(s.cluster.islands.nodes, s.cluster.gpu_types):
        counts[gpu.name] += node.gpus
        per_node[gpu.name] = math.gcd(per_node.get(gpu.name, 0), node.gpus)
    blocks = [Slice(tuple(s.atoms[i:j])) for i, j in block_ranges(len(s.atoms), cuts)]
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


__all__ = ["BLOCK_ATOMS", "UNIT", "block_ranges", "mixed_instance"]
