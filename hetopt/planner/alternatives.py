"""The plans the composed pipeline is compared with, each naming the model that priced it.

* ``cephalo-fsdp``: FSDP over every GPU (allocation family, ``planner/fsdp.py``);
* ``mixed-stages`` (when asked for): stages whose data-parallel replicas span GPU types (mixed
  family, ``planner/mixed.py``);
* ``single-island``: the parallelizer's best plan of the whole model on one island;
* ``uniform-layers`` / ``compute-proportional``: compositions with each island's layer count
  fixed in proportion to its GPUs / its sustained FLOP/s, solved by the pipeline ``dp``.

Each alternative carries a status like a solver's Result: OPTIMAL (its own optimum, proven),
FEASIBLE (the time limit stopped it after a plan was found), TIME_LIMIT, INFEASIBLE (nothing
fits), DECLINED or ERROR (its method declined or failed, with the reason). An alternative
never stops the planner: whatever happens to it is shown in its row.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hetopt import solvers
from hetopt.errors import InputError
from hetopt.family import Deadline, no_solution
from hetopt.planner.answer import PRICED_BY_ALLOCATION, Alternative
from hetopt.planner.builtin import best_single_island_plan, whole_model_slice
from hetopt.planner.cluster import Cluster
from hetopt.planner.compose import job_element_bytes, link_matrix, microbatch_candidates, pipeline_instance, split_layers
from hetopt.costmodel import running as run
from hetopt.planner.budget import fsdp_limit
from hetopt.planner.fsdp import ignored as fsdp_ignored
from hetopt.planner.fsdp import plan_fsdp
from hetopt.planner.mixed import mixed_alternative
from hetopt.planner.parallelizer import IslandSpec, Parallelizer, PartialPlan, Slice, held_gpus
from hetopt.result import Result, Status
from hetopt.workload import ModelConfig


#: Seconds the forked FSDP planning may run past its time limit before it is stopped: the
#: allocation dp checks the clock between units of work, plus ``evaluate`` (the same slack
#: as ``hetopt.family.TIME_LIMIT_SLACK_S``, of which this takes half).
FSDP_KILL_SLACK_S = 0.5


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
    time_model: str = "closed-form"  # "simulated": the pipelines' times are their simulated 1F1B schedules
    #: The micro-batch sizes the plan was composed over (None: ``microbatch_candidates``), so
    #: the alternatives are planned over the same ones.
    microbatch_sizes: tuple[int, ...] | None = None
    #: plan the ``mixed-stages`` alternative too (``planner/mixed.py``; off by default: it takes
    #: up to ``budget.SHARES.mixed_cap_s``, and its row is priced by block tables, not the planner's own prices)
    mixed_stages: bool = False


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


def _fsdp(s: Setting, time_limit: float | None) -> Result:
    return plan_fsdp(s.cluster, s.cfg, s.global_batch, s.seq, time_limit=time_limit, running=s.parallelizer.running)


def _fsdp_child(s: Setting, time_limit: float, conn) -> None:
    """In a forked process: plan FSDP and send ("ok", Result) or (exception type, message)."""
    try:
        conn.send(("ok", _fsdp(s, time_limit)))
    except (InputError, MemoryError) as exc:
        conn.send((type(exc).__name__, str(exc)))
    except Exception as exc:  # noqa: BLE001 - reported in the row; the parent goes on
        conn.send(("ERROR", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def _fsdp_within(s: Setting, time_limit: float) -> Result:
    """``plan_fsdp`` in a forked process, killed when ``time_limit`` (+ the stated slack) runs
    out: the allocation method may spend long before it first looks at the clock (building
    its tables for a huge batch), and the planner's limit covers its alternatives.

    Raises
    ------
    InputError, MemoryError
        As ``plan_fsdp`` raised them in the child.
    """
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe(duplex=False)
    process = context.Process(target=_fsdp_child, args=(s, time_limit, child), daemon=True)
    process.start()
    child.close()
    try:
        if not parent.poll(time_limit + FSDP_KILL_SLACK_S):
            return no_solution(problem="allocation", method="dp", status=Status.TIME_LIMIT, deadline=Deadline(None),
                               reason=f"the allocation dp did not answer within the time limit ({time_limit:.3g} s left); stopped")
        kind, payload = parent.recv()
    except EOFError:  # the child died (killed by the OOM killer, ...)
        return no_solution(problem="allocation", method="dp", status=Status.ERROR, deadline=Deadline(None),
                           reason=f"the allocation dp's process died (exit code {process.exitcode})")
    finally:
        process.kill()
        process.join()
        parent.close()
    if kind == "ok":
        return payload
    if kind == "InputError":
        raise InputError(payload)
    if kind == "MemoryError":
        raise MemoryError(payload)
    return no_solution(problem="allocation", method="dp", status=Status.ERROR, deadline=Deadline(None), reason=payload)


def fsdp_alternative(s: Setting, deadline: Deadline) -> Alternative:
    """Cephalo's FSDP plan; a declined, failed or out-of-memory allocation says so in its row.

    Under a time limit it runs in a forked process (where the platform can fork) that is
    stopped when the limit runs out.
    """
    running, ignores = s.parallelizer.running, fsdp_ignored(s.parallelizer.running)
    under = dict(running=running, ignores=ignores)
    if deadline.expired():
        return Alternative("cephalo-fsdp", None, "not planned: the time limit was spent", Status.TIME_LIMIT, PRICED_BY_ALLOCATION,
                           **under)
    left = fsdp_limit(deadline)
    try:
        if left is not None and "fork" in multiprocessing.get_all_start_methods():
            result = _fsdp_within(s, left)
        else:
            result = _fsdp(s, left)
    except InputError as exc:  # the allocation instance refuses the sizes (with its range)
        return Alternative("cephalo-fsdp", None, f"allocation instance declined: {exc}", Status.DECLINED, PRICED_BY_ALLOCATION,
                           **under)
    except MemoryError as exc:
        return Alternative("cephalo-fsdp", None, f"out of memory in the allocation dp: {exc}", Status.ERROR, PRICED_BY_ALLOCATION,
                           **under)
    if result.status.has_solution:
        used = Counter(g.type for g in result.solution.gpus)
        without = "" if not ignores else "; priced without " + ", ".join(
            f"{k}={run.BY_TEXT[k].word(getattr(running, run.BY_TEXT[k].field))}" for k in ignores) + \
            " (the allocation model cannot express it: not compared for best)"
        return Alternative("cephalo-fsdp", result.objective, "FSDP, per-GPU batch " + fsdp_batches(result) + without,
                           result.status, PRICED_BY_ALLOCATION, dict(used), **under)
    return Alternative("cephalo-fsdp", None, result.reason or result.status.value, result.status, PRICED_BY_ALLOCATION,
                       **under)


def _restricted_slices(s: Setting, counts: Sequence[int]) -> list[tuple[int, Slice]]:
    """The (island, slice) pairs :func:`_restricted` asks the parallelizer about, in its order:
    island i's first, last and a middle run of counts[i] atoms."""
    L = len(s.atoms)
    out = []
    for i, k in enumerate(counts):
        if k == 0:
            continue
        positions = {0, L - k} | ({1} if L - k > 1 else set())  # first, last, and a middle slice
        out.extend((i, Slice(tuple(s.atoms[start : start + k]))) for start in sorted(positions))
    return out


