"""Issue 27, the price of a plan (first part): GPU prices in the catalog and the cluster file, and
what an iteration of a plan costs on the GPUs of the islands it runs on."""

from __future__ import annotations

import pytest

import hetopt
from hetopt import cli
from hetopt.errors import InputError
from hetopt.hardware import load_gpus
from hetopt.planner.answer import SECONDS_PER_HOUR
from hetopt.planner.setup.cluster import load_cluster

CLUSTER = """
name = "priced"
[[node]]
name = "a"
gpu = "A100-SXM4-40GB"
gpus = 4
[[node]]
name = "t"
gpu = "T4"
gpus = 4
[network]
default_gbps = 50.0
[price]
usd_per_gpu_hour = { "T4" = 0.526 }
source = "a test's own figure"
"""


def test_every_catalog_price_names_its_source() -> None:
    priced = {name: g for name, g in load_gpus().items() if g.usd_per_hour is not None}
    assert {"A100-SXM4-40GB", "V100-SXM2-16GB", "GH200"} <= set(priced)
    assert {"T4", "V100-PCIe-16GB", "V100-SXM2-32GB", "A100-PCIe-80GB"} <= set(priced)  # Tangram's Azure VMs
    assert all(("Sailor" in g.price_source and "cf2c8e3" in g.price_source)
               or ("skypilot-catalog" in g.price_source and "098741e" in g.price_source) for g in priced.values())


def test_an_azure_price_is_the_vm_price_over_its_gpus() -> None:
    gpus = load_gpus()
    # the VM prices SkyPilot's catalog records for Azure eastus, on demand, over the VM's GPUs
    assert gpus["T4"].usd_per_hour == pytest.approx(4.352 / 4)
    assert gpus["V100-PCIe-16GB"].usd_per_hour == pytest.approx(12.24 / 4)
    assert gpus["V100-SXM2-32GB"].usd_per_hour == pytest.approx(22.032 / 8)
    assert gpus["A100-PCIe-80GB"].usd_per_hour == pytest.approx(14.692 / 4)


def test_a_cluster_file_gives_and_overrides_prices(tmp_path) -> None:
    path = tmp_path / "priced.toml"
    path.write_text(CLUSTER)
    assert load_cluster(path).prices == {"A100-SXM4-40GB": 3.673385, "T4": 0.526}
    path.write_text(CLUSTER.replace('"T4" = 0.526', '"T4" = 0.526, "A100-SXM4-40GB" = 2.0'))
    assert load_cluster(path).prices["A100-SXM4-40GB"] == 2.0


def test_the_plan_costs_its_time_on_the_gpus_of_the_islands_it_runs_on(tmp_path) -> None:
    path = tmp_path / "priced.toml"
    path.write_text(CLUSTER)
    p = hetopt.plan(path, "gpt3-1.3b", global_batch=32, microbatch_size=8, alternatives=False)
    held = {}
    for island in {s.island for s in p.stages}:  # a block holds its whole island
        spec = next(i for i in p.islands if i["name"] == island)
        held[spec["gpu"]] = held.get(spec["gpu"], 0) + spec["gpus"]
    rate = sum(n * {"A100-SXM4-40GB": 3.673385, "T4": 0.526}[t] for t, n in held.items())
    assert p.cost["usd_per_hour"] == pytest.approx(rate, rel=1e-12)
    assert p.cost["usd_per_iteration"] == pytest.approx(rate * p.iteration_time_s / SECONDS_PER_HOUR, rel=1e-12)
    assert p.cost["usd_per_million_tokens"] == pytest.approx(p.cost["usd_per_iteration"] / (32 * p.seq) * 1e6, rel=1e-12)
    assert p.cost["gpus"] == sum(held.values()) and p.cost["unpriced"] == []


def test_a_gpu_without_a_price_leaves_the_cost_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plan", "--cluster", "tangram-c2", "--model", "gpt3-1.3b", "--global-batch", "64",
                     "--microbatch-size", "8", "--no-alternatives", "--workers", "1"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("cost:"))
    # the A100-PCIe-80GB has a catalog price (Azure's); the H100 NVL has none
    assert line == "cost: not priced, no price for H100-NVL (give [price] usd_per_gpu_hour in the cluster file)"


@pytest.mark.parametrize("table, message", [
    ('usd_per_gpu_hour = { "H100-SXM5" = 3.0 }', "not a GPU type of this cluster's nodes"),
    ('usd_per_gpu_hour = { "T4" = -1 }', "must be a number of dollars"),
    ('usd_per_gpu_hour = { "T4" = true }', "must be a number of dollars"),
    ("dollars = 3", "give usd_per_gpu_hour"),
])
def test_a_bad_price_table_is_refused_by_key(table: str, message: str, tmp_path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(CLUSTER.split("[price]")[0] + "[price]\n" + table + "\n")
    with pytest.raises(InputError) as bad:
        load_cluster(path)
    assert str(bad.value).startswith(f"{path}: price") and message in str(bad.value)


def test_every_alternative_costs_its_time_on_the_gpus_it_holds(tmp_path) -> None:
    path = tmp_path / "priced.toml"
    path.write_text(CLUSTER)
    prices = {"A100-SXM4-40GB": 3.673385, "T4": 0.526}
    p = hetopt.plan(path, "gpt3-1.3b", global_batch=32, microbatch_size=8)
    priced = [a for a in p.alternatives if a.iteration_time_s]
    assert {a.name for a in priced} >= {"cephalo-fsdp", "single-island"}
    for a in priced:
        rate = sum(n * prices[t] for t, n in a.gpus_by_type.items())
        assert a.cost["usd_per_iteration"] == pytest.approx(rate * a.iteration_time_s / SECONDS_PER_HOUR, rel=1e-12)
    fsdp = next(a for a in priced if a.name == "cephalo-fsdp")
    assert fsdp.gpus_by_type == {"A100-SXM4-40GB": 4, "T4": 4}  # FSDP runs on every GPU of the composed islands
