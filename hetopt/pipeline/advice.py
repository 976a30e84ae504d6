"""Which exact method to try when one declines: the one rule the pipeline family's decline
messages share, so that dp never sends a user to milp and cpsat when they decline the same
instance, nor they to dp.

Each method's up-front limit is checked as the method itself checks it: the DP's listing of
usage vectors (``dp_table._prepare``), the position models' binaries
(``positions.too_large``). The DP may still stop later, on one run's table
(``dp_table.MAX_DP_CELLS``), which only a run can tell: its advice says so.
"""

from __future__ import annotations

from hetopt.pipeline.positions import position_data, too_large
from hetopt.pipeline.problem import PipelineInstance


def after_dp_declines(instance: PipelineInstance) -> str:
    """The advice a DP decline ends with: milp or cpsat when their model fits, else greedy.

    >>> from hetopt import load
    >>> from hetopt.catalog import instances_dir
    >>> after_dp_declines(load(instances_dir() / "pipeline" / "tiny.toml"))
    'use milp or cpsat'
    """
    hit = too_large(position_data(instance))
    return "use milp or cpsat" if hit is None else f"milp and cpsat decline it too ({hit}): use greedy"


def after_model_declines(instance: PipelineInstance) -> str:
    """The advice a MILP or CP-SAT decline ends with: dp when its up-front limit holds, else greedy.

    >>> from hetopt import load
    >>> from hetopt.catalog import instances_dir
    >>> after_model_declines(load(instances_dir() / "pipeline" / "tiny.toml"))
    'use dp (it declines only if one of its runs outgrows its table)'
    """
    from hetopt.pipeline.dp_table import _prepare

    if _prepare(instance).listed:
        return "use dp (it declines only if one of its runs outgrows its table)"
    return "dp declines it too (too many distinct island kinds for its usage vectors): use greedy"
