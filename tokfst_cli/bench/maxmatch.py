"""``tokfst bench maxmatch``: canonical MaxMatch on WordPiece tokenizers (e.g. BERT).

Per tokenizer:
    compile   ``tokfst compile-maxmatch TOKENIZER OUT`` in a fresh process with an empty cache
              (T_Aho built from scratch), --cold-repeat runs; states, arcs and bytes of the .fst
              (checked against the in-process ``maxmatch.composition.compiled``)
    warm-up   the first canonical use of the tokenizer (stage P's normalizer and pre-tokenizer
              tables, read off HF's tokenizers once per configuration and cached), one run
Per tokenizer and regex, in one process with those tables warm (medians of --repeat runs):
    promote       stage P + the lazy product machine: ``pipeline.preprocess`` (the text
                  automaton X) and ``maxmatch.product.machine_of_text``
    initial mask  the machine's mask at its initial state, and how many tokens it allows
    materialized  promote + ``maxmatch.product.materialize`` (trimmed, minimized), while it fits
                  under the pipeline's default limits (else the factorized form is what
                  ``tokfst promote --canonical`` writes)
    aho           the paper's route MIN(PROJ(X o T_Aho)) (``maxmatch.composition.maxmatch_promote``)
                  where the product materialized; the two results must be equivalent
"""

from __future__ import annotations

import os
import tempfile

import pynini

from tokfst_cli.automata.fst_io import fst_bytes
from tokfst_cli.bench import common
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.errors import LimitError, TokfstError
from tokfst_cli.maxmatch import composition, product
from tokfst_cli.maxmatch.composition import compiled
from tokfst_cli.pipeline import Limits, accept, preprocess
from tokfst_cli.promotion.promote import count_arcs

LIMITS = Limits()


def compile_row(name: str, path: str, cold_repeat: int, res: Results, progress) -> tuple[dict, object, pynini.Fst]:

    model = common.load_model(path, "wordpiece")
    taho = compiled(model)
    row = {"tokenizer": name, "vocab": model.vocab_size, "states": taho.num_states(), "arcs": count_arcs(taho),
           "bytes": len(fst_bytes(taho))}
    if cold_repeat:
        progress(f"maxmatch: {name}: compile-maxmatch, {cold_repeat} cold processes")
        runs, written = [], None
        with tempfile.TemporaryDirectory(prefix="tokfst-bench-") as d:
            for i in range(cold_repeat):
                cache = os.path.join(d, f"cache-{i}")
                out = os.path.join(d, f"taho-{i}.fst")
                cmd = common.tokfst_command() + ["compile-maxmatch", os.path.abspath(path), out]
                runs.append(common.run_cold(cmd, {**os.environ, "TOKFST_CACHE": cache}, d))
            written = pynini.Fst.read(out)
            size = (written.num_states(), count_arcs(written), os.path.getsize(out))
        row["compile"] = common.ok(runs)
        res.check(f"maxmatch {name}: the CLI's T_Aho = the in-process T_Aho (states/arcs/bytes)",
                  size == (row["states"], row["arcs"], row["bytes"]), f"CLI {size[0]}/{size[1]}/{size[2]}")
    else:
        row["compile"] = common.skipped("no cold runs")
    t, _ = common.timed(lambda: preprocess(model, accept("a"), canonical=True, limits=Limits(max_states=10)))
    row["warmup"] = common.ok([t])
    return row, model, taho


