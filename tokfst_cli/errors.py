"""Library errors: each carries its data; the command line words it (``cli.errors``).

The library never names a command-line flag. A :class:`LimitError` says which limit (the
library parameter, e.g. ``max_states``), its bound, the size reached and the stage; the CLI
turns that into ``--max-states N`` and a hint. Other errors may carry a ``hint`` key that the
CLI looks up to add a command-line remedy; ``fix`` is the remedy in library terms.
"""

from __future__ import annotations

from typing import Any, Callable


class TokfstError(Exception):
    """A failure the user can act on. ``exit_code`` 1 = runtime error, 2 = bad input/usage, 3 = a limit."""

    exit_code = 1

    def __init__(self, message: str, fix: str | None = None, *, hint: str | None = None, **data: Any):
        super().__init__(message)
        self.fix = fix
        self.hint = hint
        self.data = data

    def message(self, option: Callable[[str], str] = lambda name: name) -> str:
        """The message, with limits named by ``option`` (the CLI passes its flag names)."""
        return str(self).replace("\n", " ")

    def one_line(self, option: Callable[[str], str] = lambda name: name, fix: str | None = None) -> str:
        msg = self.message(option)
        fix = fix if fix is not None else self.fix
        return f"{msg}; {fix}" if fix else msg


class InputError(TokfstError):
    """Bad input: malformed file, unsupported tokenizer or regex syntax (exit 2)."""

    exit_code = 2


class LimitError(TokfstError):
    """A size limit was reached (exit 3).

    ``stage`` names what was being built, ``limit`` the parameter (``max_states``,
    ``max_arcs``), ``bound`` its value, ``value`` the size reached (None when the
    construction stopped on passing the bound), ``remedy`` a key for the way out
    (``factorized``, ``product``, ``implicit``, ``simplify``, ``vocabulary`` or None).
    ``at_least``: ``value`` is a lower bound estimated before building (nothing was built).
    """

    exit_code = 3
    UNITS = {"max_states": "states", "max_arcs": "arcs"}

    def __init__(self, stage: str, limit: str, bound: int, value: int | None = None,
                 remedy: str | None = None, unit: str | None = None, at_least: bool = False):
        self.stage, self.limit, self.bound, self.value, self.remedy = stage, limit, bound, value, remedy
        self.unit = unit or self.UNITS.get(limit, "units")
        self.at_least = at_least and value is not None
        super().__init__(self.message(), None, hint=remedy, stage=stage, limit=limit, bound=bound, value=value)

    def with_remedy(self, remedy: str) -> "LimitError":
        """The same limit, with another way out."""
        return LimitError(self.stage, self.limit, self.bound, self.value, remedy, self.unit, self.at_least)

    def message(self, option: Callable[[str], str] = lambda name: name) -> str:
        name = option(self.limit)
        if self.value is None:
            return f"{self.stage} needs more than {name} {self.bound} {self.unit}"
        if self.at_least:
            return f"{self.stage} would have at least {self.value} {self.unit} (> {name} {self.bound})"
        return f"{self.stage} has {self.value} {self.unit} (> {name} {self.bound})"


class EmptyLanguageError(TokfstError):
    """The requested automaton accepts nothing (exit 1)."""


class DisallowedTokenError(TokfstError, ValueError):
    """``advance(state, token)`` with a token the constraint does not allow there."""

    def __init__(self, token: int, state: Any):
        super().__init__(f"token {token} is not allowed in state {state}", token=token, state=state)
        self.token, self.state = token, state


class UsageError(TokfstError, ValueError):
    """A Python API called with an argument it cannot take (a wrong value or shape; exit 2)."""

    exit_code = 2


class TokenTypeError(TokfstError, TypeError):
    """A decoder given a token that is not an integer (a float, a bool, a string; numpy integers
    are integers): the same in every decoder kind (``decoding.matcher.token_id``)."""

    exit_code = 2

    def __init__(self, token: Any):
        super().__init__(f"a token id is an integer, not {type(token).__name__} {token!r}"[:200],
                         "pass int(token)", token=token)
        self.token = token


class TokenRangeError(DisallowedTokenError):
    """A decoder given a token id outside its vocabulary (``0 <= token < vocab_size``): the same in
    every decoder kind. A :class:`DisallowedTokenError` (such an id is never allowed), so a
    Matcher's ``accept_token`` answers False for it."""

    exit_code = 2

    def __init__(self, token: int, vocab_size: int):
        TokfstError.__init__(self, f"token id {token} is outside the vocabulary (ids 0 to {vocab_size - 1})",
                             "check the tokenizer the decoder was built for", token=token, vocab_size=vocab_size)
        self.token, self.state, self.vocab_size = token, None, vocab_size


class ForeignStateError(UsageError):
    """A decoder given a state that is not one of its own (another decoder's, or no state at all),
    where that can be told cheaply: the same in every decoder kind (``decoding.matcher.foreign``)."""

    def __init__(self, state: Any, decoder: str):
        shown = repr(state)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        super().__init__(f"{shown} is not a state of this {decoder}",
                         "pass a state this decoder returned (initial() or advance())", state=state, decoder=decoder)
        self.state = state


class DeadEnd(TokfstError, RuntimeError):
    """A state with an empty mask where the sequence may not end (a factorized form's dead end)."""


class InternalError(TokfstError, AssertionError):
    """An invariant of a construction does not hold: a bug in tokfst, reported with its data."""
