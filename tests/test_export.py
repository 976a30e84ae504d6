"""``hetopt export``: golden files, round trips through the runtimes' formats, gaps, bad input.

The inputs are committed results (tests/golden/export/README.md says which commands wrote
them), so these tests do not move with the planner's numbers. The allow-lists below are the
runtimes' own names, read from their sources at the versions named beside each.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from hetopt import cli
from hetopt.errors import InputError
from functools import partial

from hetopt.export import GAPS_FILE, TARGETS, write_output
from hetopt.export import export as _export
from hetopt.export import export_file as _export_file

# Most of these tests read what each exporter writes for a plan, gaps included: they export with
# gaps allowed (tests/test_one_job.py holds the refusal and the one-job files).
export = partial(_export, allow_gaps=True)
export_file = partial(_export_file, allow_gaps=True)

GOLDEN = Path(__file__).parent / "golden" / "export"
INPUTS = GOLDEN / "inputs"
C2 = INPUTS / "plan-tangram-c2-gpt3-1.3b.json"  # two islands, same tp/dp, uneven 8-stage split
C1 = INPUTS / "plan-tangram-c1-gpt3-6.7b.json"  # T4 tp4 and V100 tp2 selective: per-island differences
ONE = INPUTS / "plan-one-island-gpt3-1.3b.json"  # one island, 13+11 split
TINY = INPUTS / "allocation-tiny-uneven.json"  # batches 8, 2, 2; uneven shares
CEPHALO_A = INPUTS / "allocation-cephalo-a-gpt3-2.7b-b128.json"  # 8 GPUs of 4 types, accumulation
INFEASIBLE = INPUTS / "allocation-tiny-infeasible.json"
MOE_EP = INPUTS / "plan-one-island-gshard-moe-2.4b.json"  # tp1 pp1 dp8 zero2 ep4: EP inside DP
DENSE_CP = INPUTS / "plan-one-island-llama-3.2-3b-s32768.json"  # tp1 pp1 dp2 zero2 cp4; no FSDP alternative
EP_CP = INPUTS / "plan-tangram-c2-mixtral-8x7b-s4096.json"  # A100 ep4 cp4 in front of H100 tp2 pp4
FSEP_OFFLOAD = INPUTS / "plan-one-island-gshard-moe-2.4b-fsep-offload.json"  # hand-made: tp2 pp2 dp2 ep4 fsep offload
#: torchtitan's job file names a model it ships (issue 40): the plans above as plans of the shipped
#: model of their kind (Llama-3 8B for the dense ones, Qwen3-30B-A3B for the MoE ones), made by
#: hand (tests/golden/export/upgrade_inputs.py --as; README.md there).
TITAN = {path: INPUTS / f"{path.stem}-as-{model}.json" for path, model in (
    (C2, "llama-3-8b"), (C1, "llama-3-8b"), (ONE, "llama-3-8b"), (DENSE_CP, "llama-3-8b"), (MOE_EP, "qwen3-30b-a3b"),
    (EP_CP, "qwen3-30b-a3b"), (FSEP_OFFLOAD, "qwen3-30b-a3b"))}
#: Plans made with `hetopt plan --target`: one job each, with launch.sh, hostfile and README.md.
ONE_JOB = [(INPUTS / f"plan-{stem}-target-{t}.json", t) for stem, t in (
    ("tangram-c2-gpt3-1.3b", "megatron"), ("tangram-c2-llama-3-8b", "torchtitan"), ("tangram-c3-gpt3-13b", "megatron"),
    ("tangram-c3-llama-3-8b", "torchtitan"), ("tangram-c3-gpt3-13b", "deepspeed"), ("a100-v100-2x8-4x8-gpt3-2.7b", "megatron"))]
#: The plans with expert or context parallelism or offloading.
BREADTH = [MOE_EP, DENSE_CP, EP_CP, FSEP_OFFLOAD]
PLANS = [C2, C1, ONE, *BREADTH]


def _for(path: Path, target: str) -> Path:
    """The input a target's test exports: torchtitan's is the plan of a model it ships."""
    return TITAN.get(path, path) if target == "torchtitan" else path


#: (input, target) pairs with golden output folders ``<input stem>--<target>``.
CASES = [(_for(C2, t), t) for t in TARGETS] + [(_for(ONE, t), t) for t in TARGETS] \
    + [(C1, "megatron"), (TITAN[C1], "torchtitan"), (C1, "deepspeed")] \
    + [(TINY, "deepspeed"), (TINY, "cephalo"), (CEPHALO_A, "deepspeed"), (CEPHALO_A, "cephalo")] \
    + [(_for(p, t), t) for p in (MOE_EP, EP_CP, FSEP_OFFLOAD) for t in TARGETS] \
    + [(_for(DENSE_CP, t), t) for t in TARGETS if t != "cephalo"] + ONE_JOB

#: Megatron-LM arguments the exporter may write; every one is an ``add_argument`` of
#: Megatron-LM ``megatron/training/arguments.py`` at tag core_v0.15.3.
MEGATRON_ARGUMENTS = {
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--sequence-parallel", "--micro-batch-size",
    "--global-batch-size", "--num-layers", "--seq-length", "--fp16", "--bf16", "--recompute-granularity",
    "--recompute-method", "--recompute-num-layers", "--use-distributed-optimizer",
    "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers", "--pipeline-model-parallel-layout",
    "--num-virtual-stages-per-pipeline-rank", "--hidden-size", "--num-attention-heads", "--ffn-hidden-size",
    "--max-position-embeddings", "--kv-channels", "--normalization", "--position-embedding-type", "--swiglu",
    "--disable-bias-linear", "--group-query-attention", "--num-query-groups", "--untie-embeddings-and-output-weights",
    "--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size", "--moe-layer-freq",
    # the same file: _add_moe_args (--expert-model-parallel-size, --expert-tensor-parallel-size) and
    # _add_distributed_args (--context-parallel-size)
    "--expert-model-parallel-size", "--expert-tensor-parallel-size", "--context-parallel-size",
    # _add_distributed_args: the data-parallel overlap, fp32 reduction and FSDP2 (and what FSDP2
    # requires: _add_training_args --no-gradient-accumulation-fusion, _add_checkpointing_args --ckpt-format);
    # these six and FSDP2's requirements were read in a recent arguments.py (validate_args), not
    # re-checked against the core_v0.15.3 tag
    "--overlap-grad-reduce", "--overlap-param-gather", "--accumulate-allreduce-grads-in-fp32", "--use-torch-fsdp2",
    "--no-gradient-accumulation-fusion", "--ckpt-format",
    # read in the core_v0.15.3 tag itself (issue 40): _add_network_size_args (--attention-backend,
    # --make-vocab-size-divisible-by) and _add_tokenizer_args (--vocab-size)
    "--attention-backend", "--make-vocab-size-divisible-by", "--vocab-size",
} | {
    # Megatron-LM core_v0.16.0: megatron/training/arguments.py _add_network_size_args turns the fields of
    # megatron/core/transformer/transformer_config.py (fine_grained_activation_offloading, offload_modules)
    # into arguments (megatron/training/argument_utils.py ArgumentGroupFactory: "--" + name with "-")
    "--fine-grained-activation-offloading", "--offload-modules",
}
#: ``--offload-modules`` values: the allowed_modules of TransformerConfig.__post_init__ (core_v0.16.0
#: megatron/core/transformer/transformer_config.py).
MEGATRON_OFFLOAD_MODULES = {"attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act"}
#: Their ``choices`` in the same file.
MEGATRON_CHOICES = {"--recompute-granularity": {"full", "selective"}, "--recompute-method": {"uniform", "block"},
                    "--normalization": {"LayerNorm", "RMSNorm"},
                    "--position-embedding-type": {"learned_absolute", "rope", "mrope", "relative", "none"},
                    "--attention-backend": {"flash", "fused", "unfused", "local", "auto"},
                    "--ckpt-format": {"torch", "torch_dist", "torch_dcp", "zarr", "fsdp_dtensor"}}
#: torchtitan job TOML keys per section: fields of the dataclasses of torchtitan v0.2.2
#: ``torchtitan/config/job_config.py`` (Job, Model, Training, Parallelism, ActivationCheckpoint).
TORCHTITAN_KEYS = {
    "job": {"config_file", "dump_folder", "description", "print_config", "save_config_file", "custom_config_module"},
    "model": {"name", "flavor", "hf_assets_path", "tokenizer_path", "converters", "print_after_conversion"},
    "training": {"dataset", "dataset_path", "local_batch_size", "global_batch_size", "seq_len", "max_norm", "steps",
                 "enable_cpu_offload", "dtype", "mixed_precision_param", "mixed_precision_reduce", "gc_freq", "gc_debug",
                 "dataloader"},
    "parallelism": {"data_parallel_replicate_degree", "data_parallel_shard_degree", "fsdp_reshard_after_forward",
                    "tensor_parallel_degree", "disable_loss_parallel", "enable_async_tensor_parallel",
                    "pipeline_parallel_degree", "module_fqns_per_model_part", "pipeline_parallel_first_stage_less_layers",
                    "pipeline_parallel_last_stage_less_layers", "pipeline_parallel_layers_per_stage",
                    "pipeline_parallel_schedule", "pipeline_parallel_schedule_csv", "pipeline_parallel_microbatch_size",
                    "pipeline_parallel_expert_parallel_overlap", "context_parallel_degree", "context_parallel_load_balancer",
                    "context_parallel_rotate_method", "expert_parallel_degree", "expert_tensor_parallel_degree",
                    "expert_parallel_comm_backend"},
    "activation_checkpoint": {"mode", "selective_ac_option", "per_op_sac_force_recompute_mm_shapes_by_fqns", "early_stop",
                              "memory_budget", "visualize_memory_budget_pareto", "preserve_rng_state",
                              "determinism_check", "debug"},
}
#: Literal choices in the same file.
TORCHTITAN_CHOICES = {("activation_checkpoint", "mode"): {"selective", "full", "memory_budget", "none"},
                      ("parallelism", "fsdp_reshard_after_forward"): {"default", "always", "never"},
                      ("training", "mixed_precision_param"): {"bfloat16", "float32"}}
#: DeepSpeed config keys: deepspeed/runtime/constants.py (TRAIN_BATCH_SIZE,
#: TRAIN_MICRO_BATCH_SIZE_PER_GPU, GRADIENT_ACCUMULATION_STEPS, ZERO_OPTIMIZATION, FP16, BFLOAT16)
#: and deepspeed/runtime/zero/config.py ("stage"), v0.18.
DEEPSPEED_KEYS = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                  "zero_optimization", "fp16", "bf16", "fp32_allreduce",
                  # deepspeed/runtime/activation_checkpointing/config.py (ACT_CHKPT), v0.18.9
                  "activation_checkpointing"}
#: Its keys: ACT_CHKPT_* of the same file, v0.18.9.
DEEPSPEED_ACTIVATION_CHECKPOINTING_KEYS = {"partition_activations", "number_checkpoints", "contiguous_memory_optimization",
                                           "synchronize_checkpoint_boundary", "profile", "cpu_checkpointing"}
#: Cephalo's config keys: the json.dump of Cephalo's split_workload.py (github.com/benson-guo/cephalo).
CEPHALO_KEYS = {"model_name", "uneven_batch_sizes", "split_uneven_partitions", "split_uneven", "uneven_microbatches",
                "seq_length", "recompute_layer", "experiment_name", "ga", "use_activation_buffers",
                "use_prefetch_backwards", "reduce_dtype", "autocast_dtype", "image_size"}


def _case_id(case: tuple[Path, str]) -> str:
    return f"{case[0].stem}--{case[1]}"


def _doc(path: Path) -> dict:
    return json.loads(path.read_text())


def _running(doc: dict, **settings) -> dict:
    """``doc`` with ``settings`` changed in its ``running`` object (file keys)."""
    return doc | {"running": doc["running"] | settings}


def _model(name: str):
    """A shipped model by its file name (``gpt3-1.3b``) or its ``name`` (``GPT-3 1.3B``)."""
    from hetopt.catalog import instances_dir
    from hetopt.planner.setup.cluster import resolve
    from hetopt.workload import load_model

    folder = instances_dir() / "models"
    found = [cfg for cfg in map(load_model, sorted(folder.glob("*.toml"))) if cfg.name == name]
    return found[0] if found else load_model(resolve(name, folder, "model"))


def _with_model(doc: dict, cfg) -> dict:
    """``doc`` as a plan of ``cfg``: its name and shape, the last stage taking the layers that differ."""
    from hetopt.planfile import model_shape

    doc = json.loads(json.dumps(doc)) | {"model": cfg.name, "model_shape": model_shape(cfg)}
    doc["stages"][-1]["layers"] += cfg.layers - sum(s["layers"] for s in doc["stages"])
    return doc


def _arguments(text: str) -> list[list[str]]:
    """An args file's arguments, each as [name, value...], comments dropped."""
    words = shlex.split("\n".join(line for line in text.splitlines() if not line.startswith("#")))
    out: list[list[str]] = []
    for w in words:
        if w.startswith("--"):
            out.append([w])
        else:
            out[-1].append(w)
    return out


