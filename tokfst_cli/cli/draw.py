"""``tokfst draw`` (placeholder; replaced below)."""

from __future__ import annotations

import typer


def draw_cmd() -> None:
    """Draw an automaton."""
    raise typer.Exit(2)
