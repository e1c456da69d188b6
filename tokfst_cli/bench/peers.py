"""tokfst vs outlines-core on one vocabulary and a regex set, in one process.

Per regex, medians of --repeat runs after one untimed warm-up:
    agnostic   compile_regex + promote (lexicon T loaded once)
    canonical  agnostic + the product with the implicit A_BPE, materialized and minimized
               (``product.materialize``), or factorized (``counted.factorize``) past 2M arcs
               (``tokfst promote --canonical``'s default --max-arcs);
               the artifact is loaded once and its class masks stay cached across regexes
    outlines   ``outlines_core.Index(regex, vocabulary)``; the Vocabulary (token surface bytes ->
               ids) is built once, outside the timing
Ratios are outlines / tokfst (above 1: tokfst is faster). Start masks: tokens allowed in the
start state (outlines' EOS left out). Non-canonical first tokens: allowed at the start but
the first token of no canonical tokenization of a string of the language (the canonical
automaton's start mask; untrimmed when factorized). Same language: do tokfst's agnostic
automaton and outlines' index accept the same token sequences? Where they differ, the shortest
witness is decoded and checked with Python's ``re.fullmatch``; the check fails if tokfst is wrong.
"""

from __future__ import annotations

import re

import numpy as np
import pynini

from tokfst_cli.bench import common
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.bpe import implicit
from tokfst_cli.bpe.counted import factorize
from tokfst_cli.bpe.product import materialize
from tokfst_cli.errors import LimitError, TokfstError
from tokfst_cli.pipeline import Limits, accept, promote
from tokfst_cli.promotion import lexicon

MISSING = "outlines-core not installed (pip install 'tokfst[bench]')"
MAX_ARCS = Limits().max_arcs  # materialize up to the pipeline's default, as ``tokfst promote --canonical`` does


def outlines_module():
    try:
        import outlines_core  # deferred: optional dependency (the bench/test extras)
    except ImportError:
        return None
    return outlines_core


def outlines_vocabulary(oc, model):
    """outlines' Vocabulary from the tokenizer's surfaces; EOS = a special token id, else an id past the vocabulary."""
    by_surface: dict[bytes, list[int]] = {}
    for tid, s in model.lexicon_items():
        by_surface.setdefault(s, []).append(tid)
    eos = min(model.special_ids) if model.special_ids else model.vocab_size
    return oc.Vocabulary(eos, by_surface), eos


def index_fst(index, eos: int) -> pynini.Fst:
    """outlines' Index as an acceptor (labels id + 1), EOS arcs left out."""
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    trans = index.get_transitions()
    states = set(trans) | {t for d in trans.values() for t in d.values()} | {index.get_initial_state()}
    ids = {s: f.add_state() for s in sorted(states)}
    f.set_start(ids[index.get_initial_state()])
    for s in index.get_final_states():
        f.set_final(ids[s])
    for s, d in trans.items():
        for tok, nxt in d.items():
            if tok != eos:
                f.add_arc(ids[s], pynini.Arc(tok + 1, tok + 1, one, ids[nxt]))
    return pynini.determinize(f.connect()).minimize()


def compare(agn: pynini.Fst, peer: pynini.Fst, model, pattern: str) -> tuple[bool, str, bool]:
    """(same language, witness, is tokfst right on the witness per Python's re.fullmatch).

    The witness is the shortest token sequence accepted by one automaton only."""
    a, b = agn.copy(), peer.copy()
    for f in (a, b):
        f.set_input_symbols(None)
        f.set_output_symbols(None)
    for x, y, who in ((a, b, "tokfst only"), (b, a, "outlines-core only")):
        d = pynini.difference(x, y).connect()
        if d.num_states() == 0:
            continue
        p = pynini.shortestpath(d).topsort()
        labels, s = [], p.start()
        while p.num_arcs(s):
            arc = next(iter(p.arcs(s)))
            labels.append(arc.ilabel - 1)
            s = arc.nextstate
        data = b"".join(model.surfaces[t] for t in labels)
        try:
            matches = re.fullmatch(pattern, data.decode("utf-8")) is not None
        except UnicodeDecodeError:
            matches = False
        right = matches if who == "tokfst only" else not matches
        return (False, f"{who}: {data.decode('utf-8', 'replace')!r} as {len(labels)} tokens (re.fullmatch: {matches})",
                right)
    return True, "", True


def start_set(fst: pynini.Fst) -> set[int]:
    return {a.ilabel - 1 for a in fst.arcs(fst.start())} if fst.start() != pynini.NO_STATE_ID else set()


