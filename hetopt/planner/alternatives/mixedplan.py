"""The mixed-stages plan as a plan: its data in the plan document, its ``--layout`` text, and that text priced.

The ``mixed-stages`` alternative (``planner/alternatives/mixed.py``) is a plan of the mixed family: stages
whose data-parallel replicas span GPU types. This module makes it first-class:

* :func:`plan_data` writes it as plain data (the alternative's ``plan`` in ``hetopt plan
  --json``: every stage's layers, each GPU type's TP, replicas, samples and shares, memory and
  time; ``docs/formats.md``, "The mixed-stages plan");
* :class:`MixedLayout` is the same plan as ``--layout`` text, one stage a part, each GPU type a
  member of it::

      A100-SXM4-40GB: layers=24 tp=1 replicas=16 samples=112 + V100-SXM2-16GB: tp=4 replicas=4 mbs=4

  (stages separated by ``;``, a stage's members by ``+``; ``layers=K`` once per stage; per member
  ``tp``, ``replicas`` and either ``mbs`` (every replica's samples of each micro-batch) or
  ``samples`` (the type's samples, spread as evenly as whole samples allow); the running keys of
  ``--layout``, for the whole job, at most once each);
* :func:`price_mixed_layout` prices that text as the alternative was priced, so ``plan
  --mixed-stages --json`` → ``--layout`` gives the same time (``tests/planner/test_mixed_round_trip.py``).

Examples
--------
>>> lay = parse_mixed_layout("A100: layers=2 tp=1 replicas=2 mbs=3 + V100: tp=4 replicas=1 samples=2; A100: layers=1 tp=2 replicas=2 samples=8")
>>> [(st.layers, [(m.gpu, m.tp, m.replicas, m.samples) for m in st.members]) for st in lay.stages]
[(2, [('A100', 1, 2, 6), ('V100', 4, 1, 2)]), (1, [('A100', 2, 2, 8)])]
>>> lay.microbatch_size
8
>>> lay.text()
'A100: layers=2 tp=1 replicas=2 mbs=3 + V100: tp=4 replicas=1 mbs=2; A100: layers=1 tp=2 replicas=2 mbs=4'
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hetopt.costmodel import running as run
from hetopt.costmodel.running import Running
from hetopt.errors import InputError
from hetopt.planfile import MIXED_PLAN_KIND
from hetopt.mixed.problem import (Member, MixedInstance, MixedSolution, Stage, evaluate, in_flight, member_time_s,
                                  range_sum)
from hetopt.units import GIB

#: The word that marks a ``--layout`` text as a mixed-stages plan (the per-island form has no such key).
MIXED_KEY = "replicas"
#: The keys of one member of a mixed stage (beside the running keys of ``--layout``).
MEMBER_KEYS = ("layers", "tp", "replicas", "mbs", "samples")


def is_mixed_text(text: str) -> bool:
    """Whether a ``--layout`` text is a mixed-stages plan: some word is ``replicas=...``.

    >>> is_mixed_text("A100: layers=24 tp=1 replicas=16 mbs=7"), is_mixed_text("a: layers=2 tp=2 pp=1 dp=1")
    (True, False)
    """
    return any(w.startswith(MIXED_KEY + "=") for w in text.replace(",", " ").split())


@dataclass(frozen=True)
class MixedMember:
    """One GPU type's replicas in a stage: ``replicas`` of ``tp`` GPUs holding ``samples`` of every micro-batch."""

    gpu: str
    tp: int
    replicas: int
    samples: int

    def text(self) -> str:
        """``tp=1 replicas=16 mbs=7`` (every replica alike) or ``... samples=20`` (some hold one more)."""
        even = self.samples % self.replicas == 0
        share = f"mbs={self.samples // self.replicas}" if even else f"samples={self.samples}"
        return f"tp={self.tp} replicas={self.replicas} {share}"


@dataclass(frozen=True)
class MixedStage:
    """``layers`` consecutive layers of the model on its members (one per GPU type)."""

    layers: int
    members: tuple[MixedMember, ...]


