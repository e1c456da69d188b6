"""Non-special added tokens cut out of the text before stage P (Pitfalls 2025 Sec. 3.1), modelled exactly.

HF's ``encode`` first finds the added tokens' contents in the raw text, leftmost-longest (an
Aho-Corasick scan), emits each as its token and runs the normalizer, pre-tokenizer and model on
every segment between them alone. Here, for a regex's byte DFA A:

    occurring   the contents that occur in some string of L(A) (A's trim DFA walked over their trie)
    scanner     that scan as a deterministic transducer over bytes: a content becomes the label
                ``CUT_BASE + id``, every other byte is copied; a pending prefix of a content is
                held back until the longest match (or none) is known (delay: the longest content)
    language    Y = DET(PROJ_out(A o Scan o P_seg)), P_seg = P ((cut : MARKER cut MARKER) P')*:
                P restarts after every cut (P': as on a later segment, where Metaspace's
                prepend_scheme first does not prepend), and each cut is a pre-token of its own

Stage S reads a cut label through T_M's root arc (:func:`lexicon_with_cuts`), stage C accepts
it only as a whole word (``bpe.pretokenized``), and the result carries the added token's id.
Added tokens matched on normalized text, or with ``lstrip``/``rstrip``/``single_word``, are not
modelled (``added.check`` refuses them by name).
"""

from __future__ import annotations

import numpy as np
import pynini

from tokfst_cli.automata.arrays import fst_arrays, unique
from tokfst_cli.automata.fsts import linear
from tokfst_cli.automata.symbols import MARKER
from tokfst_cli.errors import LimitError
from tokfst_cli.pretok.added import splitting
from tokfst_cli.pretok.image import table, variant
from tokfst_cli.tokenizer.model import TokenizerModel

CUT_BASE = 1 << 20  # text label of the cut of added token ``id``: CUT_BASE + id (past every other text label)


def cuttable(model: TokenizerModel) -> dict[bytes, int]:
    """The non-special added tokens HF cuts out of the text in one leftmost-longest pass
    (``added.splitting``): content (UTF-8) -> id, made once per loaded tokenizer."""
    got = model.__dict__.get("_cuttable")
    if got is None:
        splits, _ = splitting(model)
        got = model.__dict__["_cuttable"] = {str(a["content"]).encode("utf-8"): a["id"] for a in model.added_tokens
                                             if a.get("id") in splits and not a.get("special") and a.get("content")}
    return got


def occurring(a: pynini.Fst, contents: dict[bytes, int]) -> dict[bytes, int]:
    """The contents that occur in some string of L(a): those some state of trim(DET(a)) reads
    through (the states each prefix reaches are walked once, over the contents' trie)."""
    if not contents:
        return {}
    d = a.copy().rmepsilon().connect()
    if d.num_states() == 0:
        return {}
    if d.properties(pynini.I_DETERMINISTIC, True) != pynini.I_DETERMINISTIC:
        d = pynini.determinize(d)
    delta = table(d)[0]
    reach: dict[bytes, np.ndarray] = {b"": np.arange(delta.shape[0])}
    found = {}
    for w in sorted(contents):
        k = len(w)
        while w[:k] not in reach:
            k -= 1
        states = reach[w[:k]]
        for j in range(k, len(w)):
            if len(states):
                nxt = delta[states, w[j] + 1]
                states = unique(nxt[nxt >= 0])
            reach[w[:j + 1]] = states
        if len(states):
            found[w] = contents[w]
    return found


