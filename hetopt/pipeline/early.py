"""What the pipeline family's two models (``milp`` and ``cpsat``) answer alike before and
while they are built: the position model's refusals, the level model's warm start and its
refusals, and the level model's answer when the time runs out while it is built.
"""

from __future__ import annotations

from hetopt.budget import Deadline
from hetopt.family import no_solution, presolve
from hetopt.pipeline.advice import after_model_declines
from hetopt.pipeline.levels import MAX_LEVEL_CELLS, LevelData, LevelsTooLarge, NoPlan, known_plan, warm_start
from hetopt.pipeline.options import GENERIC_INFEASIBLE
from hetopt.pipeline.positions import MAX_POSITION_BINARIES, PositionData, too_large
from hetopt.pipeline.problem import PipelineInstance
from hetopt.result import Result, Status


def positions_early_answer(instance: PipelineInstance, data: PositionData, *, method: str, deadline: Deadline,
                           max_binaries: int = MAX_POSITION_BINARIES) -> Result | None:
    """The position model's answer before it is built: INFEASIBLE when no usable option may be
    the first block, DECLINED when ``positions.too_large`` (past ``max_binaries``; with the
    advice of ``advice.after_model_declines``); None when the model is built."""

    def declined() -> str | None:
        reason = too_large(data, max_binaries)
        return None if reason is None else f"{reason}; {after_model_declines(instance)}"

    return presolve(problem="pipeline", method=method, deadline=deadline, declined=declined,
                    infeasible=None if data.at[0] else "no usable option may be the first block: every one has "
                                                       "role middle or last")


def levels_warm_start(instance: PipelineInstance, *, method: str, deadline: Deadline,
                      max_cells: int = MAX_LEVEL_CELLS) -> Result | tuple[LevelData, list[int] | None]:
    """The level model's data and known plan (``levels.warm_start``), or its answer before it is
    built: INFEASIBLE when no choice tiles the layers, DECLINED when the data is past
    ``max_cells`` (with the advice of ``advice.after_model_declines``)."""
    try:
        return warm_start(instance, deadline, max_cells)
    except NoPlan as exc:
        return no_solution(problem="pipeline", method=method, status=Status.INFEASIBLE, deadline=deadline,
                           reason=f"{GENERIC_INFEASIBLE.format(layers=instance.layers)} ({exc})")
    except LevelsTooLarge as exc:
        return no_solution(problem="pipeline", method=method, status=Status.DECLINED, deadline=deadline,
                           reason=f"{exc}; {after_model_declines(instance)}")


def levels_out_of_time(instance: PipelineInstance, *, method: str, model: str, hint: list[int] | None,
                       deadline: Deadline, floor: float, stats: dict) -> Result:
    """The level model's answer when the time runs out while ``model`` (``"the MILP"``, ``"the
    CP-SAT model"``) is built: FEASIBLE with the known plan ``hint`` and the bound ``floor``,
    TIME_LIMIT with that bound without one."""
    why = f"time limit reached while building {model}"
    if hint is not None:
        return known_plan(instance, method, hint, deadline, floor, stats, why)
    return no_solution(problem="pipeline", method=method, status=Status.TIME_LIMIT, deadline=deadline, bound=floor,
                       reason=why, stats=stats)