def _layer_splits(s: Setting) -> tuple[list[int], list[int]]:
    """The layer counts of ``uniform-layers`` (by GPUs) and ``compute-proportional`` (by sustained FLOP/s)."""
    return (split_layers([x.gpus for x in s.specs], len(s.atoms)),
            split_layers([x.sustained_flops for x in s.specs], len(s.atoms)))


def alternative_queries(s: Setting) -> list[tuple[Slice, IslandSpec]]:
    """Every (slice, island) pair the alternatives ask the parallelizer about at each micro-batch
    size: the whole model on each island, then the two restricted compositions' slices.

    The planner sends those its enumeration did not ask to its workers while it composes
    (``planner/plan.py``), so the alternatives find them answered. A pair missing here is
    only priced later, in this process: the list changes no answer.

    Examples
    --------
    >>> from hetopt.planner.builtin import BuiltinParallelizer
    >>> from hetopt.planner.compose import island_specs
    >>> from hetopt.planner.request import as_cluster, as_model
    >>> cluster, cfg, par = as_cluster("tangram-c2"), as_model("gpt3-1.3b"), BuiltinParallelizer()
    >>> members = [[0, 1], [2, 3, 4, 5]]  # the two A100 nodes, the four H100 NVL nodes
    >>> s = Setting(cluster, cfg, island_specs(cluster, members), members, par, par.slice_model(cfg, seq=2048),
    ...             128, 2048, None)
    >>> [(sl.layers, x.gpu.name) for sl, x in alternative_queries(s)[:2]]
    [(24, 'A100-PCIe-80GB'), (24, 'H100-NVL')]
    """
    whole = whole_model_slice(s.parallelizer, s.cfg, s.seq)
    out = [(whole, x) for x in s.specs]
    for counts in _layer_splits(s):
        out.extend((sl, s.specs[i]) for i, sl in _restricted_slices(s, counts))
    return out


