"""A profile as the cost model asks it: one term at one setting, or None where the profile does not cover it.

:func:`hetopt.costmodel.stage.price_stage` takes a :class:`Measured` as its ``measured``
argument (None: the analytic model alone, unchanged). Each question names one term of a stage's
price at one setting; the answer is the measured figure, interpolated by the rules below, or
None, and then the analytic term is used (docs/formats.md, "Profiles: how a plan uses them"):

* a layer's (embedding's, head's) forward and backward: rows of the same GPU, model, part, TP,
  sequence, recomputation and precision; at a measured micro-batch its row, between two
  measured micro-batches linear in the micro-batch (the tokens), outside them None;
* a collective: rows of the same GPU, operation, scope and ranks; at a measured size its row,
  between two measured sizes log-log (a power law between neighbours: exact for a constant
  bandwidth and for a constant latency), outside them None;
* the optimizer step: rows of the same GPU and precision, linear in the parameter count
  between measured counts, None outside;
* the host's time per layer: the row of the GPU and software stack;
* the data-parallel ring: each of its steps a ``send_recv`` of its message (the stage's
  gradient over the replicas) over the same kind of link, as measured.

Never extrapolated: a setting beyond the measured range is priced by the analytic model, and
the plan says so (``priced_from``).

Examples
--------
>>> from hetopt.profile.format import LayerRow, Profile, Provenance
>>> rows = tuple(LayerRow("cpu", "tiny", "layer", 1, b, 64, "none", "fp32", 1e-3 * b, 2e-3 * b) for b in (1, 4))
>>> m = Measured.of(Profile(Provenance("me", "today"), layers=rows))
>>> m.layer("cpu", "tiny", "layer", tp=1, samples=2, seq=64, recompute="none", precision="fp32").forward_s
0.002
>>> m.layer("cpu", "tiny", "layer", tp=1, samples=8, seq=64, recompute="none", precision="fp32") is None
True
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from hetopt.profile.format import Profile

#: The terms a plan may take from a profile, as ``priced_from`` names them.
TERMS = ("compute", "tp_collectives", "optimizer", "host", "handover", "dp_collectives")


@dataclass(frozen=True)
class LayerTimes:
    """A part's measured (or interpolated) forward and backward seconds of one micro-batch."""

    forward_s: float
    backward_s: float
    peak_bytes: float | None
    includes_tp: bool  # the times hold the TP collectives (the row's ``includes``)


def _between(xs: tuple[float, ...], x: float) -> tuple[int, int, float] | None:
    """(i, j, w): ``x`` = (1 − w)·xs[i] + w·xs[j] with xs[i] ≤ x ≤ xs[j] neighbours; None outside xs.

    >>> _between((1.0, 2.0, 4.0), 3.0), _between((1.0, 2.0), 2.0), _between((1.0, 2.0), 2.5)
    ((1, 2, 0.5), (1, 1, 0.0), None)
    """
    rel = 1e-12 * max(1.0, abs(x))  # a setting computed in floats (b·s over c) still meets its row
    j = bisect.bisect_left(xs, x - rel)
    if j == len(xs) or xs[0] > x + rel:
        return None
    if abs(xs[j] - x) <= rel:
        return j, j, 0.0
    if j == 0:
        return None
    return j - 1, j, (x - xs[j - 1]) / (xs[j] - xs[j - 1])


