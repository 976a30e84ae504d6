"""Exceptions of hetopt. Imports nothing of the project."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input: a malformed instance file, an unknown name, an impossible size.

    The message is one line that names the file, the key path and the fix, e.g.
    ``instances/allocation/x.toml: gpu[2].memory_gib: must be > 0 (got -4)``.
    The command line prints it and exits with code 2.

    Parameters
    ----------
    message
        The one line. A library message about an argument starts with the argument's name
        (``"global_batch: must be >= 1 (got 0)"``), never with a command-line flag: the
        command line alone knows which flag sets which field.
    field
        The name of the argument (or option) the message is about, when there is one; the
        command line maps it to its flag.
    source
        The file the message already names at its start, when it does (a reader's error):
        ``hetopt.readers.fields.located`` adds the file name only to messages without one.

    Examples
    --------
    >>> e = InputError("global_batch: must be >= 1 (got 0)", field="global_batch")
    >>> e.field, str(e)
    ('global_batch', 'global_batch: must be >= 1 (got 0)')
    """

    def __init__(self, message: str = "", *, field: str | None = None, source: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.source = source

    @property
    def detail(self) -> str:
        """The message after the name of its field, which says where (``field``) on its own.

        >>> InputError("layout tp=3: must divide 8", field="layout").detail
        'tp=3: must divide 8'
        >>> InputError("global_batch: must be >= 1", field="global_batch").detail
        'must be >= 1'
        """
        text = str(self)
        field = self.field
        if not field or not text.startswith(field) or text[len(field):len(field) + 1] not in (":", " "):
            return text
        return text[len(field) + 1:].lstrip()


class SolverBug(RuntimeError):
    """A solver produced an answer that the family's ``evaluate`` rejects.

    This is never caught and turned into a result: a wrong answer is a bug.
    """