def _megatron(path: Path) -> dict[str, dict[str, str | None]]:
    """Each island file's arguments as name → value (None for a flag)."""
    out = {}
    for name, text in export_file(path, "megatron").files.items():
        if name.endswith(".args"):  # not launch.sh, hostfile, README.md of a one-job export
            out[name] = {a[0]: (a[1] if len(a) > 1 else None) for a in _arguments(text)}
    return out


# -- golden files --------------------------------------------------------------------------------


#: What a golden copy of a generated script is called: the script kept as data (README.md there).
EXPECTED_SUFFIX = ".expected"


def _golden_name(name: str) -> str:
    """The golden file of an exported file: ``launch.sh`` is kept as ``launch.sh.expected``."""
    return name + EXPECTED_SUFFIX if name.endswith(".sh") else name


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_golden(case: tuple[Path, str], tmp_path: Path) -> None:
    """The files and GAPS.txt are the committed ones (HETOPT_UPDATE_GOLDEN=1 rewrites them)."""
    path, target = case
    folder = GOLDEN / _case_id(case)
    out = export_file(path, target)
    written = {_golden_name(p.name): p.read_text() for p in write_output(out, tmp_path)}
    if os.environ.get("HETOPT_UPDATE_GOLDEN"):
        for old in folder.glob("*") if folder.is_dir() else []:
            old.unlink()
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in written.items():
            (folder / name).write_text(text, encoding="utf-8")
    expected = {p.name: p.read_text() for p in folder.iterdir()}
    assert written == expected


