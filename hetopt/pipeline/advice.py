"""Which exact method to try when one declines: the one rule the pipeline family's decline
messages share, so that dp never sends a user to milp and cpsat when they decline the same
instance, nor they to dp.

Each method's up-front limit is checked as the method itself checks it: the DP's listing of
usage vectors (``dp_table._prepare``), the level model's cells (``levels.level_data``, the
models' default formulation) and the position models' binaries (``positions.too_large``).
The DP may still stop later, on one run's table (``dp_table.MAX_DP_CELLS``), which only a run
can tell: its advice says so.
"""

from __future__ import annotations

from hetopt.pipeline.positions import position_data, too_large
from hetopt.pipeline.problem import PipelineInstance


def after_dp_declines(instance: PipelineInstance) -> str:
    """The advice a DP decline ends with: milp or cpsat when one of their models fits (the level
    model, their default, first; else the position model, by name); when neither is known to
    fit before a greedy plan exists, milp or cpsat to try, then greedy.

    >>> from hetopt import load
    >>> from hetopt.catalog import instances_dir
    >>> after_dp_declines(load(instances_dir() / "pipeline" / "tiny.toml"))
    'use milp or cpsat'
    """
    from hetopt.pipeline.levels import LevelsTooLarge, NoPlan, level_data

    try:
        level_data(instance, None)  # counts the cells before listing any; raises past the limit
        return "use milp or cpsat"
    except NoPlan:
        return "use milp or cpsat"  # they prove that no plan exists
    except LevelsTooLarge as exc:
        levels = str(exc)
    if too_large(position_data(instance)) is None:
        return f"use milp or cpsat with formulation=\"positions\" (their level model, without a known plan: {levels})"
    # the level model sizes its window by the greedy's plan, which takes as long as a greedy
    # run to know (28 s on 200,000 options): the advice says what is known, not more
    return (f"try milp or cpsat: their level model sizes itself once a greedy plan bounds it (without one: {levels}); "
            "should they decline too, use greedy")


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
