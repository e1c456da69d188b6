"""Table 1 (Cognetta & Okazaki 2024 Sec. 6.4): canonical promotion time of one input automaton, by method.

Input: the edit-distance-one automaton of N corpus words (``corpus.edit_distance_one``).
Methods, each cell in its own process (``isolate``); its timed runs together get ``--timeout``
seconds, and its precomputation another ``--timeout`` (a cell over it shows >T):
    eq4       Eq. 4, ``promote_gadgets``: the merge-gadget cascade, timed whole (initial symbols,
              gadget construction, every composition and minimization)
    eq5       Eq. 5: MIN(PROJ(A o T)) intersected with the precomputed explicit A_BPE, then
              minimized; T and A_BPE are built before the timed runs ("precompute")
    implicit  tokfst: MIN(PROJ(A o T)) times the implicit A_BPE (``product.materialize``);
              cold = the artifact is loaded afresh for every run (its per-class masks are
              expanded again), warm = repeated on one loaded artifact
The three results are checked to be equivalent wherever they finished.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pynini

from tokfst_cli.bench import common, isolate
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.bench.corpus import Corpus, alphabet, draw_words, edit_distance_one, train
from tokfst_cli.bench.report import fmt_cell
from tokfst_cli.bpe import implicit
from tokfst_cli.bpe.explicit import explicit_automaton, intersect
from tokfst_cli.bpe.gadgets import promote_gadgets
from tokfst_cli.bpe.product import materialize
from tokfst_cli.pipeline import Limits, promote
from tokfst_cli.promotion import lexicon
from tokfst_cli.promotion.promote import count_arcs
from tokfst_cli.text.regex import ByteAutomaton
from tokfst_cli.tokenizer import model as tokmod

METHODS = ("eq4", "eq5", "implicit")


# ---- child side --------------------------------------------------------------------------------
def cell(spec: dict, emit) -> dict:
    """One method on one tokenizer: emits precompute and run messages, writes the result .fst."""

    model = tokmod.load(spec["tokenizer"])
    a = ByteAutomaton(pynini.Fst.read(spec["automaton"]), "edit distance one")
    n, method, max_arcs = spec["repeat"], spec["method"], spec["max_arcs"]
    result = None

    def runs(fn, kind="run"):
        nonlocal result
        for i in range(n):
            t, result = common.timed(fn)
            emit({"kind": kind, "seconds": t, "index": i})

    if method == "eq4":
        runs(lambda: promote_gadgets(a, model))
    elif method == "eq5":
        def build():
            lex = lexicon.build(model)
            abpe = explicit_automaton(implicit.compile_implicit(model), model, max_arcs=max_arcs)
            return lex, abpe.arcsort("ilabel")
        t, (lex, abpe) = common.timed(build)
        emit({"kind": "precompute", "seconds": t, "states": abpe.num_states(), "arcs": count_arcs(abpe),
              "restart": True})
        runs(lambda: intersect(promote(model, a, lexicon=lex), abpe))
    elif method == "implicit":
        def build():
            return lexicon.build(model), implicit.to_bytes(implicit.compile_implicit(model))
        t, (lex, data) = common.timed(build)
        emit({"kind": "precompute", "seconds": t, "bytes": len(data), "restart": True})

        def cold():
            imp = implicit.from_bytes(data, model.fingerprint).attach(model)
            return materialize(promote(model, a, lexicon=lex), imp, max_arcs=max_arcs)
        runs(cold)
        imp = implicit.from_bytes(data, model.fingerprint).attach(model)
        runs(lambda: materialize(promote(model, a, lexicon=lex), imp, max_arcs=max_arcs), "warm")
    else:
        raise ValueError(f"unknown method {method}")
    result.set_input_symbols(None)
    result.set_output_symbols(None)
    result.write(spec["out"])
    return {"states": result.num_states(), "arcs": count_arcs(result)}


# ---- parent side -------------------------------------------------------------------------------
KINDS = {"eq4": ("run",), "eq5": ("precompute", "run"), "implicit": ("precompute", "run", "warm")}


def _cells(method: str, outcome: isolate.Outcome, repeat: int, limit: float) -> dict:
    """Timing cells of one outcome (precompute, run, warm as the method has them). Runs after a
    precomputation that failed or timed out are "skipped" with the reason."""
    out: dict = {}
    for kind in KINDS[method]:
        secs = [m["seconds"] for m in outcome.of_kind(kind)]
        if len(secs) == (1 if kind == "precompute" else repeat):
            out[kind] = common.ok(secs)
        elif out.get("precompute", {}).get("status") in ("timeout", "error", "skipped"):
            out[kind] = common.skipped(f"precomputation {out['precompute']['status']}")
        elif outcome.error:
            out[kind] = (common.skipped(outcome.error) if "needs more than" in outcome.error
                         else common.error(outcome.error))
        elif outcome.timed_out:
            out[kind] = common.timeout(limit, secs)
        else:
            out[kind] = common.skipped("not run")
    return out


def equivalent(paths: dict[str, Path]) -> tuple[bool | None, str]:
    """Are the result automata of the finished methods equivalent? (None: fewer than two)"""
    names = [m for m in METHODS if m in paths]
    if len(names) < 2:
        return None, f"only {', '.join(names) or 'no method'} finished"
    fsts = {m: pynini.Fst.read(str(paths[m])) for m in names}
    base = names[0]
    same = all(pynini.equivalent(fsts[base], fsts[m]) for m in names[1:])
    return same, " = ".join(names) + (" (equivalent)" if same else " (NOT equivalent)")


def table1(corpus: Corpus, vocab_sizes: list[int], words: int, repeat: int, limit: float, max_arcs: int,
           progress, methods: tuple[str, ...] = METHODS) -> Results:

    res = Results()
    picked = draw_words(corpus, words)
    sigma = alphabet(corpus)
    automaton = edit_distance_one(picked, sigma)
    a_states, a_arcs = automaton.fst.num_states(), count_arcs(automaton.fst)
    progress(f"table1: edit-distance-one automaton of {words} words: {a_states} states, {a_arcs} arcs")
    table = Table(
        "table1", "Table 1: canonical promotion time of the edit-distance-one automaton", repeat,
        [("vocab", "vocab", "int"), ("agnostic", "A∘T states/arcs", "text"), ("result", "result states/arcs", "text"),
         ("eq4", "Eq. 4 gadgets", "time"), ("eq5", "Eq. 5 A_BPE", "time"),
         ("implicit_cold", "implicit cold", "time"), ("implicit_warm", "implicit warm", "time"),
         ("speedup_eq5", "Eq.4/Eq.5", "ratio"), ("speedup_implicit", "Eq.4/implicit cold", "ratio"),
         ("eq5_precompute", "A_BPE build (1 run)", "once"), ("implicit_precompute", "implicit compile (1 run)", "once"),
         ("equivalent", "Eq.4=Eq.5=impl.", "bool")],
        inputs={"words": picked, "alphabet": "".join(sigma), "automaton_states": a_states, "automaton_arcs": a_arcs,
                "timeout_s": limit, "max_arcs": max_arcs, "methods": list(methods)},
        plot={"x": "vocab", "y": ["eq4", "eq5", "implicit_cold", "implicit_warm"], "ylabel": "promotion time (s)",
              "log": True},
    )
    table.notes += [
        f"Input: all strings within edit distance one of {words} words drawn from the corpus "
        f"(alphabet: the {len(sigma)} letters of its words): {a_states} states, {a_arcs} arcs "
        "(Cognetta & Okazaki 2024: 2.4k states, 46k arcs).",
        "Eq. 4: promote_gadgets, timed whole. Eq. 5: MIN(PROJ(A∘T)) ∘ A_BPE, minimized, with T and the explicit "
        "A_BPE built beforehand (A_BPE build). implicit: MIN(PROJ(A∘T)) × implicit A_BPE (materialized, minimized); "
        "cold loads the artifact afresh each run, warm reuses one (class masks cached).",
        f"Medians of {repeat} runs, each cell in its own process; >T: the cell's {repeat} runs (or its "
        f"precomputation) did not finish within --timeout {limit:g} s [runs that did finish in brackets].",
    ]
    with tempfile.TemporaryDirectory(prefix="tokfst-bench-") as tmp:
        apath = Path(tmp) / "automaton.fst"
        automaton.fst.write(str(apath))
        for v in vocab_sizes:
            path, fresh = train(corpus, v)
            progress(f"table1: vocab {v}: tokenizer {'trained' if fresh else 'cached'} at {path}")
            model = common.load_bpe(str(path))
            p = promote(model, automaton, Limits(max_states=10_000_000), lexicon=lexicon.build(model))
            row = {"vocab": model.vocab_size, "agnostic": f"{p.num_states()}/{count_arcs(p)}"}
            paths, sizes = {}, {}
            for method in methods:
                progress(f"table1: vocab {v}: {method} ...")
                out = Path(tmp) / f"{v}-{method}.fst"
                spec = {"tokenizer": str(path), "automaton": str(apath), "method": method, "repeat": repeat,
                        "max_arcs": max_arcs, "out": str(out)}
                outcome = isolate.run("tokfst_cli.bench.promotion:cell", spec, limit)
                cells = _cells(method, outcome, repeat, limit)
                if method == "implicit":
                    row["implicit_cold"], row["implicit_warm"] = cells["run"], cells["warm"]
                else:
                    row[method] = cells["run"]
                if method != "eq4":
                    row[f"{method}_precompute"] = cells["precompute"]
                    pre = outcome.of_kind("precompute")
                    if method == "eq5" and pre:
                        row["abpe_states"], row["abpe_arcs"] = pre[0]["states"], pre[0]["arcs"]
                if outcome.result is not None:
                    paths[method] = out
                    sizes[method] = outcome.result
                progress(f"table1: vocab {v}: {method}: " + ", ".join(
                    f"{k} {_short(c)}" for k, c in cells.items()))
            row["sizes"] = sizes
            if sizes:
                first = sizes[next(iter(sizes))]
                row["result"] = f"{first['states']}/{first['arcs']}"
            row["speedup_eq5"] = common.ratio(row.get("eq4"), row.get("eq5"))
            row["speedup_implicit"] = common.ratio(row.get("eq4"), row.get("implicit_cold"))
            same, detail = equivalent(paths)
            row["equivalent"] = same
            res.check(f"table1 vocab {model.vocab_size}: Eq. 4 = Eq. 5 = implicit", same, detail)
            table.rows.append(row)
    res.tables.append(table)
    return res


def _short(cell: dict) -> str:
    return fmt_cell(cell)
