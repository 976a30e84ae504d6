"""The plans the composed pipeline is compared with, on the same cost model.

* ``cephalo-fsdp``: FSDP over every GPU (allocation family, ``planner/fsdp.py``);
* ``single-island``: the parallelizer's best plan of the whole model on one island;
* ``uniform-layers`` / ``compute-proportional``: compositions with each island's layer count
  fixed in proportion to its GPUs / its sustained FLOP/s, solved by the pipeline ``dp``.

Each alternative carries a status like a solver's Result: OPTIMAL (its own optimum, proven),
FEASIBLE (the time limit stopped it after a plan was found), TIME_LIMIT, INFEASIBLE (nothing
fits), DECLINED or ERROR (its method declined or failed, with the reason). An alternative
never stops the planner: whatever happens to it is shown in its row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from hetopt import solvers
from hetopt.errors import InputError
from hetopt.family import Deadline, no_solution
from hetopt.planner.builtin import best_single_island_plan
from hetopt.planner.cluster import Cluster
from hetopt.planner.compose import link_matrix, microbatch_candidates, pipeline_instance, split_layers
from hetopt.planner.fsdp import plan_fsdp
from hetopt.planner.parallelizer import IslandSpec, Parallelizer, PartialPlan, Slice
from hetopt.result import Result, Status
from hetopt.workload import ModelConfig


@dataclass(frozen=True)
class Alternative:
    """Another plan on the same cost model: its name, iteration time (None if none), note, status."""

    name: str
    iteration_time_s: float | None
    detail: str
    status: Status


@dataclass(frozen=True)
class Setting:
    """What every alternative is planned for: the cluster, the model and its composed islands."""

    cluster: Cluster
    cfg: ModelConfig
    specs: Sequence[IslandSpec]
    members: Sequence[Sequence[int]]
    parallelizer: Parallelizer
    atoms: tuple
    global_batch: int
    seq: int
    microbatch_size: int | None


def _remaining(deadline: Deadline) -> float | None:
    return None if deadline.limit == float("inf") else deadline.remaining()


def fsdp_batches(result: Result) -> str:
    """Every GPU's batch, grouped: ``type b×n, b'×n'`` (batch b on n GPUs), adding up to B.

    Examples
    --------
    >>> from types import SimpleNamespace as S
    >>> gpus = [S(type="V100", batch=b) for b in (1, 5, 5, 9)] + [S(type="A100", batch=21)]
    >>> fsdp_batches(S(solution=S(gpus=gpus)))
    'V100 1×1, 5×2, 9×1; A100 21×1 (batch×GPUs, total 41)'
    """
    by_type: dict[str, Counter] = {}
    for g in result.solution.gpus:
        by_type.setdefault(g.type, Counter())[g.batch] += 1
    groups = "; ".join(
        f"{t} " + ", ".join(f"{b}×{n}" for b, n in sorted(counts.items())) for t, counts in by_type.items()
    )
    total = sum(b * n for counts in by_type.values() for b, n in counts.items())
    return f"{groups} (batch×GPUs, total {total})"


def fsdp_alternative(s: Setting, deadline: Deadline) -> Alternative:
    """Cephalo's FSDP plan; a declined, failed or out-of-memory allocation says so in its row."""
    if deadline.expired():
        return Alternative("cephalo-fsdp", None, "not planned: the time limit was spent", Status.TIME_LIMIT)
    try:
        result = plan_fsdp(s.cluster, s.cfg, s.global_batch, s.seq, time_limit=_remaining(deadline))
    except InputError as exc:  # the allocation instance refuses the sizes (with its range)
        return Alternative("cephalo-fsdp", None, f"allocation instance declined: {exc}", Status.DECLINED)
    except MemoryError as exc:
        return Alternative("cephalo-fsdp", None, f"out of memory in the allocation dp: {exc}", Status.ERROR)
    if result.status.has_solution:
        return Alternative("cephalo-fsdp", result.objective, "FSDP, per-GPU batch " + fsdp_batches(result), result.status)
    return Alternative("cephalo-fsdp", None, result.reason or result.status.value, result.status)


