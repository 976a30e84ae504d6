#!/usr/bin/env bash
# Launch the torchtitan job written by `hetopt export`: Llama-3 8B on tangram-c3: global batch 64, 64 micro-batches of 1 samples, sequence 8192, 4 stages (OPTIMAL).
# Run it on every node of hostfile, with NODE_RANK the node's line in it (0 first) and MASTER_ADDR
# the address of its first node. torchrun numbers ranks in node-rank order, so each stage runs on
# the island the plan put it on.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
NNODES=1
# processes per node, in hostfile order: a100-80gb 4
NPROC=(4)
: "${NODE_RANK:?set NODE_RANK to the line of this node in hostfile, 0 first}"
: "${MASTER_ADDR:?set MASTER_ADDR to the address of the first node in hostfile}"
case "$NODE_RANK" in
    0) ;;
    *) echo "launch.sh: NODE_RANK=$NODE_RANK is not a line of hostfile (give 0 to 0: it has $NNODES nodes)" >&2
       exit 2 ;;
esac
exec torchrun --nnodes "$NNODES" --node-rank "$NODE_RANK" --nproc-per-node "${NPROC[$NODE_RANK]}" \
    --master-addr "$MASTER_ADDR" --master-port "${MASTER_PORT:-29500}" \
    -m torchtitan.train --job.config_file "$HERE/torchtitan.toml" "$@"