def test_every_target_has_golden_files() -> None:
    assert {t for _, t in CASES} == set(TARGETS)


# -- round trips through the runtimes' formats ---------------------------------------------------


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.stem)
def test_megatron_arguments_are_megatrons(path: Path) -> None:
    for name, args in _megatron(path).items():
        assert set(args) <= MEGATRON_ARGUMENTS, name
        for flag, allowed in MEGATRON_CHOICES.items():
            assert args.get(flag, next(iter(allowed))) in allowed


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.stem)
def test_megatron_batches_and_split_match_the_plan(path: Path) -> None:
    """micro-batch × data-parallel × micro-batches = global batch; the split gives the plan's stages."""
    doc = _doc(path)
    plan_split = [s["layers"] for s in doc["stages"]]
    for name, args in _megatron(path).items():
        # an island's file names its island; the one file of a one-job export holds every island's (same dp)
        island = next(s for s in doc["stages"] if name == "megatron.args"
                      or name.endswith(re.sub(r"[^A-Za-z0-9.+_-]", "_", s["island"]) + ".args"))
        dp = int(re.search(r"dp(\d+)", island["layout"]).group(1))
        assert int(args["--micro-batch-size"]) * dp * doc["microbatches"] == int(args["--global-batch-size"]) == doc["global_batch"]
        assert int(args["--pipeline-model-parallel-size"]) == len(plan_split)
        assert int(args["--num-layers"]) == sum(plan_split)
        if "--pipeline-model-parallel-layout" in args:
            # Megatron's reading: stages split by "|", t a decoder layer, E first and L last
            layout = args["--pipeline-model-parallel-layout"]
            assert layout.startswith("E") and layout.endswith("L")
            assert [stage.count("t") for stage in layout.split("|")] == plan_split
        elif "--decoder-first-pipeline-num-layers" in args:
            first, last = int(args["--decoder-first-pipeline-num-layers"]), int(args["--decoder-last-pipeline-num-layers"])
            middle = plan_split[1:-1]
            assert [first, *middle, last] == plan_split and len(set(middle)) <= 1
        else:
            assert len(set(plan_split)) == 1


def test_megatron_uses_the_first_last_form_when_it_is_enough() -> None:
    (args,) = _megatron(ONE).values()
    assert (args["--decoder-first-pipeline-num-layers"], args["--decoder-last-pipeline-num-layers"]) == ("13", "11")
    assert "--pipeline-model-parallel-layout" not in args


def test_megatron_island_files_carry_each_islands_own_layout() -> None:
    files = _megatron(C1)
    t4 = next(a for n, a in files.items() if "t4" in n)
    v100 = next(a for n, a in files.items() if "v100" in n)
    assert (t4["--tensor-model-parallel-size"], v100["--tensor-model-parallel-size"]) == ("4", "2")
    assert "--recompute-granularity" not in t4 and v100["--recompute-granularity"] == "selective"
    assert "--sequence-parallel" in t4 and "--sequence-parallel" in v100


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.stem)
def test_torchtitan_toml_parses_with_known_keys_and_matches_the_plan(path: Path) -> None:
    path = TITAN[path]
    doc = _doc(path)
    job = tomllib.loads(export_file(path, "torchtitan").files["torchtitan.toml"])
    for section, table in job.items():
        assert set(table) <= TORCHTITAN_KEYS[section], section
    for (section, key), allowed in TORCHTITAN_CHOICES.items():
        if key in job.get(section, {}):
            assert job[section][key] in allowed
    par, train = job["parallelism"], job["training"]
    stages = [s["layers"] for s in doc["stages"]]
    assert par["pipeline_parallel_degree"] == len(stages)
    dp = par["data_parallel_shard_degree"] * par["data_parallel_replicate_degree"]
    # torchtitan's train.py: gradient accumulation steps = global / (local x dp); a pipeline's micro-batches instead
    steps = doc["microbatches"] if len(stages) == 1 else 1
    assert train["local_batch_size"] * dp * steps == train["global_batch_size"] == doc["global_batch"]
    if len(stages) > 1:
        assert train["local_batch_size"] // par["pipeline_parallel_microbatch_size"] == doc["microbatches"]
        parts = par["module_fqns_per_model_part"]
        assert [sum(m.startswith("layers.") for m in part) for part in parts] == stages
        flat = [m for part in parts for m in part]
        assert flat == ["tok_embeddings", *(f"layers.{i}" for i in range(sum(stages))), "norm", "output"]


@pytest.mark.parametrize("path", [*PLANS, TINY, CEPHALO_A], ids=lambda p: p.stem)
def test_deepspeed_config_parses_with_known_keys_and_consistent_batch(path: Path) -> None:
    files = export_file(path, "deepspeed").files
    config = json.loads(files["ds_config.json"])
    assert set(config) <= DEEPSPEED_KEYS and set(config["zero_optimization"]) <= {"stage", "overlap_comm"}
    assert set(config.get("activation_checkpointing", {})) <= DEEPSPEED_ACTIVATION_CHECKPOINTING_KEYS
    side = json.loads(files["pipeline.json" if "pipeline.json" in files else "per_gpu_batch.json"])
    ranks = side["topology"]["num_dp"] if "topology" in side else len(side["gpus"])
    # DeepSpeed's own check: train_batch_size = micro-batch × accumulation × data-parallel ranks
    assert config["train_batch_size"] == config["train_micro_batch_size_per_gpu"] * config["gradient_accumulation_steps"] * ranks
    if "topology" in side:
        if side["num_stages"] > 1:
            assert config["zero_optimization"]["stage"] <= 1  # the pipeline engine refuses ZeRO-2/3
        bounds = side["decoder_layer_boundaries"]
        assert [b - a for a, b in zip(bounds, bounds[1:])] == [s["layers"] for s in _doc(path)["stages"]]
    else:
        assert config["zero_optimization"]["stage"] == 3
        assert [g["batch"] for g in side["gpus"]] == [g["batch"] for g in _doc(path)["solution"]["gpus"]]


@pytest.mark.parametrize("path", [TINY, CEPHALO_A, C2, MOE_EP, EP_CP, FSEP_OFFLOAD], ids=lambda p: p.stem)
def test_cephalo_config_has_cephalos_keys_and_the_allocation(path: Path) -> None:
    config = json.loads(export_file(path, "cephalo").files["cephalo_config.json"])
    assert set(config) <= CEPHALO_KEYS
    n = len(config["uneven_batch_sizes"])
    assert len(config["uneven_microbatches"]) == len(config["split_uneven_partitions"]) == n
    assert sum(config["split_uneven_partitions"]) == pytest.approx(1.0)
    doc = _doc(path)
    if "solution" in doc:
        gpus = doc["solution"]["gpus"]
        assert config["uneven_batch_sizes"] == [g["batch"] for g in gpus]
        assert config["uneven_microbatches"] == [g["microbatches"] for g in gpus]
        assert config["split_uneven_partitions"] == [g["state_share"] for g in gpus]
    else:
        assert sum(config["uneven_batch_sizes"]) == doc["global_batch"]


