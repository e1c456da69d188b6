"""``tokfst bench filters``: what each modular filter (Pitfalls 2025 Sec. 4) adds to promotion.

Per tokenizer, regex, promotion (agnostic: stage S; canonical: the pipeline-level build, C
included, materialized or factorized as ``tokfst promote --canonical --format index``) and
filter: the medians of ``repeat`` alternating runs of the promotion to a ready constraint (the
whole ``pipeline.build`` and the result's ``decoder()``, as ``constraint`` users and ``--format
index`` need it) without and with the filter (after a warm-up run of each, so the filter's own DFA
is built and cached once per process, as in a long-running server), and their ratio (the issue's
goal: at most 1.2). One filter at a time: :data:`FILTERS`. ``max_tokens`` is kept as the
automaton and N (``filters.length.Counted``; a factorized canonical form: ``bpe.counted``); its
row also times the build of the materialized S ∩ F_N (``factorized_ok=False``, what ``--format
fst`` writes, an error where it passes a limit): ``with_fst``.
"""

from __future__ import annotations

import gc
import statistics
from pathlib import Path

import pynini

from tokfst_cli.bench import common
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.errors import TokfstError
from tokfst_cli.filters.compose import Filters
from tokfst_cli.pipeline import build
from tokfst_cli.tokenizer import model as tokmod

SLACK = 8  # max_tokens: the regex's fewest tokens + SLACK (a bound that binds without emptying)
FILTERS = {
    "scripts": Filters(scripts=("Latin",)),
    "ascii": Filters(ascii=True),
    "nfc": Filters(nfc=True),
    "no_byte_tokens": Filters(no_byte_tokens=True),
    "literal_ascii": Filters(literal_ascii=True),
    "fuse_spaces": Filters(fuse_spaces=True),
    "max_tokens": None,  # per regex: Filters(max_tokens=fewest_tokens(...) + SLACK)
}
MODES = ("agnostic", "canonical")


def _name(model) -> str:
    return Path(model.source).stem if model.source else "tokenizer"


def fewest_tokens(fst: pynini.Fst) -> int:
    """The fewest tokens of an accepted sequence (shortest distance with every arc weighing 1)."""
    weighted = pynini.arcmap(fst, map_type="times", weight=1)  # final weights too: one more per path
    return round(float(pynini.shortestdistance(weighted, reverse=True)[fst.start()])) - 1


def _size(result) -> int | None:
    return result.fst.num_states() if result.materialized else None


def run(models: list, patterns: dict[str, str], repeat: int, progress=lambda message: None) -> list[dict]:
    """One row per tokenizer, regex, promotion and filter. ``models``: TokenizerModels, or paths or
    bundled names of tokenizer.json files."""

    rows = []
    for model in models:
        model = tokmod.load(model) if isinstance(model, (str, Path)) else model
        for rname, pattern in patterns.items():
            try:
                bound = fewest_tokens(build(model, pattern).fst) + SLACK
            except TokfstError:
                bound = SLACK
            for mode in MODES:
                def promote(filters: Filters = Filters()):
                    result = build(model, pattern, canonical=mode == "canonical", filters=filters)
                    result.decoder()  # ready for a decoding loop
                    return result

                def materialized(filters: Filters):  # as --format fst: no factorized form
                    result = build(model, pattern, canonical=mode == "canonical", filters=filters,
                                   factorized_ok=False)
                    return result, result.fst

                progress(f"filters: {_name(model)}: {rname}, {mode} ...")
                base = {"tokenizer": _name(model), "regex": rname, "mode": mode}
                try:
                    plain = promote()
                except TokfstError as e:
                    rows.append({**base, "filter": "-", "without": common.error(e.one_line())})
                    continue
                for fname, filters in FILTERS.items():
                    filters = filters or Filters(max_tokens=bound)
                    label = f"{fname} {bound}" if fname == "max_tokens" else fname
                    row = {**base, "filter": label, "states": _size(plain)}
                    try:
                        row["without"], row["with"], got = paired(repeat, promote, lambda: promote(filters))
                        row["states_filtered"] = _size(got)
                    except TokfstError as e:
                        row["with"] = common.error(e.one_line())
                    if fname == "max_tokens" and "without" in row:
                        try:
                            own, row["with_fst"], _ = paired(repeat, promote, lambda: materialized(filters))
                            row["ratio_fst"] = pair_ratio(own, row["with_fst"])
                        except TokfstError as e:
                            row["with_fst"] = common.error(e.one_line())
                    row["ratio"] = pair_ratio(row.get("without"), row.get("with"))
                    rows.append(row)
    return rows


