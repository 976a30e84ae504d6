"""Work moved or removed around the workers: the alternatives' queries answered by the workers
while the planner composes (``enumerate.Ahead``), the next micro-batch size enumerated while this
one is composed, one batch per island, and answers at hand not sent again.

Exact: the plan and every alternative are the same with the queries sent ahead and without;
what moves is where they are priced. The work is counted, not timed: with a local pool the
main process prices no query at all (the enumeration's answers and the alternatives' come
back from the workers), without ``Ahead`` it prices the alternatives' own.
"""

from __future__ import annotations

from concurrent.futures import Future

import pytest

import hetopt
from hetopt.planner.alternatives.baselines import Setting, alternative_queries, plan_alternatives
from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
from hetopt.planner.search.compose import island_specs, microbatch_candidates
from hetopt.planner.search import sizes as search
from hetopt.planner.search.enumerate import Ahead, Enumeration, _island_runs, all_slices
from hetopt.planner.setup.request import as_cluster, as_model
from hetopt.planner.search.workers import ProcessPool
from hetopt.family import Deadline

ARGS = dict(global_batch=32)


def _counting_searches(monkeypatch) -> list:
    """Count the built-in parallelizer's priced queries in this process (a forked worker counts
    in its own copy of the list, which this process never sees)."""
    calls: list = []
    search = BuiltinParallelizer._search

    def counted(self, *a, **k):
        calls.append(a[:2])
        return search(self, *a, **k)
    monkeypatch.setattr(BuiltinParallelizer, "_search", counted)
    return calls


def _plan(executor):
    return hetopt.plan("tangram-c2", "gpt3-1.3b", executor=executor, **ARGS)


def _same(got, want):
    assert got.status == want.status and got.iteration_time_s == want.iteration_time_s
    assert got.stages == want.stages and got.enumeration == want.enumeration
    assert got.alternatives == want.alternatives


def test_with_a_pool_this_process_prices_no_query_and_plans_alike(monkeypatch):
    want = _plan(None)  # every query priced here
    calls = _counting_searches(monkeypatch)
    with ProcessPool(2) as pool:
        got = _plan(pool)
    assert calls == []  # the alternatives' queries were answered by the workers
    _same(got, want)


def test_without_ahead_this_process_prices_the_alternatives_queries(monkeypatch):
    # the test above fails when ``Ahead`` is taken out: these are the queries it moves
    monkeypatch.setattr(Ahead, "usable", staticmethod(lambda parallelizer, executor: False))
    want = _plan(None)
    calls = _counting_searches(monkeypatch)
    with ProcessPool(2) as pool:
        got = _plan(pool)
    assert len(calls) > 0
    _same(got, want)


def test_under_a_time_limit_nothing_is_sent_ahead(monkeypatch):
    sent: list = []
    monkeypatch.setattr(Ahead, "send", lambda self, pairs, **k: sent.append(k))
    with ProcessPool(2) as pool:
        hetopt.plan("tangram-c2", "gpt3-1.3b", executor=pool, time_limit=600, **ARGS)
    assert sent == []


def _setting(cluster="tangram-c2", model="gpt3-1.3b", members=((0, 1), (2, 3, 4, 5)), batch=32):
    cl, cfg, par = as_cluster(cluster), as_model(model), BuiltinParallelizer()
    return Setting(cl, cfg, island_specs(cl, members), members, par, par.slice_model(cfg, seq=cfg.sequence), batch,
                   cfg.sequence, None, microbatch_sizes=tuple(microbatch_candidates(batch, None)))


@pytest.mark.parametrize("cluster,model,members", [("tangram-c2", "gpt3-1.3b", ((0, 1), (2, 3, 4, 5))),
                                                   ("tangram-c3", "gpt3-13b", ((0,), (1,), (2,), (3,)))])
