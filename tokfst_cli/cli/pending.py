"""Subcommands whose issues are not done yet: they say so and exit 2."""

from __future__ import annotations

import typer

from .common import say

PENDING = {
    "compile-maxmatch": ("Compile the MaxMatch transducer T_Aho", "#4 (canonical MaxMatch)"),
    "bench": ("Reproduce the paper's tables and time tokfst against its peers", "#5 (bench)"),
}


def make_pending(name: str):
    summary, issue = PENDING[name]

    def command(ctx: typer.Context) -> None:
        say(f"tokfst: error: '{name}' is not implemented yet; it arrives with issue {issue}")
        raise typer.Exit(2)

    command.__doc__ = f"{summary}.\n\nNot implemented yet (issue {issue}): prints a one-line notice and exits 2."
    return command