MIN_SECONDS = 1.0  # short rows: alternating pairs until each side has run this long
MAX_PAIRS = 200


def pair_ratio(without: dict | None, with_filter: dict | None) -> float | None:
    """The median over the pairs of with / without (the two runs of a pair are adjacent in time,
    so a load that drifts over seconds cancels in each ratio, not in a ratio of medians)."""
    if (without or {}).get("status") != "ok" or (with_filter or {}).get("status") != "ok":
        return None
    ratios = [b / a for a, b in zip(without["runs_s"], with_filter["runs_s"]) if a > 0]
    return statistics.median(ratios) if ratios else None


def paired(repeat: int, without, with_filter) -> tuple[dict, dict, object]:
    """Timing cells of alternating runs of the two (after a warm-up run of each, so a drifting
    machine load falls on both alike), and the filtered result: ``repeat`` pairs, more for
    short rows (until each side has run MIN_SECONDS, at most MAX_PAIRS pairs), so that a
    millisecond row's median is not a handful of samples of the machine's noise. The order
    within a pair swaps every pair (without-with, with-without, ...) and each run starts after
    a garbage collection: measured here, the second run of a fixed pair order was up to 30%
    slower, whichever side it was (the first's garbage, collected during it)."""
    without(), with_filter()
    common.collect()
    runs0, runs1, out = [], [], None
    while len(runs0) < repeat or (min(sum(runs0), sum(runs1)) < MIN_SECONDS and len(runs0) < MAX_PAIRS):
        for side in ((0, 1) if len(runs0) % 2 == 0 else (1, 0)):
            gc.collect()
            if side == 0:
                runs0.append(common.timed(without)[0])
            else:
                t, out = common.timed(with_filter)
                runs1.append(t)
    return common.ok(runs0), common.ok(runs1), out


def filters_table(tokenizers: list[tuple[str, str, bool]], patterns: dict[str, str], repeat: int,
                  progress) -> Results:
    """The rows of :func:`run` as a table of the bench document; ``tokenizers``: (name, path, trained)."""
    models = [path for _, path, _ in tokenizers]
    res = Results()
    table = Table(
        "filters", "modular filters: promotion without and with each filter", repeat,
        [("tokenizer", "tokenizer", "text"), ("regex", "regex", "text"), ("mode", "promotion", "text"),
         ("filter", "filter", "text"), ("without", "without", "time"), ("with", "with", "time"),
         ("ratio", "with/without", "ratio"), ("with_fst", "with, .fst", "time"), ("ratio_fst", ".fst/without", "ratio"),
         ("states", "states", "int"), ("states_filtered", "filtered", "int")],
        inputs={"regexes": patterns, "filters": list(FILTERS), "max_tokens_slack": SLACK})
    table.rows = run(models, patterns, repeat, progress)
    table.notes += [
        f"without / with: the promotion to a ready constraint, pipeline.build (A, P, S, C for canonical at the "
        f"pipeline level) and the result's decoder(), without and with one filter, after a warm-up run of each "
        f"(the filter DFAs are built once and cached); medians of {repeat} alternating runs (the order swapped "
        "every pair, a garbage collection before each run), more for short rows "
        f"(until each side has run {MIN_SECONDS} s, at most {MAX_PAIRS}: the runs_s of each cell). "
        "scripts: Latin (with "
        f"Common and Inherited); max_tokens: the regex's fewest tokens (agnostic) + {SLACK}, kept as S and N "
        "(no product, also for a factorized canonical form); with, .fst: the build with the minimal S ∩ F_N "
        "materialized instead (what --format fst writes; an error past a limit), against the same without. "
        "states: of the materialized result (empty: factorized). "
        "with/without: the median over the pairs of the with/without ratio of the pair (.fst/without: of the "
        ".fst timing's own pairs). the goal: with/without <= 1.2.",
    ]
    res.tables.append(table)
    return res
