"""Subcommands whose issues are not done yet: they say so and exit 2."""

from __future__ import annotations

import typer

from .common import say

PENDING = {
    "compile-bpe": ("Compile the canonical BPE automaton A_BPE", "#3 (canonical BPE)"),
    "compile-maxmatch": ("Compile the MaxMatch transducer T_Aho", "#4 (canonical MaxMatch)"),
    "canonical-check": ("Check token sequences or text for canonicity", "#3 (canonical BPE)"),
    "bench": ("Reproduce the paper's tables and time tokfst against its peers", "#5 (bench)"),
}


def make_pending(name: str):
    summary, issue = PENDING[name]

    def command(ctx: typer.Context) -> None:
        say(f"tokfst: error: '{name}' is not implemented yet; it arrives with issue {issue}")
        raise typer.Exit(2)

    command.__doc__ = f"{summary}.\n\nNot implemented yet (issue {issue}): prints a one-line notice and exits 2."
    return command
