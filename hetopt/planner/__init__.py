"""The end-to-end planner: cluster + model in, best heterogeneous plan out.

``plan(load_cluster("tangram-c3"), load_model(...), global_batch=128)`` runs islands →
slices → partial plans (any :class:`~hetopt.planner.parallelizer.protocol.Parallelizer`, the built-in
one by default) → composition, and plans the alternatives on the same cost model.
"""

from hetopt.planner.setup.cluster import Cluster, load_cluster
from hetopt.planner.steps import Alternative, HeteroPlan, StageRow, plan
from hetopt.planner.setup.request import PlanRequest

__all__ = ["Alternative", "Cluster", "HeteroPlan", "PlanRequest", "StageRow", "load_cluster", "plan"]