def test_the_listed_queries_are_the_ones_the_alternatives_ask(cluster, model, members, monkeypatch):
    s = _setting(cluster, model, members)
    asked: set = set()
    parallelize = BuiltinParallelizer.parallelize

    def spy(self, sl, island, **k):
        asked.add((sl, island, k["microbatch_size"]))
        return parallelize(self, sl, island, **k)
    monkeypatch.setattr(BuiltinParallelizer, "parallelize", spy)
    plan_alternatives(s, Deadline(None))
    listed = {(sl, x, m) for m in s.microbatch_sizes for sl, x in alternative_queries(s)}
    assert asked == listed


class _Failing:
    """An executor whose every batch is lost with its worker."""

    max_workers = 2

    def submit(self, fn, *args):
        future: Future = Future()
        future.set_exception(RuntimeError("worker died"))
        return future


def test_a_lost_batch_is_dropped_and_its_query_priced_here_when_asked():
    s = _setting()
    par = s.parallelizer
    ahead = Ahead(par, _Failing())
    m, M = 4, 8
    pairs = alternative_queries(s)[:1]
    assert ahead.send(pairs, microbatch_size=m, microbatches=M, global_batch=m * M) == 1
    assert ahead.send(pairs, microbatch_size=m, microbatches=M, global_batch=m * M) == 0  # sent once
    ahead.collect(Deadline(None))  # no exception: the batch is dropped
    sl, x = pairs[0]
    assert not par.answered(sl, x, microbatch_size=m, microbatches=M)
    assert par.parallelize(sl, x, microbatch_size=m, microbatches=M, global_batch=m * M)
    assert par.answered(sl, x, microbatch_size=m, microbatches=M)


def test_batches_not_done_by_the_deadline_are_dropped_without_waiting():
    class _Never(_Failing):
        def submit(self, fn, *args):
            return Future()  # never runs: a worker busy past the deadline (or a Ctrl-C)
    s = _setting()
    ahead = Ahead(s.parallelizer, _Never())
    ahead.send(alternative_queries(s)[:2], microbatch_size=4, microbatches=8, global_batch=32)
    ahead.collect(Deadline(0.0))  # returns at once, the batches cancelled
    assert all(not s.parallelizer.answered(sl, x, microbatch_size=4, microbatches=8)
               for sl, x in alternative_queries(s)[:2])


def test_answered_queries_are_not_sent():
    s = _setting()
    par = s.parallelizer
    sl, x = alternative_queries(s)[0]
    par.parallelize(sl, x, microbatch_size=4, microbatches=8, global_batch=32)
    assert Ahead(par, _Failing()).send([(sl, x)], microbatch_size=4, microbatches=8, global_batch=32) == 0


def test_only_the_built_in_parallelizer_on_a_local_pool_sends_ahead():
    with ProcessPool(2) as pool:
        assert Ahead.usable(BuiltinParallelizer(), pool)
        assert not Ahead.usable(BuiltinParallelizer(), None)
        assert not Ahead.usable(_Subclass(), pool)


class _Subclass(BuiltinParallelizer):
    pass



# --- the next micro-batch size enumerated while this one is composed (``search._search_sizes``) ---



class _Inline(ProcessPool):
    """A local pool of ``max_workers`` that runs each batch here, when submitted, and records it."""

    def __init__(self, max_workers: int = 2) -> None:
        self.max_workers, self.restarts, self.batches = max_workers, 0, []

    def submit(self, fn, /, *args, **kwargs):
        self.batches.append(args[0])
        future: Future = Future()
        future.set_result(fn(*args, **kwargs))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


