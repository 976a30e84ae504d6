"""The allocation picture: per GPU its batch, its share of the training state and its memory.

Three panels over the GPUs in file order: the batch as ℓ stacked micro-batches of size m
(so m × ℓ reads off the bar), the state share of the exact LP beside Cephalo's greedy, and
the memory used (with the LP's share) against the GPU's capacity. Bars are coloured by GPU
type.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from hetopt.draw import style

#: Height of the three panels together, inches, at most ``WIDE_AT`` GPUs; past it the tick
#: labels turn and take more room.
PANELS_IN = 7.5
#: GPUs up to which each bar is labelled with m × ℓ and ticks stay horizontal (about 40 px a bar).
WIDE_AT = 24
#: Extra height, inches, for the turned tick labels of many GPUs.
TURNED_LABELS_IN = 0.8
#: Most micro-batches drawn as stacked segments (one rectangle each); past it each GPU's batch
#: is one bar. A planner-sized batch of 2^20 samples in micro-batches of one would be a million
#: rectangles: minutes to draw and megabytes of SVG for bars a pixel apart.
MAX_STACKED = 2_000
#: Most GPUs that get a tick label each (64 labels of 7 pt fill the 1,000 px width); past it
#: every k-th GPU is labelled.
MAX_TICKS = 64
#: Most GPUs drawn: four bars each, and the picture is 1,000 px wide, so past this the bars
#: are narrower than a pixel and writing them takes ever longer (``draw`` of a synthetic
#: result on this project's 2-core machine: 7.9 s at 1,024 GPUs, 26 s at 4,096; a
#: 20,000-GPU result was killed after 120 s): refused up front, with the limit.
MAX_GPUS = 2_048
#: The capacity bar behind each GPU's memory bar.
CAPACITY = "#d9d9d9"
#: Width of a bar, in GPU slots; the state panel splits it between LP and greedy.
BAR = 0.8


def render(document: dict, title: str, source: str) -> Figure:
    """The three-panel picture of a ``hetopt solve --json`` allocation result.

    Reads ``solution.gpus[*]`` (``type``, ``microbatch_size``, ``microbatches``, ``state_share``,
    ``state_share_greedy``, ``memory_gib``, ``capacity_gib``) and ``solution.iteration_time_s``; as
    every picture, ``render(document, title, source)`` (:mod:`hetopt.draw`).

    Examples
    --------
    >>> gpu = {"type": "T4", "microbatch_size": 2, "microbatches": 3, "state_share": 0.5,
    ...        "state_share_greedy": 0.5, "memory_gib": 4.0, "capacity_gib": 16.0}
    >>> fig = render({"problem": "allocation", "solution": {"gpus": [gpu, gpu]}}, "two T4", "r.json")
    >>> len([p for p in fig.axes[0].patches if p.get_gid().startswith("batch-0-")])
    3
    """
    top = style.Doc(document, source)
    sol = top.table("solution")
    if isinstance(sol.data.get("gpus"), list) and len(sol.data["gpus"]) > MAX_GPUS:
        raise sol.error("gpus", f"{len(sol.data['gpus']):,} GPUs, above the {MAX_GPUS:,} an allocation picture draws "
                                "(bars narrower than a pixel); read the result itself (--json)")
    gpus = sol.tables("gpus")
    n = len(gpus)
    types = [g.text("type") for g in gpus]
    size = [g.integer("microbatch_size", minimum=1) for g in gpus]
    count = [g.integer("microbatches", minimum=1) for g in gpus]
    share = [g.number("state_share") for g in gpus]
    greedy = [g.number("state_share_greedy", optional=True) for g in gpus]
    used = [g.number("memory_gib") for g in gpus]
    capacity = [g.number("capacity_gib", optional=True) for g in gpus]
    colour = style.colours(types)
    wide = n <= WIDE_AT

    fig = style.figure(PANELS_IN + (0 if wide else TURNED_LABELS_IN))
    batch_ax, share_ax, memory_ax = fig.subplots(3, 1, sharex=True)
    stacked = sum(count) <= MAX_STACKED
    fill = [colour[t] for t in types]
    # one bar call per layer of bars, not per bar, each rectangle then named by its GPU
    # (4,096 GPUs: 26 s against 31 s; the rest of the time is writing the rectangles)
    if stacked:
        for k in range(max(count)):
            on = [i for i in range(n) if count[i] > k]
            bars = batch_ax.bar(on, [size[i] for i in on], BAR, bottom=[k * size[i] for i in on], color=[fill[i] for i in on],
                                edgecolor="white", linewidth=0.5 if n <= MAX_TICKS else 0.0)
            _name(bars, [f"batch-{i}-{k}" for i in on])
    else:
        _name(batch_ax.bar(range(n), [s * c for s, c in zip(size, count)], BAR, color=fill), [f"batch-{i}" for i in range(n)])
    if wide:
        for i in range(n):
            batch_ax.text(i, size[i] * count[i], f"{size[i]}×{count[i]}", ha="center", va="bottom",
                          fontsize=style.FONT_PT - 1)
    batch_ax.set_ylabel("batch (samples)")
    batch_ax.margins(y=0.15)
    batch_ax.set_title("batch per GPU: micro-batch size × count"
                       + (" (m×ℓ above each bar)" if wide else "")
                       + ("" if stacked else f" (one bar per GPU: {sum(count):,} micro-batches are too many to stack)"),
                       loc="left", fontsize=style.FONT_PT)

    has_greedy = any(g is not None for g in greedy)
    half = BAR / 2 if has_greedy else BAR
    _name(share_ax.bar([i - (half / 2 if has_greedy else 0) for i in range(n)], [100 * x for x in share], half, color=fill),
          [f"share-lp-{i}" for i in range(n)])
    on = [i for i in range(n) if greedy[i] is not None]
    if on:
        _name(share_ax.bar([i + half / 2 for i in on], [100 * greedy[i] for i in on], half, color="white",
                           edgecolor=[fill[i] for i in on], hatch="///", linewidth=0.8), [f"share-greedy-{i}" for i in on])
    share_ax.set_ylabel("state share (%)")
    share_ax.set_title("share of the training state: exact LP (filled)" + (", Cephalo's greedy (hatched)" if has_greedy else ""),
                       loc="left", fontsize=style.FONT_PT)

    on = [i for i in range(n) if capacity[i] is not None]
    if on:
        _name(memory_ax.bar(on, [capacity[i] for i in on], BAR, color=CAPACITY), [f"capacity-{i}" for i in on])
    _name(memory_ax.bar(range(n), used, BAR * 0.8, color=fill), [f"memory-{i}" for i in range(n)])
    memory_ax.set_ylabel("memory (GiB)")
    memory_ax.set_title("memory used (with the LP's state share)" + (" against capacity (grey)" if any(capacity) else
                        "; capacity not in this result"), loc="left", fontsize=style.FONT_PT)
    step = -(-n // MAX_TICKS)  # every GPU up to MAX_TICKS, then every step-th
    memory_ax.set_xticks(range(0, n, step), [f"{i}\n{types[i]}" if wide else f"{i} {types[i]}" for i in range(0, n, step)],
                         rotation=0 if wide else 90, fontsize=style.FONT_PT if wide else style.FONT_PT - 2)
    memory_ax.set_xlabel("GPU (file order)")
    memory_ax.set_xlim(-0.6, n - 0.4)

    total = sum(s * c for s, c in zip(size, count))
    iteration = sol.number("iteration_time_s", optional=True)
    fig.suptitle(f"{title}: allocation of a batch of {total} over {n} GPUs"
                 + (f", iteration {style.seconds(iteration)}" if iteration is not None else ""), x=0.01, ha="left")
    fig.legend(handles=[Patch(color=c, label=t) for t, c in colour.items()], loc="outside lower center",
               ncols=min(len(colour), 8), frameon=False)
    return fig


def _name(bars, gids: list[str]) -> None:
    """Give each rectangle of one ``bar`` call its id (the SVG keeps it: tests and readers find a GPU's bars)."""
    for rect, gid in zip(bars, gids):
        rect.set_gid(gid)
