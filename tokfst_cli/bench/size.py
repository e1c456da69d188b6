"""Table 2 (Cognetta & Okazaki 2024 Sec. 6.5): the size of A_BPE, explicit and implicit, per tokenizer.

Per tokenizer: the states of A_BPE, then for each representation the explicitly stored arcs
and the bytes:
    explicit .fst   states x allowed successors, as an OpenFst vector file (``compile-bpe --form
                    fst``); written and measured up to ``--max-arcs``, else computed from the
                    format (the measured size of the same file without arcs + 16 bytes per arc)
    seed implicit   Cognetta & Okazaki 2024's encoding: delta(q0, v) for every token plus BANNED(u) for every
                    token u; counted as flat int32 arrays (4 bytes per target, 8 per row offset)
    tokfst implicit the ``compile-bpe`` artifact: one rectangle per merge plus the one-row and
                    one-column rectangles of tokens whose traces pop out of rank order
                    (stored arcs = rectangles), compressed; bytes measured
"""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np
import pynini

from tokfst_cli.automata.arrays import unique
from tokfst_cli.automata.symbols import token_table
from tokfst_cli.bench import common
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.bpe import implicit
from tokfst_cli.bpe.explicit import START, explicit_automaton, successors
from tokfst_cli.promotion.promote import count_arcs

ARC_BYTES = 16  # OpenFst StdArc in a vector file: ilabel, olabel, weight, nextstate


_COUNTED: dict[str, tuple[int, int]] = {}  # by tokenizer fingerprint: table2 and paragraph both need it


def count_explicit(imp) -> tuple[int, int]:
    """(states, arcs) of the explicit A_BPE, by the breadth-first walk of ``explicit_automaton``
    without building it (per-row caches are dropped as it goes, so memory stays flat). Counted
    once per tokenizer and run: the walk takes seconds for a 50k vocabulary."""
    if not imp.fingerprint:
        return _count_explicit(imp)
    if imp.fingerprint not in _COUNTED:
        _COUNTED[imp.fingerprint] = _count_explicit(imp)
    return _COUNTED[imp.fingerprint]


def _count_explicit(imp) -> tuple[int, int]:
    classes = imp.classes()
    reps: dict[int, int] = {}
    for t in np.flatnonzero(classes >= 0):
        reps.setdefault(int(classes[t]), int(t))
    fb_b = imp.fb_byte.astype(np.int64)
    is_fb = fb_b >= 0
    n_fb = len(imp.fb_final)
    seen = np.zeros((int(classes.max()) + 2) * n_fb, bool)  # key (class + 1) * n_fb + fb; START = -1
    start = (START + 1) * n_fb
    seen[start] = True
    queue = [start]
    arcs = 0
    rows = imp.derived.setdefault("row_cache", {})
    while queue:
        cls, fb = divmod(queue.pop(), n_fb)
        cls -= 1
        rep = reps.get(cls, -1)
        nxt = successors(imp, cls, rep, fb)
        rows.pop(rep, None)
        targets = np.flatnonzero(nxt)
        arcs += len(targets)
        fb_next = np.where(is_fb[targets], imp.fb_delta[fb, np.clip(fb_b[targets], 0, 255)], 0)
        keys = (classes[targets] + 1) * n_fb + fb_next
        new = unique(keys[~seen[keys]])
        seen[new] = True
        queue.extend(new.tolist())
    return int(seen.sum()), arcs


def fst_file_size(fst: pynini.Fst) -> int:
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "a.fst")
        fst.write(p)
        return os.path.getsize(p)


def computed_fst_size(model, states: int, arcs: int) -> int:
    """The size of A_BPE's vector file: the same file without arcs (states, finals, symbol
    tables, header) plus 16 bytes per arc."""
    f = pynini.Fst()
    f.add_states(states)
    f.set_start(0)
    table = token_table(model)
    f.set_input_symbols(table).set_output_symbols(table)
    return fst_file_size(f) + ARC_BYTES * arcs


