"""``tokfst bench grammars``: self-embedding grammars decoded with a stack (``promotion.stack``)
against llguidance and xgrammar on the same walks (Koo et al. 2024 Sec. 3.2; the structured-generation
practical).

Per tokenizer and grammar (``GRAMMARS``: Lark text that tokfst and llguidance read, with the same
language in GBNF for xgrammar, ``GBNF``): a walk of ``steps`` tokens led by tokfst's masks (seeded;
it leans towards tokens of brackets, quotes, commas, colons and spaces only, so that the stack grows
and shrinks and strings stay short, and never takes a token after which nothing may follow, so that
it runs its length). Then, --repeat times, each engine follows the walk from a fresh matcher: mask
per step (median, p99; the median of the first and of the last 100 steps, whose ratio is the growth
of the mask's cost with the output), and the time from the grammar's text to the first mask. Every
engine fills a packed buffer as in ``bench masks``; all follow the walk through ``masks.run_walk``,
and each peer's masks are compared with tokfst's at every step (``masks.compare_masks``), EOS and
special tokens aside (``agree``).

llguidance is given ``%llguidance {"no_forcing": true}``: by default, where the grammar forces
bytes (the rest of ``false`` after ``f``) its mask narrows to the token that spells them in one
piece (``alse``, not ``a``), so that it is no longer the set of tokens extending a viable prefix
and a walk through ``a`` is refused. xgrammar's compiler cache is cleared before every timed
compile (a cached grammar would time a lookup).

A fresh tokfst decoder has empty memos (configurations, byte steps, masks) but its PDT states'
parts (made with it, timed in the first mask); a tail part for tokens that pop is made as a walk
meets it. T's trie layout is built once per tokenizer outside the timing (set-up seconds in the
JSON's inputs), as the peers' tokenizer objects are.
"""

from __future__ import annotations

import statistics

import numpy as np

from tokfst_cli.bench import common
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.bench.engines import LLGuidance, Session, XGrammar, decoder_session
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

# The same languages in GBNF, xgrammar's input (left recursion written as repetition, the idiom
# GBNF grammars use; xgrammar's users have reported left recursion looping); tests/grammar check
# that tokfst compiles each to the same masks as its Lark text.
GBNF = {
    "arith": r"""
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= "(" expr ")" | "-" factor | number
number ::= [0-9]+ ("." [0-9]+)?
""",
    "sexp": r"""
root ::= sexp
sexp ::= "(" ")" | "(" sexp (" " sexp)* ")" | atom
atom ::= [a-z_+*/<>=\-] [a-z0-9_+*/<>=\-]* | [0-9]+
""",
    "json": r"""
root ::= value
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" "}" | "{" pair ("," pair)* "}"
pair ::= string ":" value
array ::= "[" "]" | "[" value ("," value)* "]"
string ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4})* "\""
number ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [+-]? [0-9]+)?
""",
}
NO_FORCING = '%llguidance {"no_forcing": true}\n'

OPENERS, STRUCTURE = b"([{", set(b'([{}])",: ')


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


def _peers(model, path: str) -> list:
    """(engine, make(grammar name) -> fresh Session) for llguidance and xgrammar on one tokenizer;
    an engine that is not installed keeps its ``missing`` and is never called."""
    llg, xgr = LLGuidance(model, path), XGrammar(model, path)

    def llg_make(gname: str):
        return lambda: llg.session(llg.llg.LLMatcher.grammar_from_lark(NO_FORCING + GRAMMARS[gname]))

    def xgr_make(gname: str):
        def make():
            xgr.compiler.clear_cache()
            return xgr.session(xgr.compiler.compile_grammar(GBNF[gname]))
        return make

    return [(llg, llg_make), (xgr, xgr_make)]


def _row(runs: list) -> dict:
    """The timing cells of one engine's timed walks (``follow``'s results)."""
    cells = _cells([r.mask_ns for r, _ in runs])
    return {"first": common.ok([f for _, f in runs]), "median": cells["median"], "p99": cells["p99"],
            "growth": common.ratio(cells["tail"], cells["head"])}


