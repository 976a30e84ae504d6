"""`--layout`: a given layout priced by the same cost model, beside the plan."""

from __future__ import annotations

import json

import pytest

from hetopt import cli
from hetopt.errors import InputError
from hetopt.planner.setup.cluster import load_cluster
from hetopt.planner.setup.layout import GivenLayout, parse_layout
from hetopt.planner.steps import plan
from hetopt.costmodel.running import Running
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: One DGX-like node of 8 A100-SXM4-80GB: a cluster that forms one island.
ONE_NODE = """name = "dgx-a100"
[[node]]
name = "n0"
gpu = "A100-SXM4-80GB"
gpus = 8
[network]
default_gbps = 1600.0
"""


@pytest.fixture
def dgx(tmp_path):
    path = tmp_path / "dgx.toml"
    path.write_text(ONE_NODE)
    return path


@pytest.mark.parametrize(("text", "message"), [
    ("pp=1 dp=2", "give tp"),  # dp may be left out (derived); tp and pp may not
    ("tp=8 pp=1 dp=1 vpp=0", "vpp=0: must be >= 1"),
    ("tp=8 pp=1 dp=1 overlap=maybe", "overlap=maybe: must be yes or no"),
    ("tp=8 pp=1 dp=1 zero=4", "zero=4: must be one of"),
    ("tp=8 pp=1 dp=1 recompute=some", "recompute=some: must be one of"),
    ("tp=8 pp=1 dp=1 xp=2", "unknown key 'xp'"),
    ("tp=eight pp=1 dp=1", "must be a whole number"),
    ("tp=0 pp=1 dp=1", "tp=0: must be >= 1"),
    ("tp8", "expected key=value"),
    ("tp=1 pp=1 dp=1 tp=2", "tp is given twice"),
    ("", "give tp, pp "),
    ("tp=1 pp=1 dp=8 zero=3 zero3gather=bucket", "zero3gather=bucket: must be layer or tensor"),
    ("tp=1 pp=1 dp=8 zero=1 zero3gather=tensor", "only ZeRO-3 gathers parameters"),
    ("tp=1 pp=1 dp=8 precision=fp8", "precision=fp8: must be bf16, fp16, fp32 or tf32"),
    ("tp=1 pp=1 dp=8 gradreduce=fp64", "gradreduce=fp64: must be half or fp32"),
])
def test_bad_layouts_are_named(text, message):
    with pytest.raises(InputError, match=message):
        parse_layout(text)


def test_a_layout_parses_in_any_order():
    assert parse_layout("zero=1 mbs=2 dp=4 pp=2 tp=1 recompute=selective") == GivenLayout(1, 2, 4, 2, "selective", 1)


def test_the_plan_never_loses_to_a_layout_in_its_search_space(dgx):
    # every layout below has mbs·dp a power of two ≤ 16 and an even split: the built-in
    # parallelizer enumerates it, so the exact composition can only match or beat it
    for text in ("tp=8 pp=1 dp=1 mbs=1", "tp=4 pp=2 dp=1 mbs=2 recompute=full", "tp=2 pp=2 dp=2 mbs=1 zero=1",
                 "tp=1 pp=1 dp=8 mbs=1 zero=3 recompute=selective", "tp=2 pp=2 vpp=3 dp=2 mbs=1",
                 "tp=1 pp=4 vpp=2 dp=2 mbs=2"):
        p = plan(dgx, "gpt3-1.3b", global_batch=64, alternatives=False, layout=text)
        g = p.given_layout
        assert g["fits"], (text, g["reason"])
        assert g["plan_speedup"] >= 1 - 1e-9, (text, g)


