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

import math
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from hetopt import costmodel as cm
from hetopt.checks import check_cutoff
from hetopt.costmodel.running import Running
from hetopt.costmodel.stage import LayerTable, Layout, stage_nodes
from hetopt.parallelism import context as ctx
from hetopt.parallelism import expert as ex
from hetopt.hardware import DEFAULT_HEADROOM_GIB, GpuType
from hetopt.units import GIB
from hetopt.planner.parallelizer.layouts import even_split, fsep_may_pay, interleave_degrees, minmax_split, without_redundant
from hetopt.planner.parallelizer.pruning import by_group, front_key, is_beaten, keep_unbeaten, pareto_indices
from hetopt.planner.parallelizer.pricing import StagePricing
from hetopt.planner.parallelizer.pricecache import Prepared, collector_paused, island_key
from hetopt.planner.parallelizer.protocol import (
    Atom,
    IslandSpec,
    PartialPlan,
    Slice,
    SliceProfile,
    as_slice,
    concatenate,
    divisors,
    in_flight_fit,
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


def _answer_key(sl: Slice, island: IslandSpec, m: int, M: int, memory_fraction: float, faster_than: float) -> tuple:
    """The memo key of a query's answer: a cutoff (``faster_than``) answers a question of its own."""
    key = (sl, island, m, M, memory_fraction)
    return key if faster_than == math.inf else key + (faster_than,)


@dataclass(frozen=True)
class BuiltinParallelizer(StagePricing):
    """The built-in homogeneous parallelizer (implements :class:`~hetopt.planner.parallelizer.protocol.Parallelizer`).

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
    #: ``share_prices``: work shared between queries (``hetopt.planner.parallelizer.pricecache``: prices
    #: between islands of one signature, layouts and floors between micro-batch sizes and slices
    #: of equal layers, the answers a worker gave); off, every query answered on its own.
    #: ``drop_redundant``: layouts another one enumerated beside them always matches or beats
    #: (``without_redundant``) are not priced.
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
                            pays = ep > 1 and self.fsep and fsep_may_pay(sl, island, microbatch_size, tp, cp, dp, ep,
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

    def parallelize(
        self,
        slice: Atom | Slice,
        island: IslandSpec,
        *,
        microbatch_size: int,
        microbatches: int,
        global_batch: int,
        memory_fraction: float = 1.0,
        faster_than: float = math.inf,
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
        faster_than
            Keep only the plans that may be part of a pipeline faster than this many seconds (the
            planner's best plan so far): a plan whose Σ t + (M − 1)·max t reaches it is left out,
            and a layout whose compute floors reach it is not priced. Exact for the pipeline
            family's closed form T = Σ t + Σ c + (M − 1)·β with β ≥ every stage's t
            (formulations/pipeline.md, "A cutoff in the enumeration"); inf keeps every plan.

        Returns
        -------
        tuple of PartialPlan
            Sorted by Σ t; empty when no layout fits even as the last block of a pipeline.

        Raises
        ------
        ValueError
            When B ≠ m·M, a size is below 1 or φ is outside (0, 1]; an InputError (a ValueError) when
            ``faster_than`` is not positive.
        """
        if microbatch_size < 1 or microbatches < 1:
            raise ValueError(f"micro-batch size and micro-batches must be >= 1 (got {microbatch_size}, {microbatches})")
        if global_batch != microbatch_size * microbatches:
            raise ValueError(f"global batch {global_batch} != micro-batch size {microbatch_size} × {microbatches} micro-batches")
        if not 0.0 < memory_fraction <= 1.0:
            raise ValueError(f"memory fraction must be in (0, 1] (got {memory_fraction})")
        faster_than = check_cutoff(faster_than, "faster_than")
        sl = as_slice(slice)
        self._trim()
        answers = self._cache("answers")
        query = _answer_key(sl, island, microbatch_size, microbatches, memory_fraction, faster_than)
        known = answers.get(query) if self.share_prices else None
        if known is not None:  # asked before (the alternatives ask the enumeration's queries again)
            return known
        # a query allocates hundreds of thousands of short-lived objects and makes no reference
        # cycles, while the memo it fills only grows: the collector is paused for the query
        # (``collector_paused``; the planner pauses it for the whole search)
        with collector_paused():
            answers[query] = found = self._search(sl, island, microbatch_size, microbatches, global_batch, memory_fraction,
                                                  faster_than)
        return found

    def answered(self, slice: Atom | Slice, island: IslandSpec, *, microbatch_size: int, microbatches: int,
                 memory_fraction: float = 1.0, faster_than: float = math.inf) -> bool:
        """Whether :meth:`parallelize` has that query's answer at hand (asked before, or kept
        by :meth:`remember`), so it would not be priced again."""
        key = _answer_key(as_slice(slice), island, microbatch_size, microbatches, memory_fraction, faster_than)
        return self.share_prices and key in self._cache("answers")

    def remember(self, slice: Atom | Slice, island: IslandSpec, *, microbatch_size: int, microbatches: int,
                 memory_fraction: float, plans: tuple[PartialPlan, ...], faster_than: float = math.inf) -> None:
        """Keep ``plans`` as the answer to that query, which another process (a worker of
        ``enumerate_plans``) gave with an equal parallelizer: :meth:`parallelize` returns it when
        asked again. Exact: an answer depends on the query and the parallelizer's fields only."""
        key = _answer_key(as_slice(slice), island, microbatch_size, microbatches, memory_fraction, faster_than)
        self._cache("answers")[key] = tuple(plans)

    def _search(self, sl: Slice, island: IslandSpec, m: int, M: int, global_batch: int,
                memory_fraction: float, faster_than: float = math.inf) -> tuple[PartialPlan, ...]:
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
        # layouts of equal floors and depth found beaten once stay beaten (``is_beaten``: a row that
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
                if floors[n][0] + (M - 1) * floors[n][1] >= faster_than:
                    # no plan of this layout is fast enough: its stages take at least their floors
                    skip_offload = False
                    continue
                bounded = (floors[n], lay.pp, group)
                if bounded in beaten or is_beaten(floors[n], lay.pp, fit_everywhere, group, group_of is not None):
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
                keys.append(front_key(sum(times), max(times), len(stages), limit))
                if limit is None:
                    keep_unbeaten(fit_everywhere.setdefault(group, []), (keys[-1][0], keys[-1][1], len(stages)))
                if whole:
                    best = min(best, sum(times) + (M - 1) * max(times))
                    if group is not None:
                        best_of[group] = min(best_of.get(group, math.inf), sum(times) + (M - 1) * max(times))
        if faster_than < math.inf:
            # after the loop: a slow row still closed the rows it beats (they are slower still)
            fast = [n for n, k in enumerate(keys) if k[0] + (M - 1) * k[1] < faster_than]
            rows, keys, groups, positions = ([x[n] for n in fast] for x in (rows, keys, groups, positions))
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
            chosen = sorted({fastest(range(len(rows)))} | {fastest(ns) for ns in by_group(groups).values()})
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
                    layouts = without_redundant(layouts, flash=flash, whole=whole, keep_zero0=keep_zero0)
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
                        every_layout = without_redundant(every_layout, flash=flash, whole=False, keep_zero0=keep_zero0)
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

        front = pareto_indices(np.array(keys), lambda n: plan_of(n).peak_bytes)
        if not targeted:
            return tuple(plan_of(n) for n in front)
        kept = set(front)
        for members in by_group(groups).values():
            # the Pareto set of every job-wide group too: a plan the runtime runs may be beaten
            # only by one it does not (planner/search/launchable.py composes each group apart)
            sub = np.array([keys[n] for n in members])
            kept.update(members[k] for k in pareto_indices(sub, lambda k: plan_of(members[k]).peak_bytes))
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
