"""pytest set-up for the whole repository."""

from __future__ import annotations

import importlib.util

# hetopt/draw's doctests draw with matplotlib, an optional extra (the plot extra; the test
# extra installs it): without it, leave those modules out of the doctest collection.
collect_ignore_glob = [] if importlib.util.find_spec("matplotlib") else ["hetopt/draw/*.py"]
