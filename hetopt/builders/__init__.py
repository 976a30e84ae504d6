"""Instance builders: catalogs and the cost model turned into family instances (below the planner)."""
