"""Cephalo: the config file its trainer reads (``trainfsdp.py --config_file``).

Cephalo's ``split_workload.py`` writes a JSON with, per GPU in rank order, the batch
(``uneven_batch_sizes``), the number of micro-batches (``uneven_microbatches``) and the share
of the model state (``split_uneven_partitions``, fractions adding up to 1); this writes the
same from an allocation result, with the flags its ``dp_ga`` strategy sets (gradient
accumulation with activation buffers). From a plan, the ``cephalo-fsdp`` alternative gives the
per-GPU batches only: one micro-batch each and even shares, with a gap line; a plan whose
composed pipeline uses expert or context parallelism or activation offloading (which Cephalo,
plain FSDP, has none of) gets one more gap line saying the export is the alternative, not that
pipeline. Keys: Cephalo
(github.com/benson-guo/cephalo) ``split_workload.py`` and ``example/gpt_2.7b.json``.
"""

from __future__ import annotations

import json

from hetopt.export.source import AllocationView, share_text
from hetopt.workload import ModelConfig

ACCEPTS = ("plan", "allocation")
HINT = "it takes an allocation result (`hetopt solve ALLOCATION.toml --json`) or a plan with its cephalo-fsdp alternative"
#: A plan is exported through its cephalo-fsdp alternative (``source.fsdp_from_plan``).
PLAN_AS_ALLOCATION = True

#: Cephalo's dtype names for the fp16 mixed precision the cost model prices, and fp32 reductions
#: (split_workload.py's defaults).
AUTOCAST_DTYPE, REDUCE_DTYPE = "float16", "float32"


def build(alloc: AllocationView, model: ModelConfig | None) -> tuple[dict[str, str], list[str]]:
    """``cephalo_config.json`` and ``ranks.txt`` (the GPU order), and the gaps.

    Examples
    --------
    >>> from hetopt.export.source import AllocationView, GpuShare
    >>> alloc = AllocationView((GpuShare("A", 6, 3, 2, 0.7), GpuShare("B", 2, 1, 2, 0.3)), 8, "OPTIMAL", True, "r")
    >>> files, gaps = build(alloc, None)
    >>> cfg = json.loads(files["cephalo_config.json"])
    >>> cfg["uneven_batch_sizes"], cfg["uneven_microbatches"], cfg["split_uneven_partitions"]
    ([6, 2], [2, 2], [0.7, 0.3])
    """
    gaps: list[str] = []
    if alloc.model is None:
        gaps.append("model_name: the allocation result does not name the model; set Cephalo's name "
                    "(e.g. deepspeedgpt_2.7b) and seq_length")
    else:
        gaps.append(f"model_name: Cephalo names its models itself; set its name for {alloc.model}")
    if alloc.breadth:
        gaps.append(f"the composed plan uses expert/context parallelism or activation offloading "
                    f"({', '.join(alloc.breadth)}), which Cephalo has not: this is the {alloc.origin} "
                    "(FSDP over every GPU, experts and sequences unsplit, activations on the GPU)")
    if alloc.exact:
        counts = [g.microbatches for g in alloc.gpus]
        shares = [g.state_share for g in alloc.gpus]
    else:
        counts = [1 for _ in alloc.gpus]
        shares = [1 / len(alloc.gpus) for _ in alloc.gpus]
        gaps.append(f"the {alloc.origin} gives per-GPU batches only: uneven_microbatches set to 1 and the state split "
                    "even; for the planned ones export `hetopt solve` of the allocation instance "
                    "(`hetopt generate allocation` writes them)")
    ga = any(c != 1 for c in counts)
    config = {
        "model_name": None,
        "uneven_batch_sizes": [g.batch for g in alloc.gpus],
        "split_uneven_partitions": shares,
        "split_uneven": len(set(shares)) > 1,
        "uneven_microbatches": counts,
        "seq_length": alloc.seq,
        # as split_workload.py's dp_ga strategy: accumulation recomputes, so no layer recomputation
        "recompute_layer": not ga,
        "ga": ga,
        "use_activation_buffers": ga,
        "use_prefetch_backwards": ga,
        "reduce_dtype": REDUCE_DTYPE,
        "autocast_dtype": AUTOCAST_DTYPE,
    }
    ranks = ["# rank: GPU type, batch = micro-batch size x micro-batches, state share (written by `hetopt export`)"]
    for i, g in enumerate(alloc.gpus):
        size = f"{g.microbatch_size} x {g.microbatches}" if alloc.exact else "?"
        share = share_text(g.state_share) if g.state_share is not None else "?"
        ranks.append(f"{i}: {g.type}, batch {g.batch} = {size}, state share {share}")
    if len({g.type for g in alloc.gpus}) > 1:
        gaps.append("GPU order: Cephalo reads the lists by rank; start the job so rank i runs on the GPU type "
                    "ranks.txt names")
    return {"cephalo_config.json": json.dumps(config, indent=4) + "\n", "ranks.txt": "\n".join(ranks) + "\n"}, gaps