def test_cli_prints_and_carries_the_layout(dgx, capsys):
    assert cli.main(["plan", "--cluster", str(dgx), "--model", "gpt3-1.3b", "--global-batch", "64", "--no-alternatives",
                     "--workers", "1", "--layout", "tp=8 pp=1 dp=1 mbs=1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["given_layout"]["layout"] == "tp=8 pp=1 dp=1 mbs=1 recompute=none zero=0"
    assert doc["given_layout"]["plan_speedup"] >= 1 - 1e-9
    assert cli.main(["plan", "--cluster", str(dgx), "--model", "gpt3-1.3b", "--global-batch", "64", "--no-alternatives",
                     "--workers", "1", "--layout", "tp=8 pp=1 dp=1 mbs=1"]) == 0
    assert "your layout tp=8 pp=1 dp=1 mbs=1" in capsys.readouterr().out


@pytest.mark.parametrize(("text", "message"), [
    ("tp=16 pp=1 dp=1", "tp=16: exceeds the 8 GPUs of a node"),
    ("tp=8 pp=2 dp=1", "more GPUs than the 8"),
    ("tp=8 pp=1 dp=1 mbs=3", "must divide the global batch 64"),
    ("tp=3 pp=1 dp=1", "must divide the 8 GPUs of a node"),
    ("tp=8 pp=1 dp=1 sp=no tpoverlap=yes", "TP overlap needs sequence parallelism"),
])
def test_cli_refuses_a_layout_the_cluster_cannot_hold(dgx, capsys, text, message):
    code = cli.main(["plan", "--cluster", str(dgx), "--model", "gpt3-1.3b", "--global-batch", "64", "--no-alternatives",
                     "--workers", "1", "--layout", text])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_a_cluster_of_several_islands_is_refused():
    with pytest.raises(InputError, match="forms 2 islands"):
        plan(load_cluster("tangram-c2"), "gpt3-1.3b", global_batch=32, alternatives=False, layout="tp=1 pp=1 dp=1")


def test_a_layout_that_does_not_fit_says_why(dgx):
    # GPT-3 13B on one GPU of 80 GB: 18 bytes per parameter of training state alone is 230 GB
    p = plan(dgx, "gpt3-13b", global_batch=8, alternatives=False, layout="tp=1 pp=1 dp=1 mbs=1")
    assert not p.given_layout["fits"] and "does not fit in memory at mbs=1" in p.given_layout["reason"]
    # its time as if the memory were there is still given, apart from the plan's figures
    assert p.given_layout["iteration_time_s"] is None and p.given_layout["over_memory_iteration_time_s"] > 0


@pytest.mark.parametrize(("text", "message"), [
    ("tp=8 pp=1 dp=1 vpp=2", "interleaving needs pp >= 2"),
    ("tp=2 pp=4 dp=1 vpp=4", r"the 24 layers of GPT-3 1.3B give stages of 6 layers: vpp must divide 6 \(valid: 2, 3, 6\)"),
    ("tp=1 pp=5 dp=1 vpp=5", r"stages of 4 to 5 layers: vpp must divide 5 and be at most 4 \(valid: none\)"),
    ("tp=2 pp=4 dp=1 mbs=1 vpp=2", "multiple of pp=4"),
])
def test_an_impossible_interleaving_is_named(dgx, text, message):
    with pytest.raises(InputError, match=message):
        plan(dgx, "gpt3-1.3b", global_batch=6, alternatives=False, layout=text)


def test_interleaving_shrinks_the_bubble_by_v_and_costs_hand_overs(dgx):
    from hetopt.planner.setup.cluster import load_cluster
    from hetopt.planner.search.compose import island_specs
    from hetopt.planner.setup.layout import price_layout
    from hetopt.workload import load_model

    cl = load_cluster(dgx)
    (isl,) = island_specs(cl, [[0]])
    cfg = load_model(ROOT / "instances" / "models" / "gpt3-1.3b.toml")
    flat = price_layout(parse_layout("tp=1 pp=4 dp=1 mbs=1"), isl, cfg, global_batch=8).plan
    v2 = price_layout(parse_layout("tp=1 pp=4 vpp=2 dp=1 mbs=1"), isl, cfg, global_batch=8).plan
    assert v2.vpp == 2 and "vpp2" in v2.layout
    # by hand: T_v = M·max t' + (Σ t' − max t')/v, t' = t + (v − 1) hand-overs per stage
    raw = [s.time_s for s in flat.stages]
    t = [s.time_s for s in v2.stages]
    slow = max(range(4), key=lambda q: t[q])
    real = [t[q] if q == slow else 2 * t[q] for q in range(4)]
    assert all(r >= f for r, f in zip(real, raw))  # extra hand-overs only add
    assert v2.iteration_time_s == pytest.approx(8 * max(real) + (sum(real) - max(real)) / 2, rel=1e-12)
    assert v2.iteration_time_s < flat.iteration_time_s  # the bubble (Σ − max)·(1 − 1/v) outweighs 4 hand-overs here


def _own_layout(p):
    """The plan's composition written back as a per-island --layout (an island's stages are its pp)."""
    blocks: list[list] = []
    for st in p.stages:  # consecutive stages of one island are one block of pp stages
        if blocks and blocks[-1][0].island == st.island:
            blocks[-1].append(st)
        else:
            blocks.append([st])
    parts = []
    for block in blocks:
        st = block[0]
        tp, pp, dp, rc, z = st.layout.split()[:5]
        assert pp == f"pp{len(block)}" and len({s.layers for s in block}) == 1  # an even split, as --layout gives
        parts.append(f"{st.island}: layers={sum(s.layers for s in block)} tp={tp[2:]} pp={len(block)} dp={dp[2:]} "
                     f"mbs={p.microbatch_size // int(dp[2:])} recompute={rc} zero={z[4:]}")
    return "; ".join(parts)


def test_a_per_island_layout_is_priced_as_the_composition_prices_those_blocks():
    cl = load_cluster("cephalo-a")
    p = plan(cl, "gpt3-2.7b", global_batch=32, seq=512, alternatives=False)
    assert len({st.island for st in p.stages}) > 1
    q = plan(cl, "gpt3-2.7b", global_batch=32, seq=512, alternatives=False, layout=_own_layout(p))
    g = q.given_layout
    assert g["fits"] and g["microbatch_size"] == p.microbatch_size
    assert g["iteration_time_s"] == pytest.approx(p.iteration_time_s, rel=1e-12)
    assert g["plan_speedup"] == pytest.approx(1.0, rel=1e-12)
    # another split of the same islands is never faster than the plan: one layer moves between
    # the first and the last island, from whichever of the two has more than one
    parts = _own_layout(p).split("; ")
    counts = [int(x.partition(": ")[2].split()[0].removeprefix("layers=")) for x in parts]
    give, take = (len(parts) - 1, 0) if counts[-1] > 1 else (0, len(parts) - 1)
    assert counts[give] > 1
    for i, delta in ((give, -1), (take, +1)):
        parts[i] = parts[i].replace(f"layers={counts[i]} ", f"layers={counts[i] + delta} ", 1)
    other = "; ".join(parts)
    r = plan(cl, "gpt3-2.7b", global_batch=32, seq=512, alternatives=False, layout=other).given_layout
    assert not r["fits"] or r["iteration_time_s"] >= p.iteration_time_s


@pytest.mark.parametrize(("text", "message"), [
    (": layers=32 tp=1 pp=1 dp=2", "give the island first"),
    ("m1-l4: tp=1 pp=1 dp=2", "give the island's layer count once"),
    ("m1-l4: layers=32 tp=1 pp=2 dp=1 vpp=2", "interleaving is priced for a model on one island only"),
    ("m9: layers=32 tp=1 pp=1 dp=1", "m9: not an island of this cluster"),
    ("m1-l4: layers=16 tp=1 pp=1 dp=1; m1-l4: layers=16 tp=1 pp=1 dp=1", "m1-l4: given twice"),
    ("m1-l4: layers=16 tp=1 pp=1 dp=1; m1-a6000: layers=10 tp=1 pp=1 dp=1", "add up to 26, not the 32 layers"),
    ("m1-l4: layers=16 tp=1 pp=1 dp=2 mbs=1; m1-a6000: layers=16 tp=1 pp=1 dp=1 mbs=1", "must be the same micro-batch"),
    ("tp=1 pp=1 dp=1", "forms 5 islands"),
])
def test_bad_per_island_layouts_exit_2_with_the_reason(capsys, text, message):
    code = cli.main(["plan", "--cluster", "cephalo-a", "--model", "gpt3-2.7b", "--global-batch", "32", "--seq", "512",
                     "--no-alternatives", "--layout", text])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_zero3_per_tensor_pays_the_collective_latency_per_tensor_and_per_layer_once(tmp_path):
    """ZeRO-3 on 4 DGX nodes, nothing overlapped, no recomputation, one stage: per micro-batch
    the forward gathers once and the backward gathers and reduce-scatters once, so per tensor
    instead of per layer cuts each pass's bytes into more collectives, each priced as NCCL's tuner
    runs its size (its latency once a collective), the bytes on the wire the same, and the list
    collectives' copies of every gathered tensor and reduced gradient
    (two gathers and a reduce-scatter of all the model's parameters a micro-batch), a launch a
    rank piece."""
    from hetopt import costmodel as cm
    from hetopt.planner.search.compose import island_specs
    from hetopt.planner.setup.layout import price_layout
    from hetopt.workload import layer_parameters, load_model

    path = tmp_path / "four.toml"
    nodes = "".join(f'[[node]]\nname = "n{i}"\ngpu = "A100-SXM4-80GB"\ngpus = 8\n' for i in range(4))
    path.write_text(f'name = "dgx-a100-4"\n{nodes}[network]\ndefault_gbps = 1600.0\n')
    (isl,) = island_specs(load_cluster(path), [[0, 1, 2, 3]])
    assert isl.gpus == 32 and isl.nodes == 4
    cfg = load_model(ROOT / "instances" / "models" / "gpt3-1.3b.toml")
    text = "tp=1 pp=1 dp=32 mbs=1 zero=3 overlap=no"
    per_layer = price_layout(parse_layout(text), isl, cfg, global_batch=64).plan
    per_tensor = price_layout(parse_layout(text + " zero3gather=tensor"), isl, cfg, global_batch=64).plan
    microbatches = 64 // 32
    tensors = cfg.layers * cm.parameter_tensors(cfg)
    units = cfg.layers + 1 + (0 if cfg.tied_embeddings else 1)  # the layers, the embedding, the head
    gpu = isl.gpu
    params = cfg.layers * layer_parameters(cfg) + cm.input_embedding_parameters(cfg) + cm.head_parameters(cfg, with_embedding=True)
    # each of n collectives carries 1/n of the bytes at the algorithm and protocol NCCL's tuner
    # picks for that size, over the 4 nodes' network (the bytes the same either way)
    fab, w = cm.fabric(gpu, 32, 4), isl.inter_achieved

    def pieces(kind: str, n: int) -> float:
        return n * cm.collective_s(kind, 2 * params / n, w, fab)

    expected = microbatches * (2 * (pieces("allgather", tensors) - pieces("allgather", units))
                               + pieces("reducescatter", tensors) - pieces("reducescatter", units))
    assert expected > 0
    copies = microbatches * cm.zero3_tensor_copies_s(params, gpu, gathers=2, scatters=1)
    assert copies == pytest.approx(microbatches * 20 * params / gpu.memory_bandwidth)  # 6 bytes a gather, 8 a reduce-scatter
    expected += copies
    # and the list collectives copy every tensor's 32 rank pieces one launch at a time (issue 41)
    expected += microbatches * cm.list_copies_s(tensors * 32, gathers=2, scatters=1)
    assert per_tensor.iteration_time_s - per_layer.iteration_time_s == pytest.approx(expected, rel=1e-9)
    assert "zero3gather=tensor" in parse_layout(text + " zero3gather=tensor").text()


def test_the_plan_is_made_for_the_runtime_the_layout_names(dgx):
    """``flash=no overlap=no sp=no`` describe the user's framework: the plan is searched for the
    same runtime (it equals a plan with that parallelizer), so it runs there and is never slower."""
    from hetopt.planner.parallelizer.builtin import BuiltinParallelizer

    text = "tp=2 pp=2 dp=2 mbs=1 recompute=full zero=1 flash=no overlap=no sp=no"
    given = plan(dgx, "gpt3-1.3b", global_batch=16, alternatives=False, layout=text)
    same = plan(dgx, "gpt3-1.3b", global_batch=16, alternatives=False,
                parallelizer=BuiltinParallelizer(running=Running(flash=False, overlap=False, sequence_parallel=False)))
    default = plan(dgx, "gpt3-1.3b", global_batch=16, alternatives=False)
    assert given.iteration_time_s == same.iteration_time_s and given.stages == same.stages
    assert given.iteration_time_s > default.iteration_time_s  # stored scores and exposed traffic cost time
    assert given.given_layout["fits"] and given.given_layout["plan_speedup"] >= 1.0


def test_islands_layouts_that_name_two_runtimes_are_refused():
    cl = load_cluster("cephalo-a")
    p = plan(cl, "gpt3-2.7b", global_batch=32, seq=512, alternatives=False)
    parts = _own_layout(p).split("; ")
    parts[0] += " flash=no"
    with pytest.raises(InputError, match="run differently"):
        plan(cl, "gpt3-2.7b", global_batch=32, seq=512, alternatives=False, layout="; ".join(parts))


def test_fp16_keeps_two_bytes_a_parameter_more_than_bf16(dgx):
    """Megatron's mixed precision: bf16 with fp32 main gradients 18 bytes a parameter, fp16 20
    (Megatron-LM's distributed-optimizer table); the precision changes memory, not time."""
    assert parse_layout("tp=2 pp=1 dp=4 precision=FP16").running.precision == "fp16"
    assert parse_layout("tp=2 pp=1 dp=4 precision=fp16").text().endswith("precision=fp16")
    assert "precision" not in parse_layout("tp=2 pp=1 dp=4 precision=bf16").text()
    bf16 = plan(dgx, "gpt3-1.3b", global_batch=8, alternatives=False, layout="tp=2 pp=1 dp=4 mbs=1")
    fp16 = plan(dgx, "gpt3-1.3b", global_batch=8, alternatives=False, layout="tp=2 pp=1 dp=4 mbs=1 precision=fp16")
    a, b = bf16.given_layout, fp16.given_layout
    assert a["iteration_time_s"] == b["iteration_time_s"]
    from hetopt.workload import load_model, parameters
    params = parameters(load_model(ROOT / "instances" / "models" / "gpt3-1.3b.toml"))
    assert (b["peak_memory_gib"] - a["peak_memory_gib"]) * 2**30 == pytest.approx(2 * params / 2, rel=1e-9)


#: One node of 8 V100-SXM2-32GB (Volta: no BF16 arithmetic).
V100_NODE = ONE_NODE.replace("A100-SXM4-80GB", "V100-SXM2-32GB").replace('"dgx-a100"', '"dgx1-v100"')


def test_a_gpu_without_bf16_trains_in_fp16_and_refuses_bf16(tmp_path, capsys):
    """True to hardware: Volta, Turing and Pascal parts have no BF16, so a plan on them keeps
    fp16's 20 bytes of state a parameter, and asking for bf16 there exits 2 with the reason."""
    v100 = tmp_path / "v100.toml"
    v100.write_text(V100_NODE)
    unstated = plan(v100, "gpt3-1.3b", global_batch=8, alternatives=False, layout="tp=2 pp=1 dp=4 mbs=1")
    fp16 = plan(v100, "gpt3-1.3b", global_batch=8, alternatives=False, layout="tp=2 pp=1 dp=4 mbs=1 precision=fp16")
    assert unstated.given_layout == fp16.given_layout and unstated.given_layout["layout"].endswith("precision=fp16")
    assert [s.memory_gib for s in unstated.stages] == [s.memory_gib for s in fp16.stages]
    for flag in (["--layout", "tp=2 pp=1 dp=4 mbs=1 precision=bf16"], ["--runtime", "precision=bf16"]):
        assert cli.main(["plan", "--cluster", str(v100), "--model", "gpt3-1.3b", "--global-batch", "8", "--no-alternatives",
                         "--workers", "1", *flag]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "precision=bf16: the V100-SXM2-32GB has no BF16 arithmetic (use precision=fp16)" in err
    with pytest.raises(InputError, match="parallelizer precision=bf16"):
        from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
        plan(v100, "gpt3-1.3b", global_batch=8, alternatives=False, parallelizer=BuiltinParallelizer(running=Running(precision="bf16")))


def test_a_cluster_with_one_gpu_type_without_bf16_trains_all_of_it_in_fp16():
    """One job, one precision: tangram-c3 (T4 and V100 beside A100s) plans every island in fp16."""
    from hetopt import costmodel as cm
    c3 = load_cluster("tangram-c3")
    assert cm.hardware_precision(c3.gpu_types) == "fp16"
    assert cm.hardware_precision([t for t in c3.gpu_types if t.bf16]) == "bf16"


def test_the_precision_follows_the_islands_the_plan_composes(tmp_path, capsys):
    """bf16 is refused only where a GPU without BF16 takes part: with --max-islands 1 the T4
    island is left out of the composition, so the A100s may (and by default do) train in bf16."""
    mixed = tmp_path / "mixed.toml"
    mixed.write_text(ONE_NODE.replace('"dgx-a100"', '"a100-and-t4"') + '[[node]]\nname = "t0"\ngpu = "T4"\ngpus = 4\n')
    args = ["plan", "--cluster", str(mixed), "--model", "gpt3-1.3b", "--global-batch", "8", "--no-alternatives", "--workers", "1",
            "--runtime", "precision=bf16"]
    assert cli.main(args) == 2
    assert "the T4 has no BF16 arithmetic" in capsys.readouterr().err
    assert cli.main(args + ["--max-islands", "1"]) == 0
    capsys.readouterr()
