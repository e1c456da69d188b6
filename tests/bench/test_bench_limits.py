"""``tokfst bench limits``: the derandomized pattern generator, and the tables on a small set
(one pattern that compiles, one that hits a limit, one killed at the timeout)."""

from __future__ import annotations

import json

from tokfst_cli.bench import limits
from tokfst_cli.text.regex import parse

from ..runner import run


def test_the_generator_is_the_same_every_run_and_its_patterns_parse():
    first = limits.generated(12)
    assert first == limits.generated(12) and len(set(first)) == 12
    assert any("{" in p for p in first) and any("|" in p for p in first)
    for p in first:
        parse(p)


def test_bench_limits_tables(tmp_path, monkeypatch):
    """The limit case refuses in about 2 s on a quiet 2-core machine and the killed one runs for
    minutes: an 8 s timeout tells them apart on a loaded one too."""
    monkeypatch.setattr(limits, "PINNED", ["(yes|no)", "[a-z]{1,20}(?:[0-9]{1,20}[a-z]{1,20}){1,10}",
                                          "[a-z]{1,300}x[a-z]{1,300}"])
    monkeypatch.setattr(limits, "MODES", {"agnostic": []})
    out = tmp_path / "limits.json"
    r = run("bench", "limits", "--tokenizer", "gpt2", "--patterns", "0", "--timeout", "8", "--json", out)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    summary, worst = doc["tables"]
    (row,) = summary["rows"]
    assert (row["runs"], row["compiled"], row["limit"], row["timeout"]) == (3, 1, 1, 1), row
    assert row["worst"]["median_s"] >= 8 and row["worst_rss"] > 10_000_000
    assert [w["exit"] for w in worst["rows"]] == [-9, 3]
    assert "A o T" in worst["rows"][1]["stage"]
    assert doc["checks"] and all(c["passed"] for c in doc["checks"])
