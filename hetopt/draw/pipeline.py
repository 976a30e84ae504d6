"""The pipeline picture: the 1F1B schedule of a composed pipeline as a Gantt chart.

The schedule is the project's 1F1B simulator (:func:`hetopt.pipeline.simulate.schedule_1f1b`)
run again on the result's stage times, links and micro-batch count, so the picture is the
simulation ``hetopt solve`` reports (``simulated_s``), operation by operation. One lane per
stage, forward / backward / idle coloured; the stages of one island block are bracketed and
named on the right, with the link time where two blocks meet; the bottleneck stage (the
slowest F + B) is outlined.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from hetopt.draw import style
from hetopt.pipeline.simulate import schedule_1f1b
from hetopt.tables import counted

#: Height of one stage's lane, inches, and of the title, axis and legend around them.
LANE_IN = 0.42
FRAME_IN = 1.9
#: Fraction of a lane its bars fill (the rest separates lanes).
BAR = 0.8
#: Narrowest bar, as a fraction of the makespan, that gets its micro-batch number written in:
#: about 16 px of the 1,000 px picture, room for two digits at the base font size.
LABEL_MIN_WIDTH = 0.016
#: Narrowest bar, as a fraction of the makespan, that gets a white edge: about 4 px.
EDGE_MIN_WIDTH = 0.004
#: A stage is the bottleneck when its F + B is within this relative tolerance of the slowest
#: (the crosscheck tolerance: equal times from different sums differ in the last bits).
BOTTLENECK_RTOL = 1e-9


def render(document: dict, title: str, source: str) -> Figure:
    """The Gantt chart of a ``hetopt solve --json`` pipeline result.

    Reads ``solution.stages`` (``forward_s``, ``backward_s``, ``island``, ``block``, ``gpus``),
    ``solution.blocks[*].link_after_s`` and ``solution.microbatches``; as every picture,
    ``render(document, title, source)`` (:mod:`hetopt.draw`). Beyond a field missing or malformed,
    refuses a schedule above the simulator's size limit.

    Examples
    --------
    >>> doc = {"problem": "pipeline", "solution": {"microbatches": 2, "iteration_time_s": 9.0,
    ...     "blocks": [{"island": "a", "link_after_s": None}],
    ...     "stages": [{"island": "a", "block": 0, "gpus": 1, "forward_s": 1.0, "backward_s": 2.0}] * 2}}
    >>> fig = render(doc, "two stages", "r.json")
    >>> sorted(c.get_gid() for c in fig.axes[0].collections)[:3]
    ['stage-0-backward', 'stage-0-forward', 'stage-0-idle']
    """
    top = style.Doc(document, source)
    sol = top.table("solution")
    stages = sol.tables("stages")
    blocks = sol.tables("blocks")
    microbatches = sol.integer("microbatches", minimum=1)
    forward = [st.number("forward_s") for st in stages]
    backward = [st.number("backward_s") for st in stages]
    block_of = [st.integer("block") for st in stages]
    for st, k in zip(stages, block_of):
        if k >= len(blocks):
            raise st.error("block", f"is {k}, but there are {len(blocks)} blocks")
    links = [blocks[k].number("link_after_s", optional=True) or 0.0 for k in range(len(blocks))]
    # a link lies between the last stage of one block and the first of the next
    after = [links[block_of[s]] if s + 1 < len(stages) and block_of[s + 1] != block_of[s] else 0.0
             for s in range(len(stages))]
    return schedule_figure(
        f"{title}: 1F1B schedule", forward, backward, after, microbatches, block_of,
        [st.text("island") for st in stages], [st.integer("gpus", optional=True) for st in stages],
        analytic=sol.number("iteration_time_s", optional=True), link_bottleneck_s=sol.number("bottleneck_s", optional=True),
        error=lambda problem: sol.error("stages", problem))


def schedule_figure(title: str, forward: list[float], backward: list[float], after: list[float], microbatches: int,
                    block_of: list[int], islands: list[str], gpus: list[int | None], *, analytic: float | None = None,
                    link_bottleneck_s: float | None = None, block_labels: dict[int, str] | None = None,
                    error=None) -> Figure:
    """The Gantt chart of the 1F1B schedule of stages with these times (one micro-batch's
    ``forward`` and ``backward``, the round-trip ``after`` each stage to the next), as
    :func:`~hetopt.pipeline.simulate.schedule_1f1b` places them: the picture of a pipeline
    result and of a plan (:mod:`hetopt.draw.gantt`). ``block_of`` numbers each stage's block,
    ``islands`` names its island, ``block_labels`` (by block) what the bracket of a block says
    beside its island's name (a plan's layout); ``error(problem)`` makes the document's error."""
    makespan, operations = schedule_1f1b(forward, backward, after, microbatches)
    if makespan <= 0:
        raise error("every stage and link takes 0 s: there is no schedule to draw")

    S = len(forward)
    fig = style.figure(FRAME_IN + LANE_IN * S)
    ax = fig.add_subplot()
    busy: list[dict[str, list[tuple[float, float]]]] = [{"F": [], "B": []} for _ in range(S)]
    for op in operations:
        busy[op.stage][op.kind].append((op.start_s, op.end_s - op.start_s))
        if (op.end_s - op.start_s) >= LABEL_MIN_WIDTH * makespan:
            ax.text((op.start_s + op.end_s) / 2, op.stage, str(op.microbatch), ha="center", va="center",
                    fontsize=style.FONT_PT - 2, color="white")
    # white edges part neighbouring micro-batches where bars are wide; on thin bars they would hide them
    shortest = min((op.end_s - op.start_s for op in operations if op.end_s > op.start_s), default=0.0)
    edges = "white" if shortest >= EDGE_MIN_WIDTH * makespan else "none"
    for s in range(S):
        lane = (s - BAR / 2, BAR)
        ax.broken_barh(_gaps(busy[s]["F"] + busy[s]["B"], makespan), lane, facecolors=style.IDLE, gid=f"stage-{s}-idle")
        ax.broken_barh(busy[s]["F"], lane, facecolors=style.FORWARD, edgecolors=edges, linewidths=0.3,
                       gid=f"stage-{s}-forward")
        ax.broken_barh(busy[s]["B"], lane, facecolors=style.BACKWARD, edgecolors=edges, linewidths=0.3,
                       gid=f"stage-{s}-backward")

    times = [f + b for f, b in zip(forward, backward)]
    slowest = max(times)
    bottlenecks = [s for s in range(S) if times[s] >= slowest * (1 - BOTTLENECK_RTOL)]
    for s in bottlenecks:
        ax.add_patch(Rectangle((0, s - 0.5), makespan, 1.0, fill=False, edgecolor=style.HIGHLIGHT, linewidth=1.8,
                               zorder=3, gid=f"bottleneck-{s}"))

    ax.set_yticks(range(S), [f"{s}: {islands[s]}" + (f" ({counted(gpus[s], 'GPU')})" if gpus[s] else "") for s in range(S)])
    for s in bottlenecks:
        ax.get_yticklabels()[s].set(color=style.HIGHLIGHT, fontweight="bold")
    _bracket_blocks(ax, block_of, islands, after, block_labels or {})
    ax.set_ylim(S - 0.5, -0.5)
    ax.set_xlim(0, makespan)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("stage")

    link_bottleneck = (link_bottleneck_s or 0.0) > slowest * (1 + BOTTLENECK_RTOL)
    ax.set_title(
        f"{title}, {counted(S, 'stage')} × {counted(microbatches, 'micro-batch')}\n"
        f"simulated {style.seconds(makespan)}" + (f", analytic {style.seconds(analytic)}" if analytic else "")
        + f"; bottleneck: stage {', '.join(map(str, bottlenecks))} (F+B {style.seconds(slowest)})"
        + (f", a link is slower ({style.seconds(link_bottleneck_s)})" if link_bottleneck else ""),
        loc="left")
    fig.legend(handles=[Patch(color=style.FORWARD, label="forward"), Patch(color=style.BACKWARD, label="backward"),
                        Patch(color=style.IDLE, label="idle"),
                        Patch(fill=False, edgecolor=style.HIGHLIGHT, linewidth=1.8, label="bottleneck stage")],
               loc="outside lower center", ncols=4, frameon=False)
    return fig


