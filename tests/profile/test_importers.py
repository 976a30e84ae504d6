"""The three importers: nccl-tests on the shipped real sample, Sailor's and Metis's formats (real files when a
Sailor checkout is named by HETOPT_SAILOR), one-line errors on bad files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hetopt.catalog import instances_dir
from hetopt.cli import main
from hetopt.errors import InputError
from hetopt.profile.format import read_profile
from hetopt.profile.importers import import_metis, import_nccl_tests, import_sailor, parse_nccl_tests
from hetopt.workload import load_model

SAMPLE = instances_dir() / "profiles" / "nccl-tests" / "all_reduce_perf-a100-sxm4-40gb-8gpus.log"
SAILOR = os.environ.get("HETOPT_SAILOR")  # a checkout of github:eth-easl/sailor at cf2c8e3 (not shipped)


def test_nccl_tests_sample(tmp_path):
    p = import_nccl_tests([str(SAMPLE)], gpu="A100-SXM4-40GB", scope="intra")
    rows = p.collectives
    assert {(r.op, r.ranks, r.scope, r.gpu) for r in rows} == {("all_reduce", 8, "intra", "A100-SXM4-40GB")}
    by_size = {r.nbytes: r.time_s for r in rows}
    assert len(rows) == 32 and 0.0 not in by_size  # the two 0-byte rows left out
    assert by_size[4.0] == pytest.approx(34.73e-6) and by_size[8589934592.0] == pytest.approx(63896e-6)
    out = tmp_path / "a100.toml"
    assert main(["profile", "import", "nccl-tests", str(SAMPLE), "--gpu", "A100-SXM4-40GB", "--out", str(out)]) == 0
    assert read_profile(out).collectives == rows


def test_nccl_tests_bad_files(tmp_path):
    with pytest.raises(InputError, match="which nccl-tests binary"):
        parse_nccl_tests(SAMPLE.read_text(), "output.txt", gpu="x")
    with pytest.raises(InputError, match="no nccl-tests table"):
        parse_nccl_tests("# Collective test starting: all_gather_perf\n#  Rank  0\n#  Rank  1\n", "x", gpu="x")


def test_profile_help_names_the_three_importers(capsys):
    with pytest.raises(SystemExit):
        main(["profile", "import", "--help"])
    text = capsys.readouterr().out
    assert all(name in text for name in ("nccl-tests", "sailor", "metis"))


def _sailor_file(path: Path, layers: int, mbs=(1, 2), tps=(1, 2)) -> Path:
    data = {str(b): {str(t): {str(i): [0.01 * b / t, 0.02 * b / t, 0.001 / t] for i in range(layers + 2)} for t in tps}
            for b in mbs}
    path.write_text(json.dumps(data))
    return path


def test_sailor_format(tmp_path):
    cfg = load_model(instances_dir() / "models" / "opt-350m.toml")
    f = _sailor_file(tmp_path / "profile.json", cfg.layers)
    p = import_sailor([str(f)], gpu="RTX-3090", model="opt-350m")
    assert len(p.layers) == 2 * 2 * 3 and all(r.includes == ("tp_collectives",) for r in p.layers)
    row = next(r for r in p.layers if r.part == "layer" and r.tp == 2 and r.microbatch == 2)
    assert (row.forward_s, row.backward_s, row.seq, row.precision) == (0.01, 0.02, 2048, "fp32")
    assert p.optimizer  # the update times by per-GPU parameter count
    wrong = _sailor_file(tmp_path / "w" / "profile.json", 10) if (tmp_path / "w").mkdir() is None else None
    with pytest.raises(InputError, match="is --model the model Sailor profiled"):
        import_sailor([str(wrong)], gpu="RTX-3090", model="opt-350m")
    with pytest.raises(InputError, match="needs --model"):
        import_sailor([str(f)], gpu="RTX-3090")


def test_metis_format(tmp_path):
    cfg = load_model(instances_dir() / "models" / "opt-350m.toml")
    n = cfg.layers + 2
    doc = {"model": {"parameters": {"total_parameters_bytes": 4 * 3.5e8}},
           "execution_time": {"layer_compute_total_ms": [3.0] * n, "optimizer_time_ms": 60.0},
           "execution_memory": {"layer_memory_total_mb": [100.0] * n}}
    (tmp_path / "DeviceType.A100_tp2_bs4.json").write_text(json.dumps(doc))
    p = import_metis([str(tmp_path)], gpu="A100-SXM4-40GB", model="opt-350m")
    layer = next(r for r in p.layers if r.part == "layer")
    assert (layer.tp, layer.microbatch) == (2, 4)
    assert layer.forward_s == pytest.approx(1e-3) and layer.backward_s == pytest.approx(2e-3)  # the 1 : 2 split
    assert p.optimizer[0].parameters == pytest.approx(3.5e8 / 2) and p.optimizer[0].step_s == pytest.approx(0.06)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(InputError, match="not a Metis profile name"):
        import_metis([str(tmp_path / "bad.json")], gpu="x", model="opt-350m")


@pytest.mark.skipif(not SAILOR, reason="set HETOPT_SAILOR to a checkout of github:eth-easl/sailor (cf2c8e3): its "
                    "profiles are not shipped")
def test_real_sailor_and_metis_profiles():
    root = Path(SAILOR) / "sailor" / "Planner"
    p = import_sailor([str(root / "sailor_planner/profiles/OPT-350/RTX-3090/profile.json")], gpu="RTX-3090", model="opt-350m")
    assert {r.tp for r in p.layers} == {1, 2, 4, 8}
    m = import_metis([str(root / "baselines/Metis/profiles/OPT-350/RTX-3090")], gpu="RTX-3090", model="opt-350m")
    assert m.layers and m.optimizer
