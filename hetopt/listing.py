"""The shipped catalogs as rows: GPU types, model shapes and clusters (``hetopt list``).

Each function returns plain data, one dict per entry in name order, with human units in the
key names (CONVENTIONS §2): the command line prints them as a table or as JSON. The name
of a model or a cluster is its file name without ``.toml``, the name ``hetopt plan --model``
and ``--cluster`` take.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hetopt.catalog import instances_dir
from hetopt.hardware import GIGA, TERA, load_gpus
from hetopt.units import GIB
from hetopt.workload import load_model, parameters

#: Parameters per reported unit of ``params_b`` (billions).
BILLION = 1e9


def gpu_rows() -> list[dict[str, Any]]:
    """The GPU catalog (``instances/gpus.toml``): memory, peak rates and the intra-node link.

    Returns
    -------
    list of dict
        ``gpu``, ``memory_gib``, ``fp16_tflops`` (dense FP16/BF16 peak), ``training_tflops``
        (the peak mixed-precision training runs against; FP32 where FP16 is crippled),
        ``memory_gbs``, ``intra_link`` and ``intra_gbs`` (per GPU and direction),
        ``calibrated`` (the latency model is fitted to measured profiles).

    Examples
    --------
    >>> row = next(r for r in gpu_rows() if r["gpu"] == "A100-SXM4-80GB")
    >>> row["memory_gib"], row["fp16_tflops"], row["intra_link"]
    (80.0, 312.0, 'NVLink3')
    """
    return [
        {
            "gpu": g.name,
            "memory_gib": g.memory_bytes / GIB,
            "fp16_tflops": g.fp16_flops / TERA,
            "training_tflops": g.training_flops / TERA,
            "memory_gbs": g.memory_bandwidth / GIGA,
            "intra_link": g.intra_link,
            "intra_gbs": g.intra_bandwidth / GIGA,
            "calibrated": g.calibrated,
        }
        for g in sorted(load_gpus().values(), key=lambda g: g.name)
    ]


def model_rows() -> list[dict[str, Any]]:
    """The model shapes (``instances/models/*.toml``) and their parameter counts.

    Returns
    -------
    list of dict
        ``model`` (the file's name), ``title`` (the published name), ``architecture``,
        ``layers``, ``hidden``, ``heads``, ``kv_heads``, ``experts`` (1: dense),
        ``params_b`` (all parameters, billions, computed as ``hetopt.workload.parameters``),
        ``sequence``.

    Examples
    --------
    >>> row = next(r for r in model_rows() if r["model"] == "llama-2-7b")
    >>> row["layers"], row["hidden"], row["heads"], round(row["params_b"], 2)
    (32, 4096, 32, 6.74)
    """
    rows = []
    for path in sorted((instances_dir() / "models").glob("*.toml")):
        cfg = load_model(path)
        rows.append({
            "model": path.stem,
            "title": cfg.name,
            "architecture": cfg.architecture,
            "layers": cfg.layers,
            "hidden": cfg.hidden,
            "heads": cfg.heads,
            "kv_heads": cfg.kv_heads or cfg.heads,
            "experts": cfg.experts,
            "params_b": parameters(cfg) / BILLION,
            "sequence": cfg.sequence,
        })
    return rows


def cluster_rows() -> list[dict[str, Any]]:
    """The clusters (``instances/clusters/*.toml``): nodes and GPUs, by GPU type.

    Returns
    -------
    list of dict
        ``cluster`` (the file's name), ``nodes``, ``gpus``, ``by_type`` (one dict per GPU
        type and node size, in file order: ``gpu``, ``nodes``, ``gpus_per_node``) and
        ``description``.

    Examples
    --------
    >>> row = next(r for r in cluster_rows() if r["cluster"] == "tangram-c3")
    >>> row["nodes"], row["gpus"], row["by_type"][0]
    (4, 20, {'gpu': 'T4', 'nodes': 1, 'gpus_per_node': 4})
    """
    # the planner's reader: the same validation and catalog defaults as `hetopt plan --cluster`
    from hetopt.files import read_toml
    from hetopt.planner.setup.cluster import clusters_dir, load_cluster

    rows = []
    for path in sorted(clusters_dir().glob("*.toml")):
        cluster = load_cluster(path)
        kinds = Counter((t.name, node.gpus) for t, node in zip(cluster.gpu_types, cluster.islands.nodes))
        rows.append({
            "cluster": path.stem,
            "nodes": len(cluster.islands.nodes),
            "gpus": cluster.gpus,
            "by_type": [{"gpu": gpu, "nodes": n, "gpus_per_node": per} for (gpu, per), n in kinds.items()],
            "description": str(read_toml(path).get("description", "")),
        })
    return rows


def by_type_text(by_type: list[dict[str, Any]]) -> str:
    """``by_type`` in one line: "nodes×GPUs type" per kind of node.

    Examples
    --------
    >>> by_type_text([{"gpu": "T4", "nodes": 2, "gpus_per_node": 4}, {"gpu": "A100", "nodes": 1, "gpus_per_node": 8}])
    '2×4 T4, 1×8 A100'
    """
    return ", ".join(f"{k['nodes']}×{k['gpus_per_node']} {k['gpu']}" for k in by_type)


#: ``hetopt list WHAT``: the rows of each catalog.
CATALOGS = {"gpus": gpu_rows, "models": model_rows, "clusters": cluster_rows}
