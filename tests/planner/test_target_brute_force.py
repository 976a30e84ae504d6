"""``plan(target=...)`` against brute force: every layout of every block priced, the runtime's rules
applied, every composition of one job-wide setting evaluated by the pipeline family's ``evaluate``.

The oracle shares the cost model (``BuiltinParallelizer.plan`` prices one layout) and the
pipeline family's ``evaluate``, and nothing of the search: not the parallelizer's Pareto filter
or its per-group fronts, not the pruning of redundant layouts, not the grouping, the bounds or
the DP of ``planner/launchable.py``. Disagreement is a bug in one of them.
"""

from __future__ import annotations

import itertools
import math

import pytest

import hetopt
from hetopt.pipeline.problem import Block, PipelineInstance, PipelineSolution, evaluate
from hetopt.planner.builtin import BuiltinParallelizer
from hetopt.planner.cluster import load_cluster
from hetopt.planner.compose import island_specs, link_matrix
from hetopt.planner.launchable import shape_of
from hetopt.planner.parallelizer import Slice
from hetopt.runtimes import RUNTIMES, Job
from hetopt.workload import ModelConfig
from hetopt.costmodel.running import Running

CLUSTER = """
name = "two-small-islands"
[[node]]
name = "a"
gpu = "A100-SXM4-80GB"
gpus = 2
[[node]]
name = "h"
gpu = "H100-SXM5"
gpus = 2
[network]
default_gbps = 100.0
"""
#: Four layers, narrow enough that every layout fits two GPUs: the brute force stays small.
MODEL = ModelConfig("tiny-4", "gpt", 4, 1024, 16, 4096, 50257, 512)
BATCH, MICRO = 8, 2


def _brute_force(cluster, target: str, precision: str) -> float:
    runtime = RUNTIMES[target]
    par = BuiltinParallelizer(running=Running(precision=precision, overlap=runtime.overlap is not False))
    members = [[0], [1]]
    specs = island_specs(cluster, members)
    atoms = par.slice_model(MODEL, seq=MODEL.sequence)
    links = link_matrix(cluster, members, MODEL, MODEL.sequence, MICRO)
    M = BATCH // MICRO
    job = Job(precision, MODEL.sequence, MODEL.experts, MODEL.tied_embeddings)

    def launchable(i: int, a: int, b: int) -> list:
        sl = Slice(atoms[a:b])
        out = []
        for lay in par.layouts(sl, specs[i], microbatch_size=MICRO, microbatches=M):
            plan = par.plan(sl, specs[i], lay, microbatch_size=MICRO, microbatches=M)
            shape = shape_of(plan, MODEL.layers, specs[i].gpu.bf16)
            if runtime.takes(shape, job):
                out.append((runtime.key(shape), plan))
        return out

    best = math.inf
    layers = MODEL.layers
    shapes = [[(i, 0, layers)] for i in range(2)]
    shapes += [[(i, 0, cut), (1 - i, cut, layers)] for i in range(2) for cut in range(1, layers)]
    for blocks in shapes:
        choices = [launchable(i, a, b) for i, a, b in blocks]
        for combo in itertools.product(*choices):
            if len({key for key, _ in combo}) > 1:
                continue  # one job: every block the same job-wide values
            options = tuple(plan.to_option(i) for (i, _, _), (_, plan) in zip(blocks, combo))
            inst = PipelineInstance("brute", layers, M, tuple(s.to_island() for s in specs), options, links)
            ev = evaluate(inst, PipelineSolution(tuple(Block(i, k, a, b - a) for k, (i, a, b) in enumerate(blocks))))
            if ev.feasible:
                best = min(best, ev.objective)
    return best


@pytest.mark.parametrize("target", ["megatron", "torchtitan", "deepspeed"])
def test_the_launchable_plan_is_the_brute_force_optimum(target: str, tmp_path) -> None:
    path = tmp_path / "two.toml"
    path.write_text(CLUSTER)
    cluster = load_cluster(path)
    p = hetopt.plan(cluster, MODEL, global_batch=BATCH, microbatch_size=MICRO, target=target, alternatives=False,
                    policies=())
    assert p.status is hetopt.Status.OPTIMAL
    assert p.iteration_time_s == pytest.approx(_brute_force(cluster, target, p.precision), rel=1e-9)
    # never faster than the unrestricted plan of the same enumeration
    free = p.launchability["unrestricted"]["iteration_time_s"]
    assert free <= p.iteration_time_s * (1 + 1e-12)