class _Scan:
    """The leftmost-longest scan as a deterministic transducer with delay (states: pending prefixes)."""

    def __init__(self, contents: dict[bytes, int]):
        self.contents = contents
        self.prefixes = {w[:k] for w in contents for k in range(len(w))}  # proper prefixes: may still grow

    def step(self, pending: bytes, byte: int) -> tuple[list[int], bytes]:
        """Read ``byte`` after ``pending``: the labels emitted and the new pending prefix."""
        v = pending + bytes([byte])
        if v in self.prefixes:
            return [], v
        return self.resolve(v, final=False)

    def resolve(self, v: bytes, final: bool) -> tuple[list[int], bytes]:
        """``v`` can grow into no longer content: emit the longest content it starts with (else its
        first byte) and scan the rest again; ``final``: the text ends, flush everything."""
        best = next((v[:k] for k in range(len(v), 0, -1) if v[:k] in self.contents), None)
        out = [CUT_BASE + self.contents[best]] if best else [v[0] + 1]
        pending = b""
        for b in v[len(best) if best else 1:]:
            more, pending = self.step(pending, b)
            out += more
        if final and pending:
            more, pending = self.resolve(pending, final=True)
            out += more
        return out, pending

    def size(self, labels: int) -> int:
        """About the states :meth:`fst` makes over ``labels`` bytes: per pending prefix and byte, the
        labels a resolution may emit (at most the prefix's length and one)."""
        return len(self.prefixes) + labels * sum(len(u) for u in self.prefixes if u)

    def fst(self, alphabet: list[int]) -> pynini.Fst:
        f = pynini.Fst()
        one = pynini.Weight.one(f.weight_type())
        ids = {b"": f.add_state()}
        f.set_start(ids[b""])
        f.set_final(ids[b""])
        todo = [b""]
        end = f.add_state()  # the text ended with a pending prefix, flushed: nothing may follow
        f.set_final(end)

        def emit(src: int, ilabel: int, labels: list[int], dst: int) -> None:
            labels = labels or [0]
            for k, lab in enumerate(labels):
                nxt = dst if k == len(labels) - 1 else f.add_state()
                f.add_arc(src, pynini.Arc(ilabel if k == 0 else 0, lab, one, nxt))
                src = nxt

        while todo:
            u = todo.pop()
            for label in alphabet:
                out, v = self.step(u, label - 1)
                if v not in ids:
                    ids[v] = f.add_state()
                    todo.append(v)
                emit(ids[u], label, out, ids[v])
            if u:
                emit(ids[u], 0, self.resolve(u, final=True)[0], end)  # the text ends here: flush
        return f.arcsort("ilabel")


def scanner(contents: dict[bytes, int], alphabet: list[int]) -> pynini.Fst:
    """The scan over the byte labels ``alphabet`` (those of A): see the module docstring."""
    return _Scan(contents).fst(sorted(set(alphabet)))


def restarting(p: pynini.Fst, later: pynini.Fst, ids: list[int]) -> pynini.Fst:
    """P_seg = P ((cut : MARKER cut MARKER) P')*: P on each segment alone (P' on the segments after
    a cut, where they differ), every cut a pre-token of its own."""
    cut = pynini.union(*(linear([CUT_BASE + i], [MARKER, CUT_BASE + i, MARKER]) for i in ids))
    return pynini.concat(p.copy(), pynini.concat(cut, later.copy()).closure())


def _first_only(spec) -> bool:
    """Does a pre-tokenizer treat the text's first segment apart (Metaspace ``prepend_scheme: first``)?"""
    if isinstance(spec, dict):
        if spec.get("type") == "Metaspace" and spec.get("prepend_scheme") == "first":
            return True
        return any(_first_only(sub) for sub in spec.get("pretokenizers") or ())
    return False


