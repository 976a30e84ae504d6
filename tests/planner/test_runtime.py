"""`--runtime`: the search held to what a training framework can run, and a layout priced under it."""

from __future__ import annotations

import pytest

from hetopt import cli
from hetopt.errors import InputError
from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
from hetopt.planner.setup.cluster import load_cluster
from hetopt.planner.steps import plan
from hetopt.planner.setup.framework import Framework, parse_runtime
from hetopt.costmodel.running import Running

#: Megatron-LM as of 2021: no selective recomputation, no distributed optimizer, no
#: FlashAttention, no sequence parallelism, gradients all-reduced after the backward.
MEGATRON_2021 = "recompute=none,full zero=0 overlap=no flash=no sp=no"  # as the runtime is written back: KEYS order


@pytest.fixture(scope="module")
def c2():
    return load_cluster("tangram-c2")


@pytest.mark.parametrize(("text", "message"), [
    ("", "give at least one key"),
    ("flash", "expected key=value"),
    ("fp8=yes", "unknown key 'fp8'"),
    ("zero=0 zero=1", "zero is given twice"),
    ("recompute=partial", "recompute=partial: each must be one of none, selective, full"),
    ("zero=4", "zero=4: each must be one of 0, 1, 2, 3"),
    ("zero=one", "zero=one: each must be one of"),
    ("flash=maybe", "flash=maybe: must be yes or no"),
    ("zero3gather=block", "must be layer or tensor"),
    ("precision=fp8", "precision=fp8: must be bf16, fp16, fp32 or tf32"),
])
def test_a_bad_runtime_is_named(text, message):
    with pytest.raises(InputError, match=message):
        parse_runtime(text)


def test_the_runtime_string_round_trips():
    rt = parse_runtime(MEGATRON_2021 + " ep=no zero3gather=tensor precision=fp16")
    assert parse_runtime(rt.text()) == rt
    assert rt.running.precision == "fp16" and rt.parallelizer(BuiltinParallelizer()).running.precision == "fp16"
    assert Framework().text() == ""


def test_the_plan_under_a_runtime_is_the_plan_of_that_parallelizer_and_uses_only_what_it_has(c2):
    held = plan(c2, "gpt3-1.3b", global_batch=32, alternatives=False, runtime=MEGATRON_2021)
    par = BuiltinParallelizer(recompute=("none", "full"), zero_stages=(0,), running=Running(flash=False, sequence_parallel=False, overlap=False))
    same = plan(c2, "gpt3-1.3b", global_batch=32, alternatives=False, parallelizer=par)
    free = plan(c2, "gpt3-1.3b", global_batch=32, alternatives=False)
    assert held.iteration_time_s == same.iteration_time_s and held.stages == same.stages
    assert held.runtime == MEGATRON_2021
    assert all(" zero0" in st.layout and "selective" not in st.layout and not st.layout.endswith(" sp") for st in held.stages)
    assert held.iteration_time_s >= free.iteration_time_s  # a smaller search space never plans faster


def test_a_layout_is_priced_under_the_runtime_and_never_beats_its_plan(c2):
    p = plan(c2, "gpt3-1.3b", global_batch=32, alternatives=False, runtime=MEGATRON_2021,
             layout="h100nvl-0+3: layers=16 tp=1 pp=4 dp=2 mbs=1 recompute=full; a100-0+1: layers=8 tp=1 pp=2 dp=2 mbs=1 recompute=full")
    g = p.given_layout
    assert g["fits"] and "flash=no" in g["layout"] and "sp=no" in g["layout"]
    assert g["plan_speedup"] >= 1.0


@pytest.mark.parametrize(("layout", "message"), [
    ("h100nvl-0+3: layers=16 tp=1 pp=4 dp=2 mbs=1 recompute=selective; a100-0+1: layers=8 tp=1 pp=2 dp=2 mbs=1",
     r"layout recompute=selective: the runtime.s recompute=none,full does not have it"),
    ("h100nvl-0+3: layers=16 tp=1 pp=4 dp=2 mbs=1 zero=1; a100-0+1: layers=8 tp=1 pp=2 dp=2 mbs=1",
     r"layout zero=1: the runtime.s zero=0 does not have it"),
    ("h100nvl-0+3: layers=16 tp=1 pp=4 dp=2 mbs=1 flash=no; a100-0+1: layers=8 tp=1 pp=2 dp=2 mbs=1",
     r"layout: names flash; with a runtime, say how the framework runs once, in the runtime"),
])
def test_a_layout_the_runtime_cannot_run_or_that_restates_it_is_refused(c2, layout, message):
    with pytest.raises(InputError, match=message):
        plan(c2, "gpt3-1.3b", global_batch=32, alternatives=False, runtime=MEGATRON_2021, layout=layout)