def test_cephalo_turns_on_accumulation_when_a_gpu_accumulates() -> None:
    config = json.loads(export_file(CEPHALO_A, "cephalo").files["cephalo_config.json"])
    assert config["ga"] is True and config["recompute_layer"] is False and config["split_uneven"] is True


# -- gaps ------------------------------------------------------------------------------------------


def test_gaps_are_one_line_each_and_written_to_gaps_txt(tmp_path: Path) -> None:
    out = export_file(C1, "megatron")
    assert out.gaps and all("\n" not in g and g for g in out.gaps)
    write_output(out, tmp_path)
    assert (tmp_path / GAPS_FILE).read_text().splitlines() == list(out.gaps)


def test_megatron_gaps_name_the_islands_that_differ() -> None:
    gaps = export_file(C1, "megatron").gaps
    tp = [g for g in gaps if g.startswith("tensor parallel size differs")]
    assert len(tp) == 1 and "tp4" in tp[0] and "tp2" in tp[0]
    assert any(g.startswith("recomputation differs") for g in gaps)
    assert not any(g.startswith("data-parallel size differs") for g in gaps)  # both dp2


def test_one_island_megatron_export_has_no_gaps() -> None:
    assert export_file(ONE, "megatron").gaps == ()


def test_torchtitan_names_a_model_it_ships() -> None:
    out = export(_with_model(_doc(C2), _model("llama-3-8b")), "torchtitan")
    assert tomllib.loads(out.files["torchtitan.toml"])["model"] == {"name": "llama3", "flavor": "8B"}
    assert not any(g.startswith("model:") for g in out.gaps + out.fill_in)


