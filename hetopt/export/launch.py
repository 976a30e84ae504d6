"""What a person runs for a plan that is one job: a torchrun launch script, a hostfile, a README.

Every pipeline runtime here puts pipeline parallelism outermost in its rank order (Megatron-LM's
``tp-cp-ep-dp-pp``, torchtitan's ``pp`` first device-mesh dimension, DeepSpeed's
``PipeDataParallelTopology``), so stage k runs on global ranks [k·S, (k+1)·S), S = tp·cp·dp.
torchrun numbers ranks node by node in node-rank order, each node's processes after those of
the nodes before it (``torch.distributed.elastic``, static rendezvous with ``--node-rank``). So
listing each island's nodes in stage order, each with the GPUs its stages use, puts every stage
on its island: that list is the hostfile, and ``launch.sh`` reads its own node's line.

Examples
--------
>>> from hetopt.export.source import Block, Layout, PlanView
>>> block = Block("a", "A100", Layout(1, 2, 2, 1, "none", 1, False), 0, (3, 2), 8, 2, ("n0", "n1"))
>>> plan = PlanView("c", "m", 8, 2, 4, 128, "OPTIMAL", (block,), None)
>>> node_ranks(plan)
[('n0', 4, 'a'), ('n1', 0, 'a')]
"""

from __future__ import annotations

from hetopt.export.common import plan_line, split_text
from hetopt.export.running import tf32_environment
from hetopt.export.source import PlanView

#: torchrun's rendezvous port when MASTER_PORT is not set (its own default).
MASTER_PORT = 29500


def node_ranks(plan: PlanView) -> list[tuple[str, int, str]]:
    """(node, processes, island) in node-rank order: each island's nodes, front stages first,
    filled with the GPUs its stages use (a node the plan leaves idle gets 0 and is not launched)."""
    out = []
    for b in plan.blocks:
        used = b.layout.stage_gpus * len(b.stage_layers)
        per_node = b.gpus_per_node or used
        names = b.members or tuple(f"{b.island}-node{k}" for k in range(max(1, b.island_nodes)))
        for name in names:
            take = min(per_node, used)
            out.append((name, take, b.island))
            used -= take
    return out


def hostfile(plan: PlanView) -> str:
    """The nodes in rank order as ``NAME slots=N`` (the OpenMPI and DeepSpeed format)."""
    lines = ["# Nodes in the order their ranks must follow, written by `hetopt export`: the names are those of the",
             "# cluster file; replace each by the node's address (keep the order). slots: processes on that node."]
    lines += [f"{name} slots={n}" for name, n, _ in node_ranks(plan) if n]
    return "\n".join(lines) + "\n"


def launch_script(plan: PlanView, command: str, runtime: str, args_file: str | None = None) -> str:
    """``launch.sh``: torchrun on one node, its node rank and process count from ``hostfile``.

    ``command`` is what torchrun starts (the training script and its arguments; ``$HERE`` is the
    export folder; with ``args_file``, ``"${ARGS[@]}"`` holds the words of that arguments file:
    :func:`arguments_file_reader`). The script is bash (arrays; ``set -euo pipefail``) and passes
    ``bash -n`` and shellcheck (tests/export/test_launch.py). A ``NODE_RANK`` that is not one of
    the hostfile's lines stops it with one line on stderr and exit 2, before torchrun starts.

    Examples
    --------
    >>> from hetopt.export.source import Block, Layout, PlanView
    >>> block = Block("a", "A100", Layout(1, 2, 2, 1, "none", 1, False), 0, (3, 2), 8, 2, ("n0", "n1"))
    >>> text = launch_script(PlanView("c", "m", 8, 2, 4, 128, "OPTIMAL", (block,), None), "train.py", "X")
    >>> [line for line in text.splitlines() if line.startswith(("NPROC", "    0)"))]
    ['NPROC=(4)', '    0) ;;']
    """
    nodes = [(name, n) for name, n, _ in node_ranks(plan) if n]
    last = len(nodes) - 1
    lines = [
        "#!/usr/bin/env bash",
        f"# Launch the {runtime} job written by `hetopt export`: {plan_line(plan)}.",
        "# Run it on every node of hostfile, with NODE_RANK the node's line in it (0 first) and MASTER_ADDR",
        "# the address of its first node. torchrun numbers ranks in node-rank order, so each stage runs on",
        "# the island the plan put it on.",
        "set -euo pipefail",
        'HERE="$(cd "$(dirname "$0")" && pwd)"',
        f"NNODES={len(nodes)}",
        "# processes per node, in hostfile order: " + ", ".join(f"{name} {n}" for name, n in nodes),
        "NPROC=(" + " ".join(str(n) for _, n in nodes) + ")",
        # no apostrophe inside the ${...:?} words: bash would read it as an open quote
        ': "${NODE_RANK:?set NODE_RANK to the line of this node in hostfile, 0 first}"',
        ': "${MASTER_ADDR:?set MASTER_ADDR to the address of the first node in hostfile}"',
        # the node ranks spelled out: no arithmetic on the text (08 is no octal error, 1e3 no rank)
        'case "$NODE_RANK" in',
        f"    {'|'.join(str(k) for k in range(len(nodes)))}) ;;",
        f'    *) echo "launch.sh: NODE_RANK=$NODE_RANK is not a line of hostfile (give 0 to {last}: it has '
        f'$NNODES nodes)" >&2',
        "       exit 2 ;;",
        "esac",
        *([f"export {tf32_environment(plan.running)}  # matmuls on fp32 tensors: TF32 (1) or FP32 (0), as the plan "
           f"prices (precision {plan.running.precision}, tf32={plan.running.tf32})"]
          if tf32_environment(plan.running) else []),
        *(arguments_file_reader(args_file) if args_file else []),
        f'exec torchrun --nnodes "$NNODES" --node-rank "$NODE_RANK" --nproc-per-node "${{NPROC[$NODE_RANK]}}" \\',
        f'    --master-addr "$MASTER_ADDR" --master-port "${{MASTER_PORT:-{MASTER_PORT}}}" \\',
        f"    {command}",
    ]
    return "\n".join(lines) + "\n"


