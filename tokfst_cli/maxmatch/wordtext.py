"""Stage P for WordPiece, its output: the word-level text automaton X (Cognetta & Okazaki 2024 Sec. 6.2;
Pitfalls 2025 Sec. 3.1).

X = MIN(PROJ(A o P o U)): the regex's strings after HF's normalizer and pre-tokenizer
(:mod:`.preprocess`: words separated by MARKER) where every word HF's WordPiece turns into
[UNK] as a whole also has the alternative UNKSYM. A word is [UNK] when it has more than
max_input_chars_per_word characters, or no complete greedy parse (outside dom S of T_Aho;
only possible where some position has no single-character piece, which is checked first).
"""

from __future__ import annotations

import pynini

from tokfst_cli.automata import utf8
from tokfst_cli.automata.fst_io import cached_fst
from tokfst_cli.automata.fsts import linear, ranges_acceptor
from tokfst_cli.automata.symbols import MARKER, UNKSYM
from tokfst_cli.errors import EmptyLanguageError, LimitError
from tokfst_cli.maxmatch import preprocess
from tokfst_cli.maxmatch.taho import domain_acceptor
from tokfst_cli.tokenizer.model import TokenizerModel


def _any_char() -> pynini.Fst:
    """One UTF-8 character (any Unicode scalar value)."""
    return ranges_acceptor([(0, utf8.MAX_CODE_POINT)])


def _label(lab: int) -> pynini.Fst:
    return linear([lab])


def _repeat(f: pynini.Fst, lo: int, hi: int | None = None) -> pynini.Fst:
    """f{lo,hi} (hi None: unbounded), built by concatenation."""
    out = linear([])  # the empty string
    for _ in range(lo):
        out = pynini.concat(out, f)
    if hi is None:
        return pynini.concat(out, f.copy().closure()).rmepsilon()
    opt = pynini.union(f, linear([])).rmepsilon()
    for _ in range(hi - lo):
        out = pynini.concat(out, opt)
    return out.rmepsilon()


def max_chars(model: TokenizerModel) -> int:
    """HF's max_input_chars_per_word (its default: 100)."""
    value = model.options.get("max_input_chars_per_word")
    return 100 if value is None else int(value)


def unk_words(model: TokenizerModel, bounded: bool, bad: pynini.Fst | None = None) -> pynini.Fst:
    """U: a pre-tokenized text -> the same text with alternatives UNKSYM for [UNK] words.

    A word gets the alternative when it has more than max_input_chars_per_word characters, or
    is in ``bad`` (words without a complete greedy parse, see :func:`bad_words`). With
    ``bounded``, the identity is limited to words within the length limit (for composition
    with T_Aho, which does not count).
    """
    n = max_chars(model)
    char = _any_char()
    word = _repeat(char, 1, n) if bounded else _repeat(char, 1)
    unk_domain = _repeat(char, n + 1)
    if bad is not None:
        unk_domain = pynini.union(unk_domain, bad).rmepsilon()
    item = pynini.union(word, pynini.cross(unk_domain, _label(UNKSYM)))
    seq = pynini.concat(item, pynini.concat(_label(MARKER), item).closure())
    return pynini.union(seq, linear([])).rmepsilon().arcsort("ilabel")


def _char_set(chars: set[str]) -> pynini.Fst:
    return ranges_acceptor(utf8.ranges_of(ord(c) for c in chars))


def risky(model: TokenizerModel, pre: pynini.Fst) -> bool:
    """Can a word of ``pre`` lack a complete greedy parse? Only where no single-character
    piece covers a position (word-initial for the first character, ``##`` for the others)."""
    single = [(model.word_internal[t], b.decode("utf-8", "replace")) for t, b in model.lexicon_items()
              if t not in model.not_in_model]
    first = {c for internal, c in single if len(c) == 1 and not internal}
    later = {c for internal, c in single if len(c) == 1 and internal}
    if not first or not later:
        return True
    safe_word = pynini.concat(_char_set(first), _char_set(later).closure())
    safe = pynini.union(pynini.concat(safe_word, pynini.concat(_label(MARKER), safe_word).closure()),
                        linear([])).rmepsilon()
    safe = pynini.determinize(safe).minimize()
    return pynini.difference(pre, safe).connect().num_states() > 0


