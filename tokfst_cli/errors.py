"""Errors that the command line turns into one-line messages and exit codes."""

from __future__ import annotations


class TokfstError(Exception):
    """A failure the user can act on. ``exit_code`` 1 = runtime error, 2 = bad input/usage."""

    exit_code = 1

    def __init__(self, message: str, fix: str | None = None):
        super().__init__(message)
        self.fix = fix

    def one_line(self) -> str:
        msg = str(self).replace("\n", " ")
        return f"{msg}; {self.fix}" if self.fix else msg


class InputError(TokfstError):
    """Bad input: malformed file, unsupported tokenizer or regex syntax (exit 2)."""

    exit_code = 2


class LimitError(TokfstError):
    """An explicit size limit (``--max-states``) was exceeded (exit 1)."""


class EmptyLanguageError(TokfstError):
    """The requested automaton accepts nothing (exit 1)."""