@dataclass(frozen=True)
class Measured:
    """The lookup tables of one or more profiles (frozen and hashable: part of a pricing context).

    Build with :meth:`of`. GPU names are matched as the catalog names them (the island's
    ``gpu.name``), model names case-insensitively.
    """

    layers: tuple[tuple[tuple, tuple[float, ...], tuple[tuple[float, float, float | None, bool], ...]], ...]
    collectives: tuple[tuple[tuple, tuple[float, ...], tuple[float, ...]], ...]
    optimizer: tuple[tuple[tuple, tuple[float, ...], tuple[float, ...]], ...]
    hosts: tuple[tuple[tuple, tuple[float, float]], ...]
    hidden: tuple[tuple[str, int], ...] = ()
    source: str = ""

    @classmethod
    def of(cls, profile: Profile) -> Measured:
        """The tables of ``profile``, each key's rows sorted along its interpolation axis."""
        layers: dict[tuple, list] = {}
        hidden: dict[str, int] = {}
        for r in profile.layers:
            key = (r.gpu, r.model.lower(), r.part, r.tp, r.seq, r.recompute, r.precision)
            layers.setdefault(key, []).append((float(r.microbatch), (r.forward_s, r.backward_s, r.peak_bytes,
                                                                      "tp_collectives" in r.includes)))
            if r.hidden is not None:
                hidden[r.model.lower()] = r.hidden
        colls: dict[tuple, list] = {}
        for r in profile.collectives:
            colls.setdefault(r.key, []).append((r.nbytes, r.time_s))
        opt: dict[tuple, list] = {}
        for r in profile.optimizer:
            opt.setdefault((r.gpu, r.precision), []).append((r.parameters, r.step_s))

        def table(d: dict) -> tuple:
            out = []
            for key in sorted(d, key=repr):
                pts = sorted(d[key], key=lambda p: p[0])
                out.append((key, tuple(p[0] for p in pts), tuple(p[1] for p in pts)))
            return tuple(out)

        return cls(table(layers), table(colls), table(opt),
                   tuple(((h.gpu, h.stack), (h.forward_s, h.backward_s)) for h in profile.hosts),
                   tuple(sorted(hidden.items())), profile.source)

    def _bracket(self, tables: tuple, key: tuple, x: float, *, log: bool = False) -> tuple[tuple, int, int, float] | None:
        """The rows of ``key`` in ``tables`` and where ``x`` falls among them, ``(ys, i, j, w)`` as
        :func:`_between` gives it (on the logarithms of the axis and of ``x`` when ``log``);
        None when ``key`` has no rows or ``x`` is outside them."""
        found = next(((xs, ys) for k, xs, ys in tables if k == key), None)
        if found is None:
            return None
        xs, ys = found
        at = _between(tuple(math.log(v) for v in xs), math.log(x)) if log else _between(xs, x)
        return None if at is None else (ys, *at)

    def models(self) -> tuple[str, ...]:
        """The (lower-case) model names the layer rows measured."""
        return tuple(sorted({k[1] for k, _, _ in self.layers}))

    def layer(self, gpu: str, model: str, part: str, *, tp: int, samples: float, seq: int, recompute: str,
              precision: str, hidden: int | None = None) -> LayerTimes | None:
        """A part's times for ``samples`` samples per micro-batch (None: not covered).

        ``hidden``, when given, must equal the hidden size the rows recorded (a profile of
        another model with the same name does not price this one).
        """
        name = model.lower()
        if hidden is not None and dict(self.hidden).get(name, hidden) != hidden:
            return None
        at = self._bracket(self.layers, (gpu, name, part, tp, seq, recompute, precision), samples)
        if at is None:
            return None
        ys, i, j, w = at
        (f0, b0, m0, t0), (f1, b1, m1, t1) = ys[i], ys[j]
        if t0 != t1:  # two rows that count different things are not interpolated between
            return None
        peak = None if m0 is None or m1 is None else (1 - w) * m0 + w * m1
        return LayerTimes((1 - w) * f0 + w * f1, (1 - w) * b0 + w * b1, peak, t0)

    def collective_s(self, gpu: str, op: str, scope: str, ranks: int, nbytes: float) -> float | None:
        """Seconds of one collective of ``nbytes`` (None: not covered; 0 for one rank or no bytes)."""
        if ranks <= 1 or nbytes <= 0:
            return 0.0
        at = self._bracket(self.collectives, (gpu, op, scope, ranks), nbytes, log=True)
        if at is None:
            return None
        ys, i, j, w = at
        if w == 0.0:
            return ys[i]
        if ys[i] <= 0.0 or ys[j] <= 0.0:  # a zero time has no logarithm: linear between the two
            return (1 - w) * ys[i] + w * ys[j]
        return math.exp((1 - w) * math.log(ys[i]) + w * math.log(ys[j]))

    def optimizer_s(self, gpu: str, precision: str, parameters: float) -> float | None:
        """Seconds of the optimizer step over ``parameters`` parameters (None: not covered)."""
        if parameters <= 0:
            return 0.0
        at = self._bracket(self.optimizer, (gpu, precision), parameters)
        if at is None:
            return None
        ys, i, j, w = at
        return (1 - w) * ys[i] + w * ys[j]

    def host_s(self, gpu: str, stack: str) -> tuple[float, float] | None:
        """The host's (forward, backward) seconds per layer under ``stack`` (None: not measured)."""
        for key, times in self.hosts:
            if key == (gpu, stack):
                return times
        return None





#: The terms of a stage's price the profile never prices (yet): memory (the cost model's estimate
#: decides what fits); CP, EP, MoE layers and offloading's copies are analytic too.
ANALYTIC_ONLY = ("memory",)


def priced_from(blocks: list[tuple[str, object]], measured: Measured) -> dict:
    """Which terms of each planned stage came from the profile and which from the analytic model.

    ``blocks`` are (island name, its ``PartialPlan``) in pipeline order; each stage's price
    (``StageCost.measured``) lists the terms taken from the profile.

    >>> from types import SimpleNamespace as ns
    >>> plan = ns(stages=[ns(measured=("compute", "optimizer")), ns(measured=())], layout="tp1 pp2")
    >>> d = priced_from([("a100", plan)], Measured((), (), (), ()))
    >>> d["stages"][0]["profile"], d["stages"][1]["profile"], d["stages"][1]["analytic"][:2]
    (['compute', 'optimizer'], [], ['compute', 'tp_collectives'])
    """
    stages = []
    for island, partial in blocks:
        for q, st in enumerate(partial.stages):
            taken = [t for t in TERMS if t in st.measured]
            stages.append({"island": island, "stage": q, "profile": taken,
                           "analytic": [t for t in TERMS if t not in taken] + list(ANALYTIC_ONLY)})
    return {"profile": measured.source, "terms": list(TERMS) + list(ANALYTIC_ONLY), "stages": stages}
__all__ = ["ANALYTIC_ONLY", "LayerTimes", "Measured", "TERMS", "priced_from"]