@dataclass(frozen=True)
class MixedLayout:
    """A mixed-stages plan as given: its stages front first, and how the framework runs it.

    Its stages are priced as the ``mixed-stages`` alternative prices them (no recomputation, ZeRO
    0), which the attributes ``recompute``, ``zero``, ``ep``, ``cp`` and ``offload`` say, so a
    ``--runtime`` holds it as it holds any layout (``planner/runtime.py``).
    """

    stages: tuple[MixedStage, ...]
    running: Running = Running()

    recompute = "none"
    zero = 0
    ep = 1
    cp = 1
    offload = False

    @property
    def microbatch_size(self) -> int:
        """b, the samples of one micro-batch: every stage's members hold them between them."""
        return sum(m.samples for m in self.stages[0].members)

    def text(self) -> str:
        """The ``--layout`` text (running settings that differ from the defaults once, after the
        first member; bf16 left unsaid, as :meth:`GivenLayout.text <hetopt.planner.setup.layout.GivenLayout.text>`)."""
        shown = self.running if self.running.precision != "bf16" else replace(self.running, precision=None)
        tail = f" {shown.text()}" if shown.text() else ""
        parts = []
        for k, st in enumerate(self.stages):
            words = [f"{m.gpu}: " + (f"layers={st.layers} " if j == 0 else "") + m.text() + (tail if k == j == 0 else "")
                     for j, m in enumerate(st.members)]
            parts.append(" + ".join(words))
        return "; ".join(parts)

    def runtime(self, par):
        """``par`` pricing the framework this plan runs on (:attr:`running`)."""
        return par.run_as(self.running)


def _error(message: str) -> InputError:
    return InputError(message, field="layout")


def _count(part: str, key: str, value: str) -> int:
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise _error(f"layout {key}={value}: must be a whole number >= 1 (in {part!r})")
    return int(value)


def parse_mixed_layout(text: str) -> MixedLayout:
    """Read a mixed-stages ``--layout`` text (the module's form).

    Raises
    ------
    InputError
        (field ``layout``) a member without ``TYPE:``, an unknown or repeated key, a stage
        without ``layers=K`` or with it twice, a member without ``tp``/``replicas`` or without
        exactly one of ``mbs``/``samples``, fewer samples than replicas, a type twice in a stage,
        stages whose samples differ (one micro-batch size), a running key given twice.

    Examples
    --------
    >>> parse_mixed_layout("A100: layers=2 tp=1 replicas=2 mbs=1; V100: layers=1 tp=1 replicas=1 mbs=3")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: layout: every stage holds the same micro-batch: stage 0 holds 2 samples, stage 1 holds 3 (give the members' samples so that each stage's add up to one size)
    """
    from hetopt.planner.setup.layout import key_values

    stages, running_words = [], {}
    for s, stage_text in enumerate(p.strip() for p in text.split(";")):
        if not stage_text:
            continue
        members, layers = [], None
        for part in (p.strip() for p in stage_text.split("+")):
            name, sep, rest = part.partition(":")
            if not sep or not name.strip() or not rest.strip():
                raise _error(f"layout {part!r}: give the GPU type first, as \"TYPE: tp=.. replicas=.. mbs=..\" "
                             "(a stage's types joined by +, its layers=K once)")
            values = key_values(rest.replace(",", " ").split(), MEMBER_KEYS + run.TEXT_KEYS, "layout", part)
            for key in run.TEXT_KEYS:
                if key in values:
                    if key in running_words:
                        raise _error(f"layout {key}={values[key]}: given twice; the running keys are the whole job's, "
                                     "give each once")
                    running_words[key] = values[key]
            if "layers" in values:
                if layers is not None:
                    raise _error(f"layout {part!r}: layers= is given twice in stage {s} (once per stage)")
                layers = _count(part, "layers", values["layers"])
            missing = [k for k in ("tp", "replicas") if k not in values]
            if missing or ("mbs" in values) == ("samples" in values):
                what = ", ".join(missing) + (" and " if missing else "") + (
                    "one of mbs (each replica's samples) or samples (the type's)" if ("mbs" in values) == (
                        "samples" in values) else "")
                raise _error(f"layout {part!r}: give {what.rstrip(' and')}")
            tp, replicas = _count(part, "tp", values["tp"]), _count(part, "replicas", values["replicas"])
            samples = (replicas * _count(part, "mbs", values["mbs"]) if "mbs" in values
                       else _count(part, "samples", values["samples"]))
            if samples < replicas:
                raise _error(f"layout {part!r}: samples={samples} for {replicas} replicas (every replica holds one at least)")
            gpu = name.strip()
            if any(m.gpu.lower() == gpu.lower() for m in members):
                raise _error(f"layout {part!r}: {gpu} is given twice in stage {s} (a stage holds one member per GPU type)")
            members.append(MixedMember(gpu, tp, replicas, samples))
        if layers is None:
            raise _error(f"layout {stage_text!r}: give the stage's layer count once, layers=K")
        stages.append(MixedStage(layers, tuple(members)))
    if not stages:
        raise _error("layout: empty (give \"TYPE: layers=K tp=.. replicas=.. mbs=.. + TYPE: ...; ...\")")
    sizes = [sum(m.samples for m in st.members) for st in stages]
    if len(set(sizes)) > 1:
        k = next(i for i, b in enumerate(sizes) if b != sizes[0])
        raise _error(f"layout: every stage holds the same micro-batch: stage 0 holds {sizes[0]} samples, stage {k} holds "
                     f"{sizes[k]} (give the members' samples so that each stage's add up to one size)")
    return MixedLayout(tuple(stages), Running().with_words(running_words, "layout"))


