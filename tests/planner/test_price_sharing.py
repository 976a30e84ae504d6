"""Work the built-in parallelizer shares between queries never changes an answer (``planner/pricecache.py``).

The shared path (one parallelizer answering many queries: prices shared between islands of one
signature, layouts and floors shared between micro-batch sizes and slices of equal layers, the
workers' answers kept) is compared with the plain one (``pricecache.SHARING`` off, a fresh
parallelizer per query) on seeded cases and on shipped settings, plan for plan and bit for bit.
A key that left out a field of the island that matters would make two islands share prices they
must not: the tests change one field at a time and check that the answer follows it.
"""

from __future__ import annotations

import dataclasses

import pytest

import hetopt
from hetopt.planner import builtin, pricecache
from hetopt.planner.builtin import BuiltinParallelizer, _without_redundant
from hetopt.planner.parallelizer import IslandSpec, Slice, divisors, slice_model
from hetopt.planner.pricecache import FloorTable, PricingIsland, island_key
from hetopt.workload import load_model
from hetopt.costmodel.running import Running
from tests.planner.test_exact_pruning import GPUS, MODELS, _case


def _plain(monkeypatch, sl, isl, par_args, **args):
    """The answer of a fresh parallelizer with every sharing off."""
    return BuiltinParallelizer(**par_args, share_prices=False).parallelize(sl, isl, **args)


def _counting(monkeypatch) -> list:
    """Patch ``price_stage`` to count its calls (the list grows by one per call)."""
    calls: list = []
    price = builtin.price_stage

    def counted(*a, **k):
        calls.append(1)
        return price(*a, **k)
    monkeypatch.setattr(builtin, "price_stage", counted)
    return calls


@pytest.mark.parametrize("flash", [True, False])
def test_one_warm_parallelizer_answers_seeded_queries_as_fresh_ones_do(flash, monkeypatch):
    """Seeded slices on islands all named "i" (shapes, GPUs and links differ), dense and MoE,
    whole models and parts, in one run through one parallelizer: every answer equals a fresh
    parallelizer's without sharing."""
    warm = BuiltinParallelizer(running=Running(flash=flash))
    checked = 0
    for seed in range(64):
        sl, isl, m, M, phi, case_flash = _case(seed)
        if case_flash != flash:
            continue
        args = dict(microbatch_size=m, microbatches=M, global_batch=m * M, memory_fraction=phi)
        assert warm.parallelize(sl, isl, **args) == _plain(monkeypatch, sl, isl, dict(running=Running(flash=flash)), **args)
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("model,first,stop,nodes", [("gpt3-1.3b", 0, 6, 1), ("gpt3-1.3b", 3, 9, 2), ("llama-3-8b", 2, 8, 2),
                                                    ("gshard-moe-2.4b", 0, 4, 1)])
def test_every_micro_batch_size_of_a_slice_as_on_its_own(model, first, stop, nodes, monkeypatch):
    """A dense slice's layouts are filtered from one list for every m (``_prepared``), its floors
    come from one table and its stage keys are shared: each size's answer is the plain one's."""
    cfg = load_model(MODELS / f"{model}.toml")
    sl = Slice(slice_model(cfg, seq=1024)[first:stop])
    isl = IslandSpec("a", GPUS["A100-SXM4-40GB"], nodes=nodes, gpus_per_node=8,
                     **(dict(inter_bandwidth=12.5e9) if nodes > 1 else {}))
    B = 64
    warm = BuiltinParallelizer()
    for m in divisors(B)[:6]:
        args = dict(microbatch_size=m, microbatches=B // m, global_batch=B)
        got = warm.parallelize(sl, isl, **args)
        assert got == _plain(monkeypatch, sl, isl, {}, **args) and got


@pytest.mark.parametrize("seed", range(12))
def test_the_layouts_of_a_size_are_the_global_batchs_whose_d_divides_it(seed):
    """``_prepared``'s rule, checked on its own: for a dense slice of ordinary length, the layouts
    of m (redundant ones dropped) are those of B whose d divides m, in the same order."""
    sl, isl, _, _, _, flash = _case(seed)
    par = BuiltinParallelizer(running=Running(flash=flash))
    if par._broad(sl)[1] or (sl.embedding and sl.head):
        pytest.skip("MoE, long-sequence and whole-model slices are enumerated per size")
    B = 24
    every = _without_redundant(par.layouts(sl, isl, microbatch_size=B), flash=par.running_on(isl).flash, whole=False)
    for m in divisors(B):
        own = _without_redundant(par.layouts(sl, isl, microbatch_size=m), flash=par.running_on(isl).flash, whole=False)
        assert [x for x in every if m % x.dp == 0] == own


@pytest.mark.parametrize("seed", range(12))
def test_the_floor_table_gives_the_floors_and_order_of_the_layout_by_layout_path(seed):
    sl, isl, _, _, _, flash = _case(seed)
    par = BuiltinParallelizer(running=Running(flash=flash))
    tab = par._table(sl, isl)
    every = _without_redundant(par.layouts(sl, isl, microbatch_size=12), flash=par.running_on(isl).flash, whole=False)
    parts: dict = {}
    table = FloorTable(every, lambda lay: par._stage_parts(sl, tab, lay, parts))
    for m in (1, 2, 3, 4, 6, 12):
        index, floors, visit = table.order(m, par._floor_of(sl, isl, tab, m))
        layouts = [every[n] for n in index]
        assert layouts == [x for x in every if m % x.dp == 0]
        want_floors, want_visit = par._visit_order(sl, isl, tab, layouts, m, False)
        assert floors == want_floors and visit == list(want_visit)


def _island(**change) -> IslandSpec:
    base = IslandSpec("a", GPUS["A100-PCIe-80GB"], nodes=2, gpus_per_node=4, inter_bandwidth=25e9)
    return dataclasses.replace(base, **change)


#: One field of the island changed at a time: each one moves some stage's price of the slice below.
CHANGES = [dict(inter_bandwidth=3e9), dict(intra_bandwidth=8e9), dict(p2p=True), dict(transport="tcp"),
           dict(gpu=GPUS["A100-SXM4-80GB"]), dict(nodes=1)]


def _query():
    cfg = load_model(MODELS / "gpt3-6.7b.toml")
    return Slice(slice_model(cfg, seq=1024)[2:6]), dict(microbatch_size=8, microbatches=8, global_batch=64)


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: next(iter(c)))
def test_islands_that_differ_in_one_field_do_not_share(change, monkeypatch):
    sl, args = _query()
    a, b = _island(), _island(name="b", **change)
    assert island_key(a) != island_key(b)
    warm = BuiltinParallelizer()
    first = warm.parallelize(sl, a, **args)
    got = warm.parallelize(sl, b, **args)
    want = _plain(monkeypatch, sl, b, {}, **args)
    assert got == want
    # the change matters: some stage's price moved (else this case could not catch a shared key)
    assert [p.stages for p in got] != [p.stages for p in first]