def peers_table(tokenizers: list[tuple[str, str, bool]], regexes: dict[str, str], repeat: int, progress,
                max_arcs: int = MAX_ARCS) -> Results:

    oc = outlines_module()
    res = Results()
    table = Table(
        "peers", "Peers: promotion time, tokfst vs outlines-core Index", repeat,
        [("tokenizer", "tokenizer", "text"), ("regex", "regex", "text"), ("agnostic", "tokfst agnostic", "time"),
         ("canonical", "tokfst canonical", "time"), ("form", "canonical form", "text"),
         ("outlines", "outlines-core Index", "time"), ("ratio_agnostic", "outlines/agnostic", "ratio"),
         ("ratio_canonical", "outlines/canonical", "ratio"), ("start_agnostic", "start mask agnostic", "int"),
         ("start_canonical", "start mask canonical", "int"), ("start_outlines", "start mask outlines", "int"),
         ("noncanonical_agnostic", "non-canonical first (agnostic)", "int"),
         ("noncanonical_outlines", "non-canonical first (outlines)", "int"),
         ("same_language", "same language", "bool")],
        inputs={"regexes": regexes, "outlines_core": oc is not None, "precompute": {}},
    )
    for name, path, _ in tokenizers:
        model = common.load_bpe(path)
        t_lex, lex = common.timed(lambda: lexicon.lexicon(model))
        t_imp, imp = common.timed(lambda: implicit.load_or_compile(model))
        pre = {"lexicon_s": t_lex, "implicit_s": t_imp}
        vocab = eos = None
        if oc is not None:
            t_voc, (vocab, eos) = common.timed(lambda: outlines_vocabulary(oc, model))
            pre["outlines_vocabulary_s"] = t_voc
        table.inputs["precompute"][name] = pre
        for rname, pattern in regexes.items():
            progress(f"peers: {name}: {rname} ...")
            row = {"tokenizer": name, "regex": rname}
            try:
                row["agnostic"], agn = common.measure(repeat, lambda: promote(model, accept(pattern), lexicon=lex),
                                                      warmup=True)
            except TokfstError as e:
                row["agnostic"] = common.error(e.one_line())
                res.check(f"peers {name} {rname}: tokfst agnostic vs outlines-core", None, e.one_line())
                table.rows.append(row)
                continue
            canonical_start: set[int]
            try:
                row["canonical"], can = common.measure(
                    repeat, lambda: materialize(promote(model, accept(pattern), lexicon=lex), imp, max_arcs=max_arcs),
                    warmup=True)
                row["form"] = "materialized"
                canonical_start = start_set(can)
            except LimitError:
                row["canonical"], fz = common.measure(
                    repeat, lambda: factorize(promote(model, accept(pattern), lexicon=lex), imp), warmup=True)
                row["form"] = "factorized"
                canonical_start = set(np.flatnonzero(fz.mask(fz.initial())).tolist())
            agn_start = start_set(agn)
            row["start_agnostic"], row["start_canonical"] = len(agn_start), len(canonical_start)
            row["noncanonical_agnostic"] = len(agn_start - canonical_start)
            if oc is None:
                row["outlines"] = common.skipped(MISSING)
                res.check(f"peers {name} {rname}: tokfst agnostic vs outlines-core", None, MISSING)
            else:
                try:
                    row["outlines"], index = common.measure(repeat, lambda: oc.Index(pattern, vocab), warmup=True)
                except Exception as e:  # noqa: BLE001 - the peer refuses a pattern: say so in the cell
                    row["outlines"] = common.error(f"{type(e).__name__}: {e}".split("\n")[0])
                    res.check(f"peers {name} {rname}: tokfst agnostic vs outlines-core", None, row["outlines"]["error"])
                else:
                    out_start = set(index.get_allowed_tokens(index.get_initial_state())) - {eos}
                    row["start_outlines"] = len(out_start)
                    row["noncanonical_outlines"] = len(out_start - canonical_start)
                    same, witness, right = compare(agn, index_fst(index, eos), model, pattern)
                    row["same_language"], row["witness"] = same, witness
                    res.check(f"peers {name} {rname}: tokfst agnostic = re.fullmatch where it and outlines-core differ",
                              right, witness or "same token language")
                    row["ratio_agnostic"] = common.ratio(row["outlines"], row["agnostic"])
                    row["ratio_canonical"] = common.ratio(row["outlines"], row["canonical"])
            table.rows.append(row)
    table.notes += [
        f"One process; medians of {repeat} runs after a warm-up. tokfst agnostic: compile_regex + promote (T "
        "loaded once). tokfst canonical: agnostic + product with the implicit A_BPE (materialized and minimized; "
        "factorized past 2M arcs as in tokfst promote --canonical), the artifact loaded once. "
        "outlines-core: Index(regex, Vocabulary) with the "
        "Vocabulary of the tokenizer's surface bytes built once.",
        "outlines/x > 1: tokfst is faster. Start masks count the tokens allowed first; non-canonical first = "
        "allowed first but the first token of no canonical tokenization of a string of the language. Factorized "
        "rows: the canonical start mask is not trimmed (an upper bound), so their non-canonical counts are lower "
        "bounds.",
        "same language: tokfst's agnostic automaton and outlines-core's index accept the same token sequences; "
        "where not, the JSON row's witness is the shortest sequence accepted by one side only, checked with "
        "Python's re.fullmatch.",
    ]
    table.notes += [f"Differs: {r['tokenizer']} {r['regex']}: {r['witness']}." for r in table.rows if r.get("witness")]
    if oc is None:
        table.notes.append(f"Peer columns: {MISSING}.")
    res.tables.append(table)
    return res
