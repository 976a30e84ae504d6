"""The exported DeepSpeed job runs: two iterations on CPU, two nodes of one process each (issue 40).

A tiny GPT planned with ``--target deepspeed`` on two one-GPU nodes whose memory forces two pipeline
stages, exported, and launched with the export's own ``launch.sh`` twice on this machine (node ranks
0 and 1, the real torchrun, MASTER_ADDR on loopback) with a training script that builds DeepSpeed's
``PipelineModule`` from ``pipeline.json`` (the model's shape, the stage boundaries) and takes
``ds_config.json`` as written, but for its precision section (the CPU trains in fp32) and an
optimizer (the README's fill-in). DeepSpeed runs on CPU with gloo (its CPU accelerator).

Megatron-LM and torchtitan are not run: Megatron-LM's ``pretrain_gpt.py`` is not on the package
registry (megatron-core ships megatron/core only), and torchtitan's job file names a model it ships,
the smallest 0.6B parameters with a tokenizer its trainer loads from a model hub (no network here);
their exports are checked by their own config readers (tests/test_export.py, runtime marker).
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
from pathlib import Path

import pytest

from hetopt import cli

TINY = """name = "Tiny GPT"
architecture = "gpt"
layers = 4
hidden = 64
heads = 4
ffn = 256
vocab = 128
sequence = 32
"""
#: Two nodes of one T4 each, 4 MiB of memory a GPU: the model's state fits only split in two.
TWO_NODES = """name = "two"
[[node]]
name = "node-0"
gpu = "T4"
gpus = 1
memory_gib = 0.004
[[node]]
name = "node-1"
gpu = "T4"
gpus = 1
memory_gib = 0.004
[network]
default_gbps = 10.0
"""
#: The user's training script (the export's README: data, optimizer and model code are theirs).
TRAIN = r'''"""A DeepSpeed pipeline job built from an hetopt export (ds_config.json, pipeline.json), on CPU."""
import json
import os
import sys

import torch
import deepspeed
from deepspeed.pipe import LayerSpec, PipelineModule

config_path = sys.argv[sys.argv.index("--deepspeed_config") + 1]
folder = os.path.dirname(config_path)
config = json.load(open(config_path))
side = json.load(open(os.path.join(folder, "pipeline.json")))
shape = side["model"]
for key in ("fp16", "bf16"):  # the CPU trains in fp32
    config.pop(key, None)
config["optimizer"] = {"type": "SGD", "params": {"lr": 0.01}}  # the README's fill-in: an optimizer


class Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = torch.nn.Embedding(shape["vocab"], shape["hidden"])
        self.positions = torch.nn.Embedding(shape["max_positions"], shape["hidden"])

    def forward(self, ids):
        return self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(shape["hidden"], shape["heads"], shape["ffn"], dropout=0.0,
                                                      batch_first=True, norm_first=True)

    def forward(self, x):
        return self.layer(x)


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.out = torch.nn.Linear(shape["hidden"], shape["vocab"])

    def forward(self, x):
        return self.out(x)


class Parts(PipelineModule):
    """PipelineModule with the stage boundaries of pipeline.json (no partition method takes them)."""

    def _partition_layers(self, method="uniform"):
        self.parts = side["parts_with_embedding_and_head"]
        self._set_bounds(start=self.parts[self.stage_id], stop=self.parts[self.stage_id + 1])


def loss(logits, labels):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


deepspeed.init_distributed(dist_backend="gloo")
torch.manual_seed(0)
specs = [LayerSpec(Embed)] + [LayerSpec(Block) for _ in range(shape["layers"])] + [LayerSpec(Head)]
model = Parts(layers=specs, num_stages=side["num_stages"], loss_fn=loss,
              activation_checkpoint_interval=side["activation_checkpoint_interval"])
engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=[p for p in model.parameters()], config=config)
micro = config["train_micro_batch_size_per_gpu"]


def batches():
    while True:
        ids = torch.randint(0, shape["vocab"], (micro, shape["sequence"]))
        yield ids, ids


data = batches()
losses = [float(engine.train_batch(data_iter=data)) for _ in range(2)]
rank = int(os.environ["RANK"])
with open(os.path.join(os.environ["RESULT_DIR"], f"rank{rank}.json"), "w") as out:
    json.dump({"rank": rank, "stage": engine.stage_id, "layers": [type(m).__name__ for m in model.forward_funcs],
               "losses": losses, "world": int(os.environ["WORLD_SIZE"])}, out)
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_exported_deepspeed_job_trains_two_iterations_on_cpu(tmp_path: Path) -> None:
    pytest.importorskip("deepspeed")
    (tmp_path / "tiny.toml").write_text(TINY)
    (tmp_path / "two.toml").write_text(TWO_NODES)
    plan = tmp_path / "plan.json"
    with open(plan, "w") as out:
        subprocess.run(["hetopt", "plan", "--cluster", str(tmp_path / "two.toml"), "--model", str(tmp_path / "tiny.toml"),
                        "--global-batch", "4", "--target", "deepspeed", "--no-alternatives", "--memory-headroom", "0",
                        "--json"], stdout=out, check=True, timeout=300)
    doc = json.loads(plan.read_text())
    assert [s["layers"] for s in doc["stages"]] == [2, 2]
    run, results = tmp_path / "run", tmp_path / "results"
    results.mkdir()
    assert cli.main(["export", str(plan), "--to", "deepspeed", "-o", str(run)]) == 0
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    env = os.environ | {"TRAIN_SCRIPT": str(script), "RESULT_DIR": str(results), "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": str(_free_port()), "OMP_NUM_THREADS": "1"}
    nodes = [subprocess.Popen([str(run / "launch.sh")], env=env | {"NODE_RANK": str(k)}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for k in (1, 0)]
    try:
        logs = [node.communicate(timeout=600)[0] for node in nodes]
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
    assert all(node.returncode == 0 for node in nodes), logs
    ranks = [json.loads((results / f"rank{k}.json").read_text()) for k in (0, 1)]
    # each stage holds the layers pipeline.json gives it: the embedding and 2 blocks, 2 blocks and the head
    assert [r["layers"] for r in ranks] == [["Embed", "Block", "Block"], ["Block", "Block", "Head"]]
    assert [r["stage"] for r in ranks] == [0, 1] and {r["world"] for r in ranks} == {2}
    losses = ranks[-1]["losses"]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
