"""The alternatives priced beside the composed plan: Cephalo's FSDP (fsdp), the papers' baselines
(baselines), the mixed stages (mixed), the data-parallel replicas (replicas), and the cheapest
plan under ``--objective cost`` (cheapest).
"""
