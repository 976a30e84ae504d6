"""Enumerating (slice, island) pairs and querying the parallelizer, with Tangram's pruning.

Every slice of consecutive atoms meets every island; three policies drop pairs before the
parallelizer is asked (each can be switched off, and ``EnumerationStats`` counts them):

* **redundancy**: a slice whose signature was already queried on this island adds nothing
  (options carry a length and a role, not a position, so equal slices share their answer);
* **infeasibility**: the slice's training state alone, spread over every GPU of the
  island, exceeds a GPU's memory (``SliceProfile.min_bytes_per_gpu``): no layout can fit;
* **imbalance**: the slice's share of the model's compute is far from the island's share of
  the cluster's: more than ``imbalance`` times the island's share, or less than its share
  divided by it. This one is Tangram's heuristic, not a proof; the planner's tests check
  that the composed plan is the same with and without it on the shipped clusters.

Queries go through any ``concurrent.futures.Executor`` (a process pool, or a Dask
``distributed`` client's executor), in batches of consecutive queries (``tasks``): an
external parallelizer that takes minutes per query is the case this serves.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any
from concurrent.futures import Executor, Future
from concurrent.futures import wait as wait_for
from dataclasses import dataclass, field, replace

from hetopt.checks import check_cutoff
from hetopt.family import Deadline
from hetopt.planner.parallelizer.protocol import IslandSpec, Parallelizer, PartialPlan, Slice
from hetopt.planner.parallelizer.pricecache import collector_paused
from hetopt.planner.search.workers import POLL_S, Gathering, ProcessPool

#: Pruning policies, all on by default.
POLICIES = ("redundancy", "infeasibility", "imbalance")
#: How far (as a factor) a slice's compute share may stray from its island's capacity share.
#: Tangram prunes "unbalanced" pairs without publishing its threshold; 4 keeps every pair a
#: balanced pipeline of the shipped clusters uses (checked by tests) and drops, e.g., one
#: layer of a 40-layer model on an island holding half of the cluster's compute.
DEFAULT_IMBALANCE = 4.0
#: Tasks one enumeration sends to an executor: enough to keep a few dozen workers busy and
#: to show progress, few enough that each task answers many queries with one copy of the
#: parallelizer. With an external parallelizer that takes minutes per query and a large
#: Dask cluster, pass ``tasks`` = the number of queries instead.
DEFAULT_TASKS = 64
#: Batches per worker of a local process pool (``workers.ProcessPool``), when fewer than
#: ``tasks``: workers that answer runs of consecutive queries (one island's, of slices that
#: share stages) price each stage once where short batches spread over both made each worker
#: price most of them (Tangram's C1 with 2 workers: 3.9 → 3.5 s, 6.3 → 5.3 s of CPU).
TASKS_PER_LOCAL_WORKER = 4
#: How far the busiest worker's share may exceed an even split (as a fraction of it) for a
#: local pool to get one batch per island (``_island_runs``) instead: an engineering margin,
#: not a physical quantity; islands of equal GPUs (the shipped two-type clusters) split exactly.
ISLAND_BATCH_SLACK = 0.1


@dataclass
class EnumerationStats:
    """Counts of one enumeration: pairs seen, pruned by each policy, queried, plans returned."""

    pairs: int = 0
    pruned: dict[str, int] = field(default_factory=lambda: {p: 0 for p in POLICIES})
    queried: int = 0
    plans: int = 0
    answered: int = 0  # queries answered before the deadline (= queried without one)
    unreachable: int = 0  # pairs whose slice needs more islands than there are (never queried)

    @property
    def complete(self) -> bool:
        """The parallelizer answered every query."""
        return self.answered == self.queried

    def to_dict(self) -> dict:
        return {"pairs": self.pairs, "pruned": dict(self.pruned), "unreachable": self.unreachable,
                "queried": self.queried, "answered": self.answered, "plans": self.plans}


@dataclass(frozen=True)
class _Query:
    """One parallelizer call (picklable: it crosses process and Dask boundaries)."""

    parallelizer: Parallelizer
    slice: Slice
    island: IslandSpec
    microbatch_size: int
    microbatches: int
    global_batch: int
    memory_fraction: float
    #: the built-in parallelizer's cutoff (``BuiltinParallelizer.parallelize``); inf: none, and
    #: then the call is the protocol's own, which every parallelizer answers
    faster_than: float = math.inf


def _run(query: _Query) -> tuple[PartialPlan, ...]:
    cutoff = {} if query.faster_than == math.inf else {"faster_than": query.faster_than}
    return query.parallelizer.parallelize(
        query.slice,
        query.island,
        microbatch_size=query.microbatch_size,
        microbatches=query.microbatches,
        global_batch=query.global_batch,
        memory_fraction=query.memory_fraction,
        **cutoff,
    )


#: The built-in parallelizer that last answered a batch in this process (a worker's), kept with
#: its memo of stage prices: the next batch brings an equal copy without the memo
#: (``BuiltinParallelizer`` pickles without it), and answers through this one instead. One
#: slot, so a long-lived worker holds at most one memo per thread (the memo is per thread:
#: a threaded worker runs queries at once; each is bounded by ``STAGE_CACHE_LIMIT``).
_warm: list = []


def _warm_parallelizer(par: Parallelizer) -> Parallelizer:
    """An equal built-in parallelizer that has answered queries in this process, else ``par``.

    Exact: the memo is keyed by everything a price depends on, and equal parallelizers price
    alike (``tests/planner/test_builtin.py``: a warm memo never changes an answer)."""
    from hetopt.planner.parallelizer.builtin import BuiltinParallelizer

    if type(par) is not BuiltinParallelizer:
        return par
    if _warm and _warm[0] == par:
        return _warm[0]
    _warm[:] = [par]
    return par


def _remember(par: Parallelizer, calls: list[_Query], answers: list[tuple[PartialPlan, ...] | None]) -> None:
    """The workers' answers kept by this process's built-in parallelizer, which answers the same
    queries again without pricing them (the planner's alternatives ask many of them)."""
    from hetopt.planner.parallelizer.builtin import BuiltinParallelizer

    if type(par) is not BuiltinParallelizer or not par.share_prices:
        return
    for call, found in zip(calls, answers):
        if found is not None and call.parallelizer == par:
            par.remember(call.slice, call.island, microbatch_size=call.microbatch_size, microbatches=call.microbatches,
                         memory_fraction=call.memory_fraction, plans=found, faster_than=call.faster_than)


def _knows(query: _Query) -> bool:
    """Whether the query's built-in parallelizer has its answer at hand (``BuiltinParallelizer.answered``)."""
    from hetopt.planner.parallelizer.builtin import BuiltinParallelizer

    return type(query.parallelizer) is BuiltinParallelizer and query.parallelizer.answered(
        query.slice, query.island, microbatch_size=query.microbatch_size, microbatches=query.microbatches,
        memory_fraction=query.memory_fraction, faster_than=query.faster_than)


def _run_batch(batch: list[_Query]) -> list[tuple[PartialPlan, ...]]:
    # one parallelizer answers the whole batch, so whatever it memoizes (the built-in one:
    # stage prices) serves every query of the batch, and the batches after it in this worker
    out = []
    with collector_paused():  # the whole batch: see ``collector_paused``
        for query in batch:
            par = _warm_parallelizer(query.parallelizer)
            out.append(_run(query if par is query.parallelizer else replace(query, parallelizer=par)))
    return out


def _weight(query: _Query) -> int:
    """A query's work, roughly: its layouts grow with the island's GPUs and the slice's layers."""
    return query.island.gpus * query.slice.layers


def _island_runs(calls: Sequence[_Query], workers: int) -> list[list[_Query]] | None:
    """One batch per island when the islands' batches keep ``workers`` workers evenly busy
    (largest first, each to the least loaded: within ``ISLAND_BATCH_SLACK`` of an even
    split); None otherwise.

    An island's queries of one micro-batch size share most of their stage prices, which a
    worker's memo keeps: split over two workers, both price them (Tangram's C1: 71,572 stage
    prices over its two workers with four batches a worker, 67,181 with one per island, 63,495
    in one process).

    Examples
    --------
    >>> from types import SimpleNamespace as S
    >>> def q(island, gpus, layers):
    ...     return S(island=S(name=island, gpus=gpus), slice=S(layers=layers))
    >>> even = [q("a", 16, 2), q("b", 16, 1), q("a", 16, 1), q("b", 16, 2)]
    >>> [[x.island.name for x in run] for run in _island_runs(even, 2)]
    [['a', 'a'], ['b', 'b']]
    >>> _island_runs([q("a", 32, 1), q("b", 96, 1)], 2) is None  # one island holds 3/4 of the work
    True
    """
    by: dict[str, list[_Query]] = {}
    for q in calls:
        by.setdefault(q.island.name, []).append(q)
    weights = sorted((sum(_weight(q) for q in run) for run in by.values()), reverse=True)
    loads = [0] * workers
    for w in weights:
        loads[loads.index(min(loads))] += w
    if not calls or max(loads) > (1.0 + ISLAND_BATCH_SLACK) * sum(weights) / workers:
        return None
    return list(by.values())


class _Answers:
    """Every query's plans, in order (None: not answered before the deadline), reporting
    progress as they complete.

    With an executor the queries go out when this is made, in at most ``tasks`` batches of
    consecutive queries (one island's queries are consecutive, and share its memoized
    prices), and :meth:`wait` collects them; a batch whose worker died is sent again
    (``workers.Gathering``). Without one, :meth:`wait` answers them here.
    """

    def __init__(self, calls: list[_Query], executor: Executor | None, on_progress, tasks: int) -> None:
        self.calls, self.on_progress = calls, on_progress
        self.gathering: Gathering | None = None
        self.known: dict[int, tuple[PartialPlan, ...]] = {}
        if executor is None:
            return
        # queries this process's parallelizer has answered already (a size enumerated again
        # without imbalance pruning asks most of them again) are not sent: a worker that did
        # not answer them would price them again
        for n, q in enumerate(calls):
            if _knows(q):
                self.known[n] = _run(q)  # the kept answer, not priced
        calls = [q for n, q in enumerate(calls) if n not in self.known]
        total, everything = len(calls), len(self.calls)
        if isinstance(executor, ProcessPool):
            # a local pool: a few batches a worker balance the load, and each worker's memo of stage
            # prices serves longer runs of consecutive queries (it prices less of what another did)
            tasks = min(tasks, TASKS_PER_LOCAL_WORKER * executor.max_workers)
        size = max(1, -(-total // max(1, tasks)))
        runs = _island_runs(calls, executor.max_workers) if isinstance(executor, ProcessPool) else None
        if runs is None or len(runs) > tasks:
            runs = [calls[i : i + size] for i in range(0, total, size)]
        self.runs = runs
        # the heaviest batches first (layouts grow with the island's GPUs and the slice's layers): the
        # enumeration ends when its last batch does, and a heavy batch started last would leave the
        # other workers idle while it runs
        self.order = sorted(range(len(runs)), key=lambda i: -sum(_weight(q) for q in runs[i]))
        batches = [runs[i] for i in self.order]
        done = len(self.known)

        def progress(i: int) -> None:
            nonlocal done
            done += len(batches[i])
            if on_progress is not None:
                on_progress(done, everything)

        self.gathering = Gathering(executor, _run_batch, batches, on_done=progress)

    def wait(self, deadline: Deadline) -> list[tuple[PartialPlan, ...] | None]:
        calls, total = self.calls, len(self.calls)
        if self.gathering is None:
            out: list[tuple[PartialPlan, ...] | None] = [None] * total
            for done, call in enumerate(calls, start=1):
                if deadline.expired():
                    break
                out[done - 1] = _run(call)
                if self.on_progress is not None:
                    self.on_progress(done, total)
            return out
        answers = self.gathering.wait(deadline)
        by_run = dict(zip(self.order, answers))
        sent = iter([plans for i, batch in enumerate(self.runs) for plans in (by_run[i] or [None] * len(batch))])
        return [self.known[n] if n in self.known else next(sent) for n in range(total)]

    def cancel(self) -> None:
        if self.gathering is not None:
            self.gathering.cancel()


class Ahead:
    """Queries a local pool's workers answer in the background while this process composes,
    kept by this process's built-in parallelizer once collected (the planner sends the
    alternatives' queries of each micro-batch size as soon as its enumeration is in).

    Exact: an answer depends on the query and the parallelizer only (``remember``), and a
    batch that fails or is lost with its worker is dropped: its queries are then asked here,
    as without this. Only for the built-in parallelizer on a :class:`ProcessPool` (a Dask
    cluster's workers are not idle while the planner composes).

    Examples
    --------
    >>> from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
    >>> Ahead.usable(BuiltinParallelizer(), None)
    False
    """

    def __init__(self, parallelizer: Parallelizer, executor: ProcessPool) -> None:
        self.parallelizer, self.executor = parallelizer, executor
        self._pending: list[tuple[Future, list[_Query]]] = []
        self._sent: set[tuple] = set()

    @staticmethod
    def usable(parallelizer: Parallelizer, executor: Executor | None) -> bool:
        """Whether answers sent ahead would be kept: the built-in parallelizer, a local pool, sharing on."""
        from hetopt.planner.parallelizer.builtin import BuiltinParallelizer

        return type(parallelizer) is BuiltinParallelizer and isinstance(executor, ProcessPool) and parallelizer.share_prices

    def send(self, pairs: Sequence[tuple[Slice, IslandSpec]], *, microbatch_size: int, microbatches: int,
             global_batch: int, memory_fraction: float = 1.0) -> int:
        """Submit the pairs' queries not yet answered or sent, one run of consecutive queries a
        worker (one island's together: they share a worker's memo); how many were sent."""
        par = self.parallelizer
        calls = []
        for sl, isl in pairs:
            key = (sl, isl, microbatch_size, microbatches, memory_fraction)
            if key in self._sent or par.answered(sl, isl, microbatch_size=microbatch_size, microbatches=microbatches,
                                                 memory_fraction=memory_fraction):
                continue
            self._sent.add(key)
            calls.append(_Query(par, sl, isl, microbatch_size, microbatches, global_batch, memory_fraction))
        if not calls:
            return 0
        calls.sort(key=lambda q: q.island.name)  # stable: each island's queries in the order given
        size = -(-len(calls) // self.executor.max_workers)
        for i in range(0, len(calls), size):
            run = calls[i : i + size]
            self._pending.append((self.executor.submit(_run_batch, run), run))
        return len(calls)

    def collect(self, deadline: Deadline) -> None:
        """Wait for the batches sent, until ``deadline`` (a Ctrl-C ends it too), and keep their
        answers; the batches not done by then are dropped (their queries are asked here, if the
        deadline leaves time for them)."""
        pending, self._pending = self._pending, []
        futures = [future for future, _ in pending]
        while futures and not deadline.expired():
            _, left = wait_for(futures, timeout=min(POLL_S, deadline.remaining()))
            if not left:
                break
        for future, run in pending:
            if not future.done():
                future.cancel()
                continue
            try:
                answers = future.result()
            except Exception:  # noqa: BLE001 - a lost or failed batch: asked here later, as without it
                continue
            _remember(self.parallelizer, run, answers)

    def cancel(self) -> None:
        """Drop the batches not started (the plan stopped early)."""
        for future, _ in self._pending:
            future.cancel()
        self._pending = []


def blocks_needed(sl: Slice, first_layer: int, total_layers: int) -> int:
    """Fewest blocks of a pipeline that holds ``sl`` as one of its blocks: itself, plus one
    block in front when it does not start the model and one behind when it does not end it.

    Islands host one block each (``formulations/pipeline.md``, "island once"), so on a
    cluster of I islands a slice with ``blocks_needed > I`` can be in no composition: on one
    island only the whole model is queried, on two only prefixes and suffixes.

    Examples
    --------
    >>> from hetopt.planner.parallelizer.protocol import slice_model
    >>> from hetopt.workload import ModelConfig
    >>> atoms = slice_model(ModelConfig("x", "gpt", 4, 64, 4, 256, 100, 32))
    >>> [blocks_needed(Slice(atoms[a:b]), 0, 4) for a, b in ((0, 4), (0, 2), (2, 4), (1, 3))]
    [1, 2, 2, 3]
    """
    front = sl.first_layer > first_layer
    behind = sl.first_layer + sl.layers < first_layer + total_layers
    return 1 + front + behind


def all_slices(parallelizer: Parallelizer, atoms: Sequence) -> list[Slice]:
    """Every run of consecutive atoms, built with the parallelizer's ``concatenate``."""
    out = []
    for i in range(len(atoms)):
        current = Slice((atoms[i],))
        out.append(current)
        for j in range(i + 1, len(atoms)):
            current = parallelizer.concatenate(current, atoms[j])
            out.append(current)
    return out


def enumerate_plans(
    parallelizer: Parallelizer,
    slices: Sequence[Slice],
    islands: Sequence[IslandSpec],
    *,
    deadline: Deadline | None = None,
    **options: Any,
) -> tuple[dict[int, list[PartialPlan]], EnumerationStats]:
    """Query the parallelizer for every surviving (slice, island) pair: an :class:`Enumeration`
    made and finished at once.

    Parameters
    ----------
    parallelizer, slices, islands
        As :class:`Enumeration` takes them.
    deadline
        Queries not answered by then are dropped (``stats.complete`` is then False): the
        plans returned are a subset, a restriction of the composition.
    **options
        :class:`Enumeration`'s keywords: ``microbatch_size``, ``microbatches``,
        ``global_batch`` (required), ``memory_fraction``, ``policies``, ``imbalance``,
        ``executor``, ``on_progress``, ``tasks``, ``faster_than`` (the built-in parallelizer's
        cutoff: only plans that may be part of a pipeline faster than it).

    Returns
    -------
    (plans, stats)
        ``plans[i]``: the partial plans of island ``i``, one entry per distinct slice
        signature queried there (with redundancy off, duplicates appear and are harmless).

    Raises
    ------
    ValueError
        For an unknown policy name.
    """
    return Enumeration(parallelizer, slices, islands, **options).finish(deadline or Deadline(None))


class Enumeration:
    """:func:`enumerate_plans` in two steps: the pairs are pruned and, with an executor, the
    queries sent when this is made; :meth:`finish` collects the answers. The planner composes
    one micro-batch size while the workers answer the next size's queries.

    ``on_progress`` is called as ``on_progress(done, total)`` while the queries complete
    (progress bars); with an ``executor``, the queries go out in at most ``tasks`` batches.

    Examples
    --------
    >>> from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
    >>> from hetopt.planner.search.compose import island_specs
    >>> from hetopt.planner.setup.request import as_cluster, as_model
    >>> cluster, par = as_cluster("tangram-c2"), BuiltinParallelizer()
    >>> atoms = par.slice_model(as_model("gpt3-1.3b"))
    >>> started = Enumeration(par, all_slices(par, atoms), island_specs(cluster, [[0, 1], [2, 3, 4, 5]]),
    ...                       microbatch_size=4, microbatches=8, global_batch=32)
    >>> plans, stats = started.finish(Deadline(None))
    >>> stats.complete, stats.queried == stats.answered > 0
    (True, True)
    """

    def __init__(
        self,
        parallelizer: Parallelizer,
        slices: Sequence[Slice],
        islands: Sequence[IslandSpec],
        *,
        microbatch_size: int,
        microbatches: int,
        global_batch: int,
        memory_fraction: float = 1.0,
        policies: Sequence[str] = POLICIES,
        imbalance: float = DEFAULT_IMBALANCE,
        executor: Executor | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        tasks: int = DEFAULT_TASKS,
        faster_than: float = math.inf,
    ) -> None:
        unknown = set(policies) - set(POLICIES)
        if unknown:
            raise ValueError(f"unknown pruning policy {sorted(unknown)} (known: {', '.join(POLICIES)})")
        self.parallelizer, self.executor, self.islands = parallelizer, executor, islands
        self.faster_than = check_cutoff(faster_than, "faster_than")
        self.stats = stats = EnumerationStats()
        total_layers = max(s.layers for s in slices)  # the whole model is one of the slices
        profiles = {}
        whole = max(slices, key=lambda s: s.layers)
        capacity = [parallelizer.profile(whole, isl).island_flops for isl in islands]
        cluster_flops = sum(capacity)
        self.queries = queries = []
        seen: set[tuple[str, int]] = set()
        for i, isl in enumerate(islands):
            share = capacity[i] / cluster_flops
            for sl in slices:
                stats.pairs += 1
                if blocks_needed(sl, whole.first_layer, total_layers) > len(islands):
                    # exact, not a policy: the composition puts one block on each island at most
                    stats.unreachable += 1
                    continue
                key = (sl.signature, i)
                if "redundancy" in policies and key in seen:
                    stats.pruned["redundancy"] += 1
                    continue
                seen.add(key)
                if "infeasibility" in policies:
                    prof = profiles.get(key) or parallelizer.profile(sl, isl)
                    profiles[key] = prof
                    if prof.min_bytes_per_gpu > memory_fraction * prof.memory_bytes:
                        stats.pruned["infeasibility"] += 1
                        continue
                if "imbalance" in policies:
                    demand = sl.layers / total_layers
                    if demand > imbalance * share or demand < share / imbalance:
                        stats.pruned["imbalance"] += 1
                        continue
                queries.append(
                    (i, _Query(parallelizer, sl, isl, microbatch_size, microbatches, global_batch, memory_fraction,
                               faster_than))
                )
        stats.queried = len(queries)
        self.calls = [q for _, q in queries]
        self.answers = _Answers(self.calls, executor, on_progress, tasks)

    def finish(self, deadline: Deadline) -> tuple[dict[int, list[PartialPlan]], EnumerationStats]:
        """The plans and statistics of :func:`enumerate_plans`; queries not answered by ``deadline`` dropped."""
        answers = self.answers.wait(deadline)
        if self.executor is not None:
            _remember(self.parallelizer, self.calls, answers)
        stats = self.stats
        plans: dict[int, list[PartialPlan]] = {i: [] for i in range(len(self.islands))}
        for (i, _), found in zip(self.queries, answers):
            if found is None:
                continue
            stats.answered += 1
            plans[i].extend(found)
            stats.plans += len(found)
        return plans, stats

    def cancel(self) -> None:
        """Drop the queries not started: their answers are no longer wanted."""
        self.answers.cancel()
