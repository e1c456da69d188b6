"""``tokfst bench ready``: regex -> ready constraint, tokfst vs xgrammar, llguidance, outlines-core.

Per tokenizer and regex, medians of --repeat runs after one untimed warm-up, in one process;
the tokenizer, the lexicon T and the peers' tokenizer objects are built once, outside the
timing (as in a warm server). Every engine ends with the first packed mask (int32 words, the
layout of ``matcher.pack``), ready for logits:

    tokfst index    what ``tokfst promote --format index OUT`` and ``constraint.load(OUT)`` do:
                    ``pipeline.build`` (agnostic) + ``Result.index()`` + its JSON written
                    atomically to a file + ``constraint.load`` of the file + the first mask
    tokfst memory   ``pipeline.build`` + ``Result.decoder()`` (the FstDecoder, arcs read in
                    bulk) + the first mask: the Python API's ready constraint, without a file
    tokfst lazy     ``constraint.lazy``: the regex's byte DFA, its table over its classes of
                    bytes and the first mask, one walk of the trie (``lazy.LazyDecoder``: no
                    promotion; T's walk layout is made once per tokenizer, with T, outside the
                    timing)
    tokfst lazy file  what ``tokfst promote --format lazy OUT`` and ``constraint.load(OUT,
                    tokenizer)`` do: the byte DFA's table as the lazy artifact, written
                    atomically to a file, loaded, and the first mask
    xgrammar        ``GrammarCompiler.compile_regex`` with the compiler's cache disabled (one
                    compiler per tokenizer, ``engines.THREADS`` threads) + a GrammarMatcher's
                    first ``fill_next_token_bitmask``
    llguidance      ``grammar_from_regex`` + validation + an ``LLMatcher`` + its first mask
                    (llguidance compiles lazily: the first mask does the work)
    outlines-core   ``Index(regex, Vocabulary)`` + a Guide's first mask

The stage table splits tokfst index into its steps (A: the regex's byte DFA; S: promotion;
export: ``build_index``; write: JSON text and file; load: ``constraint.load``; mask). The
cold table times one whole ``tokfst promote TOKENIZER -e REGEX --format index OUT`` process
for the first regex of the set (T already in the cache), --repeat times.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

from tokfst_cli import constraint, pipeline
from tokfst_cli.bench import common
from tokfst_cli.bench.check import cold
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.bench.engines import THREADS, LLGuidance, Outlines, XGrammar, bitmask
from tokfst_cli.decoding.index import build_index
from tokfst_cli.decoding.matcher import pack
from tokfst_cli.errors import TokfstError
from tokfst_cli.promotion import lazy, lexicon
from tokfst_cli.promotion.lazy import layout_for as lazy_layout
from tokfst_cli.support.files import write_bytes
from tokfst_cli.text.regex import ByteAutomaton, compile_regex

ENGINES = ("index", "memory", "lazy", "lazyfile", "xgrammar", "llguidance", "outlines")
STAGES = ("a", "s", "export", "write", "load", "mask")


def peers(model, path: str, pre: dict) -> dict:
    """column -> the peer's Engine (``engines``), set up once; ``pre`` gets their set-up seconds."""
    out = {}
    for key, cls in (("xgrammar", XGrammar), ("llguidance", LLGuidance), ("outlines", Outlines)):
        try:
            seconds, engine = common.timed(lambda: cls(model, path))
        except Exception as e:  # noqa: BLE001 - a peer that cannot read this tokenizer: its cells say why
            seconds, engine = 0.0, Unavailable(f"set-up failed: {type(e).__name__}: {e}".split("\n")[0][:200])
        if engine.missing is None:
            pre[f"{key}_setup_s"] = seconds
            if key == "xgrammar":  # compile every run: no cache hit across the timed runs
                engine.compiler = engine.xgr.GrammarCompiler(engine.info, max_threads=THREADS, cache_enabled=False)
        out[key] = engine
    return out


class Unavailable:
    """A peer whose set-up failed (its cells are skipped with the reason)."""

    def __init__(self, why: str):
        self.missing = why


def peer_ready(engine, pattern: str) -> np.ndarray:
    """A peer's ready constraint and first mask (compile, a fresh matcher, fill)."""
    return engine.session(engine.compile(pattern)).fill()


def tokfst_index(model, lex, pattern: str, out: str):
    """pipeline.build + the index JSON to ``out`` + constraint.load + the first mask: (decoder, mask)."""

    result = pipeline.build(model, pattern, lexicon=lex)
    write_bytes(out, (json.dumps(result.index(), ensure_ascii=False) + "\n").encode("utf-8"))
    decoder = constraint.load(out, model)
    return decoder, bitmask(decoder, decoder.initial())


