"""The data of the position-indexed model shared by ``milp.py`` and ``cpsat.py``.

Blocks sit at positions p = 0..P−1 from the front; a used position holds one option; the
used positions are a prefix. What the models need, computed once: which options may sit at
which position (by role), each option's stages-behind limit capped at S_max, the island
pairs whose link costs something, and pairs of identical islands for symmetry breaking.
See ``formulations/pipeline.md``, "The position model".
"""

from __future__ import annotations

from dataclasses import dataclass

from hetopt.pipeline.options import max_stages, usable_options
from hetopt.pipeline.problem import PipelineInstance


#: Most y[p,o] binaries the MILP and CP-SAT models are built with. Memory grows about 6 KB
#: per binary (PuLP's objects; scale-16x128 has 60,640 and peaks at 380 MB), so this
#: keeps a model near 1.5 GB, a third of what a 2-core benchmark box can spare. Beyond it
#: both methods decline up front (dp handles such instances when its table fits).
MAX_POSITION_BINARIES = 250_000


def too_large(data: PositionData, limit: int = MAX_POSITION_BINARIES) -> str | None:
    """The reason the position model is declined for its size (more than ``limit`` binaries),
    or None (the advice that follows it is ``hetopt.pipeline.advice``'s)."""
    n = sum(len(a) for a in data.at)
    if n <= limit:
        return None
    return (f"the position model would have {n:,} binaries y[p,o] ({data.positions} positions x usable options), "
            f"above the limit of {limit:,}")


@dataclass(frozen=True)
class PositionData:
    """P positions; ``at[p]`` the options allowed there; ``limit[o]`` ≤ S_max; link pairs; twins."""

    positions: int
    at: tuple[tuple[int, ...], ...]
    limit: dict[int, int]
    max_stages: int
    hosts: tuple[int, ...]
    links: tuple[tuple[int, int, float], ...]  # (i, j, c) with i ≠ j, c > 0, both islands hosting
    twins: tuple[tuple[int, int], ...]  # (a, b): identical islands, a < b


def _option_key(instance: PipelineInstance, o: int) -> tuple:
    opt = instance.options[o]
    return (opt.layers, opt.role, tuple((s.layers, s.forward_s, s.backward_s, s.static_bytes, s.activation_bytes, s.gpus) for s in opt.stages))


def position_data(instance: PipelineInstance) -> PositionData:
    """Build :class:`PositionData` for ``instance``."""
    usable = usable_options(instance)
    hosts = tuple(sorted({instance.options[o].island for o in usable}))
    P = min(len(hosts), instance.layers)
    s_max = max_stages(instance)
    at = []
    for p in range(P):
        allowed = []
        for o in usable:
            role = instance.options[o].role
            if p == 0 and role in ("middle", "last"):
                continue
            if p > 0 and role in ("first", "whole"):
                continue
            if p == P - 1 and role == "middle":
                continue
            if P == 1 and role == "first":
                continue
            allowed.append(o)
        at.append(tuple(allowed))
    limit = {}
    for o in usable:
        lim = instance.behind_limits[o]
        limit[o] = s_max if lim is None else min(lim, s_max)
    links = tuple(
        (i, j, instance.link_s[i][j]) for i in hosts for j in hosts if i != j and instance.link_s[i][j] > 0
    )
    keys = {i: sorted(_option_key(instance, o) for o in usable if instance.options[o].island == i) for i in hosts}
    twins = []
    for a in hosts:
        for b in hosts:
            if a >= b:
                continue
            ia, ib = instance.islands[a], instance.islands[b]
            same_links = all(instance.link_s[x][a] == instance.link_s[x][b] for x in hosts if x not in (a, b))
            if (ia.gpus, ia.memory_bytes) == (ib.gpus, ib.memory_bytes) and keys[a] == keys[b] and same_links:
                twins.append((a, b))
                break  # chain each island to the next identical one only
    return PositionData(P, tuple(at), limit, s_max, hosts, links, tuple(twins))


def canonical_plan(instance: PipelineInstance, data: PositionData, plan: list[int]) -> list[int]:
    """``plan`` with identical islands renamed so that it meets the models' symmetry rules.

    Along each chain of identical islands (``data.twins``), the plan's blocks on the chain get
    the chain's first islands, in pipeline order; each option becomes the same option (equal
    slice, role and stages) on its new island. Swapping identical islands changes no cost or
    rule (``formulations/pipeline.md``), so the result is a plan of the same T; the CP-SAT
    model uses it as its warm start, which a plan breaking the symmetry rows could not be.

    Examples
    --------
    >>> from hetopt.pipeline.problem import GIB, PipelineIsland, PipelineOption, StagePlan
    >>> isl = tuple(PipelineIsland(f"i{k}", 1, 8 * GIB) for k in range(2))
    >>> opts = tuple(PipelineOption(k, 1, (StagePlan(1, 0.1, 0.2, GIB, GIB),)) for k in range(2))
    >>> inst = PipelineInstance("x", 1, 4, isl, opts, ((0.0, 0.0), (0.0, 0.0)))
    >>> canonical_plan(inst, position_data(inst), [1])
    [0]
    """
    chains: list[list[int]] = []
    for a, b in data.twins:
        for chain in chains:
            if chain[-1] == a:
                chain.append(b)
                break
        else:
            chains.append([a, b])
    same = {}
    for o in range(len(instance.options)):
        same.setdefault((instance.options[o].island, _option_key(instance, o)), o)
    out = list(plan)
    for chain in chains:
        members = set(chain)
        at = [k for k, o in enumerate(plan) if instance.options[o].island in members]
        for k, island in zip(at, chain):
            out[k] = same[(island, _option_key(instance, plan[k]))]
    return out
