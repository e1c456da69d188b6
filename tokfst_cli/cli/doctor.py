"""``tokfst doctor``: versions, tools and the cache's state for bug reports (help: ``helptext.DOCTOR``)."""

from __future__ import annotations

import typer

from tokfst_cli.cli.output import OUT
from tokfst_cli.support import doctor


def doctor_cmd(
    json_out: bool = typer.Option(False, "--json", help="One JSON object instead of aligned lines."),
) -> None:
    """Print versions of tokfst, Python, its libraries and tools, and the cache's state (always exit 0)."""
    rep = doctor.report()
    if json_out:
        OUT.record(rep)
        return
    rows = [("tokfst", rep["tokfst"]), ("python", f"{rep['python']} ({rep['executable']})"),
            ("platform", rep["platform"])]
    rows += [(name, version or "MISSING") for name, version in rep["packages"].items()]
    rows += [(name, f"{x['version'] or 'not installed'} (optional: {x['for']})") for name, x in rep["optional"].items()]
    rows.append(("pynini's OpenFst", rep["pynini_openfst"] or "unknown"))
    for key, label in (("openfst", "OpenFst tools"), ("dot", "graphviz dot")):
        tool = rep["tools"][key]
        rows.append((label, f"{tool['version'] or 'unknown version'} ({tool['path']})" if tool["path"] else "MISSING"))
    c = rep["cache"]
    rows += [("cache", c["location"] + ("" if c["exists"] else " (not created yet)")),
             ("cache entries", f"{c['entries']} ({size_text(c['bytes'])}), {c['unverified']} not verifying "
                               f"(rebuilt on use), {c['temporary_files']} temporary files"),
             ("cache writable", "yes" if c["writable"] else "NO")]
    width = max(len(k) for k, _ in rows) + 1
    for k, v in rows:
        OUT.text(f"{k:{width}s} {v}")
    for m in rep["missing"]:
        OUT.text(f"missing: {m['what']} (needed by {m['needed_by']}): {m['fix']}")


def size_text(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