def _restricted(s: Setting, counts: list[int], m: int, deadline: Deadline) -> Result | None:
    """The best pipeline in which island i takes exactly counts[i] layers (0: unused)."""
    microbatches = s.global_batch // m
    plans: dict[int, list[PartialPlan]] = {i: [] for i in range(len(s.specs))}
    for i, sl in _restricted_slices(s, counts):
        if deadline.expired():
            return no_solution(problem="pipeline", method="dp", status=Status.TIME_LIMIT, deadline=deadline,
                               reason="time limit reached before a plan was found")
        plans[i].extend(s.parallelizer.parallelize(
            sl, s.specs[i], microbatch_size=m, microbatches=microbatches, global_batch=s.global_batch))
    links = link_matrix(s.cluster, s.members, s.cfg, s.seq, m, job_element_bytes(s.parallelizer))
    instance, _ = pipeline_instance("restricted", s.cfg, s.specs, plans, links, microbatches, 1.0)
    if not instance.options:
        return None
    if deadline.expired():
        return no_solution(problem="pipeline", method="dp", status=Status.TIME_LIMIT, deadline=deadline,
                           reason="time limit reached before a plan was found")
    return solvers.solve(instance, "dp", time_limit=deadline.seconds_left())


class _Best:
    """The best plan of one alternative over the micro-batch sizes, and whether that is proven."""

    def __init__(self, name: str, none_fits: str) -> None:
        self.name, self.none_fits = name, none_fits
        self.time: float | None = None
        self.detail = ""
        self.used: dict[str, int] | None = None  # the best plan's GPUs by type
        self.proven = True  # every candidate was planned to its optimum (or proven not to fit)
        self.stopped = (Status.TIME_LIMIT, "time limit reached before a plan was found")  # why not, if not

    def stop(self, status: Status, reason: str) -> None:
        self.proven = False
        if status is not Status.FEASIBLE:
            self.stopped = (status, reason)

    def offer(self, time_s: float, detail: str, used: dict[str, int]) -> None:
        if self.time is None or time_s < self.time:
            self.time, self.detail, self.used = time_s, detail, used

    def alternative(self) -> Alternative:
        if self.time is None:
            if self.proven:
                return Alternative(self.name, None, self.none_fits, Status.INFEASIBLE)
            status, reason = self.stopped
            return Alternative(self.name, None, reason, status)
        if self.proven:
            return Alternative(self.name, self.time, self.detail, Status.OPTIMAL, gpus_by_type=self.used)
        return Alternative(self.name, self.time, f"{self.detail} (not proven best: {self.stopped[1]})", Status.FEASIBLE,
                           gpus_by_type=self.used)


def plan_alternatives(s: Setting, deadline: Deadline) -> list[Alternative]:
    """The four alternatives (five with ``mixed_stages``), each within what is left of ``deadline``."""
    out = [fsdp_alternative(s, deadline)] + ([mixed_alternative(s, deadline)] if s.mixed_stages else [])
    single = _Best("single-island", "no island holds the whole model")
    uniform = _Best("uniform-layers", "no fit with layers split by GPU count")
    proportional = _Best("compute-proportional", "no fit with layers split by compute")
    splits = _layer_splits(s)
    for m in s.microbatch_sizes or microbatch_candidates(s.global_batch, s.microbatch_size):
        M = s.global_batch // m
        for x in s.specs:
            if deadline.expired():
                single.stop(Status.TIME_LIMIT, "time limit reached before every island was tried")
                break
            p = best_single_island_plan(s.cfg, x, microbatch_size=m, microbatches=M, seq=s.seq, parallelizer=s.parallelizer)
            if p is not None:
                single.offer(p.iteration_time_s, f"{x.name} ({x.gpus}x {x.gpu.name}), {p.layout}, m={m}", {x.gpu.name: x.gpus})
        for best, counts in zip((uniform, proportional), splits):
            if deadline.expired():
                best.stop(Status.TIME_LIMIT, "time limit reached before every micro-batch size was tried")
                continue
            r = _restricted(s, counts, m, deadline)
            if r is None or r.status is Status.INFEASIBLE:
                continue
            if r.status is not Status.OPTIMAL:
                best.stop(r.status, r.reason or r.status.value)
            if r.status.has_solution:
                detail = "layers " + ", ".join(f"{x.name} {k}" for x, k in zip(s.specs, counts) if k) + f", m={m}"
                simulated = getattr(r.solution, "simulated_or_none", None)
                # the composed plan's time model, so the speed-ups compare like with like
                held = held_gpus(s.specs, {block.island for block in r.solution.blocks})
                best.offer(simulated if s.time_model == "simulated" and simulated is not None else r.objective, detail,
                           held)
    # the pipelines are priced by the plan's own parallelizer, under its running settings; the
    # FSDP and mixed rows say what their models leave out (``Alternative.ignores``)
    running = s.parallelizer.running
    return [a if a.running is not None else replace(a, running=running)
            for a in out + [single.alternative(), uniform.alternative(), proportional.alternative()]]
