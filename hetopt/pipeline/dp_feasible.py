"""The cost-free DP: whether some pipeline has bottleneck ≤ τ (the search's τ_0 bisection).

It runs over the same states as ``dp_table`` but keeps, per (usage, class, first covered
layer), only the least number of stages behind; see ``formulations/pipeline.md``, "The search
over thresholds".
"""

from __future__ import annotations

import numpy as np

from hetopt.family import Deadline
from hetopt.pipeline import dp_table
from hetopt.pipeline.dp_table import INF, _groups, _last_blocks, _Prep, _Timeout, _TooLarge
from hetopt.pipeline.problem import PipelineInstance


def feasible(instance: PipelineInstance, prep: _Prep, tau: float, deadline: Deadline, *,
             max_cells: int = dp_table.MAX_DP_CELLS) -> bool:
    """Whether some pipeline has bottleneck ≤ τ: the DP's states with the cost dropped, at most
    ``max_cells`` cells at once (``_TooLarge`` beyond).

    Whether a suffix (u, κ, r, b) extends to a whole pipeline does not depend on its cost,
    and a suffix with fewer stages behind (b) allows every block a larger b allows and
    leads to smaller b's, so keeping the least b per (u, κ, r) decides feasibility exactly:
    a table of L + 1 values per (usage, class) instead of (L + 1)·(B + 1) costs.
    """
    L, B = instance.layers, prep.cap
    link_ok = np.where(prep.link <= tau, 0.0, INF)
    groups = _groups(instance, prep, tau)
    index = {u: k for k, u in enumerate(prep.usage)}
    n_classes = link_ok.shape[1]
    least: dict[int, np.ndarray] = {}  # least[x][κ, r] = least b (float; inf: unreachable)
    # at most max_cells cells at once: a table is dropped once its usage vector is done
    most_tables = max(1, max_cells // (n_classes * (L + 1)))

    def table(x: int) -> np.ndarray:
        if x not in least:
            if len(least) >= most_tables:
                raise _TooLarge
            least[x] = np.full((n_classes, L + 1), INF)
        return least[x]

    shapes = []
    for gs in groups:
        ks = np.array([g.layers for g in gs], dtype=np.int64)
        # the most stages behind a member of the group can take (its memory limit, capped at B)
        lim = np.array([int(np.flatnonzero(np.isfinite(g.best))[-1]) for g in gs], dtype=np.int64)
        ns = np.array([g.stages for g in gs], dtype=np.int64)
        roles = (np.array([g.role in ("first", "any") for g in gs], dtype=bool), np.array([g.role in ("middle", "any") for g in gs], dtype=bool))
        shapes.append((ks, lim, ns, roles))
    for K, nxt, g in _last_blocks(prep, groups, L):
        if g.layers == L:
            return True
        t = table(index[nxt])
        t[prep.kind_class[K], L - g.layers] = min(t[prep.kind_class[K], L - g.layers], min(g.stages, B))
    for u in prep.usage:
        if sum(u) == 0 or index[u] not in least:
            continue
        if deadline.expired():
            raise _Timeout
        here = least.pop(index[u])  # nothing reaches u any more
        if np.isfinite(here[:, 0]).any():
            return True
        live = np.flatnonzero(np.isfinite(here).any(axis=0))
        rlo, rhi = int(live[0]), int(live[-1])
        for K, gs in enumerate(groups):
            if u[K] + 1 >= prep.radix[K] or not gs:
                continue
            front = (here + link_ok[K][:, None]).min(axis=0)  # least b over the classes the link allows
            ks, lim, ns, roles = shapes[K]
            t = np.arange(max(0, rlo - int(ks.max())), rhi)  # target rows r − k < rhi
            src = t[None, :] + ks[:, None]
            b = front[np.minimum(src, L)]
            ok = (src <= rhi) & (b <= lim[:, None]) & np.where(t[None, :] == 0, roles[0][:, None], roles[1][:, None])
            if not ok.any():
                continue
            new = np.where(ok, np.minimum(b + ns[:, None], B), INF).min(axis=0)
            nxt = tuple(c + (j == K) for j, c in enumerate(u))
            tab = table(index[nxt])
            row = tab[prep.kind_class[K], t]
            tab[prep.kind_class[K], t] = np.minimum(row, new)
    return False