def test_a_key_without_the_network_would_share_what_it_must_not(monkeypatch):
    """The check above has teeth: with the inter-node bandwidth left out of the key, the second
    island's answer is the first one's prices and no longer its own."""
    sl, args = _query()
    a, b = _island(), _island(name="b", inter_bandwidth=3e9)
    want = _plain(monkeypatch, sl, b, {}, **args)
    with monkeypatch.context() as mp:
        mp.setattr(builtin, "island_key", lambda isl: island_key(dataclasses.replace(isl, inter_bandwidth=1.0)))
        warm = BuiltinParallelizer()
        warm.parallelize(sl, a, **args)
        assert warm.parallelize(sl, b, **args) != want


def test_islands_that_differ_only_in_their_names_share_their_prices(monkeypatch):
    sl, args = _query()
    warm = BuiltinParallelizer()
    first = warm.parallelize(sl, _island(), **args)
    calls = _counting(monkeypatch)
    second = warm.parallelize(sl, _island(name="twin"), **args)
    assert not calls  # every stage price came from the first island's
    assert [dataclasses.replace(p, island="a") for p in second] == list(first)
    assert {p.island for p in second} == {"twin"}


def test_a_remembered_answer_is_returned_unpriced(monkeypatch):
    sl, args = _query()
    worker, main = BuiltinParallelizer(), BuiltinParallelizer()
    plans = worker.parallelize(sl, _island(), **args)
    main.remember(sl, _island(), microbatch_size=8, microbatches=8, memory_fraction=1.0, plans=plans)
    calls = _counting(monkeypatch)
    assert main.parallelize(sl, _island(), **args) == plans and not calls
    assert main.parallelize(sl, _island(), **args, memory_fraction=0.5) and calls  # another query: priced


def test_the_pricing_view_reads_as_the_island():
    isl = _island(p2p=True, transport="tcp")
    view = PricingIsland(isl)
    assert (view.intra_achieved, view.inter_achieved) == (isl.intra_achieved, isl.inter_achieved)
    assert (view.gpu, view.nodes, view.gpus_per_node, view.gpus, view.memory_bytes) == (
        isl.gpu, isl.nodes, isl.gpus_per_node, isl.gpus, isl.memory_bytes)


@pytest.mark.parametrize("cluster,model,batch,m", [("tangram-c2", "gpt3-1.3b", 128, None), ("sailor-a4v4", "opt-350m", 64, None),
                                                   ("tangram-c3", "gpt3-13b", 128, 2)])
def test_shipped_settings_plan_alike_with_and_without_sharing(cluster, model, batch, m, monkeypatch):
    args = dict(global_batch=batch, microbatch_size=m, alternatives=False)
    got = hetopt.plan(cluster, model, **args)
    want = hetopt.plan(cluster, model, **args, parallelizer=BuiltinParallelizer(share_prices=False))
    assert got.status == want.status and got.iteration_time_s == want.iteration_time_s
    assert got.stages == want.stages and got.enumeration == want.enumeration
