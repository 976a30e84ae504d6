"""The built-in homogeneous parallelizer: Megatron-style layouts of a slice on one island.

For a slice of k layers on an island of G GPUs (``gpus_per_node`` per node) it enumerates

* TP degree t: a divisor of ``gpus_per_node`` that divides the attention heads (a TP
  group never leaves a node);
* inner pipeline depth p = 1..min(k, G/t) (``max_pp`` caps it);
* DP degree d: a divisor of the micro-batch size m with t·p·d ≤ G (every stage has d
  replicas, each gets m/d samples of each micro-batch);
* two layer splits over the p stages (even by layer count with extras at the back, and
  the split minimizing the slowest stage's FLOPs); recomputation (none, selective, full);
  ZeRO stage 0-3 (only 0 when d = 1, where they coincide);
* for MoE slices: expert-parallel degree e (with and without FSEP); for MoE slices and long
  sequences: context-parallel degree c and activation offloading (:mod:`hetopt.parallelism`;
  a stage then has t·c·d GPUs);

prices every stage with :mod:`hetopt.costmodel`, drops the layouts that fit in no
pipeline position and returns the rest that no other layout dominates. The formulas, the
placement of stages on nodes and the dominance rule are in ``formulations/costmodel.md``.

Examples
--------
>>> from hetopt.hardware import load_gpus
>>> from hetopt.workload import ModelConfig
>>> gpt = ModelConfig("gpt-small", "gpt", 8, 1024, 16, 4096, 50257, 1024)
>>> island = IslandSpec("v100", load_gpus()["V100-SXM2-16GB"], nodes=1, gpus_per_node=4)
>>> par = BuiltinParallelizer()
>>> atoms = par.slice_model(gpt)
>>> plans = par.parallelize(par.concatenate(atoms[2], atoms[3]), island, microbatch_size=4, microbatches=8, global_batch=32)
>>> all(p.gpus <= 4 and p.layers == 2 for p in plans), plans[0].to_option(0).role
(True, 'middle')
"""

from __future__ import annotations

import bisect
import math
import operator
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from itertools import accumulate

import numpy as np

from hetopt import costmodel as cm
from hetopt.costmodel.running import Running
from hetopt.costmodel.stage import LayerTable, Layout, layer_table, path_floor_s, price_stage, stage_nodes, stage_offset
from hetopt.parallelism import context as ctx
from hetopt.parallelism import expert as ex
from hetopt.hardware import DEFAULT_HEADROOM_GIB, GpuType
from hetopt.units import GIB
from hetopt.planner.pricecache import FloorTable, PricingIsland, Prepared, collector_paused, island_key
from hetopt.planner.parallelizer import (
    Atom,
    IslandSpec,
    PartialPlan,
    Slice,
    SliceProfile,
    StageCost,
    as_slice,
    concatenate,
    divisors,
    in_flight_fit,
    limit_from_fits,
    slice_model,
)
from hetopt.runtimes import RUNTIMES, Job, Shape
from hetopt.workload import ModelConfig
from hetopt.profile.measured import Measured

#: Per-GPU memory no layout may use: the default memory headroom (CUDA context, NCCL's buffers,
#: the allocator's fragmentation; ``hetopt.hardware.HEADROOM_PARTS``, each with its source).
RESERVED_BYTES = DEFAULT_HEADROOM_GIB * GIB
#: Context-parallel degrees the built-in parallelizer tries (those whose t·c GPUs are part of
#: a node or whole nodes and 2c of which divide the sequence): up to 16, as Llama 3 ran
#: (CP 16 with TP 8 at 128K tokens, Dubey et al. 2024, Table 4).
CP_DEGREES = (1, 2, 4, 8, 16)
#: Tokens per sample from which dense slices are also searched with CP and offloading: the
#: long-context regime (Llama-3's 8k and beyond) that they are for. Shorter dense runs keep
#: the TP/PP/DP/recomputation/ZeRO search space, so their plans (and the planner's shipped
#: pipeline instances and findings) are unchanged: a choice of search space, not a proof
#: that CP or offloading cannot help there.
LONG_SEQUENCE = 8192
#: Entries a parallelizer's memo of stage prices may hold before it is emptied (memory bound;
#: see :class:`BuiltinParallelizer`).
STAGE_CACHE_LIMIT = 1_000_000


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


def interleaved_in_flight(q: int, pp: int, vpp: int, microbatches: int) -> float:
    """Micro-batches of activations stage q holds at its peak under Megatron's interleaved 1F1B.

    Megatron-LM's schedule runs (p − q − 1)·2 + (v − 1)·p warm-up chunk forwards on rank q
    (``get_forward_backward_func``, interleaved: ``num_warmup_microbatches``), at most all
    M·v chunks, then holds one more; a chunk is 1/v of the stage's layers.

    Examples
    --------
    >>> interleaved_in_flight(0, 4, 2, 16), interleaved_in_flight(3, 4, 2, 16)
    (5.5, 2.5)
    """
    chunks = min((pp - q - 1) * 2 + (vpp - 1) * pp, microbatches * vpp - 1) + 1
    return chunks / vpp


def interleaved_stages(stages: Sequence[StageCost], vpp: int, microbatches: int) -> tuple[StageCost, ...]:
    """The stages of an interleaved layout as the composition's 1F1B closed form must see them.

    The interleaved schedule (Narayanan et al. SC'21, §2.2.2) takes
    T = M·max t + (Σ t − max t)/v: the bottleneck GPU is busy M·t and the warm-up and
    cool-down are made of chunks of 1/v of a stage. The closed form Σ x + (M − 1)·max x
    gives exactly that when the slowest stage keeps its time and the others enter at 1/v of
    theirs; the activations are scaled so that the composition's in-flight count (p − q for a
    whole-model block) times them is :func:`interleaved_in_flight` times the real ones.
    Only a whole-model plan may be interleaved (nothing runs in front of or behind it).

    Examples
    --------
    >>> st = StageCost(2, 0.1, 0.2, static_bytes=4.0, activation_bytes=2.0, gpus=1)
    >>> slow = StageCost(2, 0.2, 0.4, static_bytes=4.0, activation_bytes=2.0, gpus=1)
    >>> out = interleaved_stages([st, slow], 2, 8)
    >>> [round(x.time_s, 6) for x in out], round(sum(x.time_s for x in out) + 7 * max(x.time_s for x in out), 9)
    ([0.15, 0.6], 4.95)
    """
    pp = len(stages)
    slowest = max(range(pp), key=lambda q: stages[q].time_s)
    out = []
    for q, st in enumerate(stages):
        share = 1.0 if q == slowest else 1.0 / vpp
        scale = interleaved_in_flight(q, pp, vpp, microbatches) / min(pp - q, microbatches)
        out.append(replace(st, forward_s=st.forward_s * share, backward_s=st.backward_s * share,
                           activation_bytes=st.activation_bytes * scale))
    return tuple(out)