def test_sizes_proven_useless_are_reported_alike_with_the_next_size_started_early(monkeypatch):
    # tangram-c3's largest sizes are skipped by their bound after the smaller ones are composed:
    # the size started early is then dropped, and the enumeration reads as without a pool. By
    # simulated time: by closed-form time the enumerations are cut, and none starts early (below)
    args = dict(global_batch=128, alternatives=False, time_model="simulated")
    want = hetopt.plan("tangram-c3", "gpt3-13b", **args)
    skipped = [m for m, e in want.enumeration.items() if "skipped_bound_s" in e]
    assert skipped  # the case this test is about
    events: list = []
    start = search.start_enumeration
    monkeypatch.setattr(search, "start_enumeration", lambda ctx, m, *a: events.append(("start", m)) or start(ctx, m, *a))
    compose = search.pipeline_instance
    monkeypatch.setattr(search, "pipeline_instance", lambda name, *a: events.append(("compose", name)) or compose(name, *a))
    got = hetopt.plan("tangram-c3", "gpt3-13b", executor=_Inline(), **args)
    assert got.enumeration == want.enumeration and got.stages == want.stages
    assert got.iteration_time_s == want.iteration_time_s
    # size 2 was started before size 1 was composed (without the overlap: after)
    composed = [e for e in events if e[0] == "compose"]
    assert composed[0][1].endswith("-m1")
    assert events.index(("start", 2)) < events.index(composed[0])


@pytest.mark.parametrize("options", [dict(time_limit=600, time_model="simulated"), dict(time_model="closed-form")],
                         ids=["time-limit", "cut-enumerations"])
def test_no_size_is_started_early_under_a_time_limit_or_a_cut(options, monkeypatch):
    # a cut enumeration (closed-form time, the built-in parallelizer) waits for the plans of
    # every size before it, with a pool as without one
    events: list = []
    start = search.start_enumeration
    monkeypatch.setattr(search, "start_enumeration", lambda ctx, m, *a: events.append(("start", m)) or start(ctx, m, *a))
    compose = search.pipeline_instance
    monkeypatch.setattr(search, "pipeline_instance", lambda name, *a: events.append(("compose", name)) or compose(name, *a))
    hetopt.plan("tangram-c2", "gpt3-1.3b", executor=_Inline(), global_batch=8, alternatives=False, **options)
    composed = [e for e in events if e[0] == "compose"]
    assert events[:3] == [("start", 1), composed[0], ("start", 2)]


def _c2_enumeration(executor, par=None, m=4, M=8):
    cluster, cfg = as_cluster("tangram-c2"), as_model("gpt3-1.3b")
    par = par or BuiltinParallelizer()
    return Enumeration(par, all_slices(par, par.slice_model(cfg)), island_specs(cluster, [[0, 1], [2, 3, 4, 5]]),
                       microbatch_size=m, microbatches=M, global_batch=m * M, executor=executor)


def test_a_pool_gets_one_batch_per_island_when_that_keeps_both_workers_busy():
    pool = _Inline(2)
    plans, stats = _c2_enumeration(pool).finish(Deadline(None))
    # tangram-c2: 2 A100 nodes of 4 and 4 H100 NVL nodes of 2, 8 GPUs each
    islands = [{q.island.name for q in b} for b in pool.batches]
    assert len(islands) == 2 and all(len(i) == 1 for i in islands) and islands[0] != islands[1]
    want, _ = _c2_enumeration(None).finish(Deadline(None))
    assert plans == want and stats.complete


def test_queries_answered_here_already_are_not_sent_again():
    par = BuiltinParallelizer()
    first = _c2_enumeration(None, par)
    want, _ = first.finish(Deadline(None))
    pool = _Inline(2)
    plans, stats = _c2_enumeration(pool, par).finish(Deadline(None))
    assert pool.batches == [] and plans == want and stats.answered == stats.queried


def test_island_batches_need_islands_that_split_evenly():
    from types import SimpleNamespace as S

    def q(island, gpus, layers=1):
        return S(island=S(name=island, gpus=gpus), slice=S(layers=layers))
    # shares 0.4, 0.2, 0.2, 0.2 over two workers: 0.4 + 0.2 against 0.2 + 0.2 is over the slack
    assert _island_runs([q("a", 8), q("b", 4), q("c", 4), q("d", 4)], 2) is None
    # 4 + 4 against 4 + 4
    assert len(_island_runs([q("a", 4), q("b", 4), q("c", 4), q("d", 4)], 2)) == 4
    assert _island_runs([q("a", 4), q("b", 4)], 4) is None  # more workers than islands
