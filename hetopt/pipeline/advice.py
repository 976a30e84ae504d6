"""Which exact method to try when one declines: the one rule the pipeline family's decline
messages share, so that dp never sends a user to milp and cpsat when they decline the same
instance, nor they to dp.

Each method's up-front limit is checked as the method itself checks it: the DP's listing of
usage vectors (``dp_table._prepare``), the position models' binaries
(``positions.too_large``). The DP may still stop later, on one run's table
(``dp_table.MAX_DP_CELLS``), which only a run can tell: its advice says so.
"""

from __future__ import annotations

from hetopt.budget import Deadline
from hetopt.family import presolve
from hetopt.pipeline.positions import PositionData, position_data, too_large
from hetopt.pipeline.problem import PipelineInstance
from hetopt.result import Result


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


def positions_early_answer(instance: PipelineInstance, data: PositionData, *, method: str, deadline: Deadline) -> Result | None:
    """The position model's answer before it is built (both methods, ``milp`` and ``cpsat``):
    INFEASIBLE when no usable option may be the first block, DECLINED when
    ``positions.too_large`` (with :func:`after_model_declines`'s advice); None when the model is built."""

    def declined() -> str | None:
        reason = too_large(data)
        return None if reason is None else f"{reason}; {after_model_declines(instance)}"

    return presolve(problem="pipeline", method=method, deadline=deadline, declined=declined,
                    infeasible=None if data.at[0] else "no usable option may be the first block: every one has "
                                                       "role middle or last")
