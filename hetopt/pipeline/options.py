"""What every pipeline solver needs from the option list: memory limits, thresholds, infeasibility."""

from __future__ import annotations

from hetopt.pipeline.problem import GIB, PipelineInstance


#: The formulations of the MILP and CP-SAT models (``formulation=``): ``signatures`` (the
#: level model over island signatures; the default, may change) and ``positions`` (one
#: binary per position and concrete option).
FORMULATIONS = ("signatures", "positions")


def usable_options(instance: PipelineInstance) -> list[int]:
    """Options that fit their island at least as the last block (behind limit ≥ 0 or none)."""
    return [o for o, lim in enumerate(instance.behind_limits) if lim is None or lim >= 0]


def max_stages(instance: PipelineInstance) -> int:
    """An upper bound on S: per island, its option with the most stages, summed."""
    most = [0] * len(instance.islands)
    for o in usable_options(instance):
        opt = instance.options[o]
        most[opt.island] = max(most[opt.island], len(opt.stages))
    return sum(most)


def bottleneck_candidates(instance: PipelineInstance) -> list[float]:
    """The sorted distinct values the bottleneck max(max t, max c) can take.

    Every usable option's largest stage time and every link time between two islands
    that have a usable option (and 0-length pipelines never occur, so nothing else).
    """
    usable = usable_options(instance)
    values = {instance.options[o].max_time_s for o in usable}
    hosts = sorted({instance.options[o].island for o in usable})
    for a in hosts:
        for b in hosts:
            if a < b:
                values.add(instance.link_s[a][b])
    return sorted(values)


def why_infeasible(instance: PipelineInstance) -> str | None:
    """A reason a person can act on when a cheap check proves no pipeline exists, else None.

    The checks: no option fits memory even as the last block; no whole-model pipeline is
    possible because the usable options cannot reach L layers even using every island.
    """
    usable = usable_options(instance)
    if not instance.options:
        return "the instance has no option: give each island at least one [[option]] (a partial plan)"
    if not usable:
        worst = []
        for i, isl in enumerate(instance.islands):
            own = [opt for opt in instance.options if opt.island == i]
            if own:
                need = min(max(st.static_bytes + st.activation_bytes for st in opt.stages) for opt in own)
                worst.append(f"{isl.name} needs >= {need / GIB:.3g} GiB, has {instance.capacity(i) / GIB:.3g} GiB usable")
        return (
            "no option fits its island's memory even as the last block (1 micro-batch in flight): "
            + "; ".join(worst)
            + "; give more memory, more GPUs per option, or options with fewer layers"
        )
    longest = {}
    for o in usable:
        opt = instance.options[o]
        longest[opt.island] = max(longest.get(opt.island, 0), opt.layers)
    if sum(longest.values()) < instance.layers:
        return (
            f"the longest slices the islands' usable options cover add up to {sum(longest.values())} layers, "
            f"fewer than the model's {instance.layers}: add islands or options for longer slices"
        )
    return None


#: The reason given when the exact search finds no pipeline and no cheap check explains why.
GENERIC_INFEASIBLE = (
    "no ordered choice of islands and options tiles the {layers} layers: every combination breaks the 1F1B "
    "memory of some stage at its position, a role rule or the one-block-per-island rule"
)
