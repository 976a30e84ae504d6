"""The built-in parallelizer's exact layout prunings never change an answer.

Each pruning added for planning speed (``layouts.without_redundant``, the static-memory check
before a stage's time in ``_stage``) is compared with the unpruned search on small seeded
cases: dense and MoE slices, with and without FlashAttention, the whole model and parts of
it, one and two nodes, memory fractions that make layouts infeasible. The answers must be
equal, plan for plan and bit for bit (``PartialPlan`` equality compares every stage's floats).
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from hetopt.catalog import instances_dir
from hetopt.hardware import load_gpus
from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
from hetopt.planner.parallelizer.protocol import IslandSpec, Slice, slice_model
from hetopt.workload import ModelConfig, load_model
from hetopt.costmodel.running import Running

GPUS = load_gpus()
MODELS = instances_dir() / "models"


#: The search as it was before the prunings: every enumerated layout priced in full.
UNPRUNED = dict(drop_redundant=False, static_first=False)


#: Shipped shapes the seeded cases cut down to a few layers (dense and MoE, GPT and Llama).
SHAPES = ("gpt3-1.3b", "gpt3-6.7b", "llama-3-8b", "gshard-moe-2.4b", "gshard-moe-10b", "mixtral-8x7b", "qwen3-30b-a3b")


def _case(seed: int):
    """A seeded (slice, island, m, M, φ, flash) with real memory pressure: a shipped shape with
    4-8 layers on 16-80 GB GPUs, some of the memory withheld."""
    rnd = random.Random(seed)
    full = load_model(MODELS / f"{SHAPES[seed % len(SHAPES)]}.toml")
    layers = rnd.choice([4, 6, 8])
    cfg = dataclasses.replace(full, layers=layers)
    gpu = GPUS[rnd.choice(["T4", "V100-SXM2-16GB", "A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5"])]
    nodes = rnd.choice([1, 2])
    isl = IslandSpec("i", gpu, nodes=nodes, gpus_per_node=rnd.choice([2, 4, 8]),
                     **(dict(inter_bandwidth=rnd.choice([3e9, 25e9])) if nodes > 1 else {}))
    atoms = slice_model(cfg, seq=rnd.choice([512, 1024, 4096]))
    a = rnd.randrange(layers)
    b = rnd.randrange(a + 1, layers + 1)
    if seed % 4 == 0:
        a, b = 0, layers  # the whole model: one block, the fastest plan
    m = rnd.choice([1, 2, 4, 6])
    M = rnd.choice([1, 2, 4, 8])
    phi = rnd.uniform(0.2, 1.0)
    flash = rnd.random() < 0.75
    return Slice(atoms[a:b]), isl, m, M, phi, flash


def _both(sl, isl, flash, monkeypatch, **args):
    got = BuiltinParallelizer(running=Running(flash=flash)).parallelize(sl, isl, **args)
    want = BuiltinParallelizer(running=Running(flash=flash), **UNPRUNED).parallelize(sl, isl, **args)
    return got, want


@pytest.mark.parametrize("seed", range(28))
def test_pruned_search_returns_exactly_what_the_unpruned_one_does(seed, monkeypatch):
    """At the case's memory fraction, and at fractions where each plan of the full-memory answer
    just fits (its peak exactly the capacity) or where none of them does: memory at the boundary,
    where infeasibility and the ZeRO / recomputation trade-offs decide."""
    sl, isl, m, M, phi, flash = _case(seed)
    args = dict(microbatch_size=m, microbatches=M, global_batch=m * M)
    got, want = _both(sl, isl, flash, monkeypatch, memory_fraction=phi, **args)
    assert got == want
    full, _ = _both(sl, isl, flash, monkeypatch, memory_fraction=1.0, **args)
    peaks = [p.peak_bytes / isl.memory_bytes for p in full]
    for phi in sorted({min(1.0, x) for x in peaks} | {0.7 * min(peaks, default=1.0), 0.4 * min(peaks, default=1.0)}):
        got, want = _both(sl, isl, flash, monkeypatch, memory_fraction=phi, **args)
        assert got == want, phi


@pytest.mark.parametrize("model,first,stop", [("gshard-moe-2.4b", 2, 6), ("gshard-moe-2.4b", 0, 3), ("gpt3-1.3b", 4, 9),
                                              ("mixtral-8x7b", 30, 32)])
@pytest.mark.parametrize("m", [1, 4])
def test_pruned_search_on_shipped_models(model, first, stop, m, monkeypatch):
    cfg = load_model(MODELS / f"{model}.toml")
    sl = Slice(slice_model(cfg, seq=1024)[first:stop])
    isl = IslandSpec("v100", GPUS["V100-SXM2-16GB"], nodes=2, gpus_per_node=4, inter_bandwidth=12.5e9)
    args = dict(microbatch_size=m, microbatches=8, global_batch=8 * m)
    got = BuiltinParallelizer().parallelize(sl, isl, **args)
    want = BuiltinParallelizer(**UNPRUNED).parallelize(sl, isl, **args)
    assert got == want and got


@pytest.mark.parametrize("seed", range(12))
def test_flash_twins_and_zero1_dominance_hold_stage_by_stage(seed):
    """The two facts ``_without_redundant`` rests on, on every layout of a seeded case: with
    FlashAttention (on a GPU that runs it) a ``selective`` layout's stages equal its ``none`` twin's bit for bit; a
    ZeRO-0 layout's stages are no faster and hold more static memory than its ZeRO-1 twin's."""
    sl, isl, m, M, _, _ = _case(seed)
    par = BuiltinParallelizer()
    lays = par.layouts(sl, isl, microbatch_size=m, microbatches=M)
    index = {dataclasses.astuple(x): x for x in lays}
    checked = 0
    for lay in lays:
        p = par.plan(sl, isl, lay, microbatch_size=m, microbatches=M)
        if lay.recompute == "selective" and par.running_on(isl).flash:  # GPUs without FlashAttention: no twins
            twin = index[dataclasses.astuple(dataclasses.replace(lay, recompute="none"))]
            assert par.plan(sl, isl, twin, microbatch_size=m, microbatches=M).stages == p.stages
            checked += 1
        if lay.zero_stage == 0 and lay.vpp == 1 and lay.dp * lay.cp > 1:
            one = par.plan(sl, isl, dataclasses.replace(lay, zero_stage=1), microbatch_size=m, microbatches=M)
            for a, b in zip(p.stages, one.stages):
                assert b.forward_s == a.forward_s and b.backward_s <= a.backward_s
                assert b.static_bytes < a.static_bytes and b.activation_bytes == a.activation_bytes
            checked += 1
    assert checked


def test_a_worker_answers_later_batches_with_its_warm_parallelizer():
    """A worker keeps the last built-in parallelizer it used (with its memo) for the equal,
    memo-less copies later batches bring; the answers are those of a fresh one."""
    import pickle

    from hetopt.planner.search import enumerate as en

    cfg = load_model(MODELS / "gshard-moe-2.4b.toml")
    atoms = slice_model(cfg)
    isl = IslandSpec("v100", GPUS["V100-SXM2-16GB"], nodes=2, gpus_per_node=4, inter_bandwidth=12.5e9)
    par = BuiltinParallelizer()

    def query(a, b):
        return en._Query(pickle.loads(pickle.dumps(par)), Slice(atoms[a:b]), isl, 2, 8, 16, 1.0)

    first = en._run_batch([query(0, 3), query(3, 6)])
    warm = en._warm[0]
    assert warm._memo.get("prices")
    second = en._run_batch([query(2, 5), query(0, 3)])
    assert en._warm[0] is warm  # the same instance answered, its memo grown
    assert second[1] == first[0]
    assert second[0] == BuiltinParallelizer().parallelize(Slice(atoms[2:5]), isl, microbatch_size=2, microbatches=8,
                                                          global_batch=16)
    other = dataclasses.replace(par, fsep=False)  # not equal: answers with its own copy
    en._run_batch([en._Query(other, Slice(atoms[0:2]), isl, 2, 8, 16, 1.0)])
    assert en._warm[0] is not warm and en._warm[0] == other


def test_threads_sharing_one_parallelizer_keep_their_own_memo():
    """A dask worker runs several queries at once on its one warm copy (``enumerate._warm``):
    each thread fills its own memo, so no table grows while another thread walks it, and the
    answers are those of a fresh parallelizer."""
    import threading

    cfg = load_model(MODELS / "gpt3-1.3b.toml")
    atoms = slice_model(cfg)
    isl = IslandSpec("a100", GPUS["A100-SXM4-40GB"], nodes=1, gpus_per_node=8)
    shared = BuiltinParallelizer()
    cuts = [(0, 6), (6, 12), (12, 18), (0, 12)]
    answers: dict[int, object] = {}
    memos: dict[int, object] = {}

    def work(i: int) -> None:
        a, b = cuts[i]
        answers[i] = shared.parallelize(Slice(atoms[a:b]), isl, microbatch_size=2, microbatches=8, global_batch=16)
        memos[i] = shared._memo  # the object itself: an id alone may be reused once a thread's memo is freed

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(cuts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(answers) == len(cuts) and len({id(m) for m in memos.values()}) == len(cuts)
    assert shared._memo == {}  # the main thread's memo: untouched by the workers
    for i, (a, b) in enumerate(cuts):
        assert answers[i] == BuiltinParallelizer().parallelize(Slice(atoms[a:b]), isl, microbatch_size=2, microbatches=8,
                                                               global_batch=16)


def test_the_pareto_filter_keeps_the_same_rows_in_python_and_in_numpy(monkeypatch):
    """The filter compares against few kept rows in Python and against many in numpy: the
    same float comparisons, so the same rows, in the same order (seeded random keys with ties)."""
    import numpy as np

    from hetopt.planner.parallelizer import pruning

    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        keys = np.column_stack([rng.integers(0, 6, n) / 4, rng.integers(0, 5, n) / 8, rng.integers(1, 4, n),
                                -rng.choice([np.inf, 0, 1, 2], n)]).astype(float)
        peaks = rng.random(n)
        python = pruning.pareto_indices(keys, lambda j: peaks[j])
        numpy_only = pruning.pareto_indices(keys, lambda j: peaks[j], python_rows=-1)
        assert python == numpy_only


@pytest.mark.parametrize("seed", range(28))
def test_a_cutoff_returns_exactly_the_plans_under_it(seed, monkeypatch):
    """``faster_than`` (the planner's best plan so far) skips layouts by their compute floors and
    drops plans by Σ t + (M − 1)·max t: the answer must be the uncut answer's plans under the
    cutoff, plan for plan, at every plan's own value (the boundary) and between them."""
    sl, isl, m, M, phi, flash = _case(seed)
    args = dict(microbatch_size=m, microbatches=M, global_batch=m * M, memory_fraction=phi)
    par = BuiltinParallelizer(running=Running(flash=flash))
    full = par.parallelize(sl, isl, **args)
    values = sorted({p.total_time_s + (M - 1) * p.max_time_s for p in full})
    cutoffs = values + [(a + b) / 2 for a, b in zip(values, values[1:])] + [values[0] / 2 if values else 1.0]
    for cutoff in cutoffs:
        cut = BuiltinParallelizer(running=Running(flash=flash)).parallelize(sl, isl, faster_than=cutoff, **args)
        assert cut == tuple(p for p in full if p.total_time_s + (M - 1) * p.max_time_s < cutoff), cutoff
        # the same parallelizer answers the cut query apart from the uncut one (its own memo key)
        assert par.parallelize(sl, isl, faster_than=cutoff, **args) == cut
    assert par.parallelize(sl, isl, **args) == full


def test_a_cutoff_must_be_positive():
    sl, isl, m, M, phi, flash = _case(1)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="faster_than"):
            BuiltinParallelizer().parallelize(sl, isl, microbatch_size=m, microbatches=M, global_batch=m * M,
                                              faster_than=bad)