def test_the_command_line_takes_a_runtime_and_refuses_a_bad_one(capsys):
    base = ["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "32", "--no-alternatives"]
    assert cli.main(base + ["--runtime", MEGATRON_2021]) == 0
    assert f"runtime: {MEGATRON_2021}" in capsys.readouterr().out
    assert cli.main(base + ["--runtime", "zero=7"]) == 2
    err = capsys.readouterr().err
    assert "--runtime zero=7" in err and "Traceback" not in err


def test_flash_attention_runs_only_where_the_gpu_runs_it():
    """The catalog's ``flash_attention``: a GPU without FlashAttention (Volta here) prices attention
    unfused under the default runtime, bit for bit as ``flash=no`` does, while an A100 island of
    the same slice prices it fused (less memory, another time)."""
    from hetopt.hardware import load_gpus
    from hetopt.planner.parallelizer.protocol import IslandSpec
    from hetopt.workload import ModelConfig

    cat = load_gpus()
    gpt = ModelConfig("gpt-2k", "gpt", 4, 2048, 16, 8192, 50257, 2048)
    on, off = BuiltinParallelizer(), BuiltinParallelizer(running=Running(flash=False))
    sl = on.concatenate(*on.slice_model(gpt)[1:3])
    lay = on.layouts(sl, IslandSpec("a", cat["A100-SXM4-80GB"], 1, 4), microbatch_size=2, microbatches=4)[0]
    args = dict(microbatch_size=2, microbatches=4)
    v100 = IslandSpec("v", cat["V100-SXM2-32GB"], 1, 4)
    a100 = IslandSpec("a", cat["A100-SXM4-80GB"], 1, 4)
    assert [g for g in cat.values() if not g.flash_attention] and all(
        not g.flash_attention for g in cat.values() if g.name.startswith(("V100", "T4", "P100", "P40")))
    assert on.plan(sl, v100, lay, **args).stages == off.plan(sl, v100, lay, **args).stages
    fused, unfused = on.plan(sl, a100, lay, **args).stages, off.plan(sl, a100, lay, **args).stages
    assert fused != unfused and fused[0].activation_bytes < unfused[0].activation_bytes


def test_the_plan_names_the_gpus_whose_attention_runs_unfused(capsys):
    """C1's T4s and V100s cannot run FlashAttention: the plan says so (printed and in --json),
    and says nothing when the runtime asks for no FlashAttention at all."""
    import json

    assert cli.main(["plan", "--cluster", "tangram-c1", "--model", "gpt3-1.3b", "--global-batch", "16", "--no-alternatives",
                     "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["unfused_attention"] == ["T4", "V100-PCIe-16GB"] and doc["running"]["precision"] == "fp16"  # no BF16 either
    assert cli.main(["plan", "--cluster", "tangram-c1", "--model", "gpt3-1.3b", "--global-batch", "16", "--no-alternatives",
                     "--runtime", "flash=no", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unfused_attention"] == []
    assert cli.main(["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "16", "--no-alternatives"]) == 0
    assert "unfused" not in capsys.readouterr().out
    assert cli.main(["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "16", "--no-alternatives",
                     "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["running"]["precision"] == "bf16"


def test_a_schedule_not_simulated_is_said_so_never_printed_as_nan(capsys):
    """The family marks a schedule too large to simulate with NaN; the plan says "not run" and
    its JSON has null, never a non-finite number (found in review: "1F1B simulation nan s")."""
    import json

    from hetopt.pipeline.simulate import MAX_SIMULATED_OPERATIONS, simulation_size

    # 65,536 micro-batches of 1 sample (the most a pipeline composes): at 2 stages or more, more
    # operations than MAX_SIMULATED_OPERATIONS
    args = ["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "65536", "--microbatch", "1",
            "--no-alternatives", "--workers", "1"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "1F1B simulation not run" in out and "nan" not in out
    assert cli.main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["simulated_s"] is None
    assert simulation_size(len(doc["stages"]), doc["microbatches"]) > MAX_SIMULATED_OPERATIONS
