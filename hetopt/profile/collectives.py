"""Collectives timed through ``torch.distributed``: local processes, or the ranks of a torchrun job.

On one machine ``hetopt profile`` starts ``ranks`` processes (gloo on CPU, NCCL on GPUs, one GPU
each) that meet on a loopback address; under torchrun across the nodes of a cluster the job's
own process group is used (``WORLD_SIZE`` set), one rank per node for the network's curves. Rank
0 reports the median of each collective; the parent writes it as a ``[[collective]]`` row.
"""

from __future__ import annotations

import os
import socket
import statistics
import time

#: Loopback only: the local processes meet here, and nowhere else.
LOOPBACK = "127.0.0.1"
#: Seconds the local group waits for its processes to meet (a hang guard, not a timing).
MEET_TIMEOUT_S = 120
#: Seconds between looks at the local processes while waiting for their next row.
LOOK_EVERY_S = 0.5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def time_collective(torch, dist, op: str, nbytes: int, *, ranks: int, device: str, warmup: int, repeats: int) -> float:
    """Median seconds of ``op`` on ``nbytes`` (in float32 elements) over the current group (every rank calls it)."""
    cuda = device.startswith("cuda")
    n = max(1, nbytes // 4)
    rank = dist.get_rank()
    if op == "all_reduce":
        buf = torch.ones(n, device=device)

        def call():
            dist.all_reduce(buf)
    elif op == "all_gather":  # nbytes gathered in total: each rank gives its 1/p share
        part = torch.ones(max(1, n // ranks), device=device)
        out = [torch.empty_like(part) for _ in range(ranks)]

        def call():
            dist.all_gather(out, part)
    elif op == "reduce_scatter":  # nbytes reduced in total: each rank keeps 1/p
        part = torch.empty(max(1, n // ranks), device=device)
        ins = [torch.ones_like(part) for _ in range(ranks)]

        def call():
            if hasattr(dist, "reduce_scatter") and dist.get_backend() != "gloo":
                dist.reduce_scatter(part, ins)
            else:  # gloo has no reduce_scatter: an all-reduce and the rank's share (what it costs there)
                whole = torch.cat(ins)
                dist.all_reduce(whole)
                part.copy_(whole[rank * part.numel():(rank + 1) * part.numel()])
    elif op == "all_to_all":
        chunk = max(1, n // ranks)
        ins = [torch.ones(chunk, device=device) for _ in range(ranks)]
        out = [torch.empty(chunk, device=device) for _ in range(ranks)]

        def call():
            if dist.get_backend() != "gloo":
                dist.all_to_all(out, ins)
            else:  # gloo has no all_to_all: each rank scatters its chunks in turn
                for src in range(ranks):
                    dist.scatter(out[src], ins if rank == src else None, src=src)
    elif op == "send_recv":  # one message from rank 0 to rank 1
        buf = torch.ones(n, device=device)

        def call():
            if rank == 0:
                dist.send(buf, 1)
            elif rank == 1:
                dist.recv(buf, 0)
    else:
        raise ValueError(f"unknown collective {op!r}")
    times = []
    for i in range(warmup + repeats):
        dist.barrier()
        if cuda:
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        call()
        if cuda:
            torch.cuda.synchronize(device)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    # the slowest rank sets a collective's time: the max of the ranks' medians
    mine = torch.tensor([statistics.median(times)], dtype=torch.float64)
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
    return float(mine.item())


def _local_rank(rank: int, ranks: int, port: int, tasks: list, device: str, warmup: int, repeats: int, queue) -> None:
    """One local process: join the group, run every (op, bytes) task, rank 0 puts the medians on ``queue``."""
    import torch
    import torch.distributed as dist

    cuda = device.startswith("cuda")
    backend = "nccl" if cuda else "gloo"
    dev = f"cuda:{rank}" if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(rank)
    from datetime import timedelta

    dist.init_process_group(backend, init_method=f"tcp://{LOOPBACK}:{port}", rank=rank, world_size=ranks,
                            timeout=timedelta(seconds=MEET_TIMEOUT_S))
    try:
        for op, nbytes in tasks:
            t = time_collective(torch, dist, op, nbytes, ranks=ranks, device=dev, warmup=warmup, repeats=repeats)
            if rank == 0:
                queue.put((op, nbytes, t))
    finally:
        dist.destroy_process_group()
        if rank == 0:
            queue.put(None)


def run_local(tasks: list[tuple[str, int]], on_row, *, ranks: int, device: str, warmup: int, repeats: int,
              should_stop=lambda: False) -> None:
    """Start ``ranks`` local processes, time every task, call ``on_row(op, nbytes, seconds)`` as each finishes.

    ``should_stop()`` is asked between rows (a requested stop: Ctrl-C); the processes are ended
    (by their id) when the parent stops early, and the rows already given stay."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_local_rank, args=(r, ranks, port, tasks, device, warmup, repeats, queue), daemon=True)
             for r in range(ranks)]
    for p in procs:
        p.start()
    try:
        waited = 0.0
        while True:
            try:
                item = queue.get(timeout=LOOK_EVERY_S)
            except Exception:  # noqa: BLE001 - queue.Empty: still working, or a process died without a word
                waited += LOOK_EVERY_S
                dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                if should_stop():
                    break
                if dead or waited > MEET_TIMEOUT_S:
                    raise RuntimeError(f"the collective processes stopped answering (exit codes {dead})") from None
                continue
            waited = 0.0
            if item is None:
                break
            on_row(*item)
            if should_stop():
                break
        if not should_stop():
            for p in procs:
                p.join(MEET_TIMEOUT_S)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(5)


def under_torchrun() -> bool:
    """Whether this process is one rank of a torchrun job (its environment says so)."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ and int(os.environ["WORLD_SIZE"]) > 1


def run_torchrun(tasks: list[tuple[str, int]], on_row, *, device: str, warmup: int, repeats: int) -> None:
    """Time every task over the torchrun job's ranks; rank 0 calls ``on_row`` (the scope, ``inter``
    for one rank per node, is the caller's, from torchrun's environment)."""
    import torch
    import torch.distributed as dist

    cuda = device.startswith("cuda")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if cuda else "gloo")
    ranks = dist.get_world_size()
    try:
        for op, nbytes in tasks:
            t = time_collective(torch, dist, op, nbytes, ranks=ranks, device=f"cuda:{local}" if cuda else "cpu",
                                warmup=warmup, repeats=repeats)
            if dist.get_rank() == 0:
                on_row(op, nbytes, t)
    finally:
        dist.destroy_process_group()
