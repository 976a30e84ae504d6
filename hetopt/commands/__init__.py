"""The commands of ``hetopt``, one module each (or a few of one kind), run from parsed
arguments by :mod:`hetopt.cli`, which alone parses (``tests/test_layering.py``)."""
