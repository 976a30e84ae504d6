"""The plan picture: the composed pipeline's stages over the islands, beside the alternatives.

Left, one row per island of the cluster (unused ones stay empty) and the model's layers
across: each stage is a bar over the layers it holds, on the island that runs it, with its
time where the bar has room; each island's name, GPU and layout (TP, PP, DP, recompute, ZeRO:
the same on all its stages) beside its row, so they stay at any number of stages; the slowest
stage is outlined. Right, the iteration time of the composed
plan beside every alternative the planner priced on the same cost model (and ``--layout``
when given), each with the composed plan's speed-up over it. Below, when the document holds a
mixed-stages plan (the alternative's or a given layout's), its stages over the GPU types
(:mod:`hetopt.draw.mixed`).
"""

from __future__ import annotations

from matplotlib.figure import Figure

from hetopt.draw import mixed, style
from hetopt.draw.style import PLAN_BAR as BAR, SLOWEST_RTOL
from hetopt.tables import counted

#: Height of one island or alternative row, inches, and of the title, axes and legend.
ROW_IN = 0.6
FRAME_IN = 1.8
#: Width of the stage panel's plotting area, px at the picture's DPI (measured on the shipped
#: plans' pictures: 3/5 of the 1,000 px, less the island names), and of one character of the
#: small font (7 pt at 100 dpi; 5.2 px measured on layout strings in DejaVu Sans): a stage's
#: label is written in only where it fits.
PANEL_PX = 420.0
CHAR_PX = 5.2
#: The name the picture gives the plan itself among the alternatives, and the planner's name
#: for it in ``best`` (the fastest of them all, starred).
THIS_PLAN = "composed (this plan)"
COMPOSED = "tangram-composed"