def bad_words(model: TokenizerModel, pre: pynini.Fst) -> pynini.Fst | None:
    """Words over the bytes that ``pre`` uses with no complete greedy parse: (alphabet+) - dom S."""
    labels = sorted({a.ilabel for s in pre.states() for a in pre.arcs(s)} - {MARKER, UNKSYM, 0})
    if not labels:
        return None
    alpha = pynini.union(*(linear([lab]) for lab in labels)).closure(1).rmepsilon()
    return pynini.difference(alpha, domain_acceptor_cached(model)).connect()


def _dfa(f: pynini.Fst, max_states: int, what: str) -> pynini.Fst:
    f.project("output").rmepsilon()
    f = pynini.determinize(f, nstate=max_states + 1)
    if f.num_states() > max_states:
        raise LimitError(what, "max_states", max_states, remedy="simplify")
    return f.minimize()


def text_automaton(model: TokenizerModel, automaton: pynini.Fst | None, max_states: int, bounded: bool = False,
                   bad: bool = True) -> pynini.Fst:
    """X = MIN(PROJ(A o P o U)): the regex's text as the tokenizer's words, [UNK] words marked.

    ``automaton=None`` stands for all text. ``bad=False`` leaves out the words without a greedy
    parse (exact when every word position can also hold a too-long word, as for all text)."""
    if automaton is None:
        pre = preprocess.output_language(model)
    else:
        a = automaton.copy().arcsort("olabel")
        pre = _dfa(pynini.compose(a, preprocess.transducer(model)), max_states, "the pre-tokenized regex")
    if bad and risky(model, pre):
        u = unk_words(model, bounded, bad_words(model, pre))
    else:
        u = unk_words_cached(model, bounded)
    x = _dfa(pynini.compose(pre.arcsort("olabel"), u), max_states, "the word automaton")
    if x.num_states() == 0:
        raise EmptyLanguageError("the regex matches no string", "check the regex")
    return x.arcsort("ilabel")


def all_text(model: TokenizerModel) -> pynini.Fst:
    """X for every text, cached: what canonical-check runs against."""
    return cached_fst(f"alltext-{model.fingerprint}",
                      lambda: text_automaton(model, None, 10_000_000, bad=False))


def unk_words_cached(model: TokenizerModel, bounded: bool = False) -> pynini.Fst:
    kind = "bounded" if bounded else "open"
    return cached_fst(f"unkwords-{kind}-{model.options.get('max_input_chars_per_word')}",
                      lambda: unk_words(model, bounded))


def domain_acceptor_cached(model: TokenizerModel) -> pynini.Fst:
    return cached_fst(f"maxmatch-dom-{model.fingerprint[:16]}", lambda: domain_acceptor(model))


def longest_word(x: pynini.Fst) -> int | None:
    """Most characters in a word of X (None: unbounded). UTF-8 lead bytes count as characters.

    Longest path over the word arcs (all but MARKER and UNKSYM) in topological order (Kahn);
    a cycle left over means words of unbounded length."""
    arcs = {s: [(0 if 0x80 <= a.ilabel - 1 < 0xC0 else 1, a.nextstate) for a in x.arcs(s)
                if a.ilabel not in (MARKER, UNKSYM)] for s in x.states()}
    indegree = dict.fromkeys(arcs, 0)
    for out in arcs.values():
        for _, t in out:
            indegree[t] += 1
    ready = [s for s, d in indegree.items() if d == 0]
    depth = dict.fromkeys(arcs, 0)
    done = 0
    while ready:
        s = ready.pop()
        done += 1
        for w, t in arcs[s]:
            depth[t] = max(depth[t], depth[s] + w)
            indegree[t] -= 1
            if indegree[t] == 0:
                ready.append(t)
    return max(depth.values(), default=0) if done == len(arcs) else None