def _gaps(intervals: list[tuple[float, float]], end: float) -> list[tuple[float, float]]:
    """The (start, width) pieces of [0, end] that no interval covers.

    Examples
    --------
    >>> _gaps([(1.0, 1.0), (3.0, 1.0)], 5.0)
    [(0.0, 1.0), (2.0, 1.0), (4.0, 1.0)]
    """
    out, at = [], 0.0
    for start, width in sorted(intervals):
        if start > at:
            out.append((at, start - at))
        at = max(at, start + width)
    if end > at:
        out.append((at, end - at))
    return out


def _bracket_blocks(ax, block_of: list[int], islands: list[str], after: list[float], labels: dict[int, str]) -> None:
    """Bracket each block's lanes on the right and name its island (with its label, if any);
    a line between blocks, with its link time."""
    colour = style.colours(islands)
    side = ax.get_yaxis_transform()  # x in axes fractions, y in lanes
    first = 0
    for s in range(1, len(block_of) + 1):
        if s < len(block_of) and block_of[s] == block_of[first]:
            continue
        k, island = block_of[first], islands[first]
        ax.plot([1.01, 1.01], [first - BAR / 2, s - 1 + BAR / 2], transform=side, clip_on=False, linewidth=4,
                solid_capstyle="butt", color=colour[island], gid=f"block-{k}")
        ax.text(1.02, (first + s - 1) / 2, island + (f"\n{labels[k]}" if labels.get(k) else ""), transform=side,
                va="center", ha="left", color=colour[island], fontweight="bold")
        if s < len(block_of):
            ax.axhline(s - 0.5, color="black", linewidth=0.8)
            if after[s - 1] > 0:
                ax.text(1.02, s - 0.5, f"link {style.seconds(after[s - 1])}", transform=side, va="center", ha="left",
                        fontsize=style.FONT_PT - 2, color="dimgrey")
        first = s