def render(document: dict, title: str, source: str) -> Figure:
    """The two-panel picture of a ``hetopt plan --json`` result.

    Reads ``islands[*].name``, ``stages[*]`` (``island``, ``first_layer``, ``layers``, ``layout``,
    ``time_s``), ``iteration_time_s``, ``alternatives[*]`` (``name``, ``iteration_time_s``) and
    ``given_layout``; as every picture, ``render(document, title, source)`` (:mod:`hetopt.draw`).
    Beyond a field missing or malformed, refuses a stage on an island the plan does not list.

    Examples
    --------
    >>> doc = {"islands": [{"name": "a", "gpu": "T4"}, {"name": "b", "gpu": "V100"}], "iteration_time_s": 2.0,
    ...        "stages": [{"island": "b", "first_layer": 0, "layers": 3, "time_s": 0.1},
    ...                   {"island": "a", "first_layer": 3, "layers": 1, "time_s": 0.1}],
    ...        "alternatives": [{"name": "uniform-layers", "iteration_time_s": 3.0}]}
    >>> fig = render(doc, "x", "p.json")
    >>> sorted(p.get_gid() for p in fig.axes[1].patches)
    ['alternative-composed', 'alternative-uniform-layers']
    """
    top = style.Doc(document, source)
    islands = top.tables("islands")
    names = [isl.text("name") for isl in islands]
    gpu_of = {name: isl.text("gpu", optional=True) for name, isl in zip(names, islands)}
    row_of = {name: r for r, name in enumerate(names)}
    stages = top.tables("stages")
    on = [st.text("island") for st in stages]
    for st, name in zip(stages, on):
        if name not in row_of:
            raise st.error("island", f"{name!r} is not among the plan's islands ({', '.join(names)})")
    first = [st.integer("first_layer") for st in stages]
    layers = [st.integer("layers", minimum=1) for st in stages]
    times = [st.number("time_s") for st in stages]
    layouts = [st.text("layout", optional=True) for st in stages]
    depth = max(f + n for f, n in zip(first, layers))
    colour = style.colours(names)

    bars = _alternatives(top)
    found = mixed.mixed_plan(top)  # a mixed-stages plan: a third panel below the two
    rows = max(len(names), len(bars))
    mixed_rows = 0 if found is None else len({m.text("gpu") for st in found[1].tables("stages") for m in st.tables("members")})
    fig = style.figure(FRAME_IN + ROW_IN * rows + (FRAME_IN + ROW_IN * mixed_rows if mixed_rows else 0.0))
    grid = fig.add_gridspec(2 if mixed_rows else 1, 2, width_ratios=[3, 2],
                            height_ratios=[FRAME_IN + ROW_IN * rows, FRAME_IN + ROW_IN * mixed_rows] if mixed_rows else None)
    stage_ax, alt_ax = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    if found is not None:
        mixed.draw(fig.add_subplot(grid[1, :]), *found)
    slowest = max(times)
    for s in range(len(stages)):
        row, width = row_of[on[s]], layers[s]
        worst = times[s] >= slowest * (1 - SLOWEST_RTOL)
        stage_ax.barh(row, width, BAR, left=first[s], color=colour[on[s]], edgecolor=style.HIGHLIGHT if worst else "white",
                      linewidth=2.0 if worst else 0.8, gid=f"stage-{s}")
        room = width / depth * PANEL_PX - 6  # px inside the bar, less a margin
        full = [f"stage {s}", f"{counted(width, 'layer')}, {style.seconds(times[s])}"]
        label = next((lines for lines in (full, [str(s)]) if max(map(len, lines)) * CHAR_PX <= room), None)
        if label:
            stage_ax.text(first[s] + width / 2, row, "\n".join(label), ha="center", va="center", color="white",
                          fontsize=style.FONT_PT - 2)
    # an island's layout (the same on each of its stages) beside its name: written in the bars
    # only where they are wide enough, it was lost past a few stages
    layout_of = {}
    for name, layout in zip(on, layouts):
        layout_of.setdefault(name, layout)
    stage_ax.set_yticks(range(len(names)), ["\n".join(x for x in (n, gpu_of[n] if gpu_of[n] != n else None,
                                                                   layout_of.get(n)) if x) for n in names])
    stage_ax.set_ylim(len(names) - 0.5, -0.5)
    stage_ax.set_xlim(0, depth)
    stage_ax.set_xlabel("layers of the model")
    stage_ax.set_title(f"{counted(len(stages), 'stage')} over {len(set(on))} of {counted(len(names), 'island')}; the slowest "
                       f"({style.seconds(slowest)}) outlined", loc="left", fontsize=style.FONT_PT)

    plan_time = bars[0][1]
    for r, (_, value, gid) in enumerate(bars):
        if value is None:
            alt_ax.text(0.02, r, "no plan", transform=alt_ax.get_yaxis_transform(), va="center",
                        fontsize=style.FONT_PT - 1)
            continue
        mine = r == 0
        alt_ax.barh(r, value, BAR, color=style.HIGHLIGHT if mine else "#9aa5b1", gid=f"alternative-{gid}")
        note = "" if mine or not plan_time else f"  (×{value / plan_time:.2f})"
        alt_ax.text(value, r, f" {style.seconds(value)}{note}", va="center", ha="left", fontsize=style.FONT_PT - 1)
    alt_ax.set_yticks(range(len(bars)), [name for name, _, _ in bars])
    alt_ax.set_ylim(len(bars) - 0.5, -0.5)
    longest = max((v for _, v, _ in bars if v is not None), default=1.0)
    alt_ax.set_xlim(0, longest * 1.6)  # room for the value and the factor after the longest bar
    alt_ax.set_xlabel("seconds (×: relative to this plan)")
    alt_ax.set_title("iteration time, same cost model; ★ fastest", loc="left", fontsize=style.FONT_PT - 1)

    cluster, model = top.text("cluster", optional=True), top.text("model", optional=True)
    batch = top.integer("global_batch", optional=True)
    what = ", ".join(x for x in (model, cluster, batch and f"batch {batch}") if x)
    fig.suptitle(f"{title}: {what}" if what else title, x=0.01, ha="left")
    return fig


def _alternatives(top: style.Doc) -> list[tuple[str, float | None, str]]:
    """(label, iteration time or None, gid suffix): the plan itself first, then each alternative."""
    best = top.text("best", optional=True)
    rows: list[tuple[str, float | None, str]] = [
        (THIS_PLAN + (" ★" if best == COMPOSED else ""), top.number("iteration_time_s", optional=True), "composed")]
    for alt in top.tables("alternatives", required=False):
        name = alt.text("name")
        rows.append((name + (" ★" if best == name else ""), alt.number("iteration_time_s", optional=True), name))
    given = top.data.get("given_layout")
    if isinstance(given, dict) and given.get("fits"):
        layout = style.Doc(given, top.source, "given_layout")
        rows.append((f"your layout\n{layout.text('layout')}", layout.number("iteration_time_s"), "given-layout"))
    return rows