def stage_layers(s, cuts_atoms: tuple[tuple[int, int], ...]) -> list[int]:
    """The model layers of each (first atom, end atom) range of ``s.atoms``."""
    return [sum(a.layers for a in s.atoms[i:j]) for i, j in cuts_atoms]


def solution_layout(s, inst: MixedInstance, solution: MixedSolution, blocks: tuple[tuple[int, int], ...]) -> MixedLayout:
    """The :class:`MixedLayout` of a mixed solution of ``inst`` whose layer l is ``blocks[l]`` (atoms)."""
    stages = []
    for st in solution.stages:
        layers = sum(a.layers for a in s.atoms[blocks[st.first][0]:blocks[st.end - 1][1]])
        stages.append(MixedStage(layers, tuple(MixedMember(inst.gpus[m.gpu].name, m.degree, m.replicas, m.samples)
                                              for m in st.members)))
    return MixedLayout(tuple(stages), s.parallelizer.running)


def plan_data(s, inst: MixedInstance, solution: MixedSolution, blocks: tuple[tuple[int, int], ...]) -> dict:
    """The mixed plan as plain data: the alternative's ``plan`` in the plan document.

    Every figure is ``evaluate``'s of the family instance the plan was priced on (times in
    seconds, per micro-batch unless named; memory per GPU in GiB, the runtime's reserved bytes
    included, against the node's memory ``capacity_gib``). A member's ``time_s`` and
    ``memory_gib`` are those of its replicas holding the largest share.
    """
    ev = evaluate(inst, solution)
    if not ev.feasible:  # the family's own answer: evaluate accepted it before
        raise AssertionError(f"a mixed plan that evaluate refuses: {ev.violations}")
    reserved = s.parallelizer.reserved_bytes
    stats, stages, first_layer = ev.details, [], 0
    for k, st in enumerate(solution.stages):
        flight = in_flight(len(solution.stages) - k - 1, inst.microbatches)
        layers = sum(a.layers for a in s.atoms[blocks[st.first][0]:blocks[st.end - 1][1]])
        members = []
        for m in st.members:
            grp = inst.gpus[m.gpu]
            t = grp.degree_index(m.degree)
            tab, y = grp.tp[t], max(m.shares)
            memory = (range_sum(tab.static_bytes, st.first, st.end)
                      + flight * range_sum(tab.activation_bytes[y - 1], st.first, st.end) + reserved)
            members.append({"gpu": grp.name, "tp": m.degree, "replicas": m.replicas, "samples": m.samples,
                            "shares": list(m.shares), "gpus": m.replicas * m.degree,
                            "time_s": member_time_s(inst, st.first, st.end, m.gpu, t, y),
                            "memory_gib": memory / GIB, "capacity_gib": (grp.memory_bytes + reserved) / GIB})
        stages.append({"first_layer": first_layer, "layers": layers, "time_s": stats["stage_times"][k],
                       "compute_s": stats["compute_s"][k], "sync_s": stats["sync_s"][k], "in_flight": flight,
                       "gpus": sum(x["gpus"] for x in members), "members": members})
        first_layer += layers
    return {"kind": MIXED_PLAN_KIND, "layout": solution_layout(s, inst, solution, blocks).text(),
            "microbatch_size": inst.microbatch_size, "microbatches": inst.microbatches,
            "iteration_time_s": ev.objective, "link_s": inst.link_s if len(stages) > 1 else 0.0, "stages": stages}


