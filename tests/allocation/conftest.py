"""Seeded random allocation instances, small enough for bruteforce."""

from __future__ import annotations

import numpy as np
import pytest

from hetopt.allocation.problem import GIB, AllocationInstance, GpuGroup, Latency


def random_instance(seed: int, *, max_gpus: int = 4, max_batch: int = 10) -> AllocationInstance:
    """A random instance whose constraints (II), (III) and the uneven-shard rule all matter.

    Latency tables are increasing and sub-linear per sample (like real GPUs: larger
    micro-batches are more efficient), memory is sized so the max micro-batch is 1..6.
    """
    rng = np.random.default_rng(seed)
    n_groups = int(rng.integers(1, 4))
    counts = [int(rng.integers(1, 3)) for _ in range(n_groups)]
    while sum(counts) > max_gpus:
        counts[int(np.argmax(counts))] -= 1
    counts = [c for c in counts if c > 0]
    n = sum(counts)
    activation = 1.0 * GIB
    groups = []
    for g, count in enumerate(counts):
        per_sample = float(rng.uniform(0.005, 0.03))
        fixed = float(rng.uniform(0.0, 0.02))
        points = int(rng.integers(0, 5))
        ms = np.arange(1, points + 1)
        table = tuple(float(x) for x in fixed + per_sample * ms * rng.uniform(0.8, 1.0, size=points))
        fwd = Latency(table, per_sample, fixed) if points < 2 or rng.random() < 0.5 else Latency(table)
        bwd_scale = float(rng.uniform(1.5, 2.5))
        bwd = Latency(tuple(bwd_scale * x for x in table), bwd_scale * per_sample, bwd_scale * fixed) if fwd.slope is not None else Latency(tuple(bwd_scale * x for x in table))
        base = float(rng.uniform(0.5, 2.0)) * GIB
        u = int(rng.integers(1, 7))
        memory = (base + (u + 0.5) * activation) / 0.8
        groups.append(GpuGroup(f"G{g}", count, memory, base, fwd, bwd))
    capacity = sum(g.count * 0.8 * g.memory_bytes for g in groups)
    base_total = sum(g.count * g.memory_base_bytes for g in groups)
    # state between "III binds hard" and "III is loose"; sometimes infeasible
    room = capacity - base_total - n * activation
    state = float(rng.uniform(-0.1, 0.9)) * room + 0.0
    state = max(0.0, state)
    return AllocationInstance(
        name=f"random-{seed}",
        global_batch=int(rng.integers(max(1, n - 1), max_batch + 1)),
        groups=tuple(groups),
        activation_bytes_per_sample=activation,
        state_bytes=state,
        memory_fraction=0.8,
        accumulation_overhead_s=float(rng.choice([0.0, 0.002])),
        allgather_s=float(rng.choice([0.0, 0.03, 0.08])),
        reducescatter_s=float(rng.choice([0.0, 0.03])),
        uneven_shard_overhead=0.25,
        max_microbatch=None if rng.random() < 0.7 else int(rng.integers(1, 4)),
        layers=int(rng.integers(4, 33)),
    )


@pytest.fixture
def tiny_path():
    from hetopt.catalog import instances_dir

    return instances_dir() / "allocation" / "tiny-2gpu.toml"


def synthetic_toml(*, global_batch: int, activation_gib: float, state_gib: float, collective_s: float,
                   groups: list[tuple[int, float]], forward_s: float = 0.001, slowdown: float = 0.3) -> str:
    """An allocation file of ``groups`` = [(count, memory_gib)]: group g's forward of one sample
    takes ``forward_s``·(1 + ``slowdown``·g), backward twice that (two-point latency tables),
    for the tests of very large instances."""
    head = (f'problem = "allocation"\nname = "synthetic"\nglobal_batch = {global_batch}\nmemory_fraction = 0.8\n'
            f"activation_gib_per_sample = {activation_gib}\nstate_gib = {state_gib}\naccumulation_overhead_s = 0.001\n"
            f"allgather_s = {collective_s}\nreducescatter_s = {collective_s}\nuneven_shard_overhead = 0.25\nlayers = 32\n")
    return head + "".join(
        f'[[gpu]]\ntype = "G{g}"\ncount = {count}\nmemory_gib = {memory}\nmemory_base_gib = 2.0\n'
        f"forward_s = [{forward_s * (1 + slowdown * g)}, {1.9 * forward_s * (1 + slowdown * g)}]\n"
        f"backward_s = [{2 * forward_s * (1 + slowdown * g)}, {3.8 * forward_s * (1 + slowdown * g)}]\n"
        for g, (count, memory) in enumerate(groups)
    )


def dp_within(tmp_path, limit: float, **fields):
    """``dp`` under a ``limit`` of seconds on the file ``synthetic_toml(**fields)`` writes, its
    wall time held to the limit: the result and the instance."""
    import time

    import hetopt
    from hetopt.family import TIME_LIMIT_SLACK_S

    path = tmp_path / "synthetic.toml"
    path.write_text(synthetic_toml(**fields))
    inst = hetopt.load(path)
    start = time.perf_counter()
    r = hetopt.solve(inst, "dp", time_limit=limit)
    wall = time.perf_counter() - start
    assert wall <= limit + TIME_LIMIT_SLACK_S, (wall, r.status, r.reason)
    return r, inst
