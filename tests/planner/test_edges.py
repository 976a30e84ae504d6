"""The planner at the edges of its range (issue 29): batches whose smallest micro-batch sizes
the pipeline family cannot compose, coarse atoms, replicas on clusters whose shapes differ only
in bandwidth, replicas found where the composition ran out of time."""

from __future__ import annotations

from dataclasses import replace
import json
import subprocess
import sys

import pytest

from hetopt.planner import load_cluster, plan
from hetopt.planner.builtin import BuiltinParallelizer
from hetopt.planner.compose import microbatch_candidates, uncomposable_microbatch_sizes
from hetopt.planner.parallelizer import divisors
from hetopt.planner.plan import HeteroPlan
from hetopt.planner.replicas import unit_shapes
from hetopt.pipeline.problem import MAX_MICROBATCHES
from hetopt.errors import InputError
from hetopt.result import Status


def test_divisors_of_a_huge_batch_come_at_once():
    # a scan to n hung plan(global_batch=2**40) before the batch was refused
    assert divisors(2**40) == [2**k for k in range(41)]
    assert divisors(999_999_000_001)[-1] == 999_999_000_001


def test_sizes_past_the_pipeline_limit_are_not_candidates():
    b = 2 * MAX_MICROBATCHES
    assert 1 not in microbatch_candidates(b, None)
    assert uncomposable_microbatch_sizes(b, None) == [1]
    assert uncomposable_microbatch_sizes(b, 4) == []
    with pytest.raises(InputError, match="give at least 2") as err:
        microbatch_candidates(b, 1)
    assert err.value.field == "microbatch_size"


@pytest.mark.slow
def test_a_batch_of_131072_plans_and_is_not_called_optimal():
    # 131,072 micro-batches of 1 are past what the pipeline family composes: the search skips
    # that size (it aborted on it before) and, unable to rule it out, says FEASIBLE
    p = plan("tangram-c2", "gpt3-1.3b", global_batch=131072, alternatives=False)
    assert p.status is Status.FEASIBLE, p.reason
    assert "not planned" in p.reason and p.iteration_time_s is not None
    assert p.enumeration[1] == {"not_planned": "not planned: 131072 micro-batches, more than the 65536 a pipeline composes"}


def test_coarse_atoms_narrow_the_search_and_the_plan_says_feasible():
    fine = plan("tangram-c2", "gpt3-1.3b", global_batch=16, alternatives=False)
    coarse = plan("tangram-c2", "gpt3-1.3b", global_batch=16, alternatives=False,
                  parallelizer=BuiltinParallelizer(layers_per_atom=12))
    assert fine.status is Status.OPTIMAL
    assert coarse.status is Status.FEASIBLE and "atoms of 12 layers" in coarse.reason
    assert coarse.iteration_time_s >= fine.iteration_time_s
    # the coarse compositions' own optimum bounds only the coarse space: the bound is the ideal
    assert coarse.bound_s <= fine.iteration_time_s


def test_unit_shapes_of_pods_that_differ_in_bandwidth_have_distinct_names():
    cluster = load_cluster("synthetic-64-nodes-2-pods")
    found = cluster.islands
    from hetopt import solvers

    islands = solvers.solve(found)
    members = [[found.index[n] for n in isl.nodes] for isl in islands.solution.islands]
    names = [s.name for s in unit_shapes(cluster, members)]
    assert len(names) == len(set(names)), names
    assert any("Gbps" in n for n in names)


def test_the_answer_is_feasible_when_only_the_replicas_found_a_plan():
    class Found:
        status = Status.FEASIBLE

    p = HeteroPlan("c", "m", 8, 0, 0, 2048, Status.TIME_LIMIT)
    assert p.answer_status is Status.TIME_LIMIT
    assert replace(p, replicas=Found()).answer_status is Status.FEASIBLE
    assert replace(p, replicas=Found(), status=Status.OPTIMAL).answer_status is Status.OPTIMAL


def test_export_says_why_a_replicas_only_plan_is_not_written(tmp_path):
    doc = {"format": "hetopt-plan", "version": 1, "cluster": "c", "model": "m", "global_batch": 8, "microbatch_size": 0,
           "microbatches": 0, "seq": 2048,
           "status": "TIME_LIMIT", "reason": "time limit reached before a pipeline was found",
           "islands": [], "stages": [], "replicas": {"status": "FEASIBLE"}}
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(doc))
    run = subprocess.run([sys.executable, "-m", "hetopt", "export", str(f), "--to", "megatron", "-o", str(tmp_path / "x")],
                         capture_output=True, text=True)
    assert run.returncode == 2
    assert "replicas plan (FEASIBLE) runs one job per replica" in run.stderr
    assert "Traceback" not in run.stderr


