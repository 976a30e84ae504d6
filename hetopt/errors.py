"""Exceptions of hetopt. Imports nothing of the project."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input: a malformed instance file, an unknown name, an impossible size.

    The message is one line that names the file, the key path and the fix, e.g.
    ``instances/allocation/x.toml: gpu[2].memory_gib: must be > 0 (got -4)``.
    The command line prints it and exits with code 2.
    """


class SolverBug(RuntimeError):
    """A solver produced an answer that the family's ``evaluate`` rejects.

    This is never caught and turned into a result: a wrong answer is a bug.
    """
