"""``tokfst bench filters`` and ``tokfst bench inspect`` on a tiny BPE: every cell ran,
the figures are consistent with the library's own results, the internal checks pass."""

from __future__ import annotations

import json

import pytest

from tokfst_cli.analysis import inspection
from tokfst_cli.bench.filters import FILTERS, filters_table
from tokfst_cli.bench.inspect import inspect_table
from tokfst_cli.tokenizer import model as tokmod

from ..cli.test_battery import BASES

REGEX = "(ab|c){1,3}( c)?"


def _tiny(tmp_path) -> str:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(BASES["bpe"]))
    return str(path)


def test_bench_inspect_table(tmp_path):
    path = _tiny(tmp_path)
    res = inspect_table([("tiny", path, False)], {"ab": REGEX}, 3, lambda _: None)
    (table,) = res.tables
    (row,) = table.rows
    assert res.checks and all(c["passed"] for c in res.checks)  # the CLI's skip rates are the library's
    assert row["build"]["status"] == row["survey"]["status"] == row["cold"]["status"] == "ok"
    direct = inspection.inspect_regex(tokmod.load(path), REGEX, 1000, 0).to_json()
    assert row["steps"] == direct["steps"]
    assert row["skip_canonical"] == direct["automata"]["canonical"]["skip_rate"]
    assert row["skip_agnostic"] == direct["automata"]["agnostic"]["skip_rate"]
    assert row["met"] is (row["survey"]["median_s"] <= 2.0)


def test_bench_filters_table(tmp_path, monkeypatch):
    from tokfst_cli.bench import filters as bench_filters

    monkeypatch.setattr(bench_filters, "MIN_SECONDS", 0.02)  # short rows run more pairs (here: to 20 ms a side)
    path = _tiny(tmp_path)
    res = filters_table([("tiny", path, False)], {"ab": REGEX}, 3, lambda _: None)
    (table,) = res.tables
    got = {(r["mode"], r["filter"].split()[0]) for r in table.rows}  # "max_tokens N": N from the regex
    assert got == {(m, f) for m in ("agnostic", "canonical") for f in FILTERS}
    for r in table.rows:
        assert r["without"]["status"] == r["with"]["status"] == "ok", r
        assert r["ratio"] > 0
        a, b = r["without"]["runs_s"], r["with"]["runs_s"]
        assert len(a) == len(b) >= 3
        assert min(sum(a), sum(b)) >= 0.02 or len(a) == bench_filters.MAX_PAIRS
        if r["filter"].startswith("max_tokens"):  # also timed with S ∩ F_N materialized
            assert r["with_fst"]["status"] == "ok" and r["ratio_fst"] > 0, r
        if r.get("states_filtered") is not None and r.get("states") is not None:
            assert r["states_filtered"] >= 1


def test_filters_pairs_swap_their_order_every_pair():
    """A fixed order (without, with) billed the second run's slowdown to the filter: the order
    swaps every pair, after one warm-up run of each."""
    from tokfst_cli.bench import filters as bench_filters

    calls = []
    without, runs, _ = bench_filters.paired(4, lambda: calls.append("w"), lambda: calls.append("f") or "out")
    assert calls[:2] == ["w", "f"]  # the warm-up
    assert calls[2:] == ["w", "f", "f", "w"] * (len(calls[2:]) // 4) + ["w", "f"] * (len(calls[2:]) % 4 // 2)
    assert len(without["runs_s"]) == len(runs["runs_s"]) >= 4


def test_filters_ratio_is_the_median_of_the_pairs_ratios():
    """A pair's two runs are adjacent in time: the ratio is taken per pair, then the median
    (here 1.1, where the medians' ratio would be 1.0); an error cell has none."""
    from tokfst_cli.bench import common
    from tokfst_cli.bench import filters as bench_filters

    assert bench_filters.pair_ratio(common.ok([1.0, 3.0, 2.0]), common.ok([2.0, 3.3, 2.0])) == pytest.approx(1.1)
    assert bench_filters.pair_ratio(common.ok([1.0]), common.error("past max_arcs")) is None
