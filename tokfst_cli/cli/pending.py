"""Subcommands whose issues are not done yet: they say so and exit 2."""

from __future__ import annotations

import typer

from .common import say

PENDING = {
    "compile-bpe": ("Compile the canonical BPE automaton A_BPE (seed 000 Sec. 6.4-6.5).", "Canonical BPE (#3)"),
    "compile-maxmatch": ("Compile the MaxMatch transducer T_Aho (seed 000 Sec. 6.2).", "Canonical MaxMatch (#4)"),
    "canonical-check": ("Check token sequences or text for canonicity (exit 0/1/2 as grep).", "Canonical BPE (#3)"),
    "bench": ("Reproduce the paper's tables and time tokfst against its peers.", "bench (#5)"),
}


def make_pending(name: str):
    summary, issue = PENDING[name]

    def command(ctx: typer.Context) -> None:
        say(f"tokfst {name}: not implemented yet; it arrives with issue {issue}")
        raise typer.Exit(2)

    command.__doc__ = f"{summary} Not implemented yet: exits 2 until issue {issue} lands."
    return command
