"""``tokfst bench terminals``: wildcards with and without terminal labels (Koo et al. 2024 Sec. 2.5.1).

Per tokenizer, pattern and form (``expanded``: every token an arc; ``terminals``: wildcard loops
as terminal labels), medians of ``repeat`` runs of the whole agnostic ``pipeline.build`` (after
one warm-up run: the lexicons are cached), the size of the result (states, arcs, the largest
state's arcs, states with 10^4+ arcs), the index export and decoder load time, and the mask at
fresh states: a new decoder loaded from the index, then one random walk whose every state's
``bitmask`` is timed once (a decoder's first look at a state, not a warm repeated lookup).
"""

from __future__ import annotations

import json
import random
from collections import deque
from pathlib import Path

import numpy as np

from tokfst_cli.bench import common
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.constraint import IndexDecoder
from tokfst_cli.errors import TokfstError
from tokfst_cli.pipeline import build
from tokfst_cli.tokenizer import model as tokmod

PATTERNS = {
    "json string": r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"',
    "string <= 64": r'"[^"\\\x00-\x1f]{0,64}"',
    "object": r'\{"name": "[^"\\\x00-\x1f]{1,32}", "bio": "(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*", "age": [0-9]{1,3}\}',
    "bullets": r"Summary:(\n\* (?P<PARAGRAPH_TOKEN>)+){3,5}",
    "answer": r"Answer: [\s\S]*",
}
FORMS = ("expanded", "terminals")
WALK = 64


def _name(model) -> str:
    return Path(model.source).stem if model.source else "tokenizer"


def fresh_masks(index: dict, steps: int = WALK, seed: int = 0) -> tuple[float, list[float]]:
    """(decoder load seconds from the index JSON, seconds of ``bitmask`` at each state of a random walk,
    first visits)."""
    text = json.dumps(index)
    load, dec = common.timed(lambda: IndexDecoder(json.loads(text)))
    rng, state, seen, times = random.Random(seed), dec.initial(), set(), []
    for _ in range(steps):
        t, words = common.timed(lambda: dec.bitmask(state))
        if state not in seen:
            times.append(t)
            seen.add(state)
        allowed = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")[:dec.vocab_size])
        if not len(allowed):
            break
        state = dec.advance(state, int(allowed[rng.randrange(len(allowed))]))
    return load, times


def paired_max(expanded, with_terms, big: int = 10_000, limit: int = 20_000) -> int | None:
    """The most arcs (tokens and terminals) of a terminals state whose expanded twin (reached by the
    same tokens: a breadth-first walk over both decoders, a sample of each state's tokens) has
    ``big`` or more arcs; None if no such state was met."""
    a, b = expanded.decoder(), with_terms.decoder()
    seen = {(a.initial(), b.initial())}
    queue, worst = deque(seen), None
    while queue and len(seen) < limit:
        x, y = queue.popleft()
        tokens = a.arcs(x)[0]
        if len(tokens) >= big:
            worst = max(worst or 0, len(b.arcs(y)[0]))
        for t in tokens[:: max(1, len(tokens) // 50)].tolist():
            pair = (a.advance(x, t), b.advance(y, t))
            if pair not in seen:
                seen.add(pair)
                queue.append(pair)
    return worst


def run(models: list, patterns: dict[str, str], repeat: int, progress=lambda message: None) -> list[dict]:

    rows = []
    for model in models:
        model = tokmod.load(model) if isinstance(model, (str, Path)) else model
        for pname, pattern in patterns.items():
            results = {}
            for form in FORMS:
                progress(f"terminals: {_name(model)}: {pname}, {form} ...")
                row = {"tokenizer": _name(model), "pattern": pname, "form": form}
                rows.append(row)
                try:
                    row["promote"], got = common.measure(repeat, lambda: build(model, pattern,
                                                                               terminals=form == "terminals"),
                                                         warmup=True)
                except TokfstError as e:
                    row["promote"] = common.error(e.one_line())
                    continue
                results[form] = got
                if form == "terminals" and "expanded" in results:
                    row["max_at_big"] = paired_max(results["expanded"], got)
                arcs = np.array([got.fst.num_arcs(s) for s in got.fst.states()])
                row.update(states=got.fst.num_states(), arcs=int(arcs.sum()), max_arcs=int(arcs.max()),
                           big_states=int((arcs >= 10_000).sum()), terminals=len(got.terminals))
                seconds, index = common.timed(got.index)
                row["index"] = common.ok([seconds])
                load, masks = fresh_masks(index)
                row["load"] = common.ok([load])
                row["mask"] = common.ok(masks)
    return rows


def terminals_table(tokenizers: list[tuple[str, str, bool]], patterns: dict[str, str] | None, repeat: int,
                    progress) -> Results:
    """The rows of :func:`run` as a table of the bench document; ``tokenizers``: (name, path, trained)."""
    patterns = patterns or PATTERNS
    res = Results()
    table = Table(
        "terminals", "wildcards as terminal labels vs expanded token arcs (agnostic)", repeat,
        [("tokenizer", "tokenizer", "text"), ("pattern", "pattern", "text"), ("form", "form", "text"),
         ("promote", "promote", "time"), ("states", "states", "int"), ("arcs", "arcs", "int"),
         ("max_arcs", "max arcs/state", "int"), ("big_states", "states 10^4+ arcs", "int"),
         ("max_at_big", "max arcs where expanded 10^4+", "int"),
         ("terminals", "terminals", "int"), ("index", "index export", "time"), ("load", "decoder load", "time"),
         ("mask", "mask, fresh state", "time")],
        inputs={"patterns": patterns, "walk_steps": WALK})
    table.rows = run([path for _, path, _ in tokenizers], patterns, repeat, progress)
    table.notes += [
        f"promote: the whole agnostic pipeline.build, median of {repeat} runs after a warm-up. index export: "
        "Result.index(); decoder load: IndexDecoder from the index's JSON text (packed masks made at load); "
        f"mask, fresh state: bitmask() at each new state of a {WALK}-step random walk on a newly loaded decoder "
        "(median over the states). max arcs where expanded 10^4+: over the states of the terminals form whose twin "
        "in the expanded form (reached by the same tokens) has 10^4 or more arcs; empty when the expanded form "
        "passed a limit. the goal: <= 1,000 there.",
    ]
    res.tables.append(table)
    return res