def measure(name: str, path: str, trained: bool, max_arcs: int, repeat: int, progress) -> tuple[dict, list[tuple]]:

    model = common.load_bpe(path)
    compile_cell, imp = common.measure(repeat, lambda: implicit.compile_implicit(model).attach(model))
    data = implicit.to_bytes(imp)
    info = imp.info()
    t0 = time.perf_counter()
    states, arcs = count_explicit(imp)
    progress(f"table2: {name}: {states} states, {arcs} explicit arcs (counted in {time.perf_counter() - t0:.1f} s)")
    checks = []
    row = {"tokenizer": name, "trained": trained, "vocab": model.vocab_size, "states": states,
           "explicit_arcs": arcs, "compile": compile_cell}
    if arcs <= max_arcs:
        t_build, fst = common.timed(lambda: explicit_automaton(imp, model, max_arcs=max_arcs))
        built = (fst.num_states(), count_arcs(fst))
        size = fst_file_size(fst)
        del fst
        row.update(explicit_bytes=size, explicit_how="written", explicit_build=common.ok([t_build]))
        formula = computed_fst_size(model, *built)
        checks.append((f"table2 {name}: explicit A_BPE counted = built ({states}/{arcs})", built == (states, arcs),
                       f"built {built[0]}/{built[1]}"))
        checks.append((f"table2 {name}: computed .fst size = written size", formula == size,
                       f"computed {formula}, written {size}"))
    else:
        row.update(explicit_bytes=computed_fst_size(model, states, arcs), explicit_how="computed",
                   explicit_build=common.skipped(f"over --max-arcs {max_arcs}"))
    allowed = int(imp.allowed.sum())
    seed_arcs = allowed + info["banned_pairs"]
    row.update(
        seed_arcs=seed_arcs,
        seed_bytes=4 * allowed + 8 * (allowed + 1) + 4 * info["banned_pairs"],
        tokfst_arcs=info["rectangles"],
        tokfst_bytes=len(data),
        banned_pairs=info["banned_pairs"], rectangles=info["rectangles"], out_of_order=info["non_monotone_tokens"],
    )
    row["seed_reduction"] = 1 - row["seed_bytes"] / row["explicit_bytes"]
    row["tokfst_reduction"] = 1 - row["tokfst_bytes"] / row["explicit_bytes"]
    return row, checks


def table2(tokenizers: list[tuple[str, str, bool]], max_arcs: int, repeat: int, progress) -> Results:
    """``tokenizers``: (name, path, trained) triples."""
    res = Results()
    table = Table(
        "table2", "Table 2: A_BPE size per representation", repeat,
        [("tokenizer", "tokenizer", "text"), ("vocab", "vocab", "int"), ("states", "states", "int"),
         ("explicit_arcs", "explicit arcs", "int"), ("explicit_bytes", "explicit .fst bytes", "bytes"),
         ("seed_arcs", "seed implicit arcs", "int"), ("seed_bytes", "seed implicit bytes", "bytes"),
         ("tokfst_arcs", "tokfst stored", "int"), ("tokfst_bytes", "tokfst bytes", "bytes"),
         ("seed_reduction", "seed reduction", "percent"), ("tokfst_reduction", "tokfst reduction", "percent"),
         ("compile", "tokfst compile", "time")],
        plot={"x": "vocab", "y": ["explicit_bytes", "seed_bytes", "tokfst_bytes"], "ylabel": "bytes", "log": True,
              "where": "trained"},
    )
    for name, path, trained in tokenizers:
        progress(f"table2: {name} ...")
        row, checks = measure(name, path, trained, max_arcs, repeat, progress)
        table.rows.append(row)
        for c in checks:
            res.check(*c)
    table.notes += [
        "states: A_BPE's states (start + one per class of tokens with equal BANNED rows, times byte-fallback "
        "DFA states). explicit arcs: allowed successors summed over states.",
        f"explicit .fst bytes: the OpenFst vector file (compile-bpe --form fst), written and measured up to "
        f"--max-arcs {max_arcs}, else computed (* in the table): the file without arcs + 16 bytes per arc.",
        "seed implicit (Cognetta & Okazaki 2024 Sec. 6.5): delta(q0, v) for every token + BANNED(u) for every token, "
        "as flat "
        "int32 arrays (computed). tokfst stored: its rectangles (merges, and rows and columns of tokens whose "
        "traces pop out of rank order); bytes: the compressed "
        "compile-bpe artifact. Reductions are relative to the explicit .fst.",
        f"tokfst compile: compile_implicit from the loaded tokenizer, median of {repeat} runs.",
    ]
    res.tables.append(table)
    return res