# ---- the Python API checks every argument by name (issue 29), with the CLI's rules --------------

BAD_OPTIONS = [
    ({"global_batch": "16"}, "global_batch", "must be a whole number"),
    ({"global_batch": True}, "global_batch", "must be a whole number"),
    ({"global_batch": 2**40}, "global_batch", "between 1 and 1048576"),
    ({"seq": 1.5}, "seq", "must be a whole number"),
    ({"max_islands": -1}, "max_islands", "must be >= 1"),
    ({"tasks": 0}, "tasks", "must be >= 1"),
    ({"imbalance": float("nan")}, "imbalance", "must be a finite number"),
    ({"imbalance": 0.5}, "imbalance", "must be >= 1"),
    ({"policies": "all"}, "policies", "not a string|got the string 'all'"),
    ({"policies": ("balance",)}, "policies", "unknown 'balance'"),
    ({"alternatives": "no"}, "alternatives", "must be True or False"),
    ({"replicas": 1}, "replicas", "must be True or False"),
    ({"time_model": "exact"}, "time_model", "must be one of"),
    ({"layers_per_atom": 0}, "layers_per_atom", "must be >= 1"),
    ({"microbatch_size": 0}, "microbatch_size", "between 1 and"),
    ({"runtime": 3}, "runtime", "must be text"),
    ({"layout": ["tp=1"]}, "layout", "must be text"),
]


@pytest.mark.parametrize(("options", "field", "words"), BAD_OPTIONS, ids=[b[1] + "-" + repr(b[0][b[1]]) for b in BAD_OPTIONS])
def test_the_api_refuses_each_bad_option_by_name_before_any_work(options, field, words):
    import re
    import time

    options = {"global_batch": 16, **options}
    started = time.perf_counter()
    with pytest.raises(InputError) as err:
        plan("tangram-c2", "gpt3-1.3b", **options)
    assert err.value.field == field
    assert str(err.value).startswith(field) and re.search(words, str(err.value)), str(err.value)
    assert time.perf_counter() - started < 5  # refused up front, not after a search (2**40 hung)


def test_a_misspelt_keyword_names_the_option_meant():
    with pytest.raises(TypeError, match="did you mean 'microbatch_size'"):
        plan("tangram-c2", "gpt3-1.3b", global_batch=16, microbatch=2)


def test_cluster_model_and_callables_are_checked_by_name():
    for kwargs, field in (({"cfg": None}, "model"), ({"cluster": 5}, "cluster")):
        cluster = kwargs.get("cluster", "tangram-c2")
        with pytest.raises(InputError) as err:
            plan(cluster, kwargs.get("cfg", "gpt3-1.3b"), global_batch=16)
        assert err.value.field == field
    for kwargs, field in (({"parallelizer": object()}, "parallelizer"), ({"executor": 3}, "executor"),
                          ({"on_progress": "x"}, "on_progress")):
        with pytest.raises(InputError) as err:
            plan("tangram-c2", "gpt3-1.3b", global_batch=16, **kwargs)
        assert err.value.field == field


def test_a_request_plans_as_the_keywords_do():
    from hetopt import PlanRequest

    req = PlanRequest(cluster="tangram-c2", model="gpt3-1.3b", global_batch=16, alternatives=False)
    a, b = plan(req), plan("tangram-c2", "gpt3-1.3b", global_batch=16, alternatives=False)
    assert a.status is b.status is Status.OPTIMAL and a.iteration_time_s == b.iteration_time_s
    with pytest.raises(TypeError, match="inside the PlanRequest"):
        plan(req, global_batch=32)


def test_a_model_whose_training_state_exceeds_the_cluster_is_infeasible_at_once():
    """Issue 28: GPT-3 175B's state (18 bytes a parameter, fully sharded) against 20 GPUs' memory is
    settled before any search, with a reason of one short line; a model that fits is planned."""
    from hetopt.result import Status

    p = plan("tangram-c3", "gpt3-175b", global_batch=128)
    assert p.status is Status.INFEASIBLE and "the training state alone does not fit tangram-c3" in p.reason
    assert len(p.reason) < 300 and p.timing_s["islands_s"] == 0.0 and not p.alternatives
    assert plan("tangram-c3", "gpt3-1.3b", global_batch=16, microbatch_size=4, alternatives=False).status is Status.OPTIMAL
