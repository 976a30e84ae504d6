"""Parallelism beyond Megatron's TP/PP/DP: expert (EP, FSEP), context (CP), activation offloading.

One job per module, pure functions of a :class:`~hetopt.workload.ModelConfig` and SI
units (bytes, seconds, bytes/s, FLOPs); the built-in parallelizer
(:mod:`hetopt.planner.parallelizer.builtin`) calls them for the layouts that use them. Formulas,
constants and sources: ``formulations/costmodel.md``, sections "Expert parallelism",
"Context parallelism" and "Activation offloading".
"""
