"""The Gantt picture of a plan: its composed pipeline's 1F1B schedule (``hetopt draw plan.json --gantt``).

The schedule is the project's 1F1B simulator (:func:`hetopt.pipeline.simulate.schedule_1f1b`)
run on the plan's own stage figures: one micro-batch's forward and backward on each stage
(``stages[*].forward_s``, ``backward_s``), the round-trip link time where one island's block
hands over to the next (``link_after_s``), and the plan's ``microbatches``. That is what the
planner simulated for the plan's ``simulated_s``, so the picture's makespan is that figure,
operation by operation (``tests/test_draw.py``). One lane per stage, as the pipeline
picture (:mod:`hetopt.draw.pipeline`, which draws it): forward, backward and idle time, each
island's block bracketed on the right with its name and layout (TP, PP, DP, recompute, ZeRO),
the link time between blocks, the bottleneck stage outlined. An interleaved plan (``vpp``) is
drawn as the 1F1B closed form sees it, as its stage table shows it.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from hetopt.draw import style
from hetopt.draw.pipeline import schedule_figure


def render(document: dict, title: str, source: str) -> Figure:
    """The 1F1B schedule of a ``hetopt plan --json`` result.

    Reads ``microbatches``, ``stages[*]`` (``island``, ``gpus``, ``layout``, ``forward_s``,
    ``backward_s``, ``link_after_s``) and ``analytic_s``; as every picture,
    ``render(document, title, source)`` (:mod:`hetopt.draw`). A plan written before the stages
    carried their forward and backward times is refused with the missing key named.

    Examples
    --------
    >>> doc = {"microbatches": 4, "analytic_s": 20.0, "stages": [
    ...     {"island": "a", "gpus": 8, "layout": "tp8 pp2 dp1", "forward_s": 1.0, "backward_s": 2.0, "link_after_s": 0.0},
    ...     {"island": "a", "gpus": 8, "layout": "tp8 pp2 dp1", "forward_s": 1.0, "backward_s": 2.0, "link_after_s": 0.5},
    ...     {"island": "b", "gpus": 4, "layout": "tp4 pp1 dp1", "forward_s": 1.0, "backward_s": 2.0, "link_after_s": 0.0}]}
    >>> fig = render(doc, "plan", "plan.json")
    >>> sorted(c.get_gid() for c in fig.axes[0].collections)[:3]
    ['stage-0-backward', 'stage-0-forward', 'stage-0-idle']
    """
    top = style.Doc(document, source)
    stages = top.tables("stages")
    microbatches = top.integer("microbatches", minimum=1)
    islands = [st.text("island") for st in stages]
    # a pipeline puts one block on an island: a block is a run of stages on the same island
    block_of, labels = [], {}
    for s, (st, island) in enumerate(zip(stages, islands)):
        block = 0 if s == 0 else block_of[-1] + (island != islands[s - 1])
        block_of.append(block)
        labels.setdefault(block, st.text("layout", optional=True) or "")
    after = [st.number("link_after_s", optional=True) or 0.0 for st in stages]
    return schedule_figure(
        f"{title}: the plan's 1F1B schedule", [st.number("forward_s") for st in stages],
        [st.number("backward_s") for st in stages], after, microbatches, block_of, islands,
        [st.integer("gpus", optional=True) for st in stages], analytic=top.number("analytic_s", optional=True),
        block_labels=labels, error=lambda problem: top.error("stages", problem))
