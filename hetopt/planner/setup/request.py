"""What a plan is asked for: :class:`PlanRequest`, every option of :func:`hetopt.plan` by name.

The request is a frozen, keyword-only dataclass. :meth:`PlanRequest.checked` validates every
field by name before any work (types, ranges, choices; the rules live in :mod:`hetopt.checks`)
and returns the request with its texts parsed (a ``runtime`` or ``layout`` string becomes its
object). ``hetopt plan`` builds one from its flags and the Python API from its keywords, so
the command line and the library refuse the same values with the same rules; the command
line then names its flag where the library names the field (``InputError.field``).

Examples
--------
>>> req = PlanRequest(cluster="tangram-c2", model="gpt3-1.3b", global_batch=16).checked()
>>> req.policies, req.time_limit
(('redundancy', 'infeasibility', 'imbalance'), None)
>>> PlanRequest(cluster="tangram-c2", model="gpt3-1.3b", global_batch="16").checked()
Traceback (most recent call last):
...
hetopt.errors.InputError: global_batch: must be a whole number (got '16')
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, fields, replace
from pathlib import Path

from hetopt.budget import check_time_limit
from hetopt.checks import (MAX_GLOBAL_BATCH, MAX_SEQ, check_bool, check_choice, check_gap_limit, check_int,
                           check_names, check_optional_int, check_real)
from hetopt.errors import InputError
from hetopt.hardware import MAX_HEADROOM_GIB
from hetopt.catalog import instances_dir
from hetopt.planner.setup.cluster import Cluster, load_cluster, resolve
from hetopt.planner.search.enumerate import DEFAULT_IMBALANCE, DEFAULT_TASKS, POLICIES
from hetopt.planner.setup.layout import GivenLayout, IslandBlock, parse_island_layouts, parse_layout
from hetopt.planner.setup.framework import Framework, layout_names_runtime, parse_runtime
from hetopt.planner.search.schedule import TIME_MODELS
from hetopt.planner.alternatives.mixedplan import MixedLayout, is_mixed_text, parse_mixed_layout
from hetopt.runtimes import RUNTIMES
from hetopt.workload import ModelConfig, load_model

#: Islands past which a cluster is *large* by default (``PlanRequest.narrow_above``): its search
#: is narrowed (``hetopt.planner.setup.configure``: atoms, micro-batch sizes) so that every
#: island is composed within about a minute on two cores (the 512-node datacenter's 30 islands:
#: docs/planner.md). Every island is composed either way (issue 43).
MAX_COMPOSE_ISLANDS = 16


@dataclass(frozen=True, kw_only=True)
class PlanRequest:
    """Every option of a plan, by name (see :func:`hetopt.plan` for what each one does).

    Attributes
    ----------
    cluster, model
        Loaded objects, paths to their files, or names in ``instances/clusters`` and
        ``instances/models``, as the command line takes them.
    global_batch
        Samples per iteration, 1 to ``hetopt.checks.MAX_GLOBAL_BATCH``.
    microbatch_size
        Samples per micro-batch of the whole pipeline (over all its data-parallel replicas).
        None: every divisor of the global batch is a candidate (powers of two first) and the
        fastest plan kept; a size whose lower bound
        (:func:`~hetopt.planner.search.compose.pipeline_lower_bound`) cannot beat the best plan found
        is skipped, which proves it cannot.
    seq
        Tokens per sample (None: the model's), 1 to ``hetopt.checks.MAX_SEQ``.
    policies
        The pruning policies on (a tuple out of ``POLICIES``; default all: redundancy,
        infeasibility, imbalance).
    imbalance
        The imbalance policy's ratio, a finite number >= 1.
    time_limit
        Seconds for the whole call (islands, enumeration, composition, alternatives); the call
        returns within ``time_limit + hetopt.family.TIME_LIMIT_SLACK_S``. Stopped early, the
        plan is FEASIBLE with its bound and gap, or TIME_LIMIT without one; never a false
        OPTIMAL or INFEASIBLE. None: no limit; 0: return at once with what is known.
    gap_limit
        The relative gap, in [0, 1), within which the plan counts as good enough (as OR-Tools'
        ``relative_gap_limit`` and HiGHS's ``mip_rel_gap``): by closed-form time and without a
        ``target`` (elsewhere it changes nothing), a micro-batch size proven to hold no plan
        faster than the best found times (1 − gap_limit) is not searched further, and the plan
        is FEASIBLE with its gap, at most gap_limit, when such a size kept it from OPTIMAL.
        Where it takes effect it lifts the ``narrow_above`` narrowing (a narrowed search's only
        whole-cluster bound is the ideal, so it could not keep the limit).
        0 (default): the search proves the optimum.
    alternatives
        Also plan the alternatives (FSDP, single island, uniform, proportional).
    replicas
        Also plan data-parallel replicas (``hetopt.planner.alternatives.replicas``): the islands cut into
        units, whole-model pipelines on units of one shape, the replicas family's ``dp``
        choosing the replicas and their micro-batch shares; in ``HeteroPlan.replicas``,
        FEASIBLE with the ideal time as bound.
    max_islands
        Compose only the ``max_islands`` islands with the most sustained FLOP/s (a heuristic:
        the plan is then exact over those islands only, and FEASIBLE with its gap to the ideal
        when islands are left out). None: every island.
    narrow_above
        Islands past which the search is narrowed (default ``MAX_COMPOSE_ISLANDS``, 16): on a
        cluster that forms more, with no ``max_islands``, the built-in parallelizer cuts the
        model into at most ``LARGE_CLUSTER_ATOMS`` atoms (unless ``layers_per_atom`` is given)
        and only the micro-batch sizes ``LARGE_CLUSTER_MICROBATCHES`` are tried (constants of
        ``hetopt.planner.setup.configure``); the plan is then FEASIBLE, optimal within the
        narrowing. Not narrowed under a ``gap_limit`` that takes effect. None: never narrowed
        (every divisor of the batch, one-layer atoms: on the 512-node datacenter 201 s to a plan
        proven within 0.8% of optimal, 124 s with ``gap_limit=0.02``, against about 20 s
        narrowed, without the alternatives; docs/planner.md).
    tasks
        With an executor, the queries of one enumeration go out in at most this many batches.
    layers_per_atom
        Layers per atom of the built-in parallelizer (None: 1, coarser on very large
        clusters); above 1 the search is narrowed and the plan FEASIBLE, not OPTIMAL.
    layout
        A layout to price beside the plan (``"tp=8 pp=8 dp=12 mbs=1 recompute=full zero=1"``
        or a :class:`~hetopt.planner.setup.layout.GivenLayout`) on a cluster that forms one island,
        or one per island (``"ISLAND: layers=K tp=.. pp=.. dp=..; ..."``, front of the
        pipeline first, or a tuple of :class:`~hetopt.planner.setup.layout.IslandBlock`);
        ``HeteroPlan.given_layout`` then holds its iteration time and the plan's speed-up.
    runtime
        What the training framework can run (:mod:`hetopt.planner.setup.framework`,
        ``"recompute=none,full zero=0 flash=no"``): the built-in parallelizer searches only
        that, priced as it runs, and a given ``layout`` is priced under it too (its text must
        then not name runtime keys).
    time_model
        ``"closed-form"`` (default): the pipeline family's closed form T, as Tangram composes;
        ``"simulated"``: the best by simulated 1F1B time among the candidates re-ranked
        (``hetopt.planner.search.schedule``), OPTIMAL only when that is proven.
    target
        A runtime of ``hetopt.runtimes.RUNTIMES`` (``"megatron"``, ``"torchtitan"``,
        ``"deepspeed"``, ``"cephalo"``): the plan is the fastest that runtime, unmodified, runs
        as one job (its rules: ``docs/runtimes.md``), and ``HeteroPlan.launchability`` sets it
        beside the unrestricted plan. For ``"cephalo"`` the launchable plan is the
        ``cephalo-fsdp`` alternative (per-GPU batches). None: plan without restriction.
    objective
        ``"time"`` (default): the fastest plan; ``"cost"``: the cheapest per iteration, where a
        plan pays for every GPU of the islands it runs on at the cluster's prices
        (``Cluster.prices``); exact over the islands' subsets (``planner/alternatives/cheapest.py``).
    budget
        US dollars per hour, a ceiling on what the plan's islands cost: only subsets of the
        islands within it are planned (with either objective). None: no ceiling.
    mixed_stages
        Also plan the ``mixed-stages`` alternative: stages whose data-parallel replicas span
        GPU types (the mixed family, ``formulations/mixed.md``), exact on tables built from the
        built-in prices and so FEASIBLE as a plan of the cluster; it may take 30 s.
    memory_headroom
        GiB per GPU that training holds beyond its tensors (CUDA context, NCCL's buffers, the
        allocator's fragmentation), 0 to ``hetopt.hardware.MAX_HEADROOM_GIB``: every stage must
        fit its GPU's capacity (the node's ``memory_gib``) with it. None: the default,
        ``hetopt.hardware.DEFAULT_HEADROOM_GIB``, the sum of ``HEADROOM_PARTS`` (each with its
        source); the plan shows it (``HeteroPlan.memory``).
    """

    cluster: Cluster | str | os.PathLike
    model: ModelConfig | str | os.PathLike
    global_batch: int
    microbatch_size: int | None = None
    seq: int | None = None
    policies: tuple[str, ...] = POLICIES
    imbalance: float = DEFAULT_IMBALANCE
    time_limit: float | None = None
    gap_limit: float = 0.0
    alternatives: bool = True
    replicas: bool = False
    max_islands: int | None = None
    narrow_above: int | None = MAX_COMPOSE_ISLANDS
    tasks: int = DEFAULT_TASKS
    layers_per_atom: int | None = None
    layout: GivenLayout | tuple[IslandBlock, ...] | MixedLayout | str | None = None
    runtime: Framework | str | None = None
    time_model: str = "closed-form"
    target: str | None = None
    objective: str = "time"
    budget: float | None = None
    mixed_stages: bool = False
    memory_headroom: float | None = None

    @classmethod
    def of(cls, **options: object) -> PlanRequest:
        """A request from keywords, where an unknown keyword names the closest option.

        >>> PlanRequest.of(cluster="c", model="m", global_batch=8, microbatch=2)
        Traceback (most recent call last):
        ...
        TypeError: plan() got an unexpected keyword 'microbatch' (did you mean 'microbatch_size'?)
        """
        names = [f.name for f in fields(cls)]
        for key in options:
            if key not in names:
                close = difflib.get_close_matches(key, names, n=1) or [n for n in names if n.startswith(key)][:1]
                hint = f" (did you mean {close[0]!r}?)" if close else f" (options: {', '.join(names)})"
                raise TypeError(f"plan() got an unexpected keyword {key!r}{hint}")
        missing = [n for n in ("cluster", "model", "global_batch") if n not in options]
        if missing:
            raise TypeError(f"plan() needs {', '.join(missing)}")
        return cls(**options)

    def checked(self) -> PlanRequest:
        """This request validated field by field, with ``layout`` and ``runtime`` texts parsed.

        Raises
        ------
        InputError
            The first field that is not what it must be, named (``field`` set).
        """
        _check_source(self.cluster, "cluster", Cluster)
        _check_source(self.model, "model", ModelConfig)
        runtime = self.runtime
        if runtime is not None and not isinstance(runtime, (str, Framework)):
            raise InputError(f"runtime: must be text such as 'recompute=none zero=0' or a Framework (got {runtime!r})",
                             field="runtime")
        layout = self.layout
        if layout is not None and not isinstance(layout, (str, GivenLayout, MixedLayout)) and not (
                isinstance(layout, tuple) and layout and all(isinstance(b, IslandBlock) for b in layout)):
            raise InputError("layout: must be text such as 'tp=8 pp=2 dp=4 mbs=1', a GivenLayout, a tuple of "
                             f"IslandBlock or a MixedLayout (got {layout!r})", field="layout")
        if isinstance(runtime, str):
            runtime = parse_runtime(runtime)
        if isinstance(layout, str):
            restated = layout_names_runtime(layout) if runtime is not None else []
            if restated:
                raise InputError(f"layout: names {', '.join(restated)}; with a runtime, say how the framework runs "
                                 "once, in the runtime", field="layout")
            # "ISLAND: layers=K ...; ..." gives one layout per island; "TYPE: ... replicas=R ...": a mixed-stages plan
            layout = (parse_mixed_layout(layout) if is_mixed_text(layout) else
                      parse_island_layouts(layout) if ":" in layout else parse_layout(layout))
        return replace(
            self,
            global_batch=check_int(self.global_batch, "global_batch", 1, MAX_GLOBAL_BATCH),
            microbatch_size=check_optional_int(self.microbatch_size, "microbatch_size", 1, MAX_GLOBAL_BATCH),
            seq=check_optional_int(self.seq, "seq", 1, MAX_SEQ),
            policies=check_names(self.policies, "policies", POLICIES),
            imbalance=check_real(self.imbalance, "imbalance", 1.0),
            time_limit=check_time_limit(self.time_limit),
            gap_limit=check_gap_limit(self.gap_limit),
            alternatives=check_bool(self.alternatives, "alternatives"),
            replicas=check_bool(self.replicas, "replicas"),
            max_islands=check_optional_int(self.max_islands, "max_islands", 1),
            narrow_above=check_optional_int(self.narrow_above, "narrow_above", 1),
            tasks=check_int(self.tasks, "tasks", 1),
            layers_per_atom=check_optional_int(self.layers_per_atom, "layers_per_atom", 1),
            time_model=check_choice(self.time_model, "time_model", TIME_MODELS),
            layout=layout,
            runtime=runtime,
            target=None if self.target is None else check_choice(self.target, "target", tuple(RUNTIMES)),
            objective=check_choice(self.objective, "objective", OBJECTIVES),
            mixed_stages=check_bool(self.mixed_stages, "mixed_stages"),
            budget=None if self.budget is None else _check_budget(self.budget),
            memory_headroom=None if self.memory_headroom is None else _check_headroom(self.memory_headroom),
        )

    @property
    def priced(self) -> bool:
        """The plan is searched over island subsets by price (a cost objective or a budget)."""
        return self.objective == "cost" or self.budget is not None


#: What a plan minimises: its iteration time, or its cost per iteration.
OBJECTIVES = ("time", "cost")


def _check_budget(value: object) -> float:
    """A budget in US dollars per hour: a finite number above 0."""
    budget = check_real(value, "budget")
    if budget <= 0:
        raise InputError(f"budget: must be above 0 US dollars per hour (got {value!r})", field="budget")
    return budget


def _check_headroom(value: object) -> float:
    """A memory headroom in GiB per GPU: a finite number from 0 to ``MAX_HEADROOM_GIB``.

    >>> _check_headroom(-1)
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: memory_headroom: must be >= 0 (got -1)
    """
    headroom = check_real(value, "memory_headroom", 0.0)
    if headroom > MAX_HEADROOM_GIB:
        raise InputError(f"memory_headroom: must be at most {MAX_HEADROOM_GIB:g} GiB per GPU (got {value!r})",
                         field="memory_headroom")
    return headroom


def as_cluster(cluster: Cluster | str | os.PathLike) -> Cluster:
    """A loaded cluster, a path to a cluster file, or a name in ``instances/clusters``."""
    return cluster if isinstance(cluster, Cluster) else load_cluster(cluster)


def as_model(cfg: ModelConfig | str | os.PathLike) -> ModelConfig:
    """A loaded model, a path to a model file, or a name in ``instances/models``."""
    return cfg if isinstance(cfg, ModelConfig) else load_model(resolve(str(cfg), instances_dir() / "models", "model"))


def _check_source(value: object, field: str, kind: type) -> None:
    """A loaded object, a path, or a shipped name (resolved later, when it is read)."""
    if isinstance(value, (kind, str, Path, os.PathLike)) and not (isinstance(value, str) and not value.strip()):
        return
    raise InputError(f"{field}: must be a {kind.__name__}, a path to its file or a name in instances/ (got {value!r})",
                     field=field)


__all__ = ["MAX_COMPOSE_ISLANDS", "MAX_GLOBAL_BATCH", "MAX_SEQ", "OBJECTIVES", "PlanRequest", "as_cluster", "as_model"]
