"""docs/results/: each page is what ``tokfst bench report`` renders from the JSON committed beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokfst_cli.bench import report

from .runner import run

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "results" / "data"
AREAS = sorted(p for p in DATA.iterdir() if p.is_dir()) if DATA.is_dir() else []


def test_there_are_rendered_results():
    assert AREAS, "docs/results/data/ holds no bench results (make bench)"


@pytest.mark.parametrize("area", AREAS, ids=lambda p: p.name)
def test_page_is_rendered_from_its_json(area):
    page = ROOT / "docs" / "results" / f"{area.name}.md"
    expected = report.page(report.read_documents([str(area)]), area.name)
    assert page.read_text(encoding="utf-8") == expected, f"stale: make results ({page.relative_to(ROOT)})"


def _doc(mode: str, commit: str | None) -> dict:
    table = {"title": f"{mode} table", "repeat": 3, "notes": ["a note"],
             "columns": [{"key": "name", "label": "name", "kind": "text"}, {"key": "t", "label": "time", "kind": "s"}],
             "rows": [{"name": "a|b", "t": {"median": 0.0123}}]}
    return {"format": "tokfst-bench", "version": 1, "generator": "tokfst 0.1.0", "mode": mode,
            "command": f"tokfst bench {mode}", "started": "2026-11-28T10:00:00Z", "elapsed_s": 12.3,
            "machine": {"cpu_model": "cpu", "nproc": 2, "os": "Linux", "python": "3.11.7", "loadavg_start": [1.0],
                        "loadavg_end": [2.0]},
            "versions": {"tokfst": "0.1.0", "pynini": "2.1.7", "xgrammar": "-"}, "commit": commit,
            "settings": {}, "tables": [table], "checks": [{"name": "c", "passed": True, "detail": ""}]}


def test_report_renders_a_page_with_its_provenance(tmp_path):
    d = tmp_path / "promote"
    d.mkdir()
    (d / "a.json").write_text(json.dumps(_doc("promote", "abc123")))
    (d / "b.json").write_text(json.dumps(_doc("canonical", None)))
    r = run("bench", "report", str(d))
    assert r.rc == 0, r.err
    text = r.stdout
    assert text.startswith("# Results: promote\n")
    assert "- commit: abc123" in text and "- commit: not recorded" in text
    assert text.index("## `promote`") < text.index("## `canonical`")  # files in name order
    assert "| a\\|b |" in text and "xgrammar" not in text.split("- versions:")[1].split("\n")[0]
    out = tmp_path / "page.md"
    assert run("bench", "report", str(d / "a.json"), "--markdown", str(out), "--title", "T").rc == 0
    assert out.read_text().startswith("# Results: T\n")


@pytest.mark.parametrize("content", ["not json", json.dumps({"format": "other"})])
def test_report_refuses_what_is_not_a_result(tmp_path, content):
    f = tmp_path / "x.json"
    f.write_text(content)
    r = run("bench", "report", str(f))
    err = r.stderr
    assert r.rc == 2 and len(err.strip().splitlines()) == 1 and "x.json" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run("bench", "report", str(empty)).rc == 2


def test_bench_documents_name_the_commit_they_measured():
    """In a git checkout, the commit of HEAD (``+dirty`` with uncommitted changes to tracked files)."""
    import subprocess

    from tokfst_cli.bench import common

    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                          text=True)
    got = common.commit()
    if head.returncode != 0:  # an installed copy without .git: nothing to name
        assert got is None
    else:
        assert got is not None and got.removesuffix("+dirty") == head.stdout.strip()
