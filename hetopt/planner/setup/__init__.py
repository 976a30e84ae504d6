"""The request and its setup: the options checked (request), the cluster read (cluster), the user's framework
(framework: ``--runtime``) and given layout (layout), and the islands and parallelizer a plan composes (configure).
"""
