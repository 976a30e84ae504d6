"""Seeded random pipeline instances, small enough for bruteforce."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hetopt import catalog
from hetopt.pipeline.problem import GIB, PipelineIsland, PipelineInstance, PipelineOption, StagePlan

INSTANCES = catalog.instances_dir() / "pipeline"


def random_islands(rng: np.random.Generator, n: int, *, repeat: float, memory_gib: tuple[float, float],
                   static_gib: tuple[float, float]) -> tuple[list[PipelineIsland], list[tuple[float, float, float]]]:
    """``n`` islands of 1-4 GPUs, each a copy of the one before with probability ``repeat`` (the
    kind reduction), and their (speed, static bytes, activation bytes) per layer."""
    islands, specs = [], []
    for i in range(n):
        if i > 0 and rng.random() < repeat:
            islands.append(PipelineIsland(f"i{i}", islands[-1].gpus, islands[-1].memory_bytes))
            specs.append(specs[-1])
            continue
        islands.append(PipelineIsland(f"i{i}", int(rng.integers(1, 5)), float(rng.uniform(*memory_gib)) * GIB))
        specs.append((float(rng.uniform(0.5, 2.0)), float(rng.uniform(*static_gib)) * GIB, float(rng.uniform(0.2, 1.5)) * GIB))
    return islands, specs


def random_instance(seed: int, *, max_islands: int = 4, max_layers: int = 6) -> PipelineInstance:
    """A random instance where memory at the 1F1B position, roles, links and tiling all matter.

    Islands sometimes repeat (same kind), links are random or uniform, M is small so that
    min(S − s, M) caps in some instances, and memory is sized so that an option fits only
    with a few stages behind it.
    """
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, max_islands + 1))
    L = int(rng.integers(1, max_layers + 1))
    M = int(rng.choice([1, 2, 3, 8]))
    islands, specs = random_islands(rng, n, repeat=0.3, memory_gib=(4, 12), static_gib=(0.5, 2.0))
    options = []
    for i, (speed, static, act) in enumerate(specs):
        for k in sorted({int(x) for x in rng.integers(1, L + 1, size=int(rng.integers(1, 4)))}):
            for n_stages in (1, 2):
                if n_stages > k or n_stages > islands[i].gpus:
                    continue
                split = [k // n_stages + (1 if q < k % n_stages else 0) for q in range(n_stages)]
                stages = tuple(
                    StagePlan(ell, round(speed * ell * 0.01 * (1 + 0.1 * q), 6), round(speed * ell * 0.02, 6),
                              static * ell / n_stages, act * ell / n_stages, islands[i].gpus // n_stages)
                    for q, ell in enumerate(split)
                )
                role = str(rng.choice(["any", "any", "first", "middle", "last", "whole"]))
                options.append(PipelineOption(i, k, stages, role))
    uniform = rng.random() < 0.4
    base = float(rng.choice([0.0, 0.005, 0.02]))
    link = [[0.0] * n for _ in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            link[a][b] = link[b][a] = base if uniform else round(float(rng.uniform(0.0, 0.05)), 4)
    return PipelineInstance(
        name=f"random-{seed}", layers=L, microbatches=M, islands=tuple(islands), options=tuple(options),
        link_s=tuple(tuple(r) for r in link), memory_fraction=float(rng.choice([1.0, 0.9])),
    )


@pytest.fixture
def instances_dir() -> Path:
    return INSTANCES
