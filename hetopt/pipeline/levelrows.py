"""The variables of the level model grouped as its rows take them; the MILP and the CP-SAT
model build the same rows (``formulations/pipeline.md``, the level model) from these groups."""

from __future__ import annotations

from hetopt.pipeline.levels import LevelData


def link_ends(lam: dict) -> tuple[dict, dict]:
    """The link variables λ[ℓ, K, K'] by the block they lead into, ``(ℓ, K')``, and by the one
    they leave, ``(ℓ, K)``.

    >>> link_ends({(2, 0, 1): "a", (2, 1, 1): "b"})
    ({(2, 1): ['a', 'b']}, {(2, 0): ['a'], (2, 1): ['b']})
    """
    into: dict = {}
    outof: dict = {}
    for (lv, K, K2), var in lam.items():
        into.setdefault((lv, K2), []).append(var)
        outof.setdefault((lv, K), []).append(var)
    return into, outof


def needs_by_threshold(data: LevelData, y: dict, K: int) -> dict[int, list]:
    """The cell variables y[b, o] of signature ``K`` by the index of the least threshold their
    option needs (``data.first``), for the options that need one above the floor."""
    need: dict[int, list] = {}
    for (_b, o), var in y.items():
        if data.kind[o] == K and data.first[o] >= 1:
            need.setdefault(data.first[o], []).append(var)
    return need
