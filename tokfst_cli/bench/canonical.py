"""``tokfst bench canonical``: canonical BPE per tokenizer, in one process.

Per tokenizer, medians of --repeat runs:
    compile   ``implicit.compile_implicit`` from the loaded tokenizer (``tokfst compile-bpe``'s
              work); the artifact's bytes (``implicit.to_bytes``) and its load time
              (``implicit.from_bytes``); A_BPE's states
    check     canonical-check's pair test ``ImplicitBpe.banned`` on 100,000 random pairs of
              tokens (one vectorized call), vs HF's ``model.tokenize`` of the pairs' texts, per
              pair; the two must agree on which pairs are canonical
Per tokenizer and regex, with the artifact loaded once (its class masks cached):
    agnostic      ``pipeline.accept`` + ``pipeline.promote`` (stage S)
    materialized  ``bpe.product.materialize`` of the agnostic automaton (stage C), while it
                  fits under the pipeline's default limit (what ``tokfst promote --canonical``
                  writes as an .fst), else "over"
    factorized    ``bpe.counted.factorize`` (the --format index form)
    mask          ``Factorized.mask`` of a state reached by a 3-token random walk (fixed seed)
    model/pipeline  the whole ``pipeline.build(canonical=True, factorized_ok=True)`` at the model
                  level and at the pipeline level (A o P, S_M, the product restarted per
                  pre-token; P cached), and their ratio (goal: <= 1.5)
Per tokenizer also P's build time from tokenizer.json (``pretok.image.for_model``, uncached).
"""

from __future__ import annotations

import numpy as np

from tokfst_cli.bench import common
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.bpe import implicit
from tokfst_cli.bpe.counted import factorize
from tokfst_cli.bpe.liveness import compute
from tokfst_cli.bpe.product import materialize
from tokfst_cli.errors import LimitError, TokfstError
from tokfst_cli.pipeline import Limits, accept, build, promote
from tokfst_cli.pretok import image
from tokfst_cli.promotion import lexicon
from tokfst_cli.promotion.promote import count_arcs

PAIRS = 100_000
MASK_LOOKUPS = 200
MAX_ARCS = Limits().max_arcs


def tokenizer_row(name: str, path: str, repeat: int, res: Results):
    """The tokenizer table's row and the loaded implicit A_BPE."""
    from tokenizers import Tokenizer  # deferred: HF's tokenizers only where the oracle is asked (start-up)


    model = common.load_bpe(path)
    compile_cell, imp = common.measure(repeat, lambda: implicit.compile_implicit(model))
    data = implicit.to_bytes(imp)
    load_cell, imp = common.measure(repeat, lambda: implicit.from_bytes(data, model.fingerprint))
    imp._rows(), imp.classes(), imp._lpos()  # the lazily derived tables, as a first use builds them
    row = {"tokenizer": name, "vocab": model.vocab_size, "compile": compile_cell, "artifact_bytes": len(data),
           "load": load_cell, "states": imp.info()["states"]}

    row["p_build"], _ = common.measure(repeat, lambda: image.for_model(model, cache=False))
    hf = Tokenizer.from_file(path)
    rng = np.random.default_rng(1)
    toks = np.flatnonzero(imp.allowed & (imp.fb_byte < 0))
    u, v = rng.choice(toks, PAIRS), rng.choice(toks, PAIRS)
    cell, banned = common.measure(repeat, lambda: imp.banned(u, v))
    row["check"] = common.per_unit(cell, PAIRS)
    texts = [model.tokens[a] + model.tokens[b] for a, b in zip(u.tolist(), v.tolist())]
    cell, encoded = common.measure(repeat, lambda: [hf.model.tokenize(t) for t in texts])
    row["hf_check"] = common.per_unit(cell, PAIRS)
    row["check_speedup"] = common.ratio(row["hf_check"], row["check"])
    canonical = np.array([[t.id for t in e] == [a, b] for e, a, b in zip(encoded, u.tolist(), v.tolist())])
    differ = int((canonical == banned).sum())
    row["pairs_banned"] = int(banned.sum())
    if imp.alone.any() or model.options.get("continuing_subword_prefix") or model.options.get("end_of_word_suffix"):
        res.check(f"canonical {name}: banned pairs = HF's model.tokenize on {PAIRS:,} pairs", None,
                  "not comparable pair by pair (ignore_merges or subword markers)")
    else:
        res.check(f"canonical {name}: banned pairs = HF's model.tokenize on {PAIRS:,} pairs", differ == 0,
                  f"{row['pairs_banned']} banned, {differ} disagree")
    return row, model, imp


def regex_row(name: str, rname: str, pattern: str, model, lex, imp, repeat: int, res: Results) -> dict:

    automaton = accept(pattern)
    row = {"tokenizer": name, "regex": rname}
    row["agnostic"], agn = common.measure(repeat, lambda: promote(model, automaton, lexicon=lex))
    try:
        row["materialized"], mat = common.measure(repeat, lambda: materialize(agn, imp, max_arcs=MAX_ARCS))
        row.update(form="materialized", states=mat.num_states(), arcs=count_arcs(mat))
    except LimitError as e:
        row.update(materialized=common.skipped(e.message()), form="factorized")
    row["factorized"], fz = common.measure(repeat, lambda: factorize(agn, imp))
    live_row(row, model, pattern, fz, repeat)
    rng = np.random.default_rng(0)
    state = fz.initial()
    for _ in range(3):
        allowed = np.flatnonzero(fz.mask(state))
        if not len(allowed):
            break
        state = fz.advance(state, int(rng.choice(allowed)))
    cell, _ = common.measure(repeat, lambda: [fz.mask(state) for _ in range(MASK_LOOKUPS)], warmup=True)
    row["mask"] = common.per_unit(cell, MASK_LOOKUPS)

    for level in ("model", "pipeline"):
        row[level], got = common.measure(repeat, lambda: build(model, pattern, canonical=True, level=level),
                                         warmup=True)
        row[f"{level}_form"] = "materialized" if got.materialized else "factorized"
    row["level_ratio"] = common.ratio(row["pipeline"], row["model"])
    return row