def tokfst_memory(model, lex, pattern: str) -> np.ndarray:

    decoder = pipeline.build(model, pattern, lexicon=lex).decoder()
    return bitmask(decoder, decoder.initial())


def tokfst_lazy(model, pattern: str) -> np.ndarray:
    decoder = constraint.lazy(model, pattern)
    return decoder.bitmask(decoder.initial())


def tokfst_lazy_file(model, pattern: str, out: str) -> np.ndarray:
    """compile_regex + the lazy artifact to ``out`` + constraint.load + the first mask."""

    write_bytes(out, lazy.artifact(model, compile_regex(pattern)))
    decoder = constraint.load(out, model)
    return decoder.bitmask(decoder.initial())


def stages_once(model, lex, pattern: str, out: str) -> dict[str, float]:
    """The steps of :func:`tokfst_index`, timed one by one (same calls, same order)."""

    limits, t = pipeline.Limits(), {}
    t["a"], a = common.timed(lambda: pipeline.accept(pattern, limits, model))
    t["s"], s = common.timed(lambda: pipeline._promote(model, ByteAutomaton(a.fst, pattern), limits, lex, True, False))
    # the export reuses the arcs promotion read, as Result.index() does (Result.arrays)
    t["export"], index = common.timed(lambda: build_index(s.fst, model, pattern, limits.max_states, arrays=s.arrays))
    t["write"], _ = common.timed(
        lambda: write_bytes(out, (json.dumps(index, ensure_ascii=False) + "\n").encode("utf-8")))
    t["load"], decoder = common.timed(lambda: constraint.load(out, model))
    t["mask"], _ = common.timed(lambda: bitmask(decoder, decoder.initial()))
    return t


def regex_rows(name: str, model, lex, engines: dict, rname: str, pattern: str, runs: int, out: str,
               res: Results) -> tuple[dict, dict]:

    row = {"tokenizer": name, "vocab": model.vocab_size, "regex": rname}
    stage_row = {"tokenizer": name, "regex": rname}
    try:
        row["index"], (decoder, first) = common.measure(runs, lambda: tokfst_index(model, lex, pattern, out), True)
        row["memory"], in_memory = common.measure(runs, lambda: tokfst_memory(model, lex, pattern), True)
    except TokfstError as e:
        row["index"] = row["memory"] = row["lazy"] = row["lazyfile"] = common.error(e.one_line())
        return row, stage_row
    try:
        row["lazy"], lazy_first = common.measure(runs, lambda: tokfst_lazy(model, pattern), True)
        res.check(f"ready {name} {rname}: the lazy decoder's first mask is the index's",
                  bool((lazy_first == first).all()))
        lazy_out = out + ".lazy"
        row["lazyfile"], file_first = common.measure(runs, lambda: tokfst_lazy_file(model, pattern, lazy_out), True)
        res.check(f"ready {name} {rname}: the loaded lazy artifact's first mask is the index's",
                  bool((file_first == first).all()))
    except TokfstError as e:  # a tokenizer that lacks bytes: refused by name
        row["lazy"] = row["lazyfile"] = common.skipped(e.one_line())
    stats = json.loads(Path(out).read_bytes())["stats"]
    row.update(states=stats["states"], arcs=stats["arcs"], masks=stats["masks"],
               allowed=int(np.unpackbits(first.view(np.uint8)).sum()))
    res.check(f"ready {name} {rname}: the loaded index and the in-memory decoder give the same first mask",
              bool((first == in_memory).all()) and bool((pack(decoder.mask(decoder.initial())) == first).all()))
    for key, engine in engines.items():
        if engine.missing is not None:
            row[key] = common.skipped(engine.missing)
            continue
        try:
            row[key], _ = common.measure(runs, lambda: peer_ready(engine, pattern), True)
        except Exception as e:  # noqa: BLE001 - the peer refuses a pattern: say so in the cell
            row[key] = common.error(f"{type(e).__name__}: {e}".split("\n")[0][:200])
    row["ratio"] = common.ratio(row["index"], row.get("xgrammar"))
    row["met"] = row["ratio"] <= 1 if row["ratio"] is not None else None
    row["lazy_ratio"] = common.ratio(row["lazy"], row.get("xgrammar"))
    row["lazyfile_ratio"] = common.ratio(row["lazyfile"], row.get("xgrammar"))
    by_stage = [stages_once(model, lex, pattern, out) for _ in range(runs)]
    stage_row.update({k: common.ok([r[k] for r in by_stage]) for k in STAGES})
    stage_row["total"] = common.ok([sum(r.values()) for r in by_stage])
    return row, stage_row