def _restricted(s: Setting, counts: list[int], m: int, deadline: Deadline) -> Result | None:
    """The best pipeline in which island i takes exactly counts[i] layers (0: unused)."""
    L = len(s.atoms)
    microbatches = s.global_batch // m
    plans: dict[int, list[PartialPlan]] = {i: [] for i in range(len(s.specs))}
    for i, k in enumerate(counts):
        if k == 0:
            continue
        positions = {0, L - k} | ({1} if L - k > 1 else set())  # first, last, and a middle slice
        for start in sorted(positions):
            sl = Slice(tuple(s.atoms[start : start + k]))
            plans[i].extend(s.parallelizer.parallelize(
                sl, s.specs[i], microbatch_size=m, microbatches=microbatches, global_batch=s.global_batch))
    links = link_matrix(s.cluster, s.members, s.cfg, s.seq, m)
    instance, _ = pipeline_instance("restricted", s.cfg, s.specs, plans, links, microbatches, 1.0)
    if not instance.options:
        return None
    if deadline.expired():
        return no_solution(problem="pipeline", method="dp", status=Status.TIME_LIMIT, deadline=deadline,
                           reason="time limit reached before a plan was found")
    return solvers.solve(instance, "dp", time_limit=_remaining(deadline))


class _Best:
    """The best plan of one alternative over the micro-batch sizes, and whether that is proven."""

    def __init__(self, name: str, none_fits: str) -> None:
        self.name, self.none_fits = name, none_fits
        self.time: float | None = None
        self.detail = ""
        self.proven = True  # every candidate was planned to its optimum (or proven not to fit)
        self.stopped = (Status.TIME_LIMIT, "time limit reached before a plan was found")  # why not, if not

    def stop(self, status: Status, reason: str) -> None:
        self.proven = False
        if status is not Status.FEASIBLE:
            self.stopped = (status, reason)

    def offer(self, time_s: float, detail: str) -> None:
        if self.time is None or time_s < self.time:
            self.time, self.detail = time_s, detail

    def alternative(self) -> Alternative:
        if self.time is None:
            if self.proven:
                return Alternative(self.name, None, self.none_fits, Status.INFEASIBLE)
            status, reason = self.stopped
            return Alternative(self.name, None, reason, status)
        if self.proven:
            return Alternative(self.name, self.time, self.detail, Status.OPTIMAL)
        return Alternative(self.name, self.time, f"{self.detail} (not proven best: {self.stopped[1]})", Status.FEASIBLE)


def plan_alternatives(s: Setting, deadline: Deadline) -> list[Alternative]:
    """The four alternatives, each within what is left of ``deadline``."""
    out = [fsdp_alternative(s, deadline)]
    single = _Best("single-island", "no island holds the whole model")
    uniform = _Best("uniform-layers", "no fit with layers split by GPU count")
    proportional = _Best("compute-proportional", "no fit with layers split by compute")
    gpus = [x.gpus for x in s.specs]
    speed = [x.gpus * x.gpu.training_flops * x.gpu.efficiency for x in s.specs]
    for m in microbatch_candidates(s.global_batch, s.microbatch_size):
        M = s.global_batch // m
        for x in s.specs:
            if deadline.expired():
                single.stop(Status.TIME_LIMIT, "time limit reached before every island was tried")
                break
            p = best_single_island_plan(s.cfg, x, microbatch_size=m, microbatches=M, seq=s.seq, parallelizer=s.parallelizer)
            if p is not None:
                single.offer(p.iteration_time_s, f"{x.name} ({x.gpus}x {x.gpu.name}), {p.layout}, m={m}")
        for best, weights in ((uniform, gpus), (proportional, speed)):
            if deadline.expired():
                best.stop(Status.TIME_LIMIT, "time limit reached before every micro-batch size was tried")
                continue
            counts = split_layers(weights, len(s.atoms))
            r = _restricted(s, counts, m, deadline)
            if r is None or r.status is Status.INFEASIBLE:
                continue
            if r.status is not Status.OPTIMAL:
                best.stop(r.status, r.reason or r.status.value)
            if r.status.has_solution:
                detail = "layers " + ", ".join(f"{x.name} {k}" for x, k in zip(s.specs, counts) if k) + f", m={m}"
                best.offer(r.objective, detail)
    return out + [single.alternative(), uniform.alternative(), proportional.alternative()]
