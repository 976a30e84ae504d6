"""The planner's cluster files (``instances/clusters/*.toml``), written from the islands
family's instance builders so that both describe the same machines and networks.

A cluster file is the islands instance without ``problem``, its nodes naming a GPU type of
``instances/gpus.toml`` instead of carrying the figures (the catalog supplies them; a test
checks the islands builders use the catalog's figures). The synthetic clusters keep each
node's profiled ``tflops`` (their point is node-to-node variation). ``hetopt generate
clusters`` rewrites them; a test checks the committed files are its output.
"""

from __future__ import annotations

from pathlib import Path

from hetopt.generate.toml import dumps
from hetopt.islands import generate as islands

#: cluster file name -> (islands builder, GPU label -> catalog name, keep per-node figures)
CLUSTERS = {
    "tangram-c1": (islands.tangram_c1, {"T4": "T4", "V100-16GB": "V100-PCIe-16GB"}, False),
    "tangram-c2": (islands.tangram_c2, {"A100-80GB": "A100-PCIe-80GB", "H100-NVL": "H100-NVL"}, False),
    "tangram-c3": (islands.tangram_c3, {"T4": "T4", "V100-16GB": "V100-PCIe-16GB", "V100-32GB": "V100-SXM2-32GB",
                                        "A100-80GB": "A100-PCIe-80GB"}, False),
    "cephalo-a": (islands.cephalo_a, {"L4": "L4", "A6000": "A6000", "P40": "P40", "P100": "P100-PCIe-12GB"}, False),
    "cephalo-b": (islands.cephalo_b, {"A10G": "A10G", "V100-16GB-SXM2": "V100-SXM2-16GB", "T4": "T4"}, False),
    "synthetic-64-nodes-2-pods": (islands.synthetic_64, {"A100-40GB": "A100-SXM4-40GB", "A100-80GB": "A100-SXM4-80GB",
                                                         "H100": "H100-SXM5", "V100-32GB": "V100-SXM2-32GB"}, True),
    "datacenter-512-nodes": (islands.datacenter_512, {"A100-40GB": "A100-SXM4-40GB", "A100-80GB": "A100-SXM4-80GB",
                                                      "H100": "H100-SXM5", "V100-32GB": "V100-SXM2-32GB", "B200": "B200"}, True),
}

FIGURES = ("tflops", "memory_gib", "intra_gbs")


def cluster_data(name: str) -> tuple[dict, list[str]]:
    """The TOML data and header lines of one cluster file."""
    build, names, keep_figures = CLUSTERS[name]
    data, header = build()
    data = {k: v for k, v in data.items() if k != "problem"}
    data["name"] = name
    for node in data["node"]:
        node["gpu"] = names[node["gpu"]]
        if not keep_figures:
            for key in FIGURES:
                node.pop(key, None)
    head = [
        "Cluster: nodes name catalog GPU types (instances/gpus.toml supplies tflops, memory_gib and",
        "intra_gbs unless a node states its own); every key: docs/formats.md, section Cluster files.",
        *header,
        "Written by `hetopt generate clusters` from hetopt/islands/generate.py; do not edit by hand.",
    ]
    return data, head


def write(folder: Path) -> list[Path]:
    """Write every cluster file into ``folder``; returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name in CLUSTERS:
        data, head = cluster_data(name)
        path = folder / f"{name}.toml"
        path.write_text(dumps(data, header="\n".join(head)), encoding="utf-8")
        out.append(path)
    return out
