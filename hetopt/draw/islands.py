"""The islands picture: the cluster's nodes grouped by island, and each island's bandwidth.

Left, one framed group per island with a square per node (named while there is room);
right, on the same rows, each island's slowest link inside against its fastest link out —
the two figures the islands family's closeness condition compares (inside ≥ out).
"""

from __future__ import annotations

import math

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter, NullFormatter

from hetopt.draw import style

#: Nodes per row of an island's group: 8 while nodes are named (about 85 px each, room for
#: a 12-character name), 16 past ``NAMED_UP_TO`` nodes.
NAMED_PER_ROW, UNNAMED_PER_ROW = 8, 16
#: Most nodes in the cluster for which every node square carries its name.
NAMED_UP_TO = 64
#: Longest node name written in full; longer names keep their tail (racks and node numbers
#: sit at the end of generated names).
NAME_CHARS = 12
#: Height of one row of nodes, inches; gap between islands, in rows; title, axis and legend.
ROW_IN = 0.34
GAP_ROWS = 0.7
FRAME_IN = 1.5
#: Bandwidths spread over more than this factor are drawn on a log scale (a 400 Gb/s
#: NVLink island beside 10 Gb/s Ethernet would flatten the slow ones to nothing).
LOG_ABOVE = 10.0
#: Most nodes drawn (a square each, 16 to a row in a picture at most 30 inches tall): past
#: it the squares are dots and writing them takes ever longer (``draw`` of one synthetic
#: island on this project's 2-core machine: 2.0 s at 1,024 nodes, 6.6 s at 4,096; 200,000
#: were killed after 120 s): refused up front, with the limit.
MAX_NODES = 8_192
#: Width of a node square, in node slots.
NODE = 0.86


def render(document: dict, title: str, source: str) -> Figure:
    """The picture of a ``hetopt solve --json`` islands result.

    Reads ``solution.islands[*]`` (``nodes``, ``gpus``, ``gpu``, ``slowest_internal_gbps``,
    ``fastest_leaving_gbps``); as every picture, ``render(document, title, source)``
    (:mod:`hetopt.draw`).

    Examples
    --------
    >>> island = {"nodes": ["a", "b"], "gpus": 8, "gpu": "T4", "slowest_internal_gbps": 100.0,
    ...           "fastest_leaving_gbps": None}
    >>> fig = render({"problem": "islands", "solution": {"islands": [island]}}, "one island", "r.json")
    >>> sorted(p.get_gid() for p in fig.axes[0].patches)
    ['island-0', 'node-0-0', 'node-0-1']
    """
    top = style.Doc(document, source)
    islands = top.table("solution").tables("islands")
    listed = sum(len(isl.data["nodes"]) for isl in islands if isinstance(isl.data.get("nodes"), list))
    if listed > MAX_NODES:
        raise top.table("solution").error("islands", f"{listed:,} nodes, above the {MAX_NODES:,} an islands picture draws "
                                                     "(squares smaller than a pixel); read the result itself (--json)")
    nodes = [isl.texts("nodes") for isl in islands]
    gpu = [isl.text("gpu", optional=True) or "?" for isl in islands]
    gpus = [isl.integer("gpus", minimum=1, optional=True) for isl in islands]
    inside = [isl.number("slowest_internal_gbps", optional=True) for isl in islands]
    leaving = [isl.number("fastest_leaving_gbps", optional=True) for isl in islands]
    total = sum(len(n) for n in nodes)
    named = total <= NAMED_UP_TO
    per_row = NAMED_PER_ROW if named else UNNAMED_PER_ROW
    rows = [max(1, math.ceil(len(n) / per_row)) for n in nodes]
    colour = style.colours(gpu)

    height_rows = sum(rows) + GAP_ROWS * len(rows)
    fig = style.figure(FRAME_IN + ROW_IN * height_rows)
    node_ax, band_ax = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [3, 1]})
    centres, y = [], GAP_ROWS / 2
    for k, names in enumerate(nodes):
        node_ax.add_patch(Rectangle((-0.1, y - 0.1), per_row + 0.2 - (1 - NODE), rows[k] - (1 - NODE) + 0.2, fill=False,
                                    edgecolor=colour[gpu[k]], linewidth=1.5, gid=f"island-{k}"))
        for j, name in enumerate(names):
            col, row = j % per_row, j // per_row
            node_ax.add_patch(Rectangle((col, y + row), NODE, NODE, color=colour[gpu[k]], alpha=0.85,
                                        gid=f"node-{k}-{j}"))
            if named:
                short = name if len(name) <= NAME_CHARS else "…" + name[-(NAME_CHARS - 1):]
                node_ax.text(col + NODE / 2, y + row + NODE / 2, short, ha="center", va="center", color="white",
                             fontsize=style.FONT_PT - 2)
        centres.append(y + (rows[k] - (1 - NODE)) / 2)
        y += rows[k] + GAP_ROWS
    node_ax.set_xlim(-0.3, per_row + 0.1)
    node_ax.set_ylim(y - GAP_ROWS / 2, 0)
    node_ax.set_xticks([])
    for side in ("top", "right", "bottom"):
        node_ax.spines[side].set_visible(False)
    node_ax.set_yticks(centres, [f"island {k}: {gpu[k]}\n{len(nodes[k])} node{'s' * (len(nodes[k]) != 1)}"
                                 + (f", {gpus[k]} GPUs" if gpus[k] else "") for k in range(len(nodes))])
    node_ax.set_title(f"{len(nodes)} islands of {total} nodes" + ("" if named else " (names left out: too many)"),
                      loc="left", fontsize=style.FONT_PT)

    bar = 0.3
    for k, c in enumerate(centres):
        for value, offset, gid, fill in ((inside[k], -bar / 2, "internal", True), (leaving[k], bar / 2, "leaving", False)):
            if value is None:
                continue
            band_ax.barh(c + offset, value, bar, color=colour[gpu[k]] if fill else "white", edgecolor=colour[gpu[k]],
                         hatch=None if fill else "///", gid=f"{gid}-{k}")
            band_ax.text(value, c + offset, f" {value:g}", va="center", ha="left", fontsize=style.FONT_PT - 2)
        if inside[k] is None:
            alone = "one node: no link inside" if len(nodes[k]) == 1 else "no link inside given"
            band_ax.text(0.02, c - bar / 2, alone, transform=band_ax.get_yaxis_transform(),
                         va="center", fontsize=style.FONT_PT - 2)
    figures = [v for v in inside + leaving if v is not None]
    if figures and max(figures) > LOG_ABOVE * min(figures):
        band_ax.set_xscale("log")
        band_ax.set_xlim(min(figures) / 2, max(figures) * 4)
        band_ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        band_ax.xaxis.set_minor_formatter(NullFormatter())
    else:
        band_ax.set_xlim(0, max(figures, default=1.0) * 1.3)
    band_ax.set_xlabel("Gb/s" + (" (log scale)" if band_ax.get_xscale() == "log" else ""))
    band_ax.tick_params(axis="y", left=False)
    band_ax.set_title("bandwidth", loc="left", fontsize=style.FONT_PT)
    fig.suptitle(f"{title}: {len(nodes)} islands", x=0.01, ha="left")
    fig.legend(handles=[Patch(color="grey", label="slowest link inside the island"),
                        Patch(facecolor="white", edgecolor="grey", hatch="///", label="fastest link leaving it")]
               + [Patch(color=c, label=g) for g, c in colour.items()],
               loc="outside lower center", ncols=min(2 + len(colour), 6), frameon=False)
    return fig
