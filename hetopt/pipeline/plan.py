"""Turning an ordered list of blocks into a full :class:`PipelineSolution` (stages, times, simulation)."""

from __future__ import annotations

from collections.abc import Sequence

from hetopt.pipeline.problem import Block, PipelineInstance, PipelineSolution, StageReport, evaluate, in_flight
from hetopt.pipeline.simulate import MAX_SIMULATED_OPERATIONS, simulate_1f1b, simulation_size


def blocks_from_choices(instance: PipelineInstance, options: Sequence[int]) -> tuple[Block, ...]:
    """Blocks for an ordered list of option indices (front to back), laid out from layer 0.

    Examples
    --------
    >>> from hetopt.pipeline.problem import GIB, PipelineIsland, PipelineOption, StagePlan
    >>> st = StagePlan(1, 0.1, 0.2, GIB, GIB)
    >>> inst = PipelineInstance("x", 3, 2, (PipelineIsland("a", 1, 8 * GIB), PipelineIsland("b", 2, 8 * GIB)),
    ...     (PipelineOption(0, 1, (st,)), PipelineOption(1, 2, (st, st))), ((0.0, 0.0), (0.0, 0.0)))
    >>> blocks_from_choices(inst, [1, 0])
    (Block(island=1, option=1, first_layer=0, layers=2), Block(island=0, option=0, first_layer=2, layers=1))
    """
    out, first = [], 0
    for o in options:
        opt = instance.options[o]
        out.append(Block(opt.island, o, first, opt.layers))
        first += opt.layers
    return tuple(out)


def build_solution(instance: PipelineInstance, blocks: Sequence[Block], *, simulate: bool = True) -> PipelineSolution:
    """The full plan for ``blocks``: per-stage reports, links, analytic and simulated times.

    The analytic time is ``evaluate``'s objective; ``simulate=False`` skips the 1F1B
    simulation (its fields stay NaN), for callers that only compare objectives.
    """
    blocks = tuple(blocks)
    ev = evaluate(instance, PipelineSolution(blocks))
    if not all(0 <= b.option < len(instance.options) and 0 <= b.island < len(instance.islands) for b in blocks):
        return PipelineSolution(blocks)  # nothing to report on indices that point nowhere
    names = tuple(isl.name for isl in instance.islands)
    plan = [(k, b, st) for k, b in enumerate(blocks) for st in instance.options[b.option].stages]
    S, M = len(plan), instance.microbatches
    stages, first = [], {}
    for s, (k, b, st) in enumerate(plan):
        start = first.setdefault(k, b.first_layer)
        first[k] = start + st.layers
        flight = in_flight(S - s - 1, M)
        stages.append(
            StageReport(
                block=k,
                island=names[b.island],
                first_layer=start,
                layers=st.layers,
                gpus=st.gpus,
                forward_s=st.forward_s,
                backward_s=st.backward_s,
                time_s=st.time_s,
                in_flight=flight,
                memory_bytes=st.static_bytes + st.activation_bytes * flight,
                capacity_bytes=instance.capacity(b.island),
            )
        )
    links = tuple(instance.link_s[a.island][b.island] for a, b in zip(blocks, blocks[1:]))
    simulated, idle, note = float("nan"), (), ""
    if simulate and ev.feasible and simulation_size(S, M) > MAX_SIMULATED_OPERATIONS:
        note = (f"1F1B simulation skipped: {S} stages x {M} micro-batches need {simulation_size(S, M):,} operations, "
                f"above its limit of {MAX_SIMULATED_OPERATIONS:,}")
    elif simulate and ev.feasible:
        after = [0.0] * S
        for s in range(S - 1):
            if plan[s][0] != plan[s + 1][0]:
                after[s] = links[plan[s][0]]
        sim = simulate_1f1b([st.forward_s for st in stages], [st.backward_s for st in stages], after, M)
        simulated, idle = sim.makespan_s, sim.idle_s
    return PipelineSolution(
        blocks=blocks,
        island_names=names,
        roles=tuple(instance.options[b.option].role if 0 <= b.option < len(instance.options) else "?" for b in blocks),
        stages=tuple(stages),
        link_s=links,
        iteration_time_s=ev.objective,
        bottleneck_s=ev.details.get("bottleneck", float("nan")),
        simulated_s=simulated,
        idle_s=idle,
        simulation_note=note,
        microbatches=M,
    )
