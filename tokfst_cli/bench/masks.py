"""Per-step mask lookup (seed 003): tokfst's index vs the naive per-token partial match.

For each tokenizer and regex, one walk of ``--steps`` tokens is drawn (fixed seed) through the
canonical automaton (factorized), so every step has an agnostic and a canonical state. At
each step the allowed tokens are computed three ways:
    naive      seed 003 Part 1: for every token, does prefix + token still partially match the
               regex? Here: the regex's minimal byte DFA re-run from the start over the bytes of
               prefix + token, in Python (O(|V|) walks per step)
    index      tokfst's agnostic index (``build_index``): the state's coalesced mask, kept as
               one numpy bool array per distinct mask (seed 003 Part 3), looked up by state
    canonical  the factorized canonical automaton's ``mask(state)`` (agnostic mask AND the
               implicit A_BPE's class mask)
The naive mask must equal the index mask at every step.
"""

from __future__ import annotations

import random

import numpy as np
import pynini

from . import common
from .common import Results, Table

INNER = 200  # lookups per timed batch of the fast methods (a single lookup is below timer noise)


def byte_dfa(fst: pynini.Fst) -> tuple[int, list[dict[int, int]]]:
    f = fst.copy().connect()
    delta = [dict() for _ in range(f.num_states())]
    for s in f.states():
        for a in f.arcs(s):
            delta[s][a.ilabel - 1] = a.nextstate
    return f.start(), delta


def naive_mask(start: int, delta: list[dict[int, int]], surfaces: list[bytes | None], prefix: bytes) -> np.ndarray:
    def partial(data: bytes) -> bool:
        s = start
        for b in data:
            s = delta[s].get(b)
            if s is None:
                return False
        return True

    return np.fromiter((s is not None and partial(prefix + s) for s in surfaces), bool, len(surfaces))


def walk(fz, steps: int, seed: int) -> list[tuple[int, tuple]]:
    """(token, factorized state before it) along a random canonical walk."""
    rng = random.Random(seed)
    state, out = fz.initial(), []
    for _ in range(steps):
        allowed = np.flatnonzero(fz.mask(state))
        if not len(allowed):
            break
        t = int(allowed[rng.randrange(len(allowed))])
        out.append((t, state))
        state = fz.advance(state, t)
    return out


def masks_table(tokenizers: list[tuple[str, str, bool]], regexes: dict[str, str], repeat: int, steps: int,
                progress) -> Results:
    from .. import lexicon
    from ..bpe import implicit
    from ..bpe.product import factorize
    from ..errors import TokfstError
    from ..index import build_index
    from ..pipeline import accept, promote

    res = Results()
    table = Table(
        "masks", "Masks: per-step lookup time, tokfst index vs naive per-token partial match", repeat,
        [("tokenizer", "tokenizer", "text"), ("vocab", "vocab", "int"), ("regex", "regex", "text"),
         ("steps", "steps", "int"), ("naive", "naive", "time"), ("index", "tokfst index", "time"),
         ("canonical", "tokfst canonical", "time"), ("speedup", "naive/index", "ratio"),
         ("coalescence", "masks/states", "text"), ("equal", "naive = index", "bool")],
        inputs={"regexes": regexes, "steps": steps, "inner": INNER},
        plot={"x": "vocab", "y": ["naive", "index", "canonical"], "ylabel": "time per step (s), median over regexes",
              "log": True, "where": "trained"},
    )
    for name, path, trained in tokenizers:
        model = common.load_bpe(path)
        lex = lexicon.lexicon(model)
        imp = implicit.load_or_compile(model)
        surfaces = model.surfaces
        for rname, pattern in regexes.items():
            progress(f"masks: {name}: {rname} ...")
            row = {"tokenizer": name, "trained": trained, "vocab": model.vocab_size, "regex": rname}
            try:
                automaton = accept(pattern)
                p = promote(model, automaton, lexicon=lex)
            except TokfstError as e:
                row["naive"] = common.error(e.one_line())
                table.rows.append(row)
                continue
            index = build_index(p, model, pattern)
            arrays = []
            for m in index["masks"]:
                a = np.zeros(model.vocab_size, bool)
                a[m] = True
                arrays.append(a)
            mask_of = [st["mask"] for st in index["states"]]
            fz = factorize(p, imp)
            walked = walk(fz, steps, seed=len(rname))
            k = len(walked)
            row["steps"] = k
            row["coalescence"] = f"{index['stats']['masks']}/{index['stats']['states']}"
            if not walked:
                table.rows.append(row)
                continue
            start, delta = byte_dfa(automaton.fst)
            prefixes, acc = [], b""
            for t, _ in walked:
                prefixes.append(acc)
                acc += surfaces[t]
            states = [st for _, st in walked]
            pstates = [st[0] for st in states]
            naive = [naive_mask(start, delta, surfaces, pre) for pre in prefixes]
            equal = all(np.array_equal(n, arrays[mask_of[q]]) for n, q in zip(naive, pstates))
            row["equal"] = equal
            res.check(f"masks {name} {rname}: naive mask = index mask at every step", equal, f"{k} steps")
            cell, _ = common.measure(repeat, lambda: [naive_mask(start, delta, surfaces, pre) for pre in prefixes])
            row["naive"] = common.per_unit(cell, k)
            cell, _ = common.measure(repeat, lambda: [arrays[mask_of[q]] for _ in range(INNER) for q in pstates])
            row["index"] = common.per_unit(cell, k * INNER)
            cell, _ = common.measure(repeat, lambda: [fz.mask(st) for _ in range(INNER // 10) for st in states],
                                     warmup=True)
            row["canonical"] = common.per_unit(cell, k * (INNER // 10))
            row["speedup"] = common.ratio(row["naive"], row["index"])
            table.rows.append(row)
    table.notes += [
        f"One canonical walk of up to {steps} tokens per regex (fixed seed); times per step, medians of {repeat} "
        f"runs. naive: every token's surface appended to the prefix and the regex's byte DFA re-run from the "
        f"start (Python). index: the state's coalesced numpy mask from build_index ({INNER} lookups per step "
        f"per run). canonical: Factorized.mask (agnostic mask AND the implicit A_BPE's class mask, "
        f"{INNER // 10} per step per run).",
        "masks/states: distinct masks / states of the agnostic index (coalescence). naive = index: the two "
        "masks are equal at every step.",
    ]
    res.tables.append(table)
    return res