def regex_row(name: str, rname: str, pattern: str, model, taho: pynini.Fst, repeat: int, res: Results) -> dict:

    a = accept(pattern, LIMITS)

    def machine():
        return product.machine_of_text(model, preprocess(model, a, canonical=True, limits=LIMITS))

    row = {"tokenizer": name, "regex": rname, "pattern": pattern}
    row["promote"], m = common.measure(repeat, machine)
    row["text_states"] = m.text.num_states()
    row["initial_mask"], mask = common.measure(repeat, lambda: m.mask(m.initial()))
    row["mask_tokens"] = int(mask.sum())
    try:
        row["materialized"], fst = common.measure(
            repeat, lambda: product.materialize(machine(), LIMITS.max_states, LIMITS.max_arcs))
    except LimitError as e:
        row.update(materialized=common.skipped(e.message()), form="factorized",
                   aho=common.skipped("the product does not materialize"))
        return row
    row.update(form="materialized", states=fst.num_states(), arcs=count_arcs(fst))
    row["aho"], aho = common.measure(repeat, lambda: composition.maxmatch_promote(model, a.fst, taho,
                                                                                   LIMITS.max_states))
    x, y = fst.copy(), aho.copy()
    for f in (x, y):
        f.set_input_symbols(None)
        f.set_output_symbols(None)
    row["equal"] = bool(pynini.equivalent(x, y))
    res.check(f"maxmatch {name} {rname}: product = MIN(PROJ(X∘T_Aho))", row["equal"],
              f"{row['states']}/{row['arcs']} vs {aho.num_states()}/{count_arcs(aho)}")
    return row


def maxmatch_table(tokenizers: list[tuple[str, str, bool]], regexes: dict[str, str], repeat: int,
                   cold_repeat: int, progress) -> Results:
    """``tokenizers``: (name, path, trained) triples of WordPiece tokenizers."""
    res = Results()
    comp = Table(
        "maxmatch_compile", "canonical MaxMatch: compile-maxmatch (T_Aho), cold process, empty cache",
        cold_repeat or repeat,
        [("tokenizer", "tokenizer", "text"), ("vocab", "vocab", "int"), ("compile", "compile-maxmatch", "time"),
         ("states", "T_Aho states", "int"), ("arcs", "T_Aho arcs", "int"), ("bytes", "T_Aho bytes", "bytes"),
         ("warmup", "first canonical use (1 run)", "once")])
    regs = Table(
        "maxmatch", "canonical MaxMatch: canonical promotion per regex", repeat,
        [("tokenizer", "tokenizer", "text"), ("regex", "regex", "text"), ("promote", "promote (X + machine)", "time"),
         ("text_states", "X states", "int"), ("initial_mask", "initial mask", "time"),
         ("mask_tokens", "mask tokens", "int"), ("materialized", "materialized", "time"),
         ("form", "canonical form", "text"), ("states", "states", "int"), ("arcs", "arcs", "int"),
         ("aho", "MIN(PROJ(X∘T_Aho))", "time"), ("equal", "product = T_Aho", "bool")],
        inputs={"regexes": regexes, "max_states": LIMITS.max_states, "max_arcs": LIMITS.max_arcs})
    for name, path, _ in tokenizers:
        row, model, taho = compile_row(name, path, cold_repeat, res, progress)
        comp.rows.append(row)
        for rname, pattern in regexes.items():
            progress(f"maxmatch: {name}: {rname} ...")
            try:
                regs.rows.append(regex_row(name, rname, pattern, model, taho, repeat, res))
            except TokfstError as e:  # e.g. an empty language: say so in the row
                regs.rows.append({"tokenizer": name, "regex": rname, "promote": common.error(e.one_line())})
    comp.notes.append(
        f"compile-maxmatch: the whole `tokfst compile-maxmatch TOKENIZER OUT` process with an empty cache, median "
        f"of {cold_repeat} runs; T_Aho's size as written (checked against the in-process build). First canonical "
        "use: stage P's normalizer and pre-tokenizer tables, read off HF's tokenizers once per configuration and "
        "cached (fast when cached).")
    regs.notes.append(
        f"promote: stage P (the text automaton X) + the lazy product machine (what --format index writes); "
        f"initial mask: its mask at the initial state; materialized: promote + materialize (trimmed, minimized) up "
        f"to {LIMITS.max_arcs:,} arcs, else the form is factorized; MIN(PROJ(X∘T_Aho)): the paper's composition "
        f"route where the product materialized, checked to be equivalent. Medians of {repeat} runs.")
    res.tables += [comp, regs]
    return res
