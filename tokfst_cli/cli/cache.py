"""``tokfst cache list|clear``: the cache's entries, verified, or removed (help: ``helptext.CACHE``)."""

from __future__ import annotations

from enum import Enum

import typer

from tokfst_cli.cli.doctor import size_text
from tokfst_cli.cli.output import OUT
from tokfst_cli.support import cache


class Action(str, Enum):
    list = "list"
    clear = "clear"


def cache_cmd(
    action: Action = typer.Argument(..., metavar="ACTION", help="list: the entries, verified; clear: remove them."),
    json_out: bool = typer.Option(False, "--json", help="list: one JSON object (location, entries)."),
) -> None:
    """List the cache's entries (name, kind, size, verified) or remove them (only tokfst's own files)."""
    root = cache.cache_dir()
    if action is Action.clear:
        files, freed = cache.clear(root)
        OUT.say(f"tokfst: removed {files} files ({size_text(freed)}) from {root}")
        return
    found = cache.entries(root)
    temps = cache.temporaries(root)
    if json_out:
        OUT.record({"location": str(root), "entries": [e.record() for e in found],
                    "bytes": sum(e.size for e in found), "temporary_files": [str(p) for p in temps]})
        return
    rows = [(e.name, e.kind, str(e.size), "yes" if e.verified else "no") for e in found]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(("name", "kind", "bytes", "verified"))]
    OUT.text("  ".join(h.ljust(w) if i != 2 else h.rjust(w)
                       for i, (h, w) in enumerate(zip(("name", "kind", "bytes", "verified"), widths))).rstrip())
    for r in rows:
        OUT.text("  ".join(v.ljust(w) if i != 2 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))).rstrip())
    OUT.say(f"tokfst: {len(found)} entries, {size_text(sum(e.size for e in found))} in {root}"
            + (f"; {len(temps)} temporary files" if temps else ""))
