"""Export the mixed-stages plan (``hetopt export PLAN --alternative mixed-stages``), or refuse it with the rule.

A mixed-stages plan (``docs/formats.md``, "The mixed-stages plan") gives each stage replicas of
several GPU types, each type its own TP degree and share of the micro-batch. A stock runtime
starts one SPMD job (``hetopt.runtimes``): one TP size, one data-parallel size and one
micro-batch size per replica for the whole job. So the plan is one job of a runtime only when
every member of every stage has the same TP, every replica the same share, every stage the same
replica count, and the runtime's own rules hold; then it is written as that runtime's one job,
each stage on the nodes of its types (a stage takes whole nodes). Otherwise it is refused with
every rule it breaks, as ``plan --target`` says of it (``planner.alternatives.mixed.stock_runtime_note``);
there are no files per island to fall back to: a stage spans islands, so ``allow_gaps`` does not
apply. Cephalo runs FSDP, never pipeline stages: its plan is the ``cephalo-fsdp`` alternative.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hetopt.errors import InputError
from hetopt.export.source import Block, Layout, PlanView, job_of, plan_view
from hetopt.hardware import load_gpus
from hetopt.planfile import MIXED_PLAN_KIND
from hetopt.runtimes import RUNTIMES, Shape, plan_breaks

#: The alternative's name (its plan's ``kind`` too: ``hetopt.planfile.MIXED_PLAN_KIND``).
NAME = MIXED_PLAN_KIND
#: Where each pipeline runtime takes the micro-batch size of a replica, once for the whole job.
MICROBATCH_SOURCE = {"megatron": "--micro-batch-size", "torchtitan": "training.local_batch_size",
                     "deepspeed": "train_micro_batch_size_per_gpu"}


def mixed_plan(doc: dict[str, Any], source: str) -> dict[str, Any]:
    """The ``mixed-stages`` alternative's plan of a plan document, checked for the counts that must agree.

    Raises
    ------
    InputError
        No such row, a row without a plan (not FEASIBLE, or written before plans carried it), or
        a plan whose stages, samples and GPU counts disagree.
    """
    row = next((a for a in doc.get("alternatives") or [] if isinstance(a, dict) and a.get("name") == NAME), None)
    if row is None:
        raise InputError(f"{source}: no {NAME} alternative in the plan (re-plan with `hetopt plan ... --mixed-stages --json`)")
    plan = row.get("plan")
    if not isinstance(plan, dict) or plan.get("kind") != MIXED_PLAN_KIND:
        raise InputError(f"{source}: the {NAME} alternative has no plan to export (status {row.get('status', '?')}: "
                         f"{row.get('detail') or 'no detail'}); re-plan with `hetopt plan ... --mixed-stages --json`")
    try:
        b, first = plan["microbatch_size"], 0
        for k, st in enumerate(plan["stages"]):
            if st["first_layer"] != first or sum(m["samples"] for m in st["members"]) != b or any(
                    m["gpus"] != m["replicas"] * m["tp"] for m in st["members"]):
                raise ValueError(f"stages[{k}]")
            first += st["layers"]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{source}: alternatives.{NAME}.plan: {exc} does not add up (the file was edited; re-run "
                         "`hetopt plan ... --mixed-stages --json`)") from None
    return plan


def breaks(plan: dict[str, Any], view: PlanView, to: str) -> list[str]:
    """What keeps the mixed plan from being one job of runtime ``to``: the job-wide settings that
    differ between its stages' members (named ``S<k> <gpu>``), a micro-batch size per replica
    that differs, and the runtime's rules each member breaks (``hetopt.runtimes.plan_breaks``)."""
    runtime = RUNTIMES[to]
    if not runtime.pipeline:
        return [f"{runtime.title} runs FSDP with per-GPU batches, no pipeline stages or TP: export the plan's "
                "cephalo-fsdp alternative instead (`hetopt export PLAN --to cephalo`)"]
    catalog = load_gpus()
    layers = tuple(st["layers"] for st in plan["stages"])
    shapes, shares = [], []
    for k, st in enumerate(plan["stages"]):
        replicas = sum(m["replicas"] for m in st["members"])
        for m in st["members"]:
            gpu = catalog.get(m["gpu"])
            shapes.append((f"S{k} {m['gpu']}", Shape(
                tp=m["tp"], pp=len(layers), dp=replicas, vpp=1, recompute="none", zero=0,
                sequence_parallel=view.running.sequence_parallel, stage_layers=layers, whole_model=True,
                bf16=gpu is not None and gpu.bf16)))
            shares.append((f"S{k} {m['gpu']}", "-".join(map(str, m["shares"]))))
    out = plan_breaks(runtime, shapes, job_of(view))
    if len({s for _, s in shares}) > 1:
        listed = ", ".join(f"{name} {s}" for name, s in shares)
        out.append(f"micro-batch size per replica differs by stage member ({listed}): {runtime.title} takes one for the "
                   f"whole job ({MICROBATCH_SOURCE[to]})")
    return out


def mixed_view(doc: dict[str, Any], plan: dict[str, Any], source: str) -> PlanView:
    """The mixed plan as the exporters' view: one block per stage, on the nodes of its types
    (the document's ``nodes`` of each type in file order, taken stage by stage in whole nodes).

    A block names one GPU type for the exporters' per-GPU choices (BF16, fused attention): a
    stage of several types is named by the one that lacks BF16 or FlashAttention, if any, so
    the job is written for the weakest of them; its island is ``S<k>-TYPE+TYPE``.
    """
    base = plan_view(doc, source)  # the document's running settings, target and checks
    catalog = load_gpus()
    free: dict[str, list[dict]] = {}
    for node in doc.get("nodes") or []:
        free.setdefault(node.get("gpu"), []).append(node)
    blocks = []
    for k, st in enumerate(plan["stages"]):
        names, gpus = [], 0
        for m in st["members"]:
            need = m["gpus"]
            while need > 0:
                if not free.get(m["gpu"]):
                    raise InputError(f"{source}: nodes: too few {m['gpu']} nodes for the {NAME} plan's stage {k} "
                                     "(the file was edited; re-run `hetopt plan ... --mixed-stages --json`)")
                node = free[m["gpu"]].pop(0)
                names.append(str(node["name"]))
                need -= int(node["gpus"])
                gpus += int(node["gpus"])
        types = [m["gpu"] for m in st["members"]]
        weak = [t for t in types if t in catalog and not (catalog[t].bf16 and catalog[t].flash_attention)]
        m0 = st["members"][0]
        layout = Layout(m0["tp"], 1, sum(m["replicas"] for m in st["members"]), 1, "none", 0,
                        base.running.sequence_parallel and m0["tp"] > 1)
        blocks.append(Block(f"S{k}-{'+'.join(types)}", (weak or types)[0], layout, k, (st["layers"],), gpus, len(names),
                            tuple(names)))
    return replace(base, microbatch_size=plan["microbatch_size"], microbatches=plan["microbatches"], blocks=tuple(blocks),
                   iteration_time_s=plan["iteration_time_s"],
                   stage_memory_gib=tuple(max(m["memory_gib"] for m in st["members"]) for st in plan["stages"]))


__all__ = ["MICROBATCH_SOURCE", "NAME", "breaks", "mixed_plan", "mixed_view"]
