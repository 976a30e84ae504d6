#!/usr/bin/env bash
# Launch the Megatron-LM job written by `hetopt export`: GPT-3 1.3B on one-island-a100x8: global batch 64, 8 micro-batches of 8 samples, sequence 2048, 2 stages (OPTIMAL).
# Run it on every node of hostfile, with NODE_RANK the node's line in it (0 first) and MASTER_ADDR
# the address of its first node. torchrun numbers ranks in node-rank order, so each stage runs on
# the island the plan put it on.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
NNODES=2
# processes per node, in hostfile order: a100-0 4, a100-1 4
NPROC=(4 4)
: "${NODE_RANK:?set NODE_RANK to the line of this node in hostfile, 0 first}"
: "${MASTER_ADDR:?set MASTER_ADDR to the address of the first node in hostfile}"
case "$NODE_RANK" in
    0|1) ;;
    *) echo "launch.sh: NODE_RANK=$NODE_RANK is not a line of hostfile (give 0 to 1: it has $NNODES nodes)" >&2
       exit 2 ;;
esac
ARGS=()
while read -r line || [ -n "$line" ]; do
    case "$line" in "#"* | "") continue ;; esac
    read -r -a words <<< "$line"
    ARGS+=("${words[@]}")
done < "$HERE/megatron.args"
exec torchrun --nnodes "$NNODES" --node-rank "$NODE_RANK" --nproc-per-node "${NPROC[$NODE_RANK]}" \
    --master-addr "$MASTER_ADDR" --master-port "${MASTER_PORT:-29500}" \
    "${TRAIN_SCRIPT:-pretrain_gpt.py}" "${ARGS[@]}" "$@"