@pytest.mark.parametrize("path", [C2, ONE, MOE_EP, DENSE_CP, EP_CP], ids=lambda p: p.stem)
def test_torchtitan_refuses_a_model_it_does_not_ship(path: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Its job file without [model] trains torchtitan's debug model: the export stops, naming why (issue 40)."""
    name = _doc(path)["model"]
    for gaps in ([], ["--allow-gaps"]):
        code = cli.main(["export", str(path), "--to", "torchtitan", *gaps, "-o", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert f"model: torchtitan v0.2.2 ships no model of {name}'s shape" in err
    assert not (tmp_path / "out").exists()


def test_torchtitan_gaps_precision_on_gpus_without_bf16() -> None:
    out = export_file(TITAN[C1], "torchtitan")
    assert any(g.startswith("precision:") and "T4" in g and "V100" in g for g in out.gaps)
    assert tomllib.loads(out.files["torchtitan.toml"])["training"]["mixed_precision_param"] == "float32"


def test_deepspeed_allocation_gaps_uneven_batches_and_shares() -> None:
    gaps = export_file(TINY, "deepspeed").gaps
    assert any(g.startswith("uneven per-GPU batches (2×2, 8×1") for g in gaps)
    assert any(g.startswith("uneven state shares") for g in gaps)


def test_an_edited_plan_whose_stages_contradict_it_is_refused() -> None:
    """Found by fuzzing: a plan JSON edited to 1e9 layers exported ``--num-layers 1000000000``,
    and a stage on an island the plan does not have exported "0 x A100, 0 nodes"."""
    doc = _doc(C2)
    doc["stages"][-1]["layers"] += 1_000_000_000
    with pytest.raises(InputError, match=r"model_shape.layers: 24 but the stages hold 1000000024 layers"):
        export(doc, "megatron")
    doc = _doc(C2)
    doc["stages"][0]["island"] = "zzz"
    with pytest.raises(InputError, match=r"stages\[0\]\.island: 'zzz' is not one of the plan's islands"):
        export(doc, "megatron")


def test_a_plan_with_keys_taken_out_names_them() -> None:
    doc = _doc(C2)
    del doc["cluster"], doc["seq"]
    with pytest.raises(InputError, match=r"a plan without 'cluster', 'seq' \(the file was edited"):
        export(doc, "megatron")


def test_deepspeed_caps_zero_beside_pipelines_with_a_gap() -> None:
    doc = _doc(C2)
    for s in doc["stages"]:
        s["layout"] = s["layout"].replace("zero1", "zero3")
    out = export(doc, "deepspeed")
    assert json.loads(out.files["ds_config.json"])["zero_optimization"]["stage"] == 1
    assert any(g.startswith("ZeRO stage 3 with 8 pipeline stages") for g in out.gaps)


def test_a_model_of_ones_own_exports_from_the_plan_alone(tmp_path: Path) -> None:
    """A model given as a file: the plan carries its shape, so the export needs no --model."""
    from hetopt.workload import load_model

    model = tmp_path / "own.toml"
    model.write_text('name = "My Own 1B"\narchitecture = "llama"\nlayers = 24\nhidden = 1024\nheads = 16\nkv_heads = 4\n'
                     'ffn = 4096\nvocab = 32000\nsequence = 4096\n')
    source = tmp_path / "plan.json"
    source.write_text(json.dumps(_with_model(_doc(C2), load_model(model))))
    assert cli.main(["export", str(source), "--to", "megatron", "-o", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "megatron.args").read_text()  # C2's plan keeps Megatron-LM's rules: one job
    assert "--hidden-size 1024" in text and "--num-query-groups 4" in text and "--swiglu" in text
    assert not (tmp_path / "out" / GAPS_FILE).exists()  # the model's dimensions came from the plan: no gap


def test_export_takes_no_model_file(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:  # argparse's own usage error
        cli.main(["export", str(C2), "--to", "megatron", "--model", "gpt3-1.3b"])
    assert stop.value.code == 2 and "unrecognized arguments: --model" in capsys.readouterr().err


def test_megatron_model_arguments_of_moe_llama_and_vit_models() -> None:
    from hetopt.export.megatron import model_arguments

    find_model = _model

    gaps: list[str] = []
    mixtral = model_arguments(find_model("Mixtral-8x7B"), 4096, gaps)
    assert {"--num-experts 8", "--moe-router-topk 2", "--swiglu", "--group-query-attention"} <= set(mixtral)
    gshard = model_arguments(find_model("GShard MoE 2.4B (Alpa)"), 1024, gaps)
    # hetopt's MoE layers are the 2nd, 4th, ...: Megatron's list form, dense first
    assert "--moe-layer-freq ([0]*1+[1])*8" in gshard  # 16 layers
    assert sum(g.startswith("model: the plan prices no expert parallelism") for g in gaps) == 2
    model_arguments(find_model("ViT-G/14"), 256, gaps)
    assert gaps[-1].startswith("model: ViT-G/14 is a vision transformer")
    assert {a.split()[0] for a in mixtral + gshard} <= MEGATRON_ARGUMENTS


def test_megatron_virtual_stages() -> None:
    from hetopt.export.megatron import build
    from hetopt.export.source import Block, Layout, PlanView

    def plan(split: tuple[int, ...]) -> PlanView:
        block = Block("a", "A100", Layout(1, len(split), 1, 2, "none", 0, False), 0, split, 4, 1)
        return PlanView("c", "m", 8, 1, 8, 128, "OPTIMAL", (block,), None)

    files, gaps = build(plan((4, 4)), None)
    assert ["--num-virtual-stages-per-pipeline-rank", "2"] in _arguments(files["megatron-1-a.args"]) and gaps == []
    files, gaps = build(plan((3, 5)), None)
    names = {a[0] for a in _arguments(files["megatron-1-a.args"])}
    assert not names & {"--pipeline-model-parallel-layout", "--decoder-first-pipeline-num-layers"}
    assert len(gaps) == 1 and gaps[0].startswith("virtual pipeline stages 2 with an uneven split")


# -- the command line and bad input ---------------------------------------------------------------


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_writes_the_folder_and_prints_the_gaps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["export", str(C1), "--to", "deepspeed", "--allow-gaps", "-o", str(tmp_path / "ds")], capsys)
    assert code == 0
    assert sorted(p.name for p in (tmp_path / "ds").iterdir()) == [GAPS_FILE, "RUNNING.md", "ds_config.json", "pipeline.json"]
    gaps = (tmp_path / "ds" / GAPS_FILE).read_text().splitlines()
    assert err.splitlines() == [f"hetopt: gap: {g}" for g in gaps] and gaps


def test_cli_without_a_folder_prints_the_files(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["export", str(TITAN[ONE]), "--to", "torchtitan", "--allow-gaps"], capsys)
    assert code == 0 and out.startswith("==> torchtitan.toml <==\n")
    tomllib.loads(out.split("\n", 1)[1])


def _bad(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("make, target, expected", [
    (lambda d: _bad(d, "x.json", "not json {"), "megatron", "not JSON"),
    (lambda d: _bad(d, "x.json", "[1, 2]"), "megatron", "not a hetopt result"),
    (lambda d: _bad(d, "x.json", '{"hello": 1}'), "cephalo", "not a hetopt result"),
    (lambda d: _bad(d, "x.json", '{"results": [], "agree": true}'), "cephalo", "a crosscheck result"),
    (lambda d: _bad(d, "x.json", '{"problem": "islands", "status": "OPTIMAL", "solution": {}}'), "megatron",
     "an islands result cannot be exported to megatron"),
    (lambda d: _bad(d, "x.json", '{"problem": "pipeline", "status": "OPTIMAL", "solution": {}}'), "deepspeed",
     "a pipeline result cannot be exported to deepspeed"),
    (lambda d: str(TINY), "megatron", "an allocation result cannot be exported to megatron"),
    (lambda d: str(TINY), "torchtitan", "an allocation result cannot be exported to torchtitan"),
    (lambda d: str(INFEASIBLE), "cephalo", "no solution to export (status INFEASIBLE"),
    (lambda d: _bad(d, "x.json", json.dumps(_doc(C2) | {"status": "TIME_LIMIT", "stages": []})), "megatron",
     "no solution to export (status TIME_LIMIT"),
    (lambda d: _bad(d, "x.json", json.dumps(_doc(C2) | {"stages": [{"island": "a"}]})), "megatron", "stages[0].layers"),
    (lambda d: _bad(d, "x.json", json.dumps(_doc(C2) | {"alternatives": []})), "cephalo", "no solved cephalo-fsdp"),
    (lambda d: str(d / "missing.json"), "megatron", "no such file"),
    (lambda d: str(d), "megatron", "is a folder"),
])
def test_bad_input_exits_2_with_one_line(make, target, expected, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["export", make(tmp_path), "--to", target], capsys)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and expected in err and "Traceback" not in err


def test_unknown_target_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["export", str(C2), "--to", "jax"])
    assert exc.value.code == 2 and "invalid choice: 'jax'" in capsys.readouterr().err
    with pytest.raises(InputError, match="unknown target"):
        export(_doc(C2), "jax")


def test_output_folder_that_is_a_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    taken = _bad(tmp_path, "taken", "")
    code, _, err = _run(["export", str(C2), "--to", "megatron", "-o", taken], capsys)
    assert code == 2 and "exists and is not a folder" in err and len(err.splitlines()) == 1
    assert Path(taken).read_text() == ""


def test_cli_targets_are_the_libraries() -> None:
    assert tuple(TARGETS) == cli.EXPORT_TARGETS


def test_the_cli_imports_the_exporters_only_when_exporting() -> None:
    code = "import sys, hetopt.cli; print('hetopt.export' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


# -- the runtimes' own parsers (installed only by hand; skipped otherwise) -------------------------


@pytest.mark.runtime
def test_torchtitan_reads_the_job_file(tmp_path: Path) -> None:
    manager = pytest.importorskip("torchtitan.config.manager")
    if not hasattr(manager, "ConfigManager"):
        pytest.skip("this torchtitan has no TOML job files (0.2.x has)")
    write_output(export_file(TITAN[C2], "torchtitan"), tmp_path)
    job = manager.ConfigManager().parse_args(["--job.config_file", str(tmp_path / "torchtitan.toml")])
    assert job.parallelism.pipeline_parallel_degree == 8
    assert job.parallelism.module_fqns_per_model_part[0][0] == "tok_embeddings"


@pytest.mark.runtime
@pytest.mark.parametrize("stem", ["tangram-c2-llama-3-8b", "tangram-c3-llama-3-8b"])
def test_torchtitan_reads_the_one_job_file(stem: str, tmp_path: Path) -> None:
    manager = pytest.importorskip("torchtitan.config.manager")
    if not hasattr(manager, "ConfigManager"):
        pytest.skip("this torchtitan has no TOML job files (0.2.x has)")
    path = INPUTS / f"plan-{stem}-target-torchtitan.json"
    doc = json.loads(path.read_text())
    write_output(export_file(path, "torchtitan"), tmp_path)
    job = manager.ConfigManager().parse_args(["--job.config_file", str(tmp_path / "torchtitan.toml")])
    assert job.parallelism.pipeline_parallel_degree == len(doc["stages"])
    assert job.training.global_batch_size == doc["global_batch"]


#: Megatron-LM argument → Megatron-Core ``TransformerConfig`` field, as ``core_transformer_config_from_args``
#: copies them (names from core 0.16's transformer_config.py and model_parallel_config.py); the
#: others are training, data-parallel or model-builder arguments that the config does not hold.
MEGATRON_CORE_FIELDS = {
    "--num-layers": ("num_layers", int), "--hidden-size": ("hidden_size", int),
    "--num-attention-heads": ("num_attention_heads", int), "--ffn-hidden-size": ("ffn_hidden_size", int),
    "--kv-channels": ("kv_channels", int), "--num-query-groups": ("num_query_groups", int),
    "--tensor-model-parallel-size": ("tensor_model_parallel_size", int),
    "--pipeline-model-parallel-size": ("pipeline_model_parallel_size", int),
    "--context-parallel-size": ("context_parallel_size", int),
    "--expert-model-parallel-size": ("expert_model_parallel_size", int),
    "--expert-tensor-parallel-size": ("expert_tensor_parallel_size", int),
    "--num-experts": ("num_moe_experts", int), "--moe-router-topk": ("moe_router_topk", int),
    "--moe-ffn-hidden-size": ("moe_ffn_hidden_size", int),
    "--sequence-parallel": ("sequence_parallel", bool), "--bf16": ("bf16", bool), "--fp16": ("fp16", bool),
    "--recompute-granularity": ("recompute_granularity", str), "--recompute-method": ("recompute_method", str),
    "--recompute-num-layers": ("recompute_num_layers", int),
    "--decoder-first-pipeline-num-layers": ("num_layers_in_first_pipeline_stage", int),
    "--decoder-last-pipeline-num-layers": ("num_layers_in_last_pipeline_stage", int),
    "--pipeline-model-parallel-layout": ("pipeline_model_parallel_layout", str),
}


@pytest.mark.runtime
@pytest.mark.parametrize("path", [C2, C1, ONE, *(p for p, t in ONE_JOB if t == "megatron")], ids=lambda p: p.stem)
def test_megatron_core_accepts_the_transformer_config(path: Path) -> None:
    # Megatron-LM's own parser (megatron/training) is not on the package registry; Megatron-Core's
    # TransformerConfig is, and its __post_init__ checks what the arguments become (heads and TP,
    # the recomputation settings, the pipeline layout and the first/last stage layers against
    # the layers and stages)
    config = pytest.importorskip("megatron.core.transformer.transformer_config")
    for name, text in export_file(path, "megatron").files.items():
        if not name.endswith(".args"):
            continue
        kwargs = {}
        for arg in _arguments(text):
            if arg[0] in MEGATRON_CORE_FIELDS:
                field, kind = MEGATRON_CORE_FIELDS[arg[0]]
                kwargs[field] = True if kind is bool else kind(arg[1])
        if kwargs.get("bf16") or kwargs.get("fp16"):
            import torch
            # as Megatron-LM's arguments do: the parameters' and the pipeline's hand-over dtype
            kwargs["params_dtype"] = kwargs["pipeline_dtype"] = torch.bfloat16 if kwargs.get("bf16") else torch.float16
        cfg = config.TransformerConfig(**kwargs)
        assert cfg.num_layers == kwargs["num_layers"]


@pytest.mark.runtime
def test_deepspeed_reads_the_zero_section() -> None:
    zero = pytest.importorskip("deepspeed.runtime.zero.config")
    for path in (C2, TINY, INPUTS / "plan-tangram-c3-gpt3-13b-target-deepspeed.json"):
        config = json.loads(export_file(path, "deepspeed").files["ds_config.json"])
        assert int(zero.DeepSpeedZeroConfig(**config["zero_optimization"]).stage) == config["zero_optimization"]["stage"]


@pytest.mark.runtime
@pytest.mark.parametrize("path, world", [(C2, 16), (ONE, 8)], ids=["two-islands", "one-island"])
def test_megatron_parses_and_validates_the_arguments(path: Path, world: int, monkeypatch: pytest.MonkeyPatch) -> None:
    arguments = pytest.importorskip("megatron.training.arguments")
    doc = _doc(path)
    # the arguments a run adds to the export: data, tokenizer, optimizer, length
    extra = ["--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "50257", "--lr", "1e-4", "--train-iters", "10"]
    for text in export_file(path, "megatron").files.values():
        monkeypatch.setattr(sys, "argv", ["pretrain_gpt.py", *(w for a in _arguments(text) for w in a), *extra])
        args = arguments.parse_args(ignore_unknown_args=False)
        args.rank, args.world_size = 0, world
        arguments.validate_args(args)
        assert args.num_layers == sum(s["layers"] for s in doc["stages"])
        assert args.global_batch_size // (args.micro_batch_size * args.data_parallel_size) == doc["microbatches"]


def test_the_planners_own_layout_text_round_trips_through_the_export_reader() -> None:
    # the reader must take exactly what PartialPlan.layout writes, interleaved plans included
    from hetopt.export.source import parse_layout
    from hetopt.planner.parallelizer.protocol import PartialPlan

    for vpp in (1, 3):
        p = PartialPlan("a", "sig", 0, 8, "whole", 8, 4, 32, 32, 4, "selective", 1, True, (), 1.0, None, vpp=vpp)
        lay = parse_layout(p.layout, "p.json", "stages[0].")
        assert (lay.tp, lay.pp, lay.dp, lay.vpp, lay.recompute, lay.zero, lay.sequence_parallel) == (8, 4, 32, vpp, "selective", 1, True)


def test_deepspeed_says_it_cannot_interleave() -> None:
    from hetopt.export.deepspeed import _plan
    from hetopt.export.source import Block, Layout, PlanView

    block = Block("a", "A100", Layout(1, 2, 1, 2, "none", 0, False), 0, (4, 4), 4, 1)
    _, gaps = _plan(PlanView("c", "m", 8, 1, 8, 128, "OPTIMAL", (block,), None))
    assert any(g.startswith("virtual pipeline stages 2: DeepSpeed") for g in gaps)


# -- expert and context parallelism, activation offloading ------------------------------------------


def test_the_planners_ep_cp_offload_layout_text_round_trips_through_the_export_reader() -> None:
    # what the export once refused (ep, ep fsep, cp, offload) now reads into the Layout fields
    from hetopt.export.source import parse_layout
    from hetopt.planner.parallelizer.protocol import PartialPlan

    for ep, fsep, cp, offload in ((4, False, 1, False), (4, True, 1, False), (1, False, 2, True), (8, True, 2, True)):
        p = PartialPlan("a", "sig", 0, 8, "whole", 2, 2, 4, 8, 4, "none", 1, True, (), 1.0, None,
                        ep=ep, fsep=fsep, cp=cp, offload=offload)
        lay = parse_layout(p.layout, "p.json", "stages[0].")
        assert (lay.tp, lay.pp, lay.dp, lay.ep, lay.fsep, lay.cp, lay.offload) == (2, 2, 4, ep, fsep, cp, offload)
        assert lay.stage_gpus == 2 * cp * 4


@pytest.mark.parametrize("text", ["tp1 pp2 dp4 none zero1 ep4", "tp1 pp2 dp4 none zero1 ep4 fsep",
                                  "tp2 pp1 dp1 none zero0 sp cp2 offload"])
@pytest.mark.parametrize("target", ["megatron", "torchtitan", "deepspeed"])
def test_ep_cp_offload_layouts_export(text: str, target: str) -> None:
    doc = _doc(_for(MOE_EP, target))  # GShard MoE 2.4B: 16 layers, 16 experts (torchtitan: Qwen3-30B-A3B, 48 and 128)
    half = sum(s["layers"] for s in doc["stages"]) // 2
    doc["stages"] = [{"island": "a100-0+1", "gpu": "A100-PCIe-80GB", "first_layer": half * k, "layers": half,
                      "layout": text.replace("pp1", "pp2")} for k in range(2)]
    doc["global_batch"], doc["microbatch_size"], doc["microbatches"] = 16, 4, 4
    out = export(doc, target)
    assert out.files and all("\n" not in g for g in out.gaps)
    written = "".join(out.files.values()) + "\n".join(out.gaps)
    ep, cp = {"megatron": ("--expert-model-parallel-size 4", "--context-parallel-size 2"),
              "torchtitan": ("expert_parallel_degree = 4", "context_parallel_degree = 2"),
              "deepspeed": ('"ep_size_by_stage"', "context parallelism cp2 on a100-0+1")}[target]
    assert (ep in written) == ("ep4" in text) and (cp in written) == ("cp2" in text)
    assert ("fully sharded EP" in written) == ("fsep" in text) and ("activation offloading" in written) == ("offload" in text)


def test_megatron_world_size_is_tp_pp_cp_dp_and_fits_the_experts() -> None:
    """Megatron-LM's rules (arguments.py, parallel_state.initialize_model_parallel) on one-island exports."""
    from hetopt.parallelism.expert import expert_tp

    find_model = _model

    for path in (MOE_EP, DENSE_CP, FSEP_OFFLOAD):
        doc = _doc(path)
        (args,) = _megatron(path).values()
        tp, pp = int(args["--tensor-model-parallel-size"]), int(args["--pipeline-model-parallel-size"])
        cp, ep = int(args.get("--context-parallel-size", 1)), int(args.get("--expert-model-parallel-size", 1))
        world = sum(s["gpus"] for s in doc["stages"])  # the GPUs the plan uses
        assert world % (tp * pp * cp) == 0
        dp = world // (tp * pp * cp)  # Megatron-LM's data-parallel size
        assert f" dp{dp} " in doc["stages"][0]["layout"]
        assert int(args["--micro-batch-size"]) * dp * doc["microbatches"] == int(args["--global-batch-size"])
        etp = int(args.get("--expert-tensor-parallel-size", tp))
        assert etp == expert_tp(tp=tp, ep=ep, cp=cp, dp=dp)
        assert world % (etp * ep * pp) == 0
        if ep > 1:
            assert find_model(doc["model"]).experts % ep == 0 and int(args["--num-experts"]) % ep == 0
        if cp > 1:
            assert doc["seq"] % (2 * cp) == 0


def test_megatron_writes_ep_cp_and_folds_expert_tp_where_the_planner_does() -> None:
    (ep,) = _megatron(MOE_EP).values()
    assert ep["--expert-model-parallel-size"] == "4" and "--expert-tensor-parallel-size" not in ep  # etp = tp = 1
    (folded,) = _megatron(FSEP_OFFLOAD).values()  # ep4 over tp2 x dp2: experts whole, EP across the TP ranks
    assert folded["--expert-model-parallel-size"] == "4" and folded["--expert-tensor-parallel-size"] == "1"
    (cp,) = _megatron(DENSE_CP).values()
    assert cp["--context-parallel-size"] == "4" and "--expert-model-parallel-size" not in cp
    a100 = next(a for n, a in _megatron(EP_CP).items() if "a100" in n)
    assert (a100["--context-parallel-size"], a100["--expert-model-parallel-size"]) == ("4", "4")


def test_the_exports_ask_for_the_plans_precision() -> None:
    """A plan carries the precision it is priced in (``precision``; documents without it: the
    hardware's, bf16 unless a GPU has no BF16), and every export asks the runtime for it."""
    assert all("\n--bf16\n" in t and "--fp16" not in t for t in export_file(DENSE_CP, "megatron").files.values())
    assert all("\n--fp16\n" in t for t in export_file(C1, "megatron").files.values())  # T4s and V100s: no BF16
    fp16 = export(_running(_doc(DENSE_CP), precision="fp16"), "megatron")
    assert all("\n--fp16\n" in t and "--bf16" not in t for t in fp16.files.values())
    assert json.loads(export(_doc(ONE), "deepspeed").files["ds_config.json"])["bf16"] == {"enabled": True}
    assert "fp16" in json.loads(export(_running(_doc(ONE), precision="fp16"), "deepspeed").files["ds_config.json"])
    with pytest.raises(InputError, match=r"precision = 'fp8' must be bf16, fp16"):
        export(_running(_doc(ONE), precision="fp8"), "megatron")


def test_megatron_asks_for_bf16_with_expert_parallelism() -> None:
    for path in (MOE_EP, EP_CP):
        out = export_file(path, "megatron")  # bf16 plans: nothing to change
        assert all("\n--bf16\n" in t and "--fp16" not in t for t in out.files.values())
        assert not any(g.startswith("precision:") for g in out.gaps)
        assert not any("prices no expert parallelism" in g for g in out.gaps)
        out = export(_running(_doc(path), precision="fp16"), "megatron")  # an fp16 plan: Megatron-LM refuses fp16 with EP
        assert all("\n--bf16\n" in t and "--fp16" not in t for t in out.files.values())
        assert sum(g.startswith("precision: Megatron-LM refuses --fp16 with expert parallelism") for g in out.gaps) == 1


def test_megatron_offloads_with_fine_grained_offloading_and_gaps_fsep() -> None:
    out = export_file(FSEP_OFFLOAD, "megatron")
    (text,) = out.files.values()
    (modules,) = [a[1:] for a in _arguments(text) if a[0] == "--offload-modules"]
    assert set(modules) <= MEGATRON_OFFLOAD_MODULES and ("attn_proj" not in modules or "core_attn" in modules)
    assert "--fine-grained-activation-offloading" in text
    assert sum(g.startswith("fully sharded EP on a100-0+1: Megatron-LM has no FSEP") for g in out.gaps) == 1
    assert sum(g.startswith("activation offloading on a100-0+1: written as Megatron-Core's fine-grained") for g in out.gaps) == 1


def test_megatron_gaps_ep_and_cp_that_differ_by_island() -> None:
    gaps = export_file(EP_CP, "megatron").gaps
    assert any(g.startswith("expert parallel size differs by island (a100-0+1 ep4, h100nvl-0+3 ep1)") for g in gaps)
    assert any(g.startswith("context parallel size differs by island (a100-0+1 cp4, h100nvl-0+3 cp1)") for g in gaps)
    files = export_file(EP_CP, "megatron").files
    h100 = next(t for n, t in files.items() if "h100" in n)
    assert "on global ranks 8-15" in h100  # after the A100 island's tp1 x cp4 x dp2 = 8 GPUs


def test_torchtitan_mesh_holds_the_plans_ep_and_cp() -> None:
    """torchtitan v0.2.2 ParallelDims: world = replicate·shard·cp·tp·pp, EP inside shard·cp·tp, etp 1 or tp."""
    for path, ep, cp in ((MOE_EP, 4, 1), (DENSE_CP, 1, 4), (EP_CP, 4, 4), (FSEP_OFFLOAD, 4, 1)):
        path = TITAN[path]
        par = tomllib.loads(export_file(path, "torchtitan").files["torchtitan.toml"])["parallelism"]
        assert (par.get("expert_parallel_degree", 1), par.get("context_parallel_degree", 1)) == (ep, cp)
        tp, etp = par["tensor_parallel_degree"], par.get("expert_tensor_parallel_degree", 1)
        assert etp in (1, tp)
        assert (par["data_parallel_shard_degree"] * cp * tp) % (etp * ep) == 0
        first = _doc(path)["stages"][0]
        assert par["data_parallel_shard_degree"] * par["data_parallel_replicate_degree"] * cp * tp == first["gpus"]


def test_torchtitan_gaps_fsep_and_offloading() -> None:
    gaps = export_file(TITAN[FSEP_OFFLOAD], "torchtitan").gaps
    assert any(g.startswith("fully sharded EP on a100-0+1: torchtitan has no FSEP") for g in gaps)
    assert any(g.startswith("activation offloading on a100-0+1: torchtitan has none") for g in gaps)


def test_torchtitan_shards_replicas_so_ep_can_borrow_them() -> None:
    doc = _doc(TITAN[MOE_EP])
    doc["stages"][0]["layout"] = "tp1 pp1 dp8 none zero0 ep4"
    out = export(doc, "torchtitan")
    par = tomllib.loads(out.files["torchtitan.toml"])["parallelism"]
    assert (par["data_parallel_shard_degree"], par["data_parallel_replicate_degree"]) == (8, 1)
    assert any(g.startswith("expert parallel degree 4: torchtitan's EP takes its ranks from dp_shard") for g in out.gaps)


def test_deepspeed_writes_ep_in_the_model_notes_and_gaps_cp() -> None:
    out = export_file(MOE_EP, "deepspeed")
    moe = json.loads(out.files["pipeline.json"])["moe"]
    assert moe["ep_size_by_stage"] == [4] and (moe["num_experts"], moe["k"]) == (16, 2)
    assert moe["class"] == "deepspeed.moe.layer.MoE"
    assert any(g.startswith("expert parallelism ep4 on a100-0+1: not a ds_config key") for g in out.gaps)
    assert not any("cannot (re-plan)" in g for g in out.gaps)  # ep4 inside dp8, as DeepSpeed's groups
    folded = export_file(FSEP_OFFLOAD, "deepspeed").gaps  # ep4 across tp2 x dp2
    assert any("DeepSpeed's expert groups lie inside the dp2 data-parallel group" in g for g in folded)
    cp = export_file(DENSE_CP, "deepspeed")
    assert any(g.startswith("context parallelism cp4 on a100-0+1: DeepSpeed's sequence parallelism is Ulysses")
               for g in cp.gaps)
    assert "sequence_parallel_size" not in cp.files["ds_config.json"]


def test_deepspeed_offloads_only_activation_checkpoints() -> None:
    out = export_file(FSEP_OFFLOAD, "deepspeed")  # selective: checkpoints every layer
    assert json.loads(out.files["ds_config.json"])["activation_checkpointing"] == {"cpu_checkpointing": True}
    doc = _doc(FSEP_OFFLOAD)
    for s in doc["stages"]:
        s["layout"] = s["layout"].replace("selective", "none")
    out = export(doc, "deepspeed")
    assert "activation_checkpointing" not in json.loads(out.files["ds_config.json"])
    assert any(g.startswith("activation offloading without recomputation: DeepSpeed offloads only") for g in out.gaps)


def test_cephalo_says_the_export_is_the_fsdp_alternative_not_the_ep_cp_pipeline() -> None:
    gaps = export_file(EP_CP, "cephalo").gaps
    assert any(g.startswith("the composed plan uses expert/context parallelism or activation offloading "
                            "(a100-0+1 ep4 cp4)") for g in gaps)
    assert not any("composed plan" in g for g in export_file(C2, "cephalo").gaps)


@pytest.mark.parametrize("edit, expected", [
    (lambda s: s.update(ep=2), "stages[0].ep: 2 disagrees with the layout"),
    (lambda s: s.update(layout="tp1 pp1 dp8 none zero2 ep0"), "has ep0"),
    (lambda s: s.update(layout="tp1 pp1 dp8 none zero2 cp2 ep4"), "is not a planner layout"),
])
def test_bad_ep_cp_input_exits_2_with_one_line(edit, expected, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(MOE_EP)
    edit(doc["stages"][0])
    code, out, err = _run(["export", _bad(tmp_path, "x.json", json.dumps(doc)), "--to", "megatron"], capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and expected in err, err


def _one_island_variant(tmp_path: Path, **changes) -> Path:
    """The one-island GPT-3 1.3B plan with ``changes`` to its document (a hand-made variant)."""
    doc = json.loads(ONE.read_text(encoding="utf-8"))
    doc.update(changes)
    if "overlap" in changes or "grad_reduce_fp32" in changes:  # an earlier version's flat keys
        doc.pop("running", None)
    path = tmp_path / "variant.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _megatron_args(path: Path) -> tuple[list[str], tuple[str, ...]]:
    """The arguments of a one-island plan's Megatron-LM file, and the export's gaps."""
    result = export_file(path, "megatron")
    (text,) = [t for name, t in result.files.items() if name.endswith(".args")]
    return [line for line in text.splitlines() if not line.startswith("#")], result.gaps


def test_megatron_carries_how_the_plan_priced_its_data_parallel_traffic(tmp_path: Path) -> None:
    """Issue 26: the cost model prices overlapped data-parallel traffic (Megatron's default is
    off) and, where asked, an fp32 gradient reduction; the export says both."""
    args, _ = _megatron_args(ONE)  # priced overlapped (the planner's default), ZeRO-1 over dp4
    assert "--overlap-grad-reduce" in args and "--overlap-param-gather" in args
    assert "--accumulate-allreduce-grads-in-fp32" not in args
    running = json.loads(ONE.read_text(encoding="utf-8"))["running"]
    args, _ = _megatron_args(_one_island_variant(tmp_path, running=dict(running, overlap=False, grad_reduce="fp32")))
    assert "--overlap-grad-reduce" not in args and "--accumulate-allreduce-grads-in-fp32" in args
    ds = json.loads(export_file(_one_island_variant(tmp_path, running=dict(running, grad_reduce="fp32")),
                                "deepspeed").files["ds_config.json"])
    assert ds["fp32_allreduce"] is True  # DeepSpeed's own key (deepspeed/runtime/constants.py FP32_ALLREDUCE)
    with pytest.raises(InputError, match="overlap = 'yes' must be true or false"):
        export_file(_one_island_variant(tmp_path, running=dict(running, overlap="yes")), "megatron")


def test_a_plan_written_before_the_running_record_is_read_by_its_flat_keys(tmp_path: Path) -> None:
    """Plans written before ``running`` (issue 39) stated five settings as top-level keys; they
    are read for one release, with the same meaning, and the rest take their defaults."""
    args, _ = _megatron_args(_one_island_variant(tmp_path, overlap=False, grad_reduce_fp32=True))
    assert "--overlap-grad-reduce" not in args and "--accumulate-allreduce-grads-in-fp32" in args


def test_a_one_stage_zero3_plan_goes_to_megatron_as_fsdp2(tmp_path: Path) -> None:
    """Issue 26: a pp=1 ZeRO-3 plan was written as the distributed optimizer with a gap line;
    Megatron-LM has --use-torch-fsdp2, with what its validate_args requires of it."""
    stage = json.loads(ONE.read_text(encoding="utf-8"))["stages"][0]
    stage = dict(stage, first_layer=0, layers=24, layout="tp1 pp1 dp8 none zero3", gpus=8)
    args, gaps = _megatron_args(_one_island_variant(tmp_path, stages=[stage]))
    assert {"--use-torch-fsdp2", "--no-gradient-accumulation-fusion", "--ckpt-format torch_dist",
            "--untie-embeddings-and-output-weights", "--overlap-grad-reduce"} <= set(args)
    assert "--use-distributed-optimizer" not in args and "--overlap-param-gather" not in args
    assert any(g.startswith("FSDP2: Megatron-LM's --use-torch-fsdp2 needs --untie-embeddings") for g in gaps)
    assert not any("shards only the optimizer state" in g for g in gaps)
