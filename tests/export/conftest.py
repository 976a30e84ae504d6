"""What the export tests share: a stub ``torchrun`` first on PATH, and running a node's ``launch.sh``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: The stub writes what it was started with to the file ``STUB_OUT`` names.
STUB = f"""#!{sys.executable}
import json, os, sys
with open(os.environ["STUB_OUT"], "w") as out:
    json.dump({{"argv": sys.argv[1:], "tf32": os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE")}}, out)
"""
#: The master address the tests give (no network is used: torchrun is the stub).
MASTER = "127.0.0.1"


class Launcher:
    """Runs an export folder's ``launch.sh`` with the stub torchrun first on PATH."""

    def __init__(self, folder: Path) -> None:
        bin_dir = folder / "bin"
        bin_dir.mkdir(exist_ok=True)
        stub = bin_dir / "torchrun"
        stub.write_text(STUB)
        stub.chmod(0o755)
        env = {k: v for k, v in os.environ.items() if k not in ("NODE_RANK", "MASTER_ADDR", "MASTER_PORT")}
        self.env = env | {"PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", "TRAIN_SCRIPT": "train.py"}
        self.out = folder
        self.master = MASTER

    def run(self, export: Path, **extra: str) -> subprocess.CompletedProcess:
        """``launch.sh`` of the folder ``export`` with ``extra`` in its environment."""
        return subprocess.run([str(export / "launch.sh")], capture_output=True, text=True, env=self.env | extra,
                              timeout=60)

    def node(self, export: Path, rank: int) -> list[str]:
        """torchrun's arguments on node ``rank`` (launch.sh must succeed)."""
        out = self.out / f"node{rank}.json"
        done = self.run(export, NODE_RANK=str(rank), MASTER_ADDR=MASTER, STUB_OUT=str(out))
        assert done.returncode == 0, done.stderr
        return json.loads(out.read_text())["argv"]


    @staticmethod
    def hostfile(folder: Path) -> list[tuple[str, int]]:
        """The export's hostfile as (node, slots), in rank order."""
        lines = [line.split() for line in (folder / "hostfile").read_text().splitlines()
                 if line and not line.startswith("#")]
        return [(name, int(slots.removeprefix("slots="))) for name, slots in lines]

    @staticmethod
    def option(argv: list[str], name: str) -> str:
        """The value after ``name`` in ``argv``."""
        return argv[argv.index(name) + 1]


@pytest.fixture
def launcher(tmp_path: Path) -> Launcher:
    """A :class:`Launcher` whose stub and outputs live in the test's own folder."""
    return Launcher(tmp_path)
