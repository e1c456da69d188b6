"""Rendering a result document: rich tables (terminal), Markdown (pipes), JSON, CSV, plots."""

from __future__ import annotations

import csv
import io
import json
import statistics
import sys
from pathlib import Path

from tokfst_cli.bench.common import machine_line
from tokfst_cli.errors import InputError
from tokfst_cli.support.files import atomic_write

PLOT_SUFFIXES = (".svg", ".png")


# ---- cells -------------------------------------------------------------------------------------
def fmt_seconds(s: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if s >= scale or unit == "ns":
            v = s / scale
            return f"{v:.3g} {unit}" if v < 1000 else f"{v:.0f} {unit}"
    return f"{s} s"  # unreachable


def fmt_cell(cell) -> str:
    if not isinstance(cell, dict):
        return "—"
    status = cell.get("status")
    if status == "ok":
        return fmt_seconds(cell["median_s"])
    if status == "timeout":
        done = cell.get("runs_s") or []
        return f">{cell['limit_s']:g} s" + (f" [{len(done)} run{'s' * (len(done) > 1)}: "
                                            f"{', '.join(fmt_seconds(r) for r in done)}]" if done else "")
    if status == "error":
        return "error"
    return "n/a"


def fmt_bytes(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def fmt(row: dict, key: str, kind: str) -> str:
    v = row.get(key)
    if kind in ("time", "once"):
        return fmt_cell(v)
    if v is None:
        return "—"
    if kind == "ratio":
        return f"{v:,.0f}x" if v >= 1000 else f"{v:.3g}x"
    if kind == "bytes":
        return fmt_bytes(v) + ("*" if row.get(key.replace("_bytes", "_how")) == "computed" else "")
    if kind == "percent":
        return f"{100 * v:.2f}%"
    if kind == "bool":
        return "yes" if v else "NO"
    if kind == "float":
        return f"{v:.3g}"
    if kind == "int":
        return f"{v:,}"
    return str(v)


def raw(row: dict, key: str, kind: str):
    """A CSV value: seconds for timings (">T" when timed out), numbers as numbers."""
    v = row.get(key)
    if kind in ("time", "once"):
        if not isinstance(v, dict):
            return ""
        return {"ok": v.get("median_s"), "timeout": f">{v.get('limit_s')}"}.get(v.get("status"), v.get("status"))
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else v


# ---- tables --------------------------------------------------------------------------------
def header_lines(doc: dict, table: dict) -> list[str]:
    return [machine_line(doc),
            f"Repetitions: figures are medians of {table['repeat']} runs. Command: `{doc['command']}`"]


def table_lines(t: dict, head: list[str]) -> list[str]:
    """One table as Markdown: its title, the ``head`` lines, the rows, its notes."""
    cols = t["columns"]
    out = [f"### {t['title']}", "", *head, ""]
    out.append("| " + " | ".join(c["label"] for c in cols) + " |")
    out.append("| " + " | ".join("---" if c["kind"] == "text" else "---:" for c in cols) + " |")
    for row in t["rows"]:
        out.append("| " + " | ".join(fmt(row, c["key"], c["kind"]).replace("|", "\\|") for c in cols) + " |")
    out.append("")
    return out + [n for note in t["notes"] for n in (note, "")]


def markdown(doc: dict) -> str:
    out = [line for t in doc["tables"] for line in table_lines(t, header_lines(doc, t))]
    out.append(checks_line(doc))
    return "\n".join(out) + "\n"


def page(docs: list[dict], title: str) -> str:
    """A results page (``docs/results/``) from result documents: each headed by its machine, date,
    versions and commit, then its tables as :func:`markdown` renders them."""
    out = [f"# Results: {title}", "",
           "Rendered by `tokfst bench report` from the JSON beside this page; rerun the command under each "
           "heading to measure again.", ""]
    for doc in docs:
        m, v = doc["machine"], doc["versions"]
        out += [f"## `{doc['mode']}` of {doc['started'][:10]}", "",
                f"- machine: {m['nproc']} CPUs ({m['cpu_model']}), {m['os']}, Python {m['python']}; load average "
                f"{m['loadavg_start'][0]} at start" + (f", {m['loadavg_end'][0]} at end" if "loadavg_end" in m else ""),
                f"- date: {doc['started']}, {doc['elapsed_s']:.0f} s",
                "- versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val and val != "-"),
                f"- commit: {doc.get('commit') or 'not recorded'}",
                f"- command: `{doc['command']}`", ""]
        for t in doc["tables"]:
            out += table_lines(t, [f"Figures are medians of {t['repeat']} runs."])
        out += [checks_line(doc), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def read_documents(paths: list[str]) -> list[dict]:
    """The result documents in ``paths`` (files, or directories of ``*.json``), in name order."""
    files: list[Path] = []
    for p in map(Path, paths):
        files += sorted(p.glob("*.json")) if p.is_dir() else [p]
    docs = []
    for f in files:
        try:
            doc = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise InputError(f"cannot read bench results {f}: {e}",
                             "give a JSON file written by tokfst bench --json") from None
        if not isinstance(doc, dict) or doc.get("format") != "tokfst-bench":
            raise InputError(f"{f} is not a tokfst bench result", "give a JSON file written by tokfst bench --json")
        docs.append(doc)
    if not docs:
        raise InputError(f"no bench results in {', '.join(paths)}", "give JSON files written by tokfst bench --json")
    return docs


def checks_line(doc: dict) -> str:
    checks = doc["checks"]
    passed = sum(1 for c in checks if c["passed"] is True)
    failed = [c for c in checks if c["passed"] is False]
    line = f"Equivalence checks: {passed} passed, {len(failed)} failed, {len(checks) - passed - len(failed)} not run."
    return line + "".join(f"\nFAILED: {c['name']}: {c['detail']}" for c in failed)


def print_tables(doc: dict, console) -> None:
    """The tables on ``console`` (a rich Console): rich tables on a terminal, Markdown otherwise."""
    from rich import box  # deferred: rich only where something is shown
    from rich.table import Table as RichTable  # deferred: rich only where something is shown

    if not console.is_terminal:
        console.file.write(markdown(doc))
        console.file.flush()
        return
    for t in doc["tables"]:
        rt = RichTable(title=t["title"], caption="\n".join(header_lines(doc, t)), caption_justify="left",
                       box=box.SIMPLE_HEAD)
        for c in t["columns"]:
            rt.add_column(c["label"], justify="left" if c["kind"] == "text" else "right", overflow="fold")
        for row in t["rows"]:
            rt.add_row(*(fmt(row, c["key"], c["kind"]) for c in t["columns"]))
        console.print(rt)
        for n in t["notes"]:
            console.print(n, markup=False)
        console.print()
    console.print(checks_line(doc), markup=False)


# ---- files ---------------------------------------------------------------------------------
def json_bytes(doc: dict) -> bytes:
    return (json.dumps(doc, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def csv_bytes(doc: dict) -> bytes:
    """One wide CSV: a 'table' column, then the union of all tables' columns."""
    keys: list[tuple[str, str]] = []
    for t in doc["tables"]:
        for c in t["columns"]:
            if c["key"] not in [k for k, _ in keys]:
                keys.append((c["key"], c["kind"]))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["table"] + [k for k, _ in keys])
    for t in doc["tables"]:
        kinds = {c["key"]: c["kind"] for c in t["columns"]}
        for row in t["rows"]:
            w.writerow([t["id"]] + [raw(row, k, kinds[k]) if k in kinds else "" for k, _ in keys])
    return buf.getvalue().encode("utf-8")


def check_plot_target(path: str) -> None:
    if Path(path).suffix.lower() not in PLOT_SUFFIXES:
        raise InputError(f"plot file {path}: unsupported format", "give a file name ending in .svg or .png",
                         path=path)
    try:
        import matplotlib  # noqa: F401  # deferred: optional dependency (the bench extra)
    except ImportError:
        raise InputError("plotting needs matplotlib", "pip install 'tokfst[bench]'") from None


def plot_series(table: dict) -> dict[str, list[tuple[float, float]]]:
    """label -> [(x, y)]: per x, the median over rows of each y column's median seconds (or value)."""
    spec = table["plot"]
    labels = {c["key"]: c["label"] for c in table["columns"]}
    series = {}
    for key in spec["y"]:
        by_x: dict[float, list[float]] = {}
        for row in table["rows"]:
            if spec.get("where") and not row.get(spec["where"]):
                continue
            v = row.get(key)
            v = v.get("median_s") if isinstance(v, dict) else v
            if v is not None and row.get(spec["x"]) is not None:
                by_x.setdefault(row[spec["x"]], []).append(v)
        pts = sorted((x, statistics.median(ys)) for x, ys in by_x.items())
        if pts:
            series[labels.get(key, key)] = pts
    return series


def write_plot(out: str, doc: dict) -> bool:
    """One panel per scaling table; False when no table has anything to plot."""
    import matplotlib  # deferred: optional dependency (the bench/test extras)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: optional dependency (the bench/test extras)
    from matplotlib.ticker import NullLocator  # deferred: optional dependency (the bench/test extras)

    panels = [(t, s) for t in doc["tables"] if t.get("plot") for s in [plot_series(t)] if s]
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    for ax, (t, series) in zip(axes[0], panels):
        for label, pts in series.items():
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=label)
        ax.set_xscale("log", base=2)
        xs = sorted({x for pts in series.values() for x, _ in pts})
        ax.set_xticks(xs, [f"{x / 1000:g}k" if x >= 1000 else str(x) for x in xs])
        ax.xaxis.set_minor_locator(NullLocator())
        if t["plot"].get("log"):
            ax.set_yscale("log")
        ax.set_xlabel(t["plot"]["x"])
        ax.set_ylabel(t["plot"]["ylabel"])
        ax.set_title(t["title"].split(":")[0], fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    m, v = doc["machine"], doc["versions"]
    fig.suptitle(f"tokfst {v['tokfst']} bench: {m['nproc']} CPUs ({m['cpu_model']}), pynini {v['pynini']}, "
                 f"tokenizers {v['tokenizers']}; medians of {panels[0][0]['repeat']} runs", fontsize=9)
    fig.tight_layout()
    fmt_ = Path(out).suffix.lower().lstrip(".")
    atomic_write(out, lambda tmp: fig.savefig(tmp, format=fmt_))
    plt.close(fig)
    return True


if __name__ == "__main__":  # python -m tokfst_cli.bench.report RESULT.json ...: the Markdown again

    for name in sys.argv[1:]:
        sys.stdout.write(markdown(json.loads(Path(name).read_text(encoding="utf-8"))))
