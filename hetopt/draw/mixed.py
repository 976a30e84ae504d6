"""The mixed-stages plan's picture: one row per GPU type, the model's layers across.

Each stage is a column over the layers it holds; in it, every GPU type the stage uses has a bar
on its own row, labelled with its replicas, TP and share (``16×tp1 y7``); the stages' borders
are dashed and the slowest stage (by its time per micro-batch) is outlined. Drawn below the plan
picture (:mod:`hetopt.draw.plan`) when the plan document holds a mixed-stages plan: the
``mixed-stages`` alternative's ``plan``, or a given mixed layout's (docs/formats.md, "The
mixed-stages plan").
"""

from __future__ import annotations

from hetopt.draw import style
from hetopt.planfile import MIXED_PLAN_KIND as KIND  # the plan data's kind this panel draws



def mixed_plan(top: style.Doc) -> tuple[str, style.Doc] | None:
    """(what it is, its plan) of the document's mixed-stages plan: the alternative's, else a given
    layout's; None when it has none."""
    for alt in top.tables("alternatives", required=False):
        plan = alt.data.get("plan")
        if isinstance(plan, dict) and plan.get("kind") == KIND:
            return f"{alt.text('name')} alternative", style.Doc(plan, top.source, f"{alt.path}.plan")
    given = top.data.get("given_layout")
    if isinstance(given, dict) and isinstance(given.get("plan"), dict) and given["plan"].get("kind") == KIND:
        return "your layout", style.Doc(given["plan"], top.source, "given_layout.plan")
    return None


def draw(ax, what: str, plan: style.Doc) -> None:
    """The panel of ``plan`` (its ``stages[*]``: ``first_layer``, ``layers``, ``time_s``,
    ``members[*]``: ``gpu``, ``tp``, ``replicas``, ``shares``) on the axes ``ax``.

    Raises
    ------
    InputError
        A field missing or malformed, named by its path in the document.
    """

    stages = plan.tables("stages")
    types: list[str] = []
    for st in stages:
        for m in st.tables("members"):
            if m.text("gpu") not in types:
                types.append(m.text("gpu"))
    row_of = {t: r for r, t in enumerate(types)}
    colour = style.colours(types)
    times = [st.number("time_s") for st in stages]
    slowest = max(times)
    depth = 0
    for s, st in enumerate(stages):
        first, layers = st.integer("first_layer"), st.integer("layers", minimum=1)
        depth = max(depth, first + layers)
        worst = times[s] >= slowest * (1 - style.SLOWEST_RTOL)
        for m in st.tables("members"):
            gpu, shares = m.text("gpu"), [int(y) for y in m.data.get("shares") or []]
            share = "y" + "-".join(map(str, shares)) if shares else ""
            ax.barh(row_of[gpu], layers, style.PLAN_BAR, left=first, color=colour[gpu], edgecolor=style.HIGHLIGHT if worst else "white",
                    linewidth=2.0 if worst else 0.8, gid=f"mixed-stage-{s}-{gpu}")
            ax.text(first + layers / 2, row_of[gpu], f"{m.integer('replicas', minimum=1)}×tp{m.integer('tp', minimum=1)} {share}",
                    ha="center", va="center", color="white", fontsize=style.FONT_PT - 2)
        if s:
            ax.axvline(first, color="#555555", linestyle="--", linewidth=0.8)
    ax.set_yticks(range(len(types)), types)
    ax.set_ylim(len(types) - 0.5, -0.5)
    ax.set_xlim(0, depth)
    ax.set_xlabel("layers of the model")
    b = plan.integer("microbatch_size", minimum=1)
    ax.set_title(f"{what}: {len(stages)} stage{'s' if len(stages) != 1 else ''} over GPU types, micro-batches of {b}, "
                 f"{style.seconds(plan.number('iteration_time_s'))} per iteration; the slowest "
                 f"({style.seconds(slowest)}) outlined", loc="left", fontsize=style.FONT_PT)
