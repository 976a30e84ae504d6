"""The built-in parallelizer's layouts: how a slice's layers split over stages (even, min-max,
interleaved), where stages sit, and which enumerated layouts are left out because another one
always matches or beats them (exact).
"""

from __future__ import annotations

import bisect
import operator
from dataclasses import fields
from itertools import accumulate

from hetopt import costmodel as cm
from hetopt.costmodel.stage import Layout, stage_offset
from hetopt.parallelism import expert as ex
from hetopt.planner.parallelizer.protocol import IslandSpec, Slice, divisors


def even_split(k: int, p: int) -> tuple[int, ...]:
    """k layers over p stages as evenly as possible, the extra layers at the back.

    Back stages hold fewer micro-batches in flight under 1F1B, so they take the extras.

    >>> even_split(10, 4)
    (2, 2, 3, 3)
    """
    return tuple(k // p + (1 if q >= p - k % p else 0) for q in range(p))

def interleave_degrees(layers: int, pp: int) -> list[int]:
    """The virtual stages per GPU, v ≥ 2, of Megatron's interleaved 1F1B for ``layers`` layers on pp stages.

    Every stage (:func:`even_split`) cuts its layers into v chunks of at least one layer, as
    even as they go: v divides the largest stage and is at most the smallest. When pp divides
    the layers these are the divisors of the layers per stage, Megatron-LM's equal chunks;
    otherwise the first stages hold one layer less and some of their chunks are one layer
    shorter, as Megatron-Core's uneven first pipeline stages run it (Llama 3 405B: 126 layers
    on 16 stages of 7 and 8).

    Examples
    --------
    >>> interleave_degrees(96, 12), interleave_degrees(126, 16), interleave_degrees(24, 1)
    ([2, 4, 8], [2, 4], [])
    """
    if pp < 2 or layers < pp:
        return []
    small, large = layers // pp, -(-layers // pp)
    return [v for v in divisors(large)[1:] if v <= small]

def minmax_split(weights: list[float], p: int) -> tuple[int, ...]:
    """A split of consecutive ``weights`` into p non-empty parts minimizing the largest part.

    Binary search over the O(k²) contiguous sums with a greedy check that fills stages
    from the back (as many layers as fit, leaving one per stage in front).

    >>> minmax_split([1, 1, 1, 1, 3], 3)
    (1, 3, 1)
    """
    k = len(weights)
    prefix = list(accumulate(weights, initial=0.0))

    def fits(bound: float) -> tuple[int, ...] | None:
        end, sizes = k, []
        for q in range(p - 1, 0, -1):  # stage q needs q layers left in front of it
            start = end - 1
            while start - 1 >= q and prefix[end] - prefix[start - 1] <= bound:
                start -= 1
            if prefix[end] - prefix[start] > bound:
                return None
            sizes.append(end - start)
            end = start
        if prefix[end] > bound:
            return None
        sizes.append(end)
        return tuple(reversed(sizes))

    candidates = sorted({prefix[j] - prefix[i] for i in range(k) for j in range(i + 1, k + 1)})
    lo = bisect.bisect_left(candidates, max(weights))
    hi = len(candidates) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(candidates[mid]) is None:
            lo = mid + 1
        else:
            hi = mid
    best = fits(candidates[lo])
    assert best is not None  # the whole sum always admits a split when k >= p
    return best

def stage_offsets(island: IslandSpec, gpus: int, pp: int) -> tuple[int, ...]:
    """The first GPU (island-wide index) of every stage of ``gpus`` GPUs, placed as :func:`stage_nodes`.

    >>> from hetopt.hardware import load_gpus
    >>> isl = IslandSpec("t4", load_gpus()["T4"], nodes=2, gpus_per_node=4, inter_bandwidth=4e9)
    >>> stage_offsets(isl, 3, 2), stage_offsets(isl, 6, 1)
    ((0, 4), (0,))
    """
    return tuple(stage_offset(island, gpus, pp, q) for q in range(pp))

def fsep_may_pay(sl: Slice, island: IslandSpec, m: int, tp: int, cp: int, dp: int, ep: int,
                  precision: str = cm.DEFAULT_PRECISION) -> bool:
    """False when FSEP is dominated by plain EP of the same layout, whatever its other choices.

    FSEP holds the same state plus gathered experts (never less memory) and differs in time
    only per MoE layer: it gathers the experts once in forward, again in backward, and
    reduce-scatters their gradients (3 collectives), and it saves the routing imbalance on the
    expert GEMMs (at most 4 of them with full recomputation) and on the all-to-alls (at most 6).
    When a lower bound of the first exceeds an upper bound of the second, every stage of the
    FSEP layout is at least as slow as the EP one: dominated (exact). Bounds on the link
    slopes: inside a node 1/w_intra; for groups that may cross nodes, an all-to-all's seconds per
    byte lie between min(1/w_intra, 1/w_inter)/2 (a GPU sends at least half its bytes over one
    kind of link) and max(1/w_intra, g/w_inter) (the node's g GPUs share the network).
    """
    cfg, s, gpu = sl.model, sl.seq, island.gpu
    index = next((i for i in range(sl.first_layer, sl.first_layer + sl.layers) if cfg.is_moe_layer(i)), None)
    if index is None:
        return False
    etp = ex.expert_tp(tp=tp, ep=ep, cp=cp, dp=dp)
    samples = m / (dp * cp)
    tokens = samples * s
    intra, inter = island.intra_achieved, island.inter_achieved
    gpn, span = island.gpus_per_node, ex.group_span(tp=tp, ep=ep, etp=etp)
    # stages start at multiples of their t·c·d GPUs, which the span divides: a group that
    # divides a node never leaves it
    crosses = island.nodes > 1 and (span > gpn or gpn % span)
    slow = max(1 / intra, gpn / inter) if crosses else 1 / intra
    fast = min(1 / intra, 1 / inter) / 2 if crosses else 1 / intra
    experts = ex.expert_forward_flops(cfg, s, index) * samples / tp
    # the routed rows' operands, per forward-equivalent pass (4 with full recomputation)
    # in the run's precision (cm.element_bytes, cm.matmul_flops), as price_stage prices both layouts
    element, peak = cm.element_bytes(precision), cm.matmul_flops(gpu, precision)
    scale = element / cm.ACTIVATION_BYTES  # ex counts 16-bit elements
    extra_traffic = cm.gemm_traffic_bytes(ex.routed_rows(cfg, tokens, tp=tp, etp=etp), ex.expert_operand_widths(cfg, index), 0.0, tp=etp,
                                          element_bytes=element)
    saved = (ex.ROUTING_IMBALANCE - 1) * (4 * cm.gemm_time_s(experts, gpu, traffic_bytes=extra_traffic, peak_flops=peak)
                                          + 6 * ex.alltoall_bytes(cfg, tokens / tp, ep) * scale * slow)
    cost = 3 * ex.fsep_gather_bytes(ex.expert_parameters(cfg, index), ep, etp) * scale * fast
    return cost < saved

#: Recomputation modes that FlashAttention prices identically (``without_redundant``).
FLASH_TWINS = ("none", "selective")

def without_redundant(layouts: list[Layout], *, flash: bool, whole: bool, keep_zero0: bool = False) -> list[Layout]:
    """``layouts`` without those that provably never change ``parallelize``'s answer (exact).

    * **FlashAttention's twins.** With FlashAttention selective recomputation has nothing to
      redo: no scores are stored, so its extra FLOPs and memory-bound bytes are 0.0 and its
      transient memory is the difference of two identical sums, 0.0; every other term reads
      only ``recompute == "full"``. A layout with ``selective`` therefore has, bit for bit, the
      stages of the same layout with ``none``. Of two such twins the one enumerated first wins
      every tie (the Pareto filter's and the whole model's ``min`` take the lower index), so
      the later one is dropped.
    * **ZeRO-0 under ZeRO-1** (a slice that is not the whole model). Over the same d·c > 1
      replicas ZeRO-1 runs the same collectives (``data_parallel_comm``'s stages 0 and 1
      coincide), steps 1/(d·c) of the optimizer (``optimizer_step_s``) and holds 4 + 12/(d·c)
      ≤ 10 instead of 16 bytes per dense parameter (the experts' state likewise, at most equal).
      Every operation in between is monotone in floating point, so each stage of the ZeRO-1
      layout is no slower and holds no more static bytes (same activations): its key
      (Σ t, max t, stages, −limit) is no larger in any component. Its peak memory is strictly
      lower, since the dense state saved, ≥ 6 bytes per parameter of the stage, exceeds any
      rounding of sums below 2⁵³ bytes; so it also wins an exact tie of keys, and the ZeRO-0
      layout is never returned. (A whole model is excluded: its ``min`` breaks ties by index,
      and its interleaved stages are rescaled after pricing.)

    Dropping a layout that another kept one beats in this sense leaves the Pareto set, and its
    order, unchanged (``tests/planner/test_exact_pruning.py`` compares with the unpruned search).
    ``keep_zero0`` keeps the ZeRO-0 layouts: a ``target`` runtime may run ZeRO-0 and not ZeRO-1
    (torchtitan's DDP, ``Runtime.keeps_zero0``), so there the ZeRO-1 layout is no substitute. The twins stay dropped:
    every runtime that runs ``selective`` runs ``none`` (``hetopt.runtimes``).
    """
    # layouts compared as tuples of their fields (what Layout's own == and hash compare): a
    # changed field is a tuple splice, where dataclasses.replace built a Layout (2.4 s of a
    # 21 s profiled plan of Sailor's a4v4, 320,000 calls)
    seen: set[tuple] = set()  # the twins met so far, under their "none" spelling
    zero1 = set() if whole or keep_zero0 else {layout_fields(x) for x in layouts if x.zero_stage == 1}
    r, z = LAYOUT_AT["recompute"], LAYOUT_AT["zero_stage"]
    out = []
    for lay in layouts:
        key = layout_fields(lay)
        if flash and lay.recompute in FLASH_TWINS:
            twin = key[:r] + (FLASH_TWINS[0],) + key[r + 1:]
            if twin in seen:
                continue
            seen.add(twin)
        if lay.zero_stage == 0 and key[:z] + (1,) + key[z + 1:] in zero1:
            continue
        out.append(lay)
    return out

#: A layout's fields as one tuple, in the order dataclass equality compares them, and where each sits.
layout_fields = operator.attrgetter(*(f.name for f in fields(Layout)))

LAYOUT_AT = {f.name: k for k, f in enumerate(fields(Layout))}


__all__ = ["FLASH_TWINS", "LAYOUT_AT", "even_split", "fsep_may_pay", "interleave_degrees", "layout_fields", "minmax_split",
           "stage_offsets", "without_redundant"]
