"""``exact`` (what ``auto`` runs): the DP where it applies, else CP-SAT.

The DP answers in milliseconds on switch trees of any size and on small clusters; when it
declines (a large cluster whose bandwidths are not ultrametric), CP-SAT takes the rest of
the time budget. The Result keeps the method name "exact" and says in ``stats["via"]``
which method answered (and why the DP declined).
"""

from __future__ import annotations

from dataclasses import replace

from hetopt.family import Deadline
from hetopt.islands.cpsat import solve_cpsat_model
from hetopt.islands.dp import solve_dp
from hetopt.islands.problem import IslandsInstance
from hetopt.modelmethod import threads_alias
from hetopt.result import Result, Status


@threads_alias
def solve_exact(instance: IslandsInstance, *, time_limit: float | None = None, threads: int | None = None,
                seed: int = 0) -> Result:
    """The DP, or CP-SAT when the DP declines.

    Returns
    -------
    Result
        method "exact"; ``stats["via"]`` is "dp" or "cpsat"; ``stats["dp_declined"]`` the
        DP's reason when CP-SAT answered.
    """
    deadline = Deadline(time_limit)
    first = solve_dp(instance, time_limit=time_limit)
    if first.status is not Status.DECLINED:
        return replace(first, method="exact", stats=dict(first.stats, via="dp"))
    rest = None if time_limit is None else deadline.remaining()
    second = solve_cpsat_model(instance, time_limit=rest, threads=threads, seed=seed)
    return replace(
        second, method="exact", wall_s=deadline.elapsed(), stats=dict(second.stats, via="cpsat", dp_declined=first.reason)
    )
