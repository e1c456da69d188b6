"""``tokfst bench grammars``: self-embedding grammars decoded with a stack (``promotion.stack``)
against llguidance on the same walks (Koo et al. 2024 Sec. 3.2; the structured-generation practical).

Per tokenizer and grammar (``GRAMMARS``, Lark text that both engines read): a walk of ``steps``
tokens led by tokfst's masks (seeded; it leans towards tokens of brackets, quotes, commas, colons
and spaces only, so that the stack grows and shrinks and strings stay short, and never takes a
token after which nothing may follow, so that it runs its length).
Then, --repeat times, each engine follows the walk from a fresh matcher: mask per step (median,
p99; the median of the first and of the last 100 steps, whose ratio is the growth of the mask's
cost with the output), compile (grammar text to a ready matcher) and the first mask. llguidance
(``LLMatcher`` on ``grammar_from_lark``) fills a packed buffer as in ``bench masks``; both follow
the walk through ``masks.run_walk``, and their masks are compared at every step
(``masks.compare_masks``), EOS and special tokens aside (``agree``).

A fresh tokfst decoder has empty memos (configurations, byte steps, masks) but its PDT states'
parts (made with it, timed in the first mask); a tail part for tokens that pop is made as a walk
meets it. T's trie layout is built once per tokenizer outside the timing (set-up seconds in the
JSON's inputs).
"""

from __future__ import annotations

import statistics

import numpy as np

from tokfst_cli.bench import common
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.bench.engines import LLGuidance, Session, decoder_session
from tokfst_cli.bench.masks import WalkRun, compare_masks, run_walk
from tokfst_cli.grammar.load import compile_grammar
from tokfst_cli.promotion.lazy import layout, spelling_trie
from tokfst_cli.promotion.stack import PushdownDecoder

ARITH = r"""
start: expr
expr: expr "+" term | expr "-" term | term
term: term "*" factor | term "/" factor | factor
factor: "(" expr ")" | "-" factor | NUMBER
NUMBER: /[0-9]+(\.[0-9]+)?/
"""

SEXP = r"""
start: sexp
sexp: "(" ")" | "(" sexp (" " sexp)* ")" | ATOM
ATOM: /[a-z_+*\/<>=-][a-z0-9_+*\/<>=-]*/ | /[0-9]+/
"""

JSON = r"""
start: value
value: object | array | STRING | NUMBER | "true" | "false" | "null"
object: "{" "}" | "{" pair ("," pair)* "}"
pair: STRING ":" value
array: "[" "]" | "[" value ("," value)* "]"
STRING: /"([^"\\\x00-\x1f]|\\["\\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/
NUMBER: /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/
"""

GRAMMARS = {"arith": ARITH, "sexp": SEXP, "json": JSON}
OPENERS, STRUCTURE = b"([{", set(b'([{}])",: ')


def llg_eos(llg: LLGuidance) -> tuple[int, ...]:
    return tuple(llg.eos) if llg.missing is None else ()


def walk(decoder: PushdownDecoder, steps: int, seed: int) -> list[int]:
    """A tokfst-led walk of ``steps`` tokens (see the module docstring)."""
    rng = np.random.default_rng(seed)
    surface = dict(decoder.model.lexicon_items())
    state, out = decoder.initial(), []
    for _ in range(steps):
        allowed = np.flatnonzero(decoder.mask(state))
        structural = [t for t in allowed if set(surface[int(t)]) <= STRUCTURE]
        opening = [t for t in structural if any(b in OPENERS for b in surface[int(t)])]
        first = 1.0 if not out else 0.4  # open first: a top-level string or number would end the walk
        pools = [p for p, w in ((opening, first), (structural, 0.6)) if p and rng.random() < w] + [list(allowed)]
        for _ in range(32):
            token = int(rng.choice(pools[0]))
            nxt = decoder.advance(state, token)
            if decoder.mask(nxt).any():
                break
        else:
            break
        state = nxt
        out.append(token)
    return out


def tokfst_session(model, text: str) -> Session:
    """A fresh pushdown decoder of ``text`` behind the bench's per-step interface (``engines.decoder_session``)."""
    return decoder_session(PushdownDecoder(model, compile_grammar(text, "lark", source="bench")))


def follow(make, tokens: list[int], excluded: np.ndarray) -> tuple[WalkRun, float]:
    """``masks.run_walk`` along ``tokens`` from the session ``make()`` builds (the masks recorded,
    ``excluded`` ids left out), and the seconds from the grammar's text to the first mask."""
    seconds, session = common.timed(make)
    run = run_walk(session, tokens, excluded)
    return run, seconds + run.mask_ns[0] / 1e9