def language(model: TokenizerModel, a: pynini.Fst, p: pynini.Fst, found: dict[bytes, int],
             max_states: int) -> pynini.Fst:
    """Y with the cuts of ``found`` (:func:`occurring`): the minimal DFA over bytes, MARKER and cut labels."""
    alphabet = sorted({arc.ilabel for s in a.states() for arc in a.arcs(s) if 0 < arc.ilabel <= 256})
    scan = _Scan(found)
    size = scan.size(len(alphabet))
    if size > max_states:  # estimate, then build: the scan's states for this many contents and bytes
        raise LimitError(f"the scan for the texts of {len(found)} non-special added tokens", "max_states", max_states,
                         size, remedy="simplify")
    marked = pynini.compose(a.copy().arcsort("olabel"), scan.fst(alphabet), connect=True)
    if marked.num_states() > max_states:
        raise LimitError("A o Scan", "max_states", max_states, marked.num_states(), remedy="simplify")
    marked = pynini.determinize(marked.project("output").rmepsilon()).minimize()
    later = variant(model, "segment") if _first_only(model.pre_tokenizer) else p  # no first-only prepend there
    y = pynini.compose(marked.arcsort("olabel"), restarting(p, later, sorted(found.values())).arcsort("ilabel"),
                       connect=True)
    if y.num_states() > max_states:
        raise LimitError("A o P", "max_states", max_states, y.num_states(), remedy="simplify")
    y = pynini.determinize(y.project("output").rmepsilon())
    if y.num_states() > max_states:
        raise LimitError("the pre-tokenized language", "max_states", max_states, y.num_states(), remedy="simplify")
    return y.minimize()


def cut_labels(y: pynini.Fst) -> list[int]:
    """The added ids whose cut labels occur in Y (its arcs read in bulk)."""
    labels = fst_arrays(y).ilabel
    return (unique(labels[labels >= CUT_BASE].astype(np.int64)) - CUT_BASE).tolist()


def marked_lexicon(model: TokenizerModel, t: pynini.Fst, y: pynini.Fst) -> pynini.Fst:
    """Stage S's T_M for Y: with a root arc per cut Y holds (:func:`lexicon_with_cuts`), else T_M."""
    ids = cut_labels(y) if cuttable(model) else []
    return lexicon_with_cuts(model, t, ids) if ids else t


def ids_of_cuts(s: pynini.Fst, vocab_size: int) -> list[tuple[int, int]]:
    """Label pairs turning S_M's cut tokens (``cut_token``) into the added tokens' ids (for an S_M
    read without stage C, which writes them itself)."""
    labels = fst_arrays(s).ilabel
    cuts = unique(labels[labels > vocab_size + 1].astype(np.int64)).tolist()
    return [(lab, lab - vocab_size - 1) for lab in cuts]


def lexicon_with_cuts(model: TokenizerModel, t: pynini.Fst, ids: list[int]) -> pynini.Fst:
    """T_M with a root arc per cut: CUT_BASE + id -> token label ``cut_token(id)`` + 1, kept per
    loaded tokenizer for the last few sets of cuts (one object each: stage S's trie of it is kept too)."""
    kept = model.__dict__.setdefault("_cut_lexicons", {})
    got = kept.get(tuple(ids))
    if got is None:
        while len(kept) >= 4:
            kept.pop(next(iter(kept)))
        got = kept[tuple(ids)] = _with_root_arcs(t, ids, model.vocab_size)
    return got


def _with_root_arcs(t: pynini.Fst, ids: list[int], vocab_size: int) -> pynini.Fst:
    t = t.copy()
    one = pynini.Weight.one(t.weight_type())
    root = t.start()
    for i in ids:
        t.add_arc(root, pynini.Arc(CUT_BASE + i, cut_token(i, vocab_size) + 1, one, root))
    return t.arcsort("ilabel")


def cut_token(aid: int, vocab_size: int) -> int:
    """The token label of a cut inside S_M and C (past the boundary's): ``vocab_size + 1 + id``."""
    return vocab_size + 1 + aid


def without_cuts(y: pynini.Fst) -> pynini.Fst:
    """Y with every cut label read as a boundary (for checks over bytes and MARKER only)."""
    pairs = [(i, MARKER) for i in {arc.ilabel for s in y.states() for arc in y.arcs(s) if arc.ilabel >= CUT_BASE}]
    return y.copy().relabel_pairs(ipairs=pairs, opairs=pairs) if pairs else y
