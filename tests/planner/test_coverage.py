"""What the cost model was calibrated on, and the notice for a plan outside it (issue 25 part 4)."""

from __future__ import annotations

import json

from hetopt import cli
from hetopt.hardware import load_gpus
from hetopt.planner import plan
from hetopt.planner.evaluation.coverage import Coverage, calibration_coverage, outside_calibration

GPUS = load_gpus()


def test_the_coverage_is_read_from_the_shipped_calibration_sets():
    cov = calibration_coverage()
    # AMP's T4 nodes (50 Gb/s) and the DGX A100s of SC'21 (8 x 200 Gb/s); AMP's 1,024-token micro-batches
    assert 50.0 in cov.networks_gbps and 1600.0 in cov.networks_gbps
    assert cov.fewest_tokens == 1024


def test_each_regime_outside_is_named_once():
    cov = Coverage(networks_gbps=(50.0, 1600.0), fewest_tokens=1024)
    assert outside_calibration([GPUS["T4"], GPUS["A100-SXM4-80GB"]], [25.0, 100.0, 3200.0], [512, 2048], cov) == []
    notes = outside_calibration([GPUS["B200"], GPUS["B200"], GPUS["T4"]], [10.0, 10.0, 24.9], [511], cov)
    assert [n.split(":")[0] for n in notes] == ["B200", "network 10 Gb/s a node", "network 24.9 Gb/s a node",
                                                "micro-batches of 511 tokens per GPU"]


def test_a_plan_of_short_micro_batches_says_it_is_outside(capsys):
    p = plan("tangram-c2", "gpt3-1.3b", global_batch=16, seq=128, microbatch_size=1, alternatives=False)
    assert any(n.startswith("micro-batches of") for n in p.outside_calibration)
    assert cli.main(["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "16", "--seq", "128",
                     "--microbatch", "1", "--no-alternatives"]) == 0
    assert "outside the calibration" in capsys.readouterr().out


def test_validate_names_the_rows_outside(capsys):
    # the GH200 has no measured profile: every row of Sailor's GH200 set says so (its 800 Gb/s
    # network, a calibration set's own, is measured; BLOOM's 400 Gb/s is within 2x of it since)
    assert cli.main(["validate", "--file", "sailor-gh200", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows and all(any(n.startswith("GH200: no measured profile") for n in r["outside_calibration"]) for r in rows)
    assert 800.0 in calibration_coverage().networks_gbps


def test_the_gpus_of_sailors_runs_are_in_the_catalog_with_their_datasheet_figures_and_uncalibrated(tmp_path):
    """Issue 25: Sailor's validation runs use GH200, RTX 3090, RTX 2080 Ti and TITAN RTX; they
    could not be priced at all. Datasheet figures (whitepapers' FP16-tensor-with-FP32-accumulate
    rates, memory, bandwidth); no measured profile, so a plan on them says so."""
    from hetopt.hardware import gpu

    figures = {"GH200": (96, 989, 4000, True), "RTX-3090": (24, 71, 936, True), "RTX-2080-Ti": (11, 53.8, 616, False),
               "Titan-RTX": (24, 130.5, 672, False)}
    for name, (memory, tflops, bandwidth, bf16) in figures.items():
        g = GPUS[name]
        assert (g.memory_bytes / 2**30, g.training_flops / 1e12, g.memory_bandwidth / 1e9, g.bf16) == (memory, tflops, bandwidth, bf16)
        assert not g.calibrated
    assert gpu(GPUS, "RTX 3090").name == "RTX-3090" and gpu(GPUS, "TITAN RTX").name == "Titan-RTX"
    cluster = tmp_path / "rtx.toml"
    cluster.write_text('name = "rtx"\n[[node]]\nname = "n0"\ngpu = "RTX-3090"\ngpus = 4\n')
    p = plan(str(cluster), "gpt3-1.3b", global_batch=16, alternatives=False)
    assert p.status.has_solution and any(n.startswith("RTX-3090: no measured profile") for n in p.outside_calibration)