def live_row(row: dict, model, pattern: str, fz, repeat: int) -> None:
    """Co-reachability (``bpe.liveness``) of the model-level and pipeline-level factorized
    products, against the agnostic promotion (the issue's bound: no slower)."""

    row["live_model"], _ = common.measure(repeat, lambda: compute(fz.word, fz.arcs3, fz.finals, fz.start))
    pipe = build(model, pattern, canonical=True, limits=Limits(max_arcs=0)).decoder()
    row["live_pipeline"], _ = common.measure(repeat, lambda: compute(pipe.word, pipe.arcs, pipe.finals, pipe.start))
    slower = max((row["live_model"], row["live_pipeline"]), key=lambda c: common.median_of(c) or 0)
    row["live_ratio"] = common.ratio(slower, row["agnostic"])


def canonical_table(tokenizers: list[tuple[str, str, bool]], regexes: dict[str, str], repeat: int,
                    progress) -> Results:
    """``tokenizers``: (name, path, trained) triples of BPE tokenizers."""

    res = Results()
    toks = Table(
        "canonical_tokenizers", "canonical BPE: compile-bpe, artifact, canonical-check per pair", repeat,
        [("tokenizer", "tokenizer", "text"), ("vocab", "vocab", "int"), ("compile", "compile-bpe", "time"),
         ("artifact_bytes", "artifact", "bytes"), ("load", "artifact load", "time"), ("states", "A_BPE states", "int"),
         ("check", "check per pair", "time"), ("hf_check", "HF per pair", "time"),
         ("check_speedup", "HF/check", "ratio"), ("p_build", "P build", "time")],
        inputs={"pairs": PAIRS})
    regs = Table(
        "canonical", "canonical BPE: canonical promotion per regex", repeat,
        [("tokenizer", "tokenizer", "text"), ("regex", "regex", "text"), ("agnostic", "agnostic", "time"),
         ("materialized", "materialized", "time"), ("form", "canonical form", "text"), ("states", "states", "int"),
         ("arcs", "arcs", "int"),
         ("factorized", "factorized", "time"), ("live_model", "co-reach. model", "time"),
         ("live_pipeline", "co-reach. pipeline", "time"), ("live_ratio", "co-reach./agnostic", "ratio"),
         ("mask", "mask lookup", "time"),
         ("model", "model level", "time"), ("model_form", "form", "text"), ("pipeline", "pipeline level", "time"),
         ("pipeline_form", "form", "text"), ("level_ratio", "pipeline/model", "ratio")],
        inputs={"regexes": regexes, "max_arcs": MAX_ARCS, "mask_lookups": MASK_LOOKUPS})
    for name, path, _ in tokenizers:
        progress(f"canonical: {name}: compiling the implicit A_BPE")
        row, model, imp = tokenizer_row(name, path, repeat, res)
        toks.rows.append(row)
        lex = lexicon.lexicon(model)
        for rname, pattern in regexes.items():
            progress(f"canonical: {name}: {rname} ...")
            try:
                regs.rows.append(regex_row(name, rname, pattern, model, lex, imp, repeat, res))
            except TokfstError as e:  # e.g. an empty language: say so in the row
                regs.rows.append({"tokenizer": name, "regex": rname, "agnostic": common.error(e.one_line())})
    toks.notes += [
        f"compile-bpe: compile_implicit from the loaded tokenizer; artifact: its compressed bytes; artifact load: "
        f"from_bytes. Medians of {repeat} runs.",
        f"check per pair: ImplicitBpe.banned on {PAIRS:,} random pairs of tokens in one call (canonical-check's "
        "pair test); HF per pair: HF's model.tokenize of each pair's text. Both must agree on which pairs are "
        "canonical (checked).",
    ]
    regs.notes += [
        f"agnostic: accept + promote (stage S). materialized: bpe.product.materialize of it (stage C; the .fst "
        f"of tokfst promote --canonical), up to {MAX_ARCS:,} arcs, else the row's form is factorized. "
        f"factorized: bpe.counted.factorize (its co-reachability included). co-reach. model / pipeline: "
        f"bpe.liveness.compute alone on the model-level and the pipeline-level factorized products; "
        f"co-reach./agnostic: the slower of the two over agnostic (goal: at most 1x). mask lookup: "
        f"Factorized.mask of a state after a 3-token random walk, {MASK_LOOKUPS} per run. "
        f"The artifact is loaded once per tokenizer; medians of {repeat} runs.",
        "model level / pipeline level: the whole pipeline.build(canonical=True) (A, P, S, C; the artifact read "
        "from the cache each time, P cached) at each level, after a warm-up run; pipeline/model: their ratio.",
    ]
    toks.notes += ["P build: pretok.image.for_model(model, cache=False): the normalizer and pre-tokenizer "
                   "blocks as one transducer."]
    res.tables += [toks, regs]
    return res