def arguments_file_reader(file_name: str) -> list[str]:
    """Bash lines that read ``$HERE/file_name`` into the array ``ARGS``: each line that is not a
    comment split into words, no glob expansion (``--moe-layer-freq ([0]*3+[1])*4`` stays a word).

    Examples
    --------
    >>> arguments_file_reader("megatron.args")[0]
    'ARGS=()'
    """
    return [
        "ARGS=()",
        "while read -r line || [ -n \"$line\" ]; do",
        '    case "$line" in "#"* | "") continue ;; esac',
        '    read -r -a words <<< "$line"',
        '    ARGS+=("${words[@]}")',
        f'done < "$HERE/{file_name}"',
    ]


def readme(plan: PlanView, runtime: str, files: list[str], fill_in: list[str], priced: dict,
           running: list[str] = ()) -> str:
    """``README.md`` of the export folder: what was priced, how it runs (``running``: the lines of
    :func:`hetopt.export.running.readme_section`), how to launch, what to fill in."""
    lay = plan.blocks[0].layout
    rows = []
    rank = 0
    for b in plan.blocks:
        gpus = b.layout.stage_gpus * len(b.stage_layers)
        rows.append(f"| {b.island} | {b.gpu} | {b.first_stage}-{b.first_stage + len(b.stage_layers) - 1} | "
                    f"{split_text(b.stage_layers)} | {rank}-{rank + gpus - 1} |")
        rank += gpus
    time_s, memory = priced.get("iteration_time_s"), priced.get("memory_gib") or []
    lines = [
        f"# {plan.model} on {plan.cluster}: one {runtime} job",
        "",
        f"Written by `hetopt export` from a plan ({plan.status}). Files: {', '.join(f'`{f}`' for f in files)}.",
        "",
        "## What was priced",
        "",
        f"- iteration time {time_s:.4g} s (global batch {plan.global_batch}, sequence {plan.seq}, {plan.precision})"
        if time_s else f"- global batch {plan.global_batch}, sequence {plan.seq}, {plan.precision}",
        f"- layout for the whole job: tp {lay.tp}, cp {lay.cp}, dp {lay.dp}, ep {lay.ep}, {len(plan.stage_layers)} "
        f"pipeline stages, {plan.microbatches} micro-batches of {plan.microbatch_size // lay.dp} per replica, "
        f"recompute {lay.recompute}, ZeRO {lay.zero}",
    ]
    if memory:
        lines.append(f"- peak memory per GPU: {max(memory):.3g} GiB (stages {', '.join(f'{m:.3g}' for m in memory)})")
    lines += ["", "| island | GPU | stages | layers per stage | global ranks |", "|---|---|---|---|---|", *rows, "",
              *running,
              "## Launch", "",
              "1. Replace the node names in `hostfile` by their addresses (keep the order).",
              "2. On every node: `NODE_RANK=<its line in hostfile, 0 first> MASTER_ADDR=<first node> ./launch.sh`.",
              "", "## Fill in", "",
              "- data paths, tokenizer, optimizer, learning-rate schedule, iterations and checkpointing"]
    lines += [f"- {note}" for note in fill_in]
    return "\n".join(lines) + "\n"


__all__ = ["MASTER_PORT", "arguments_file_reader", "hostfile", "launch_script", "node_ranks", "readme"]