def ready_table(tokenizers: list[tuple[str, str, bool]], regexes: dict[str, str], runs: int, progress) -> Results:

    res = Results()
    main = Table(
        "ready", "Regex -> ready constraint (agnostic): tokfst promote --format index + constraint.load vs peers",
        runs,
        [("tokenizer", "tokenizer", "text"), ("vocab", "vocab", "int"), ("regex", "regex", "text"),
         ("states", "states", "int"), ("arcs", "arcs", "int"), ("masks", "masks", "int"),
         ("allowed", "first mask", "int"), ("index", "tokfst index", "time"), ("memory", "tokfst memory", "time"),
         ("lazy", "tokfst lazy", "time"), ("lazyfile", "tokfst lazy file", "time"), ("xgrammar", "xgrammar", "time"),
         ("llguidance", "llguidance", "time"), ("outlines", "outlines-core", "time"),
         ("ratio", "index/xgrammar", "ratio"), ("met", "<= xgrammar", "bool"), ("lazy_ratio", "lazy/xgrammar", "ratio"),
         ("lazyfile_ratio", "lazy file/xgrammar", "ratio")],
        inputs={"regexes": regexes, "setup": {}})
    stages = Table("ready_stages", "tokfst index by step, in-process", runs,
                   [("tokenizer", "tokenizer", "text"), ("regex", "regex", "text")]
                   + [(k, {"a": "A", "s": "S"}.get(k, k), "time") for k in STAGES] + [("total", "total", "time")])
    cold_table = Table("ready_cold", "tokfst promote --format index: a whole process", runs,
                       [("tokenizer", "tokenizer", "text"), ("regex", "regex", "text"), ("process", "process", "time")])
    with tempfile.TemporaryDirectory(prefix="tokfst-bench-ready-") as d:
        out = os.path.join(d, "ready.json")
        for name, path, _ in tokenizers:
            model = common.load_model(path, None)
            pre: dict = {}
            pre["lexicon_s"], lex = common.timed(lambda: lexicon.lexicon(model))
            pre["lazy_layout_s"], _ = common.timed(lambda: lazy_layout(model))
            progress(f"ready: {name}: setting up the peers")
            engines = peers(model, path, pre)
            main.inputs["setup"][name] = pre
            for rname, pattern in regexes.items():
                progress(f"ready: {name}: {rname}")
                row, stage_row = regex_rows(name, model, lex, engines, rname, pattern, runs, out, res)
                main.rows.append(row)
                stages.rows.append(stage_row)
            rname, pattern = next(iter(regexes.items()))
            progress(f"ready: {name}: {runs} tokfst promote processes ({rname})")
            cmd = common.tokfst_command() + ["promote", os.path.abspath(path), "-e", pattern, "--format", "index", out]
            try:
                cell, _ = cold(runs, cmd, d)
            except RuntimeError as e:
                cell = common.error(str(e).split("\n")[0][:200])
            cold_table.rows.append({"tokenizer": name, "regex": rname, "process": cell})
    main.notes += [
        f"One process; medians of {runs} runs after a warm-up; tokenizer, T and the peers' tokenizer objects built "
        "once (setup times in the JSON's inputs). Every engine ends with its first packed mask.",
        "tokfst index: pipeline.build (agnostic) + Result.index() + the JSON written atomically + "
        "constraint.load + first mask, as `tokfst promote --format index` then `constraint.load`. tokfst memory: "
        "pipeline.build + Result.decoder() + first mask (no file). tokfst lazy: constraint.lazy (the byte DFA, its "
        "table over its classes of bytes) + the first mask, one walk of the trie from the start (no promotion; the "
        "other states are expanded when a decoder first visits them: see `bench masks`' tokfst lazy rows). tokfst "
        "lazy file: the same through a file, as `tokfst promote --format lazy` then `constraint.load` (the byte "
        "DFA's table written atomically, loaded with the tokenizer).",
        "xgrammar: compile_regex with the compiler's cache disabled (so every run compiles), its threads as in "
        "`bench masks`, + GrammarMatcher + fill_next_token_bitmask. llguidance: grammar_from_regex + "
        "validate_grammar + LLMatcher + first mask (lazy: the first mask compiles). outlines-core: Index + Guide + "
        "first mask.",
        "index/xgrammar < 1: tokfst's ready constraint is faster; <= xgrammar: the goal. lazy/xgrammar "
        "and lazy file/xgrammar: the same for the lazy decoder (whose later first masks cost a walk each).",
    ]
    stages.notes.append("A: pipeline.accept (the regex's minimal byte DFA); S: pipeline.promote (MIN(PROJ(A o T))); "
                        "export: build_index; write: JSON text + atomic file write; load: constraint.load (parse, "
                        "checksum, structure); mask: the first packed mask.")
    cold_table.notes.append("A whole `tokfst promote TOKENIZER -e REGEX --format index OUT` process (interpreter "
                            "start, imports, tokenizer load, T from the cache, the pipeline, the write), first regex "
                            "of the set.")
    res.tables += [main, stages, cold_table]
    return res
