"""Exact DP for the mixed family: stages placed last to first, Pareto labels (Σ, max).

State (i, u, k): layers i..L−1 are placed, u_g units (``GpuGroup.unit`` GPUs: a node, or one
GPU) of each type are used, k stages follow
(capped at max(M − 1, 1): the flight min(k + 1, M) and "is it the last stage" are all that
k decides). A label is a pair (σ, μ): σ = Σ of the placed stages' t_s plus a hand-over λ
per stage that has a successor, μ = the max of those t_s and of λ when a hand-over exists.
Placing stage [a, i) with choice c (units v_c, time t_c, at flight min(k + 1, M)) moves to
(a, u + v_c, min(k + 1, cap)) with σ + t_c + [k ≥ 1]λ and max(μ, t_c, [k ≥ 1]λ). At i = 0,
T = σ + (M − 1)·μ is the closed form; since T and both updates are non-decreasing in σ and
μ, a label dominated in both may be dropped, and the least T over the final labels is the
optimum (``formulations/mixed.md``). Stage choices are priced by ``stages.stage_options``
(per layout, i.e. per type a TP degree and a replica count, the exact best split of the
samples; dominated layouts dropped). The state counts units per type, not replicas: a type's
replicas in a stage are interchangeable, so their count is all a plan needs.
"""

from __future__ import annotations

import math

from hetopt.budget import CLOCK_EVERY
from hetopt.family import Deadline, conclude, no_solution, presolve
from hetopt.mixed.limits import after_cap, dp_limit_hit, flights
from hetopt.mixed.problem import MixedInstance, build_solution, evaluate, in_flight, infeasible_reason
from hetopt.mixed.stages import stage_options
from hetopt.result import Result, Status


def _pareto(labels: list[tuple]) -> list[tuple]:
    """The labels no other label beats in both σ and μ (sorted by σ)."""
    kept: list[tuple] = []
    for lab in sorted(labels, key=lambda x: (x[0], x[1])):
        if not kept or lab[1] < kept[-1][1]:
            kept.append(lab)
    return kept


def _plan(label: tuple) -> list[tuple]:
    """The stages of a label, first to last (a label is (σ, μ, stage, parent))."""
    stages = []
    while label is not None and label[2] is not None:
        stages.append(label[2])
        label = label[3]
    return stages


def _too_large(instance: MixedInstance) -> str | None:
    """Why the DP declines the instance (``limits.dp_limit_hit``), with the way out; None when it does not."""
    hit = dp_limit_hit(instance)
    return None if hit is None else f"{hit}; narrow the instance (fewer layers, TP degrees or units per type)"


def solve_dp(instance: MixedInstance, *, time_limit: float | None = None) -> Result:
    """Solve the instance exactly (see the module docstring).

    Returns
    -------
    Result
        OPTIMAL, INFEASIBLE (no plan fits), DECLINED (``limits.dp_limit_hit``), or on a
        stop the best complete plan found so far (FEASIBLE) or TIME_LIMIT. ``stats``:
        states, labels, pricings.

    Examples
    --------
    >>> from hetopt.mixed.synthetic import hand_instance
    >>> r = solve_dp(hand_instance())
    >>> r.status.name, round(r.objective, 9)
    ('OPTIMAL', 7.75)
    """
    deadline = Deadline(time_limit)
    refused = presolve(problem="mixed", method="dp", deadline=deadline, infeasible=infeasible_reason(instance),
                       declined=lambda: _too_large(instance))
    if refused is not None:
        return refused
    L, M, link = instance.layers, instance.microbatches, instance.link_s
    counts = tuple(g.units for g in instance.gpus)
    cap = after_cap(instance)
    options: dict[tuple[int, int, int], list] = {}
    # states by start layer: {(u, k): [labels]}; a label is (σ, μ, stage, parent label)
    by_layer: list[dict] = [dict() for _ in range(L + 1)]
    by_layer[L][(tuple([0] * instance.num_types), 0)] = [(0.0, 0.0, None, None)]
    stats = {"states": 0, "labels": 0, "pricings": 0, "flights": flights(instance), "pruned": 0}
    steps = 0

    def choices(a: int, i: int, flight: int) -> list:
        key = (a, i, flight)
        if key not in options:
            # each choice with its stage as the plan will list it (built once, not per state),
            # sorted by time (``stage_options`` keeps that order)
            options[key] = [(use, t, (a, i, members))
                            for use, t, members in stage_options(instance, a, i, flight, deadline)]
            stats["pricings"] += 1
        return options[key]

    # an incumbent: the best one-stage plan, T = M·t. A label whose (σ, μ) already gives
    # σ + (M − 1)·μ above it cannot complete to a better plan (both only grow, in floating
    # point too), so it is not kept; the one-stage plan itself is a label of the DP, so
    # nothing better than what the DP would return is lost
    try:
        incumbent = min((t + (M - 1) * t for _u, t, _s in choices(0, L, in_flight(0, M))), default=math.inf)
    except TimeoutError:
        incumbent = math.inf

    def stopped() -> Result:
        finals = [lab for labs in by_layer[0].values() for lab in labs]
        if not finals:
            return no_solution(problem="mixed", method="dp", status=Status.TIME_LIMIT, deadline=deadline,
                               reason="time limit reached before the DP completed a plan", stats=stats)
        best = min(finals, key=lambda lab: lab[0] + (M - 1) * lab[1])
        return conclude(problem="mixed", method="dp", instance=instance, solution=build_solution(instance, _plan(best)),
                        evaluate=evaluate, deadline=deadline, proven_optimal=False, stats=stats)

    try:
        for i in range(L, 0, -1):
            for (u, k), labels in by_layer[i].items():
                labels = _pareto(labels)
                stats["states"] += 1
                stats["labels"] += len(labels)
                flight = in_flight(k, M)
                hand = link if k >= 1 else 0.0
                for a in range(i - 1, -1, -1):
                    after = min(k + 1, cap)
                    for use, t, stage in choices(a, i, flight):
                        steps += 1
                        if steps % CLOCK_EVERY == 0 and deadline.expired():
                            raise TimeoutError
                        if t + (M - 1) * t > incumbent:
                            stats["pruned"] += 1
                            break  # this choice and every slower one: σ' ≥ t and μ' ≥ t
                        new_u = tuple(x + v for x, v in zip(u, use))
                        if any(x > n for x, n in zip(new_u, counts)):
                            continue
                        target = by_layer[a].setdefault((new_u, after), [])
                        for lab in labels:
                            sigma, mu = lab[0] + t + hand, max(lab[1], t, hand)
                            if sigma + (M - 1) * mu <= incumbent:
                                target.append((sigma, mu, stage, lab))
                by_layer[i][(u, k)] = []  # expanded: free its labels (children keep their parents)
    except TimeoutError:
        return stopped()
    finals = [lab for labs in by_layer[0].values() for lab in labs]
    if not finals:
        return no_solution(problem="mixed", method="dp", status=Status.INFEASIBLE, deadline=deadline, stats=stats,
                           reason="no plan fits: every cut of the layers leaves some stage without a layout that "
                                  "fits the GPUs' memory or count (add GPUs, memory or TP degrees)")
    best = min(finals, key=lambda lab: lab[0] + (M - 1) * lab[1])
    stats["states"] += len(by_layer[0])
    return conclude(problem="mixed", method="dp", instance=instance, solution=build_solution(instance, _plan(best)),
                    evaluate=evaluate, deadline=deadline, proven_optimal=True, stats=stats)


__all__ = ["solve_dp"]
