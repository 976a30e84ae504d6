"""``hetopt profile`` for real on the CPU (a tiny GPT, gloo with 2 processes), and plan --profile on what it wrote."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hetopt.cli import main
from hetopt.profile.format import read_profile
from hetopt.profile.measured import Measured

torch = pytest.importorskip("torch", reason="hetopt profile measures with torch (pip install 'hetopt[runtimes]')")

TINY = """name = "tiny-gpt"
architecture = "gpt"
layers = 2
hidden = 64
heads = 4
ffn = 256
vocab = 512
sequence = 32
"""
CLUSTER = """name = "one-t4"
[[node]]
name = "n0"
gpu = "T4"
gpus = 1
"""
#: the settings measured: small enough for a few seconds on two shared cores
ARGS = ["--gpu", "T4", "--microbatch", "1,2", "--tp", "1", "--recompute", "none", "--sizes", "4KiB,64KiB",
        "--parameters", "100000,1000000", "--repeats", "2", "--warmup", "1", "--ranks", "2"]


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One real run of ``hetopt profile``: the folder, the model file and the profile written."""
    d = tmp_path_factory.mktemp("profile")
    (d / "tiny.toml").write_text(TINY)
    (d / "cluster.toml").write_text(CLUSTER)
    out = d / "tiny-profile.toml"
    assert main(["profile", "--model", str(d / "tiny.toml"), "--out", str(out), *ARGS]) == 0
    return d, out


def test_profile_writes_a_valid_profile(measured):
    _, out = measured
    p = read_profile(out)
    parts = {(r.part, r.microbatch) for r in p.layers}
    assert parts == {(part, b) for part in ("layer", "embedding", "head") for b in (1, 2)}
    assert all(r.forward_s > 0 and r.backward_s > 0 and r.gpu == "T4" and r.model == "tiny-gpt" for r in p.layers)
    ops = {(r.op, r.ranks, r.scope) for r in p.collectives}
    assert ops == {(op, 2, "intra") for op in ("all_reduce", "all_gather", "reduce_scatter", "send_recv", "all_to_all")}
    assert len(p.collectives) == 10 and len(p.optimizer) == 2 and len(p.hosts) == 1
    assert p.provenance.torch == torch.__version__ and p.provenance.backend == "gloo"


def test_rerun_resumes(measured, capsys):
    d, out = measured
    before = out.read_text()
    assert main(["profile", "--model", str(d / "tiny.toml"), "--out", str(out), *ARGS]) == 0
    assert out.read_text() == before  # nothing measured twice
    assert "0 rows measured" in capsys.readouterr().out


def test_dry_run_lists_and_refuses(measured, capsys, tmp_path):
    d, out = measured
    assert main(["profile", "--model", str(d / "tiny.toml"), "--out", str(tmp_path / "new.toml"), *ARGS,
                 "--microbatch", "1,4096", "--memory-gib", "0.6", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.strip().startswith("measure") and "layer tp1 b1 " in line for line in lines)
    assert any(line.strip().startswith("refused") and "layer tp1 b4096 " in line for line in lines)
    assert not (tmp_path / "new.toml").exists()  # a dry run measures and writes nothing


def test_plan_prices_a_stage_as_the_sum_of_its_measured_parts(measured, capsys):
    """One stage holding the whole tiny model on one GPU: its time per micro-batch is the
    embedding's, two layers' and the head's measured forward and backward, plus the optimizer
    step (linear between the two measured counts) over the M micro-batches, held to the host's
    measured floor."""
    d, out = measured
    code = main(["plan", "--cluster", str(d / "cluster.toml"), "--model", str(d / "tiny.toml"), "--global-batch", "4",
                 "--microbatch-size", "2", "--runtime", "precision=fp32 recompute=none zero=0", "--profile", str(out), "--no-alternatives",
                 "--workers", "1", "--json"])
    assert code == 0
    plan = json.loads(capsys.readouterr().out)
    p = read_profile(out)
    m = Measured.of(p)

    def part(name):
        return next(r for r in p.layers if r.part == name and r.microbatch == 2)

    from hetopt import costmodel as cm
    from hetopt.workload import load_model
    cfg = load_model(d / "tiny.toml")
    params = cm.input_embedding_parameters(cfg) + 2 * cm.layer_parameters(cfg, 0) + cm.head_parameters(cfg, with_embedding=False)
    step = m.optimizer_s("T4", "fp32", params)
    assert step is not None  # between the 1e5 and 1e6 measured
    host_f, host_b = p.hosts[0].forward_s, p.hosts[0].backward_s
    forward = max(part("embedding").forward_s + 2 * part("layer").forward_s + part("head").forward_s, 2 * host_f)
    backward = max(part("embedding").backward_s + 2 * part("layer").backward_s + part("head").backward_s, 2 * host_b)
    stages = plan["stages"]
    assert len(stages) == 1 and stages[0]["layers"] == 2
    assert stages[0]["time_s"] == pytest.approx(forward + backward + step / 2, rel=1e-9)
    taken = plan["priced_from"]["stages"][0]["profile"]
    assert {"compute", "optimizer"} <= set(taken)


def test_without_torch_the_message_names_the_extra(tmp_path):
    """torch stays optional: import hetopt and other commands work without it, hetopt profile says what to install."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "import hetopt, hetopt.cli, hetopt.profile\n"
            "from hetopt.cli import main\n"
            f"sys.exit(main(['profile', '--model', 'opt-350m', '--out', r'{tmp_path / 'x.toml'}', '--device', 'cpu']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "pip install 'hetopt[runtimes]'" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here: the GPU path (CUDA kernels, NCCL between "
                    "the local GPUs) is the same code as the CPU path above, run with --device cuda")
def test_profile_on_a_gpu(tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY)
    out = tmp_path / "gpu.toml"
    ranks = min(2, torch.cuda.device_count())
    args = ["--gpu", "gpu", "--microbatch", "1,2", "--sizes", "4KiB", "--parameters", "100000", "--repeats", "2",
            "--warmup", "1", "--device", "cuda", "--ranks", str(max(2, ranks))]
    if ranks < 2:
        args += ["--collectives", "all_reduce"]
        pytest.skip("one GPU: NCCL collectives need two")
    assert main(["profile", "--model", str(tmp_path / "tiny.toml"), "--out", str(out), *args]) == 0
    p = read_profile(out)
    assert p.provenance.backend == "nccl" and p.provenance.cuda and all(r.peak_bytes for r in p.layers)


def test_a_stop_keeps_the_rows_measured_and_a_rerun_resumes(tmp_path):
    """Ctrl-C (a requested stop) ends the run after the setting being measured; its rows stay, and
    the same run again measures only the rest."""
    from hetopt.interrupt import request_stop, stop_on_interrupt
    from hetopt.profile.measure import Options, run, settings
    from hetopt.workload import ModelConfig

    tiny = ModelConfig("tiny-gpt", "gpt", 2, 64, 4, 256, 512, 32)
    o = Options(model=tiny, gpu="T4", microbatches=(1, 2), recompute=("none",), collectives=("all_reduce",),
                sizes=(4096,), parameters=(100000,), repeats=1, warmup=0, host=False)
    out = tmp_path / "p.toml"

    def stop_after_two(done, total, label):
        if done == 1:  # Ctrl-C while the second setting is measured: it is finished and kept
            request_stop()

    with stop_on_interrupt():
        first = run(o, out, on_step=stop_after_two)
    assert first.stopped and first.written == 2 and read_profile(out).rows == 2
    second = run(o, out)
    assert not second.stopped and second.skipped == 2 and read_profile(out).rows == len(settings(o))