def grammars_table(tokenizers: list[tuple[str, str, bool]], repeat: int, steps: int | None, progress) -> Results:
    res, steps = Results(), steps or 1000
    table = Table("grammars", f"grammar masks along a {steps}-token walk: tokfst (stack), llguidance, xgrammar",
                  repeat,
                  [("tokenizer", "tokenizer", "text"), ("vocab", "vocab", "int"), ("grammar", "grammar", "text"),
                   ("steps", "steps", "int"), ("depth", "max stack", "int"), ("engine", "engine", "text"),
                   ("first", "first mask", "time"), ("median", "mask median", "time"), ("p99", "mask p99", "time"),
                   ("growth", "last/first 100", "ratio"), ("first_ratio", "tokfst/engine first mask", "ratio"),
                   ("ratio", "tokfst/engine median", "ratio"), ("agree", "masks equal tokfst's", "int")],
                  inputs={"grammars": GRAMMARS, "gbnf": GBNF, "setup": {}})
    for name, path, _ in tokenizers:
        model = common.load_model(path, None)
        pre: dict = {}
        pre["trie_s"], _ = common.timed(lambda: layout(model, spelling_trie(model)))
        pre["peers_s"], peers = common.timed(lambda: _peers(model, path))
        table.inputs["setup"][name] = pre
        for gname, text in GRAMMARS.items():
            progress(f"grammars: {name}: {gname}: the walk")
            probe = PushdownDecoder(model, compile_grammar(text, "lark"))
            tokens = walk(probe, steps, seed=len(gname))
            depth, state = 0, probe.initial()
            for t in tokens:
                state = probe.advance(state, t)
                depth = max(depth, probe.depth(state))
            base = {"tokenizer": name, "vocab": model.vocab_size, "grammar": gname, "steps": len(tokens),
                    "depth": depth}
            excluded = np.zeros(model.vocab_size, bool)
            eos = [t for engine, _ in peers if engine.missing is None for t in engine.eos]
            excluded[[t for t in (*model.special_ids, *eos) if t < model.vocab_size]] = True
            ours = [follow(lambda: tokfst_session(model, text), tokens, excluded) for _ in range(repeat + 1)][1:]
            mine = {**base, "engine": "tokfst", **_row(ours)}
            table.rows.append(mine)
            for engine, make in peers:
                row = {**base, "engine": engine.name}
                table.rows.append(row)
                if engine.missing is not None:
                    row["first"] = row["median"] = common.skipped(engine.missing)
                    continue
                progress(f"grammars: {name}: {gname}: {engine.name}")
                theirs = [follow(make(gname), tokens, excluded) for _ in range(repeat + 1)][1:]
                stop = theirs[0][0].stop
                if stop is not None:
                    row["first"] = row["median"] = common.error(stop)
                    continue
                row.update(_row(theirs))
                agree = compare_masks(ours[0][0].masks, theirs[0][0].masks)
                row.update(first_ratio=common.ratio(mine["first"], row["first"]),
                           ratio=common.ratio(mine["median"], row["median"]), agree=agree.compared - agree.differing)
    table.notes += [
        f"One process; a walk of up to {steps} tokens led by tokfst's masks (seeded), then per engine {repeat} timed "
        "walks from a fresh matcher after an untimed one; per walk the median and p99 of the mask's time over its "
        "steps and the medians of its first and last 100 steps (last/first 100: the mask's growth with the output), "
        "medians over the timed walks. Ratios tokfst/engine below 1: tokfst faster.",
        "first mask: grammar text to the first mask (tokfst: compile_grammar + PushdownDecoder + bitmask; "
        "llguidance: grammar_from_lark + LLMatcher + fill, with no_forcing; xgrammar: compile_grammar of the GBNF "
        "text, its cache cleared, + GrammarMatcher + fill). masks equal tokfst's: steps whose masks are the same, "
        "EOS and special tokens aside, out of steps + 1.",
        "tokfst's masks are made of parts: per PDT state the tokens its frame decides (made with the decoder, "
        "in its first mask), and tail parts for the tokens that pop, resolved against the stack frame by frame; "
        "a state met again is a lookup, a new one an OR of parts, a tail part met for the first time a pass "
        "of the compiled walk under a few trie nodes (the p99).",
    ]
    res.tables.append(table)
    return res