def _cells(walks: list[list[int]]) -> dict:
    """Median over timed walks of each walk's median, p99, first-100 and last-100 medians (ns -> s)."""
    def of(fn) -> dict:
        return common.ok([fn(ns) / 1e9 for ns in walks])
    return {"median": of(statistics.median), "p99": of(lambda ns: float(np.percentile(ns, 99))),
            "head": of(lambda ns: statistics.median(ns[:100])), "tail": of(lambda ns: statistics.median(ns[-100:]))}


def grammars_table(tokenizers: list[tuple[str, str, bool]], repeat: int, steps: int | None, progress) -> Results:
    res, steps = Results(), steps or 1000
    table = Table("grammars", f"grammar masks along a {steps}-token walk, tokfst (stack) vs llguidance", repeat,
                  [("tokenizer", "tokenizer", "text"), ("vocab", "vocab", "int"), ("grammar", "grammar", "text"),
                   ("steps", "steps", "int"), ("depth", "max stack", "int"), ("first", "tokfst first mask", "time"),
                   ("median", "tokfst mask median", "time"), ("p99", "tokfst mask p99", "time"),
                   ("growth", "tokfst last/first 100", "ratio"), ("llg_first", "llguidance first mask", "time"),
                   ("llg_median", "llguidance mask median", "time"), ("llg_p99", "llguidance mask p99", "time"),
                   ("llg_growth", "llguidance last/first 100", "ratio"), ("ratio", "median tokfst/llguidance", "ratio"),
                   ("agree", "equal masks", "int")], inputs={"grammars": GRAMMARS, "setup": {}})
    for name, path, _ in tokenizers:
        model = common.load_model(path, None)
        pre: dict = {}
        pre["trie_s"], _ = common.timed(lambda: layout(model, spelling_trie(model)))
        pre["llguidance_s"], llg = common.timed(lambda: LLGuidance(model, path))
        table.inputs["setup"][name] = pre
        for gname, text in GRAMMARS.items():
            progress(f"grammars: {name}: {gname}: the walk")
            probe = PushdownDecoder(model, compile_grammar(text, "lark"))
            tokens = walk(probe, steps, seed=len(gname))
            depth, state = 0, probe.initial()
            for t in tokens:
                state = probe.advance(state, t)
                depth = max(depth, probe.depth(state))
            row = {"tokenizer": name, "vocab": model.vocab_size, "grammar": gname, "steps": len(tokens),
                   "depth": depth}
            excluded = np.zeros(model.vocab_size, bool)
            excluded[[t for t in (*model.special_ids, *llg_eos(llg)) if t < model.vocab_size]] = True
            runs = [follow(lambda: tokfst_session(model, text), tokens, excluded) for _ in range(repeat + 1)][1:]
            cells = _cells([r.mask_ns for r, _ in runs])
            row.update(first=common.ok([f for _, f in runs]), median=cells["median"], p99=cells["p99"],
                       growth=common.ratio(cells["tail"], cells["head"]))
            if llg.missing is None:
                progress(f"grammars: {name}: {gname}: llguidance")
                theirs = [follow(lambda: llg.session(llg.llg.LLMatcher.grammar_from_lark(text)), tokens, excluded)
                          for _ in range(repeat + 1)][1:]
                stop = theirs[0][0].stop
                if stop is None:
                    lc = _cells([r.mask_ns for r, _ in theirs])
                    agree = compare_masks(runs[0][0].masks, theirs[0][0].masks)
                    row.update(llg_first=common.ok([f for _, f in theirs]), llg_median=lc["median"],
                               llg_p99=lc["p99"], llg_growth=common.ratio(lc["tail"], lc["head"]),
                               ratio=common.ratio(cells["median"], lc["median"]),
                               agree=agree.compared - agree.differing)
                else:
                    row.update(llg_first=common.error(stop), llg_median=common.error(stop))
            else:
                row["llg_first"] = row["llg_median"] = common.skipped(llg.missing)
            table.rows.append(row)
    table.notes += [
        f"One process; a walk of up to {steps} tokens led by tokfst's masks (seeded), then per engine {repeat} timed "
        "walks from a fresh matcher after an untimed one; per walk the median and p99 of the mask's time over its "
        "steps and the medians of its first and last 100 steps (last/first 100: the mask's growth with the output), "
        "medians over the timed walks.",
        "first mask: grammar text to the first mask (tokfst: compile_grammar + PushdownDecoder + bitmask; "
        "llguidance: grammar_from_lark + LLMatcher + fill). equal masks: steps whose masks are the same, EOS and "
        "special tokens aside, out of steps + 1.",
        "tokfst's masks are made of parts: per PDT state the tokens its frame decides (made with the decoder, "
        "in its first mask), and tail parts for the tokens that pop, resolved against the stack frame by frame; "
        "a state met again is a lookup, a new one an OR of parts, a tail part met for the first time a pass "
        "of the compiled walk under a few trie nodes (the p99).",
    ]
    res.tables.append(table)
    return res
