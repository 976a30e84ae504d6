"""Pipeline-composition instances made by the planner from the catalogs.

Each instance is what ``hetopt plan`` composes for a cluster of ``instances/clusters`` and a
model of ``instances/models``: its islands (islands family), the built-in parallelizer's
partial plans for every slice (cost model, Tangram's pruning) and the link times between
islands, at one micro-batch size. ``hetopt generate pipeline`` rewrites them as
``instances/pipeline/planner-*.toml``; a test checks the committed files are its output.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hetopt import solvers
from hetopt.catalog import instances_dir
from hetopt.generate.toml import dumps
from hetopt.units import GIB
from hetopt.pipeline.problem import PipelineInstance
from hetopt.planner.setup.cluster import Cluster, load_cluster
from hetopt.planner.parallelizer.builtin import BuiltinParallelizer
from hetopt.planner.search.compose import island_specs, link_matrix, pipeline_instance
from hetopt.planner.search.enumerate import all_slices, enumerate_plans
from hetopt.workload import load_model



@dataclass(frozen=True)
class Setting:
    """One instance: nodes of a shipped cluster, a model, micro-batch size and count."""

    name: str
    cluster: str
    nodes: tuple[str, ...]
    model: str
    microbatch_size: int
    microbatches: int
    note: str


#: Tangram's settings with M = 128: GPT-3 6.7B on 16 GPUs of C1 at T4:V100 16:0 .. 0:16
#: (its Fig. 8; 16:16 is the whole of C1), and GPT-3 13B on C3's A100 + V100-32GB node, then
#: with the V100-16GB node, then with the T4 node (its Figs. 11 and 13).
SETTINGS = (
    Setting("planner-gpt3-6.7b-c1-t4x16-v100x16", "tangram-c1",
            ("t4-0", "t4-1", "t4-2", "t4-3", "v100-0", "v100-1", "v100-2", "v100-3"), "gpt3-6.7b", 2, 128,
            "Tangram C1 whole: 16 T4 + 16 V100-16GB"),
    Setting("planner-gpt3-6.7b-c1-t4x12-v100x4", "tangram-c1", ("t4-0", "t4-1", "t4-2", "v100-0"), "gpt3-6.7b", 2, 128,
            "Tangram Fig. 8, T4:V100 = 12:4"),
    Setting("planner-gpt3-6.7b-c1-t4x8-v100x8", "tangram-c1", ("t4-0", "t4-1", "v100-0", "v100-1"), "gpt3-6.7b", 2, 128,
            "Tangram Fig. 8, T4:V100 = 8:8"),
    Setting("planner-gpt3-6.7b-c1-t4x4-v100x12", "tangram-c1", ("t4-0", "v100-0", "v100-1", "v100-2"), "gpt3-6.7b", 2, 128,
            "Tangram Fig. 8, T4:V100 = 4:12"),
    Setting("planner-gpt3-13b-c3-a100x4-v100-32x8", "tangram-c3", ("a100-80gb", "v100-32gb"), "gpt3-13b", 2, 128,
            "Tangram Fig. 11: 4 A100-80GB + 8 V100-32GB"),
    Setting("planner-gpt3-13b-c3-a100x4-v100-32x8-v100-16x4", "tangram-c3", ("a100-80gb", "v100-32gb", "v100-16gb"),
            "gpt3-13b", 2, 128, "Tangram Fig. 11: + 4 V100-16GB"),
    Setting("planner-gpt3-13b-c3-a100x4-v100-32x8-v100-16x4-t4x4", "tangram-c3",
            ("a100-80gb", "v100-32gb", "v100-16gb", "t4"), "gpt3-13b", 2, 128, "Tangram Fig. 13: C3 whole, + 4 T4"),
)


def composition_instance(cluster: Cluster, model: str, microbatch_size: int, microbatches: int, name: str) -> PipelineInstance:
    """The composition instance ``hetopt plan`` solves for this cluster and model."""
    cfg = load_model(instances_dir() / "models" / f"{model}.toml")
    islands = solvers.solve(cluster.islands).solution.islands
    index = cluster.islands.index
    members = [[index[n] for n in isl.nodes] for isl in islands]
    specs = island_specs(cluster, members)
    par = BuiltinParallelizer().for_gpus(s.gpu for s in specs)  # one job, one precision, as hetopt plan
    seq = cfg.sequence
    plans, _ = enumerate_plans(
        par, all_slices(par, par.slice_model(cfg, seq=seq)), specs, microbatch_size=microbatch_size,
        microbatches=microbatches, global_batch=microbatch_size * microbatches,
    )
    links = link_matrix(cluster, members, cfg, seq, microbatch_size)
    instance, _ = pipeline_instance(name, cfg, specs, plans, links, microbatches, 1.0)
    return instance


def instance_data(instance: PipelineInstance, description: str) -> dict:
    """A pipeline instance as the TOML data of ``problem = "pipeline"`` files."""
    names = [isl.name for isl in instance.islands]
    return {
        "problem": "pipeline",
        "name": instance.name,
        "description": description,
        "layers": instance.layers,
        "microbatches": instance.microbatches,
        "memory_fraction": instance.memory_fraction,
        "default_link_s": 0.0,
        "island": [{"name": i.name, "gpus": i.gpus, "memory_gib": i.memory_bytes / GIB} for i in instance.islands],
        "link": [
            {"a": names[a], "b": names[b], "time_s": instance.link_s[a][b]}
            for a in range(len(names)) for b in range(a + 1, len(names))
        ],
        "option": [
            {
                "island": names[o.island],
                "layers": o.layers,
                "role": o.role,
                "stage": [
                    {"layers": s.layers, "forward_s": s.forward_s, "backward_s": s.backward_s,
                     "static_gib": s.static_bytes / GIB, "activation_gib": s.activation_bytes / GIB, "gpus": s.gpus}
                    for s in o.stages
                ],
            }
            for o in instance.options
        ],
    }


def write(folder: Path) -> list[Path]:
    """Write every setting's instance into ``folder``; returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for st in SETTINGS:
        cluster = load_cluster(st.cluster).subset(list(st.nodes), name=st.name)
        instance = composition_instance(cluster, st.model, st.microbatch_size, st.microbatches, st.name)
        description = (
            f"{st.note}: {st.model}, micro-batch {st.microbatch_size} x {st.microbatches}; options from the "
            f"built-in parallelizer on the cost model (hetopt generate pipeline)."
        )
        path = folder / f"{st.name}.toml"
        path.write_text(dumps(instance_data(instance, description),
                              header="Generated by `hetopt generate pipeline`; do not edit by hand."), encoding="utf-8")
        out.append(path)
    return out