@dataclass(frozen=True)
class PricedMixed:
    """A given mixed-stages plan under the mixed alternative's prices (``plan`` None: it does not fit, ``reason`` why)."""

    layout: MixedLayout
    plan: dict | None
    reason: str = ""

    @property
    def iteration_time_s(self) -> float | None:
        return None if self.plan is None else self.plan["iteration_time_s"]

    def to_dict(self) -> dict:
        """Plain data for JSON (the plan document's ``given_layout``)."""
        out = {"layout": self.layout.text(), "iteration_time_s": self.iteration_time_s, "fits": self.plan is not None,
               "reason": self.reason, "microbatch_size": self.layout.microbatch_size}
        if self.plan is not None:
            out["peak_memory_gib"] = max(m["memory_gib"] for st in self.plan["stages"] for m in st["members"])
            out["gpus"] = sum(st["gpus"] for st in self.plan["stages"])
            out["plan"] = self.plan
        return out


def price_mixed_layout(layout: MixedLayout, s) -> PricedMixed:
    """The given mixed-stages plan priced as the ``mixed-stages`` alternative prices its own.

    The family instance is the alternative's at the layout's micro-batch size
    (``planner.alternatives.mixedtables.mixed_instance``) with its blocks also cut where a given stage starts, so a
    plan the alternative wrote (stages on its block boundaries) is priced on the very same
    tables, and ``evaluate`` gives its time to the last bit.

    Parameters
    ----------
    layout
        The plan (:func:`parse_mixed_layout`).
    s
        The plan's setting (``planner.alternatives.Setting``), its parallelizer held to the
        layout's running settings.

    Raises
    ------
    InputError
        (field ``layout``) a GPU type the cluster does not have or whose tables hold no block,
        a TP degree not priced for the type, layers that do not add up to the model's or fall
        inside an atom, a micro-batch that does not divide the global batch.
    """
    from hetopt.planner.alternatives.mixedtables import block_ranges, mixed_instance

    cfg, b = s.cfg, layout.microbatch_size
    if sum(st.layers for st in layout.stages) != cfg.layers:
        raise _error(f"layout: the stages' layers add up to {sum(st.layers for st in layout.stages)}, not the "
                     f"{cfg.layers} layers of {cfg.name}")
    if s.global_batch % b:
        raise _error(f"layout: a micro-batch of {b} samples (each stage's members' samples) does not divide the global "
                     f"batch {s.global_batch}")
    starts, first = {0: 0}, 0
    for k, a in enumerate(s.atoms):
        first += a.layers
        starts[first] = k + 1
    cuts, layer = [], 0
    for k, st in enumerate(layout.stages):
        if layer not in starts:
            raise _error(f"layout: stage {k} starts at layer {layer}, inside an atom of {s.atoms[0].layers} layers "
                         "(stage boundaries fall between atoms)")
        cuts.append(starts[layer])
        layer += st.layers
    blocks = block_ranges(len(s.atoms), tuple(cuts))
    inst = mixed_instance(s, b, cuts=tuple(cuts))
    names = {g.name.lower(): i for i, g in enumerate(inst.gpus)}
    cluster_types = sorted({g.name for g in s.cluster.gpu_types})
    starts_block = {lo: i for i, (lo, _hi) in enumerate(blocks)}
    stages = []
    for k, st in enumerate(layout.stages):
        members = []
        for m in st.members:
            g = names.get(m.gpu.lower())
            if g is None:
                known = [t for t in cluster_types if t.lower() == m.gpu.lower()]
                why = (f"holds no block of {cfg.name} at one sample on one node" if known else
                       f"is not a GPU type of {s.cluster.name} (its types: {', '.join(cluster_types)})")
                raise _error(f"layout {m.gpu}: {why}")
            grp = inst.gpus[g]
            if grp.degree_index(m.tp) is None:
                raise _error(f"layout {m.gpu}: tp={m.tp} is not priced for it (tp: "
                             f"{', '.join(str(t.degree) for t in grp.tp)}; a TP group stays in a node)")
            members.append(Member(g, m.tp, m.replicas, m.samples))
        lo = starts_block[cuts[k]]
        hi = starts_block[cuts[k + 1]] if k + 1 < len(cuts) else len(blocks)
        stages.append(Stage(lo, hi, tuple(sorted(members, key=lambda x: x.gpu))))
    solution = MixedSolution(tuple(stages), tuple(g.name for g in inst.gpus))
    ev = evaluate(inst, solution)
    if not ev.feasible:
        return PricedMixed(layout, None, "; ".join(ev.violations[:3]))
    return PricedMixed(layout, plan_data(s, inst, solution, blocks))


__all__ = ["MIXED_KEY", "MixedLayout", "MixedMember", "MixedStage", "PricedMixed", "is_mixed_text",
           "parse_mixed_layout", "plan_data", "price_mixed_layout", "solution_layout"]