def _fsep_may_pay(sl: Slice, island: IslandSpec, m: int, tp: int, cp: int, dp: int, ep: int,
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


#: Recomputation modes that FlashAttention prices identically (``_without_redundant``).
_FLASH_TWINS = ("none", "selective")


def _without_redundant(layouts: list[Layout], *, flash: bool, whole: bool, keep_zero0: bool = False) -> list[Layout]:
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
    zero1 = set() if whole or keep_zero0 else {_layout_fields(x) for x in layouts if x.zero_stage == 1}
    r, z = _LAYOUT_AT["recompute"], _LAYOUT_AT["zero_stage"]
    out = []
    for lay in layouts:
        key = _layout_fields(lay)
        if flash and lay.recompute in _FLASH_TWINS:
            twin = key[:r] + (_FLASH_TWINS[0],) + key[r + 1:]
            if twin in seen:
                continue
            seen.add(twin)
        if lay.zero_stage == 0 and key[:z] + (1,) + key[z + 1:] in zero1:
            continue
        out.append(lay)
    return out


#: A layout's fields as one tuple, in the order dataclass equality compares them, and where each sits.
_layout_fields = operator.attrgetter(*(f.name for f in fields(Layout)))
_LAYOUT_AT = {f.name: k for k, f in enumerate(fields(Layout))}


#: Up to this many kept rows the Pareto filter compares in Python (about 1 µs a row) rather than
#: in numpy (about 10 µs a call, whatever the rows): measured on Sailor's a4v4 plan, where the
#: filter ran 146,000 numpy comparisons against a handful of kept rows each.
PARETO_PYTHON_ROWS = 16


def _by_group(groups: Sequence[tuple | None]) -> dict[tuple, list[int]]:
    """Row indices by job-wide group, rows outside every group (None) left out."""
    out: dict[tuple, list[int]] = {}
    for n, g in enumerate(groups):
        if g is not None:
            out.setdefault(g, []).append(n)
    return out


def _pareto_indices(keys: np.ndarray, peak: Callable[[int], float], python_rows: int = PARETO_PYTHON_ROWS) -> list[int]:
    """Rows of ``keys`` (Σ t, max t, stages, −limit) that no other row dominates, in key order.

    The Pareto filter of :meth:`BuiltinParallelizer.parallelize`. A plan A dominating B can
    replace B in any composed pipeline: stages in front of it hold no more micro-batches (A
    has no more stages), A fits wherever B fits (its limit is no smaller), and T does not
    grow. Of equal rows the one with the least ``peak(row)`` (then the first) is kept. Rows are
    taken in increasing key order, so a row can only be dominated by one already kept; that
    check is one vectorized comparison against the kept keys.
    """
    order = np.lexsort(keys.T[::-1])  # by Σ t, then max t, stages, −limit; stable (ties by index)
    rows = keys.tolist()  # equal rows compared as Python lists: cheaper than one numpy call per pair
    kept_keys = np.empty_like(keys)
    kept_rows: list[list[float]] = []  # the same kept keys as Python floats (the same comparisons)
    kept: list[int] = []
    start = 0
    while start < len(order):
        stop = start + 1
        while stop < len(order) and rows[order[stop]] == rows[order[start]]:
            stop += 1
        group = order[start:stop]
        n = int(group[0]) if len(group) == 1 else int(min(group, key=lambda j: (peak(j), j)))
        if len(kept) <= python_rows:  # few kept rows: two numpy calls cost more than the loop
            t, w, g, lim = rows[n]
            dominated = any(a <= t and b <= w and c <= g and d <= lim for a, b, c, d in kept_rows)
        else:
            dominated = bool(np.any(np.all(kept_keys[: len(kept)] <= keys[n], axis=1)))
        if not dominated:
            kept_keys[len(kept)] = keys[n]
            kept_rows.append(rows[n])
            kept.append(n)
        start = stop
    return kept


def _beaten(floors: tuple[float, float], stages: int, fit_everywhere: dict[tuple | None, list[tuple[float, float, int]]],
            group: tuple | None, targeted: bool) -> bool:
    """Whether a priced row (Σ t, max t, stages) that fits in every position dominates every row
    with these floors of Σ t and max t and ``stages`` stages (:attr:`BuiltinParallelizer.floor_first`).

    Such a row has a key no larger in any component and a smaller Σ t, so the bounded layout is
    on no Pareto front (``_pareto_indices``). With a ``target`` the row must be of the layout's
    own job-wide group, whose front is kept too; a layout the runtime cannot run (group None)
    is kept only on the overall front, which any row may close."""
    low_total, low_worst = floors
    if targeted and group is not None:
        candidates: Iterable[list[tuple[float, float, int]]] = (fit_everywhere.get(group, ()),)
    else:
        candidates = fit_everywhere.values()
    return any(t < low_total and w <= low_worst and g <= stages for rows in candidates for t, w, g in rows)


def _keep_unbeaten(rows: list[tuple[float, float, int]], row: tuple[float, float, int]) -> None:
    """Add ``row`` (Σ t, max t, stages) to ``rows`` unless one of them is no larger in every
    component; drop those it is no larger than (they can beat nothing it cannot)."""
    if any(t <= row[0] and w <= row[1] and g <= row[2] for t, w, g in rows):
        return
    rows[:] = [r for r in rows if not (row[0] <= r[0] and row[1] <= r[1] and row[2] <= r[2])]
    rows.append(row)


def _key(total: float, worst: float, stages: int, limit: int | None) -> tuple[float, float, int, float]:
    return (total, worst, stages, -(np.inf if limit is None else limit))


@dataclass(frozen=True)
class BuiltinParallelizer:
    """The built-in homogeneous parallelizer (implements :class:`~hetopt.planner.parallelizer.Parallelizer`).

    Parameters
    ----------
    recompute, zero_stages
        The recomputation modes and ZeRO stages to enumerate.
    reserved_bytes
        Per-GPU memory no layout may use (``RESERVED_BYTES``).
    max_pp
        Cap on the inner pipeline depth (None: as many stages as layers and GPUs allow).
    layers_per_atom
        Layers per atom in :meth:`slice_model`.
    running
        How the framework runs the layouts it prices (:class:`~hetopt.costmodel.running.Running`:
        overlap of data-parallel traffic, FlashAttention, sequence parallelism, TP overlap,
        ZeRO-3's gathers, precision, gradient reduction, hand-over, host stack); the default,
        a current runtime. A query takes it as its island's GPU runs it (:meth:`running_on`:
        no FlashAttention on Pascal, Volta, Turing; the hardware's precision where it names
        none).
    expert_parallel, fsep
        Enumerate EP degrees (divisors of the experts that fit the stage, MoE slices only), and
        each with FSEP too.
    cp
        Context-parallel degrees to try (``CP_DEGREES``); 1 must be among them to keep plain layouts.
    offload
        Enumerate activation offloading on GPUs whose catalog entry has a host link.
    long_sequence
        CP and offloading are enumerated for slices with MoE layers and for dense slices of at
        least this many tokens per sample (``LONG_SEQUENCE``).
    Notes
    -----
    A query prices thousands of stages and most recur: within a layout (the equal stages of
    an even split), across layouts, and across the slices of later queries (a stage of ℓ
    equal layers costs the same wherever it sits). So each instance keeps a memo of stage
    prices keyed by everything a price depends on, emptied past ``STAGE_CACHE_LIMIT``
    entries. The memo is not part of the value: equality, hashing and pickling ignore it,
    so a copy sent to a worker process starts empty and fills as it answers its query.
    It is kept per thread: a dask worker runs several queries on one copy at once, and a
    table one thread walks must not grow under it in another.
    """

    recompute: tuple[str, ...] = cm.RECOMPUTE_MODES
    zero_stages: tuple[int, ...] = cm.ZERO_STAGES
    reserved_bytes: float = RESERVED_BYTES
    max_pp: int | None = None
    layers_per_atom: int = 1
    running: Running = Running()
    expert_parallel: bool = True
    fsep: bool = True
    cp: tuple[int, ...] = CP_DEGREES
    offload: bool = True
    long_sequence: int = LONG_SEQUENCE
    target: str | None = None
    #: a measured profile (``hetopt.profile.measured.Measured``): the terms it covers are priced
    #: from it (``price_stage``'s ``measured``); None, the default: the analytic model alone
    measured: Measured | None = None
    #: The exact shortcuts of the search (on by default; off, the plain search each must equal,
    #: as the tests compare). ``static_first``: a stage's memory before its time, and a layout
    #: dropped unpriced at the first stage whose static bytes alone exceed the capacity (it fits
    #: in no pipeline position). ``floor_first``: a layout's stage times bounded by their kernels
    #: and TP/CP collectives held to the host's floor (``path_floor_s``) before pricing it, and
    #: left unpriced when a layout already priced in the query fits everywhere, has no more
    #: stages and beats both bounds (its Σ t strictly): it cannot be on the Pareto front.
    #: ``share_prices``: work shared between queries (``hetopt.planner.pricecache``: prices
    #: between islands of one signature, layouts and floors between micro-batch sizes and slices
    #: of equal layers, the answers a worker gave); off, every query answered on its own.
    #: ``drop_redundant``: layouts another one enumerated beside them always matches or beats
    #: (``_without_redundant``) are not priced.
    static_first: bool = True
    floor_first: bool = True
    drop_redundant: bool = True
    share_prices: bool = True
    _local: threading.local = field(default_factory=threading.local, init=False, repr=False, compare=False)

    @property
    def _memo(self) -> dict:
        """This thread's memo (``threading.local`` keeps one attribute dict per thread)."""
        return self._local.__dict__

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_local"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        object.__setattr__(self, "_local", threading.local())

    def _cache(self, name: str) -> dict:
        """One table of the memo (``prices``, ``kinds``, ``splits``, ...); :meth:`_trim` empties them."""
        return self._memo.setdefault(name, {})

    def _trim(self) -> None:
        """Empty the memo when it holds more than ``STAGE_CACHE_LIMIT`` prices and splits; checked
        once a query (the count walks every table of prices), before it starts."""
        memo = self._memo
        if sum(len(t) for t in memo.get("prices", {}).values()) + len(memo.get("splits", ())) > STAGE_CACHE_LIMIT:
            # the layer kinds' numbering stays: the answers kept (``remember``) and any table
            # built before keep meaning the same layers after it
            kinds = memo.get("kinds")
            memo.clear()
            if kinds is not None:
                memo["kinds"] = kinds

    def __post_init__(self) -> None:
        bad = [r for r in self.recompute if r not in cm.RECOMPUTE_MODES]
        if bad or not self.recompute:
            raise ValueError(f"recompute modes must be a non-empty subset of {cm.RECOMPUTE_MODES} (got {self.recompute})")
        if not self.zero_stages or any(z not in cm.ZERO_STAGES for z in self.zero_stages):
            raise ValueError(f"ZeRO stages must be a non-empty subset of {cm.ZERO_STAGES} (got {self.zero_stages})")
        if self.max_pp is not None and self.max_pp < 1:
            raise ValueError(f"max_pp must be >= 1 (got {self.max_pp})")
        if 1 not in self.cp or any(c < 1 for c in self.cp):
            raise ValueError(f"CP degrees must be >= 1 and include 1 (got {self.cp})")
        if self.reserved_bytes < 0:
            raise ValueError(f"reserved bytes must be >= 0 (got {self.reserved_bytes})")
        if not isinstance(self.running, Running):
            raise ValueError(f"running must be a hetopt.costmodel.Running (got {self.running!r})")

    def run_as(self, running: Running) -> BuiltinParallelizer:
        """This parallelizer pricing a framework that runs as ``running`` says (a given layout's
        or a ``--runtime``'s); itself when it already does, so its memo of stage prices is kept.

        Examples
        --------
        >>> par = BuiltinParallelizer()
        >>> old = par.run_as(Running(overlap=False, flash=False, zero3_per_tensor=True, precision="fp16"))
        >>> old.running.text()
        'overlap=no flash=no zero3gather=tensor precision=fp16'
        >>> par.run_as(Running()) is par
        True
        """
        return self if running == self.running else replace(self, running=running)

    def running_on(self, island: IslandSpec) -> Running:
        """How a query on ``island`` runs: :attr:`running` on the island's GPU
        (:meth:`~hetopt.costmodel.running.Running.on`: FlashAttention only where the GPU runs
        it in a precision its kernels take; when no precision is named, as outside ``plan``,
        which names one for the whole job (:meth:`for_gpus`), the GPU's).

        Examples
        --------
        >>> from hetopt.hardware import load_gpus
        >>> cat = load_gpus()
        >>> a100, v100 = IslandSpec("a", cat["A100-SXM4-80GB"], 1, 8), IslandSpec("v", cat["V100-SXM2-32GB"], 1, 8)
        >>> [(r.flash, r.precision) for r in (BuiltinParallelizer().running_on(a100), BuiltinParallelizer().running_on(v100))]
        [(True, 'bf16'), (False, 'fp16')]
        >>> BuiltinParallelizer(running=Running(flash=False)).running_on(a100).flash
        False
        """
        memo = self._cache("running_on")
        out = memo.get(island.gpu)
        if out is None:
            out = memo[island.gpu] = self.running.on(island.gpu)
        return out

    def for_gpus(self, gpus: Iterable[GpuType]) -> BuiltinParallelizer:
        """This parallelizer for one job on ``gpus``: its precision, when it names none, the
        hardware's (``cm.hardware_precision``: bf16 unless one of them has no BF16).

        Examples
        --------
        >>> from hetopt.hardware import load_gpus
        >>> cat = load_gpus()
        >>> BuiltinParallelizer().for_gpus([cat["A100-SXM4-80GB"], cat["T4"]]).running.precision
        'fp16'
        >>> BuiltinParallelizer(running=Running(precision="bf16")).for_gpus([cat["T4"]]).running.precision
        'bf16'
        """
        if self.running.precision is not None:
            return self
        return replace(self, running=replace(self.running, precision=cm.hardware_precision(gpus)))

    def slice_model(self, model: ModelConfig, *, seq: int | None = None) -> tuple[Atom, ...]:
        """Atoms of ``layers_per_atom`` layers; the first carries the embedding, the last the head."""
        return slice_model(model, seq=seq, layers_per_atom=self.layers_per_atom)

    def concatenate(self, a: Atom | Slice, b: Atom | Slice) -> Slice:
        """``a`` followed by ``b``."""
        return concatenate(a, b)

    def profile(self, slice: Atom | Slice, island: IslandSpec) -> SliceProfile:
        """The slice's FLOPs, parameters and memory floor on ``island``."""
        sl = as_slice(slice)
        cfg, s = sl.model, sl.seq
        tab = self._table(sl, island)
        forward = tab.forward[-1] + (cm.head_forward_flops(cfg, s) if sl.head else 0.0)
        params = int(tab.params[-1]) + (cm.input_embedding_parameters(cfg) if sl.embedding else 0)
        params += cm.head_parameters(cfg, with_embedding=sl.embedding) if sl.head else 0
        training = cm.TRAINING_PER_FORWARD * forward
        state = float(cm.state_bytes_per_parameter(precision=self.running_on(island).precision) * params)
        island_flops = island.sustained_flops
        return SliceProfile(
            signature=sl.signature,
            island=island.name,
            layers=sl.layers,
            forward_flops=forward,
            training_flops=training,
            parameters=params,
            state_bytes=state,
            island_flops=island_flops,
            ideal_time_per_sample_s=training / island_flops,
            min_bytes_per_gpu=state / island.gpus + self.reserved_bytes,
            memory_bytes=island.memory_bytes,
        )

    def layouts(self, slice: Atom | Slice, island: IslandSpec, *, microbatch_size: int,
                microbatches: int | None = None) -> list[Layout]:
        """Every layout enumerated for the slice (before pricing and pruning).

        With ``microbatches`` given, a whole-model slice also gets Megatron's interleaved
        schedule: v ≥ 2 virtual stages per GPU for every v of :func:`interleave_degrees`
        (the even split's stages cut into v chunks), when M is a multiple of p (Megatron-LM's
        requirement).
        """
        sl = as_slice(slice)
        cfg, k, G = sl.model, sl.layers, island.gpus
        weights = [
            cm.layer_forward_flops(cfg, sl.seq, i) + (cm.head_forward_flops(cfg, sl.seq) if sl.head and i == sl.first_layer + k - 1 else 0.0)
            for i in range(sl.first_layer, sl.first_layer + k)
        ]
        splits_memo = self._cache("splits")  # the min-max split of the same weights recurs per TP degree and query
        # every layout recurs in many queries: made once (a frozen dataclass's __init__ sets its
        # fields one by one), found again by its fields
        made = self._cache("layouts")
        whole = sl.embedding and sl.head
        key = tuple(weights)
        moe, broad = self._broad(sl)
        offload = island.gpu.host_bandwidth is not None and self.offload and broad
        out = []
        for tp in divisors(island.gpus_per_node):
            if cfg.heads % tp:
                continue  # Megatron splits whole attention heads
            # CP: a ring inside a node or over whole nodes (ctx.placement_problem), 2c equal chunks
            # of the sequence, on FlashAttention's kernels (ctx.flash_problem: no runtime rings
            # unfused attention)
            cps = [c for c in sorted(self.cp) if tp * c <= G and not ctx.placement_problem(c, tp, island.gpus_per_node)
                   and not ctx.sequence_problem(sl.seq, c)]
            cps = cps if broad and self.running_on(island).flash else [1]
            top = min(k, G // tp, self.max_pp or k)
            for pp in range(1, top + 1):
                balanced = splits_memo.get((key, pp))
                if balanced is None:
                    balanced = splits_memo[key, pp] = minmax_split(weights, pp)
                splits = dict.fromkeys((even_split(k, pp), balanced))
                even = even_split(k, pp)
                interleave = interleave_degrees(k, pp) if (
                    whole and microbatches is not None and microbatches % pp == 0) else []
                for dp in divisors(microbatch_size):
                    if tp * pp * dp > G:
                        break
                    for cp in cps:
                        if tp * pp * dp * cp > G:
                            break
                        if cp > 1 and microbatch_size % (dp * cp) == 0:
                            continue  # priced as DP over c·d plus the K/V ring: DP c·d dominates it (exact)
                        eps = [1]
                        if moe and self.expert_parallel:
                            eps += [e for e in divisors(cfg.experts)[1:] if not ex.layout_problem(cfg, tp=tp, ep=e, cp=cp, dp=dp)]
                        for ep in eps:
                            pays = ep > 1 and self.fsep and _fsep_may_pay(sl, island, microbatch_size, tp, cp, dp, ep,
                                                                                      self.running_on(island).precision)
                            for fsep in (False, True) if pays else (False,):
                                for rc in self.recompute:
                                    for z in self.zero_stages if dp * cp > 1 else self.zero_stages[:1]:
                                        # offloading right after the same layout without it (parallelize skips it
                                        # when that one shows it cannot help)
                                        offs = (False, True) if offload else (False,)
                                        for split in splits:
                                            for o in offs:
                                                fields_ = (tp, pp, dp, split, rc, z, 1, ep, fsep, cp, o)
                                                lay = made.get(fields_)
                                                if lay is None:
                                                    lay = made[fields_] = Layout(tp, pp, dp, split, rc, z, ep=ep, fsep=fsep,
                                                                                 cp=cp, offload=o)
                                                out.append(lay)
                                        for v in interleave:
                                            for o in offs:
                                                fields_ = (tp, pp, dp, even, rc, z, v, ep, fsep, cp, o)
                                                lay = made.get(fields_)
                                                if lay is None:
                                                    lay = made[fields_] = Layout(tp, pp, dp, even, rc, z, v, ep=ep, fsep=fsep,
                                                                                 cp=cp, offload=o)
                                                out.append(lay)
        return out

    def _broad(self, sl: Slice) -> tuple[bool, bool]:
        """Whether the slice has MoE layers, and whether it is searched with CP and offloading too
        (MoE slices and long sequences); dense slices of ordinary length keep the TP/PP/DP/
        recompute/ZeRO search space (and its plans)."""
        moe = any(sl.model.is_moe_layer(i) for i in range(sl.first_layer, sl.first_layer + sl.layers))
        return moe, moe or sl.seq >= self.long_sequence

    def plan(
        self, slice: Atom | Slice, island: IslandSpec, layout: Layout, *, microbatch_size: int, microbatches: int, memory_fraction: float = 1.0
    ) -> PartialPlan:
        """Price one layout (no pruning): its stages' times and memory."""
        sl = as_slice(slice)
        tab = self._table(sl, island)
        return self._plan(sl, island, tab, layout, microbatch_size, microbatches, memory_fraction)

    def _prices(self, sl: Slice, island: IslandSpec, m: int, M: int, phi: float) -> dict[tuple, tuple[StageCost, int | None, float]]:
        # one table per pricing context (the parallelizer's own settings are fixed); islands
        # that differ only in their names share one (``pricecache.island_key``)
        return self._cache("prices").setdefault((sl.model, sl.seq, island_key(island) if self.share_prices else island, m, M,
                                                  phi), {})

    def _table(self, sl: Slice, island: IslandSpec) -> LayerTable:
        """The slice's layer table (``layer_table``), memoized: it reads the slice's layers and the
        island's attention kernels and element size, and recurs for every micro-batch size."""
        running = self.running_on(island)
        flash, element = running.flash, cm.element_bytes(running.precision)
        kinds = self._cache("kinds")
        tables = self._cache("tables")
        key = (sl.model, sl.seq, sl.first_layer, sl.layers, flash, element)
        tab = tables.get(key)
        if tab is None:
            tab = tables[key] = layer_table(sl, kinds, flash=flash, element_bytes=element)
        return tab

    def _pricing(self, island: IslandSpec) -> tuple[PricingIsland, dict]:
        """The island as ``price_stage`` reads it and the keyword arguments every stage of a query
        on it is priced with (both fixed by the parallelizer and the island)."""
        views = self._memo.setdefault("pricing", {})
        out = views.get(island)
        if out is None:
            out = views[island] = (PricingIsland(island), dict(running=self.running_on(island),
                                                               reserved_bytes=self.reserved_bytes)
                                   | ({} if self.measured is None else {"measured": self.measured}))
        return out

    def _nodes(self, island: IslandSpec, lay: Layout) -> tuple[tuple[int, int], ...]:
        """``stage_nodes`` of the layout's stages, memoized: it depends on the island's shape only
        (a small table: shapes × stage sizes × depths)."""
        placed = self._memo.setdefault("nodes", {})
        where = (island.nodes, island.gpus_per_node, lay.tp * lay.dp * lay.cp, lay.pp)
        nodes = placed.get(where)
        if nodes is None:
            nodes = placed[where] = stage_nodes(island, lay.tp, lay.dp * lay.cp, lay.pp)
        return nodes

    def _stage_keys(self, sl: Slice, island: IslandSpec, tab: LayerTable, lay: Layout,
                    frames: dict[tuple, tuple] | None = None) -> tuple[tuple, ...]:
        """The memo keys of the layout's stages: everything ``price_stage`` reads of a stage besides
        the pricing context (``_prices``): the stage's layers (by content, not position: a run of
        equal layers is (kind, count, None), which no tuple of kinds can equal), its role, the
        layout, and which hand-overs cross a node boundary. ``frames`` memoizes each key but
        the layout's shape by everything that part reads (the split, the stage's GPUs,
        interleaving and EP; the slice and island are the memo's)."""
        shape = (lay.tp, lay.dp, lay.recompute, lay.zero_stage, lay.vpp, lay.ep, lay.fsep, lay.cp, lay.offload)
        gpus = lay.tp * lay.dp * lay.cp
        where = (lay.split, gpus, lay.vpp > 1, lay.ep == 1)
        frame = None if frames is None else frames.get(where)
        if frame is None:
            nodes = self._nodes(island, lay)
            starts = tuple(accumulate(lay.split, initial=0))
            embedding, head, last = sl.embedding, sl.head, lay.pp - 1
            wrap_one = nodes[0][0] == nodes[0][1] == nodes[-1][0] == nodes[-1][1]  # interleaving's last → first hand-over
            kinds, run_end = tab.kinds, tab.run_end
            parts = []
            for q in range(lay.pp):
                a, b = starts[q], starts[q + 1]
                one = nodes[q][0] == nodes[q][1]
                parts.append((
                    ((kinds[a], b - a, None) if run_end[a] >= b else kinds[a:b], embedding and q == 0, head and q == last),
                    (one,
                     None if q == last else one and nodes[q] == nodes[q + 1],
                     None if q == 0 else one and nodes[q - 1] == nodes[q],
                     lay.vpp > 1 and q in (0, last) and wrap_one,
                     # where a multi-node stage starts within a node decides which links its EP groups cross
                     None if lay.ep == 1 or one else stage_offset(island, gpus, lay.pp, q) % island.gpus_per_node),
                ))
            frame = tuple(parts)
            if frames is not None:
                frames[where] = frame
        return tuple(before + (shape,) + after for before, after in frame)

    def _price_layout(
        self, sl: Slice, island: IslandSpec, tab: LayerTable, lay: Layout, m: int, M: int,
        prices: dict[tuple, tuple[StageCost | None, int | None, float | None]], capacity: float, *, complete: bool = False,
        keys: tuple[tuple, ...] | None = None, pricing: tuple[PricingIsland, dict] | None = None,
    ) -> tuple[tuple[StageCost, ...] | None, list[float] | None, int | None]:
        """The layout's stages (memoized prices, under ``keys``: ``_stage_keys``, built when not
        given), their times and its stages-behind limit.

        Unless ``complete``, (None, None, -1) as soon as a stage's static bytes alone do not fit
        (:attr:`static_first`): the layout fits in no pipeline position, whatever its other stages.
        """
        static_first = self.static_first and not complete
        if keys is None:
            keys = self._stage_keys(sl, island, tab, lay)
        view, kwargs = pricing or self._pricing(island)
        stages, times, fits = [], [], []
        for q, key in enumerate(keys):
            priced = prices.get(key)
            if priced is None or (priced[0] is None and not static_first):
                cost = price_stage(sl, view, tab, lay, q, self._nodes(island, lay), microbatch_size=m, microbatches=M,
                                   capacity=capacity if static_first else None, **kwargs)
                # None: the stage's static bytes exceed the capacity (its time not computed)
                priced = prices[key] = (None, -1, None) if cost is None else (cost, in_flight_fit(cost, capacity, M), cost.time_s)
            if priced[0] is None:
                return None, None, -1
            stages.append(priced[0])
            fits.append(priced[1])
            times.append(priced[2])
        if lay.vpp > 1:
            stages = list(interleaved_stages(stages, lay.vpp, M))
            fits = [in_flight_fit(st, capacity, M) for st in stages]
            times = [st.time_s for st in stages]
        return tuple(stages), times, limit_from_fits(fits)

    def _floors(self, sl: Slice, island: IslandSpec, tab: LayerTable, lay: Layout, m: int,
                computed: dict[tuple, float], parts: dict[tuple[int, ...], tuple] | None = None) -> tuple[float, float]:
        """Lower bounds of the layout's Σ t and max t: its stages' kernels and TP/CP collectives,
        each pass held to the host's floor (``path_floor_s``), memoized in ``computed`` by
        everything they read: the stage's layers by content, whether it holds the embedding and
        the head, and the layout but for its ZeRO stage and offloading (the island and m: the
        table ``computed`` is). ``parts`` memoizes the first three per split (they read nothing else)."""
        shape = (lay.tp, lay.dp, lay.cp, lay.recompute, lay.ep, lay.fsep)
        times = []
        for q, part in enumerate(self._stage_parts(sl, tab, lay, parts)):
            key = part + (shape,)
            t = computed.get(key)
            if t is None:
                t = computed[key] = path_floor_s(sl, self._pricing(island)[0], tab, lay, q, microbatch_size=m,
                                                 running=self.running_on(island), measured=self.measured)
            times.append(t)
        return sum(times), max(times)

    @staticmethod
    def _stage_parts(sl: Slice, tab: LayerTable, lay: Layout, parts: dict[tuple[int, ...], tuple] | None) -> tuple:
        """The layout's stages as (layers by content, holds the embedding, holds the head), memoized
        per split in ``parts``."""
        stage_parts = None if parts is None else parts.get(lay.split)
        if stage_parts is None:
            starts = tuple(accumulate(lay.split, initial=0))
            kinds, run_end, last = tab.kinds, tab.run_end, lay.pp - 1
            stage_parts = tuple(
                ((kinds[a], b - a, None) if run_end[a] >= b else kinds[a:b], sl.embedding and q == 0, sl.head and q == last)
                for q, (a, b) in enumerate(zip(starts, starts[1:])))
            if parts is not None:
                parts[lay.split] = stage_parts
        return stage_parts

    def _partial_plan(
        self, sl: Slice, island: IslandSpec, lay: Layout, m: int, M: int, capacity: float,
        stages: tuple[StageCost, ...], limit: int | None,
    ) -> PartialPlan:
        return PartialPlan(
            island=island.name, signature=sl.signature, first_layer=sl.first_layer, layers=sl.layers, role=sl.role,
            tp=lay.tp, pp=lay.pp, dp=lay.dp, microbatch_size=m, microbatches=M, recompute=lay.recompute,
            zero_stage=lay.zero_stage, sequence_parallel=self.running.sequence_parallel and lay.tp > 1, stages=stages,
            capacity_bytes=capacity, behind=limit, vpp=lay.vpp, ep=lay.ep, fsep=lay.fsep, cp=lay.cp, offload=lay.offload,
        )

    def _plan(self, sl: Slice, island: IslandSpec, tab: LayerTable, lay: Layout, m: int, M: int, phi: float) -> PartialPlan:
        capacity = phi * island.memory_bytes
        stages, _, limit = self._price_layout(sl, island, tab, lay, m, M, self._prices(sl, island, m, M, phi), capacity,
                                              complete=True)
        return self._partial_plan(sl, island, lay, m, M, capacity, stages, limit)

    def parallelize(
        self,
        slice: Atom | Slice,
        island: IslandSpec,
        *,
        microbatch_size: int,
        microbatches: int,
        global_batch: int,
        memory_fraction: float = 1.0,
    ) -> tuple[PartialPlan, ...]:
        """The non-dominated, memory-feasible partial plans of ``slice`` on ``island``.

        Parameters
        ----------
        slice
            The layers to lay out (an atom is a one-atom slice).
        island
            The homogeneous GPUs.
        microbatch_size, microbatches, global_batch
            m samples per micro-batch, M micro-batches per iteration, B = m·M.
        memory_fraction
            φ: the usable share of each GPU's memory (the composition must use the same).

        Returns
        -------
        tuple of PartialPlan
            Sorted by Σ t; empty when no layout fits even as the last block of a pipeline.

        Raises
        ------
        ValueError
            When B ≠ m·M, a size is below 1 or φ is outside (0, 1].
        """
        if microbatch_size < 1 or microbatches < 1:
            raise ValueError(f"micro-batch size and micro-batches must be >= 1 (got {microbatch_size}, {microbatches})")
        if global_batch != microbatch_size * microbatches:
            raise ValueError(f"global batch {global_batch} != micro-batch size {microbatch_size} × {microbatches} micro-batches")
        if not 0.0 < memory_fraction <= 1.0:
            raise ValueError(f"memory fraction must be in (0, 1] (got {memory_fraction})")
        sl = as_slice(slice)
        self._trim()
        answers = self._cache("answers")
        query = (sl, island, microbatch_size, microbatches, memory_fraction)
        known = answers.get(query) if self.share_prices else None
        if known is not None:  # asked before (the alternatives ask the enumeration's queries again)
            return known
        # a query allocates hundreds of thousands of short-lived objects and makes no reference
        # cycles, while the memo it fills only grows: the collector is paused for the query
        # (``collector_paused``; the planner pauses it for the whole search)
        with collector_paused():
            answers[query] = found = self._search(sl, island, microbatch_size, microbatches, global_batch, memory_fraction)
        return found

    def answered(self, slice: Atom | Slice, island: IslandSpec, *, microbatch_size: int, microbatches: int,
                 memory_fraction: float = 1.0) -> bool:
        """Whether :meth:`parallelize` has that query's answer at hand (asked before, or kept
        by :meth:`remember`), so it would not be priced again."""
        key = (as_slice(slice), island, microbatch_size, microbatches, memory_fraction)
        return self.share_prices and key in self._cache("answers")

    def remember(self, slice: Atom | Slice, island: IslandSpec, *, microbatch_size: int, microbatches: int,
                 memory_fraction: float, plans: tuple[PartialPlan, ...]) -> None:
        """Keep ``plans`` as the answer to that query, which another process (a worker of
        ``enumerate_plans``) gave with an equal parallelizer: :meth:`parallelize` returns it when
        asked again. Exact: an answer depends on the query and the parallelizer's fields only."""
        self._cache("answers")[(as_slice(slice), island, microbatch_size, microbatches, memory_fraction)] = tuple(plans)

    def _search(self, sl: Slice, island: IslandSpec, m: int, M: int, global_batch: int,
                memory_fraction: float) -> tuple[PartialPlan, ...]:
        """:meth:`parallelize` after checking its arguments."""
        tab = self._table(sl, island)
        prices = self._prices(sl, island, m, M, memory_fraction)
        capacity = memory_fraction * island.memory_bytes
        rows, keys = [], []
        whole = sl.embedding and sl.head
        group_of = self._target_groups(sl, island, whole)
        prepared = self._prepared(sl, island, tab, m, M, whole, group_of is not None and RUNTIMES[self.target].keeps_zero0)
        layouts, floors, visit = prepared.layouts, prepared.floors, prepared.visit
        stage_keys, index = prepared.keys[sl.embedding], prepared.index
        frames = prepared.frames[sl.embedding]
        pricing = self._pricing(island)
        # layouts of equal floors and depth found beaten once stay beaten (``_beaten``: a row that
        # leaves ``fit_everywhere`` leaves it for one no larger in any component), by group
        beaten: set[tuple] = set()
        if whole:
            # a whole-model plan is a pipeline of one block: only its own 1F1B time matters,
            # so the fastest that fits is the answer, and a layout whose GPUs cannot beat it
            # even at full speed (the iteration's FLOPs over its t·p·d GPUs) is never priced
            # (``_prepared`` sorts its layouts by their GPUs, the most first)
            work = cm.TRAINING_PER_FORWARD * (tab.forward[-1] + (cm.head_forward_flops(sl.model, sl.seq) if sl.head else 0.0))
            work *= global_batch / island.gpu.sustained_flops
            best = math.inf
            best_of: dict = {}  # with a target: the fastest of each job-wide group
        # an offloading layout comes right after the same layout without it (``layouts``; the sort
        # below is stable and keeps the pair together): whether that one showed offloading useless
        skip_offload = False
        groups = []  # with a target: each row's job-wide group (None: the runtime cannot run it)
        # rows priced so far that fit in every pipeline position, by group: (Σ t, max t, stages)
        fit_everywhere: dict[tuple | None, list[tuple[float, float, int]]] = {}
        positions = []  # each row's place in ``layouts``
        for n in visit:
            lay = layouts[n]
            group = None if group_of is None else group_of(lay)
            if whole and work / (lay.stage_gpus * lay.pp) >= (best if group is None else best_of.get(group, math.inf)):
                # it beats neither the fastest found nor (with a target) the fastest of its group
                skip_offload = False
                continue
            if lay.offload and skip_offload:
                # offloading only adds time and static bytes: useless when the layout without it
                # already fits everywhere, or when a stage's static bytes alone do not fit (exact)
                continue
            if floors is not None:
                bounded = (floors[n], lay.pp, group)
                if bounded in beaten or _beaten(floors[n], lay.pp, fit_everywhere, group, group_of is not None):
                    beaten.add(bounded)
                    skip_offload = False  # its offloading twin is bounded on its own
                    continue
            at = n if index is None else index[n]
            own = stage_keys.get(at)
            if own is None:
                own = stage_keys[at] = self._stage_keys(sl, island, tab, lay, frames)
            stages, times, limit = self._price_layout(sl, island, tab, lay, m, M, prices, capacity, keys=own,
                                                      pricing=pricing)
            skip_offload = not lay.offload and (limit is None or (limit == -1 and (
                stages is None or any(in_flight_fit(st, capacity, M) == -1 for st in stages))))
            if limit is None or limit >= 0:  # -1: does not fit even with nothing behind it
                rows.append((lay, stages, limit))
                groups.append(group)
                positions.append(n)
                # the same sums PartialPlan.total_time_s and max_time_s compute
                keys.append(_key(sum(times), max(times), len(stages), limit))
                if limit is None:
                    _keep_unbeaten(fit_everywhere.setdefault(group, []), (keys[-1][0], keys[-1][1], len(stages)))
                if whole:
                    best = min(best, sum(times) + (M - 1) * max(times))
                    if group is not None:
                        best_of[group] = min(best_of.get(group, math.inf), sum(times) + (M - 1) * max(times))
        if not rows:
            return ()
        if floors is not None:
            # back in the enumeration order, whose index breaks the Pareto filter's exact ties
            order = sorted(range(len(rows)), key=positions.__getitem__)
            rows, keys, groups = [rows[n] for n in order], [keys[n] for n in order], [groups[n] for n in order]
        if whole:
            def fastest(among: Sequence[int]) -> int:
                return min(among, key=lambda n: (keys[n][0] + (M - 1) * keys[n][1], keys[n]))
            # the fastest, and with a target the fastest of every group it can run
            chosen = sorted({fastest(range(len(rows)))} | {fastest(ns) for ns in _by_group(groups).values()})
            rows, keys, groups = [rows[n] for n in chosen], [keys[n] for n in chosen], [groups[n] for n in chosen]
        return self._fronts(sl, island, m, M, capacity, rows, keys, groups, group_of is not None)

    def _prepared(self, sl: Slice, island: IslandSpec, tab: LayerTable, m: int, M: int, whole: bool,
                  keep_zero0: bool) -> Prepared:
        """The query's layouts without the redundant ones, their floors and visiting order
        (``_visit_order``), memoized by everything they read: the slice's layers by content
        (``tab.kinds``: the layouts' FLOP weights and MoE layers, the floors' compute), whether it
        holds the head and the whole model, the island but its name, the micro-batch size, and
        for a whole model the micro-batches (interleaving). A slice holding the embedding shares
        them with the slices of the same layers behind it: neither reads the embedding."""
        memo = self._cache("prepared")
        shared = (sl.model, sl.seq, tab.kinds, sl.head, whole, island_key(island), keep_zero0)
        key = shared + (m, M if whole else None, sl.embedding)  # the floors read the embedding (its TP all-reduces)
        prepared = memo.get(key) if self.share_prices else None
        if prepared is None:
            flash = self.running_on(island).flash
            if whole or self._broad(sl)[1] or not self.share_prices:
                layouts = self.layouts(sl, island, microbatch_size=m, microbatches=M)
                if self.drop_redundant:
                    layouts = _without_redundant(layouts, flash=flash, whole=whole, keep_zero0=keep_zero0)
                if whole:
                    layouts.sort(key=lambda x: -x.stage_gpus * x.pp)
            else:
                # a dense slice of ordinary length reads m only through the DP degrees, the divisors
                # of m, taken in increasing order: its layouts are, in the same order, those of the
                # global batch B (which m divides) whose d divides m; and the redundant ones too
                # (twins share their d), so every micro-batch size filters one list
                every_key = shared + ("every", M * m)
                every = memo.get(every_key)
                if every is None:
                    every_layout = self.layouts(sl, island, microbatch_size=M * m)
                    if self.drop_redundant:
                        every_layout = _without_redundant(every_layout, flash=flash, whole=False, keep_zero0=keep_zero0)
                    every = memo[every_key] = Prepared(every_layout, None, ())
                if self.floor_first:
                    index, floors, visit = self._floor_table(sl, island, tab, every).order(
                        m, self._floor_of(sl, island, tab, m))
                    layouts = [every.layouts[n] for n in index]
                else:
                    index = [n for n, x in enumerate(every.layouts) if m % x.dp == 0]
                    layouts = [every.layouts[n] for n in index]
                    floors, visit = self._visit_order(sl, island, tab, layouts, m, whole)
                # the stages' keys do not depend on m: kept once, by place in the whole list
                prepared = memo[key] = Prepared(layouts, floors, visit, keys=every.keys, index=index, frames=every.frames)
                return prepared
            prepared = memo[key] = Prepared(layouts, *self._visit_order(sl, island, tab, layouts, m, whole))
        return prepared

    def _floor_table(self, sl: Slice, island: IslandSpec, tab: LayerTable, every: Prepared) -> FloorTable:
        """The floor table of a list of layouts shared by every micro-batch size (``FloorTable``), for
        slices with or without the embedding (whose first stage's floor holds its TP all-reduces)."""
        table = every.tables.get(sl.embedding)
        if table is None:
            parts: dict[tuple[int, ...], tuple] = {}
            table = every.tables[sl.embedding] = FloorTable(every.layouts, lambda lay: self._stage_parts(sl, tab, lay, parts))
        return table

    def _floor_of(self, sl: Slice, island: IslandSpec, tab: LayerTable, m: int) -> Callable[[Layout, int, tuple], float]:
        """A stage's floor (``path_floor_s``) at micro-batch size m, memoized by its cell (``_floors``)."""
        computed = self._cache("prices").setdefault(("floor", sl.model, sl.seq, island_key(island), m), {})
        view = self._pricing(island)[0]
        running = self.running_on(island)

        def floor(lay: Layout, q: int, cell: tuple) -> float:
            t = computed.get(cell)
            if t is None:
                t = computed[cell] = path_floor_s(sl, view, tab, lay, q, microbatch_size=m, running=running,
                                                  measured=self.measured)
            return t
        return floor

    def _visit_order(self, sl: Slice, island: IslandSpec, tab: LayerTable, layouts: list[Layout], m: int,
                     whole: bool) -> tuple[list[tuple[float, float]] | None, Sequence[int]]:
        """Each layout's compute floors and the order the query prices them in: the least floors
        first (:attr:`floor_first`, not for a whole model), so that the rows that close the others
        are priced early; stable, so an offloading layout, of equal floors, stays right after
        its twin. (None, enumeration order) without floors."""
        if not self.floor_first or whole:
            return None, range(len(layouts))
        computed = self._cache("prices").setdefault(("floor", sl.model, sl.seq, island_key(island), m), {})
        by_shape: dict[tuple, tuple[float, float]] = {}  # ZeRO stages and offloading share their compute
        parts: dict[tuple[int, ...], tuple] = {}  # each split's stages' layers and head (``_floors``)
        floors = []
        for lay in layouts:
            shape = (lay.split, lay.tp, lay.dp, lay.cp, lay.recompute, lay.ep, lay.fsep)
            floor = by_shape.get(shape)
            if floor is None:
                floor = by_shape[shape] = self._floors(sl, island, tab, lay, m, computed, parts)
            floors.append(floor)
        return floors, sorted(range(len(layouts)), key=lambda n: floors[n][0])

    def _fronts(self, sl: Slice, island: IslandSpec, m: int, M: int, capacity: float, rows: list, keys: list,
                groups: list, targeted: bool) -> tuple[PartialPlan, ...]:
        """The Pareto set of the priced rows, and with a target (``targeted``) every job-wide
        group's Pareto set too, as PartialPlans; built for the survivors only (most layouts are
        dominated)."""
        plans = {}

        def plan_of(n: int) -> PartialPlan:
            if n not in plans:
                plans[n] = self._partial_plan(sl, island, rows[n][0], m, M, capacity, rows[n][1], rows[n][2])
            return plans[n]

        front = _pareto_indices(np.array(keys), lambda n: plan_of(n).peak_bytes)
        if not targeted:
            return tuple(plan_of(n) for n in front)
        kept = set(front)
        for members in _by_group(groups).values():
            # the Pareto set of every job-wide group too: a plan the runtime runs may be beaten
            # only by one it does not (planner/launchable.py composes each group apart)
            sub = np.array([keys[n] for n in members])
            kept.update(members[k] for k in _pareto_indices(sub, lambda k: plan_of(members[k]).peak_bytes))
        on_front = set(front)
        out = []
        for n in sorted(kept, key=lambda n: (keys[n], n)):
            plan = plan_of(n)
            # set on the plan just built (frozen, not yet shared): its group, and whether it is on
            # the overall front (dataclasses.replace would build every plan twice)
            object.__setattr__(plan, "launch_group", groups[n])
            if n not in on_front:
                object.__setattr__(plan, "front", False)
            out.append(plan)
        return tuple(out)

    def _target_groups(self, sl: Slice, island: IslandSpec, whole: bool) -> Callable[[Layout], tuple | None] | None:
        """With a ``target``: a layout's job-wide group under that runtime's rules (None: the
        runtime cannot run it); without one, None."""
        if self.target is None:
            return None
        runtime = RUNTIMES[self.target]
        job = Job(self.running.precision or cm.DEFAULT_PRECISION, sl.seq, sl.model.experts, sl.model.tied_embeddings)
        bf16, sp = island.gpu.bf16, self.running.sequence_parallel
        # a layout recurs across slices of one length and across micro-batch sizes: its group is
        # memoized with everything the rules read besides the layout
        memo = self._cache("groups").setdefault((runtime.name, job, whole, bf16, sp), {})

        def group_of(lay: Layout) -> tuple | None:
            if lay in memo:
                return memo[lay]
            shape = Shape(lay.tp, lay.pp, lay.dp, lay.vpp, lay.recompute, lay.zero_stage, sp and lay.tp > 1, lay.split,
                          whole, bf16, lay.ep, lay.fsep, lay.cp, lay.offload)
            memo[lay] = group = runtime.key(shape) if runtime.takes(shape, job) else None
            return group
        return group_of


def whole_model_slice(parallelizer: BuiltinParallelizer, model: ModelConfig, seq: int | None = None) -> Slice:
    """The slice of every atom of ``model``, which :func:`best_single_island_plan` lays out.

    Examples
    --------
    >>> gpt = ModelConfig("gpt-small", "gpt", 4, 1024, 16, 4096, 50257, 1024)
    >>> whole = whole_model_slice(BuiltinParallelizer(), gpt)
    >>> whole.layers, whole.role
    (4, 'whole')
    """
    return Slice(parallelizer.slice_model(model, seq=seq))


def best_single_island_plan(
    model: ModelConfig,
    island: IslandSpec,
    *,
    microbatch_size: int,
    microbatches: int,
    seq: int | None = None,
    memory_fraction: float = 1.0,
    parallelizer: BuiltinParallelizer | None = None,
) -> PartialPlan | None:
    """The fastest homogeneous plan of the whole model on one island (None if nothing fits).

    Its 1F1B iteration time is ``plan.iteration_time_s`` = Σ t + (M − 1) · max t.

    Examples
    --------
    >>> from hetopt.hardware import load_gpus
    >>> gpt = ModelConfig("gpt-small", "gpt", 4, 1024, 16, 4096, 50257, 1024)
    >>> a100 = IslandSpec("a100", load_gpus()["A100-SXM4-80GB"], nodes=1, gpus_per_node=4)
    >>> best = best_single_island_plan(gpt, a100, microbatch_size=4, microbatches=8)
    >>> best.layers, best.role, best.gpus <= 4
    (4, 'whole', True)
    """
    par = parallelizer or BuiltinParallelizer()
    plans = par.parallelize(
        whole_model_slice(par, model, seq), island, microbatch_size=microbatch_size, microbatches=microbatches,
        global_batch=microbatch_size * microbatches, memory_fraction=memory_fraction,
    )
    return min(plans, key=lambda p: p.iteration_time_s, default=None)


__all__ = [
    "RESERVED_BYTES",
    "BuiltinParallelizer",
    "best_single_island_plan",
    "whole_model_slice",
    "even_split",
    "minmax_split",
    "stage_nodes",
]
