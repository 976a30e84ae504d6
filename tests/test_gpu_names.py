"""Issue 40, part 5: a GPU name that matches several catalog entries is refused, listing them.

``V100-32GB`` was read as the SXM2 part although the PCIe part exists, and the plan changed (TP 8
over NVLink). A spelling that names one entry is still accepted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hetopt import cli
from hetopt.errors import InputError
from hetopt.hardware import gpu, load_gpus
from hetopt.planner.cluster import load_cluster

CATALOG = load_gpus()


@pytest.mark.parametrize("name, candidates", [
    ("V100-32GB", ["V100-PCIe-32GB", "V100-SXM2-32GB"]),
    ("V100 16GB", ["V100-PCIe-16GB", "V100-SXM2-16GB"]),
    ("A100-80GB", ["A100-PCIe-80GB", "A100-SXM4-80GB"]),
    ("NVIDIA A100 40GB", ["A100-PCIe-40GB", "A100-SXM4-40GB"]),
    ("H100 80GB", ["H100-PCIe", "H100-SXM5"]),
])
def test_an_ambiguous_name_is_refused_with_its_candidates(name: str, candidates: list[str]) -> None:
    with pytest.raises(InputError) as err:
        gpu(CATALOG, name, where="c.toml: node[0].gpu")
    assert str(err.value) == (f"c.toml: node[0].gpu: ambiguous GPU type {name!r}: it matches {', '.join(candidates)} "
                              "(give one of them)")


@pytest.mark.parametrize("name, entry", [
    ("V100-SXM2-32GB", "V100-SXM2-32GB"), ("Tesla V100 SXM2 32GB", "V100-SXM2-32GB"), ("V100-PCIE-32GB", "V100-PCIe-32GB"),
    ("A100 SXM4 80GB", "A100-SXM4-80GB"), ("a100-80gb-pcie", "A100-PCIe-80GB"), ("H100 NVL", "H100-NVL"), ("t4", "T4"),
    ("NVIDIA H800 80GB HBM3", "H800-SXM5"),
])
def test_a_unique_spelling_is_still_accepted(name: str, entry: str) -> None:
    assert gpu(CATALOG, name).name == entry


def _cluster(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(f'name = "c"\n[[node]]\nname = "n0"\ngpu = "{name}"\ngpus = 8\n')
    return path


def test_a_cluster_file_with_an_ambiguous_gpu_exits_2_naming_the_node(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = _cluster(tmp_path, "V100-32GB")
    code = cli.main(["plan", "--cluster", str(path), "--model", "gpt3-1.3b", "--global-batch", "8"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"{path}: node[0].gpu: ambiguous GPU type 'V100-32GB': it matches V100-PCIe-32GB, V100-SXM2-32GB" in err
    assert load_cluster(_cluster(tmp_path, "V100 SXM2 32GB")).gpu_types[0].name == "V100-SXM2-32GB"
