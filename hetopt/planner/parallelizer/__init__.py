"""The parallelizer: Tangram's interface (protocol), the built-in homogeneous parallelizer that
enumerates, prices and prunes layouts (builtin), and the work its queries share (pricecache).
"""
