"""Sec. 6.4.1 of Cognetta & Okazaki 2024: canonical tokenization of one paragraph via the automaton vs HF.

HF: ``Tokenizer.encode(paragraph, add_special_tokens=False)`` (default settings: its BPE word
cache is warm after the first trial). Automaton: the paragraph goes through HF's normalizer and
pre-tokenizer (as in the tokenizer's pipeline); the pre-tokens' bytes, joined by a boundary
label #, form one linear acceptor A; its token lattice is MIN(PROJ(A o T#)) (``promote`` with
T plus a # loop at its root, so no token crosses a boundary), and the unique canonical path is
    implicit  the depth-first walk of the lattice times the implicit A_BPE (class masks; # is
              allowed where a word may end and restarts A_BPE); a tokenizer with ignore_merges
              goes word by word through ``product.materialize`` instead
    eq5       the intersection of the lattice with the explicit A_BPE plus # arcs from its
              final states back to its start (Eq. 5, where A_BPE fits under --max-arcs)
No word cache on the automaton side. Both results are compared with HF's ids.
"""

from __future__ import annotations

import pynini

from tokfst_cli.automata.fsts import linear
from tokfst_cli.bench import common
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.bench.size import count_explicit
from tokfst_cli.bpe import implicit
from tokfst_cli.bpe.explicit import START, explicit_automaton
from tokfst_cli.bpe.product import materialize
from tokfst_cli.bpe.word import stepper
from tokfst_cli.errors import InputError
from tokfst_cli.pipeline import promote
from tokfst_cli.promotion import lexicon
from tokfst_cli.text.regex import ByteAutomaton
from tokfst_cli.tokenizer.model import SPACE_MARK, TokenizerModel, unicode_to_bytes
from tokfst_cli.tokenizer.reference import HfReference


def pretokenize(hf, text: str) -> list[str]:
    """The pre-tokens HF's BPE model sees (normalizer, then pre-tokenizer)."""
    if hf.normalizer is not None:
        text = hf.normalizer.normalize_str(text)
    if hf.pre_tokenizer is None:
        return [text] if text else []
    return [p for p, _ in hf.pre_tokenizer.pre_tokenize_str(text)]


def piece_bytes(model: TokenizerModel, piece: str) -> bytes:
    if model.style == "byte-level":
        inv = unicode_to_bytes()
        return bytes(inv[c] for c in piece)
    if model.style == "sentencepiece":
        piece = piece.replace(SPACE_MARK, " ")
    return piece.encode("utf-8")


def pieces_acceptor(pieces: list[bytes], boundary: int) -> ByteAutomaton:
    """The acceptor of the pieces' bytes (labels b + 1) joined by the label ``boundary``."""
    labels: list[int] = []
    for i, data in enumerate(pieces):
        if i:
            labels.append(boundary)
        labels += [b + 1 for b in data]
    return ByteAutomaton(linear(labels), "paragraph")


def with_boundary(fst: pynini.Fst, boundary: int, sources) -> pynini.Fst:
    """A copy of fst with a ``boundary`` arc from each state of ``sources`` back to the start."""
    f = fst.copy()
    one = pynini.Weight.one(f.weight_type())
    for s in sources:
        f.add_arc(s, pynini.Arc(boundary, boundary, one, f.start()))
    return f


def canonical_path(lattice: pynini.Fst, step, boundary: int) -> list[int]:
    """The canonical path of a token lattice (word boundaries labelled ``boundary``): depth-first
    over (lattice state, A_BPE class, fallback state), pruning dead triples; the first complete
    path is the unique one. Returns the token ids without the boundaries."""
    zero = pynini.Weight.zero(lattice.weight_type())
    classes, dead = step.classes, set()
    stack = [((lattice.start(), START, 0), iter(list(lattice.arcs(lattice.start()))))]
    path: list[int] = []
    while stack:
        node, arcs = stack[-1]
        p, cls, fb = node
        if lattice.final(p) != zero and step.final(cls, fb):  # a lattice of one string ends only here
            return [t for t in path if t >= 0]
        mask = step.mask(cls, fb)
        for arc in arcs:
            if arc.ilabel == boundary:
                if not step.final(cls, fb):
                    continue
                t, nxt = -1, (arc.nextstate, START, 0)
            else:
                t = arc.ilabel - 1
                if not mask[t]:
                    continue
                nxt = (arc.nextstate, int(classes[t]), int(step.next_fb(fb)[t]))
            if nxt not in dead:
                path.append(t)
                stack.append((nxt, iter(list(lattice.arcs(arc.nextstate)))))
                break
        else:
            dead.add(node)
            stack.pop()
            if path:
                path.pop()
    raise ValueError("no canonical path in the lattice")


def path_of(fst: pynini.Fst, boundary: int | None = None) -> list[int]:
    """Labels (token ids) of a linear acceptor, boundaries left out."""
    out, s = [], fst.start()
    zero = pynini.Weight.zero(fst.weight_type())
    while fst.final(s) == zero:
        arcs = list(fst.arcs(s))
        if len(arcs) != 1:
            raise ValueError("the canonical automaton is not a single path")
        if arcs[0].ilabel != boundary:
            out.append(arcs[0].ilabel - 1)
        s = arcs[0].nextstate
    return out


class ViaAutomaton:
    """Tokenize text through the automata of one tokenizer."""

    def __init__(self, path: str, max_arcs: int, progress, name: str):

        self.model = common.load_bpe(path)
        try:
            self.hf = HfReference(self.model).hf
        except Exception as e:  # noqa: BLE001 - HF's parser is stricter than tokfst's: one line, no traceback
            raise InputError(f"HF tokenizers cannot read {path}: {e}",
                             "give a tokenizer.json that HF tokenizers loads") from None
        self.boundary = max(256, self.model.vocab_size) + 1  # neither a byte nor a token label
        self.lex = lexicon.lexicon(self.model)
        self.lex_b = with_boundary(self.lex, self.boundary, [self.lex.start()]).arcsort("ilabel")
        self.imp = implicit.load_or_compile(self.model)
        self.ignore_merges = bool(self.imp.alone.any())  # the whole-word rule: word by word via materialize
        self.step = stepper(self.imp)
        self.abpe = None
        states, arcs = count_explicit(self.imp)
        if arcs <= max_arcs:
            progress(f"paragraph: {name}: building the explicit A_BPE ({states} states, {arcs} arcs)")
            t, abpe = common.timed(lambda: explicit_automaton(self.imp, self.model, max_arcs=max_arcs))
            zero = pynini.Weight.zero(abpe.weight_type())
            finals = [s for s in abpe.states() if abpe.final(s) != zero]
            self.abpe = with_boundary(abpe, self.boundary, finals).arcsort("ilabel")
            self.abpe_note = f"{states}/{arcs}, built in {t:.1f} s"
        else:
            self.abpe_note = f"A_BPE over --max-arcs ({arcs} arcs)"

    def lattice(self, text: str) -> pynini.Fst:
        pieces = [piece_bytes(self.model, p) for p in pretokenize(self.hf, text)]
        return promote(self.model, pieces_acceptor(pieces, self.boundary), lexicon=self.lex_b)

    def implicit(self, text: str) -> list[int]:
        if self.ignore_merges:

            out: list[int] = []
            for p in pretokenize(self.hf, text):
                lat = promote(self.model, pieces_acceptor([piece_bytes(self.model, p)], self.boundary),
                              lexicon=self.lex)
                out += path_of(materialize(lat, self.imp))
            return out
        return canonical_path(self.lattice(text), self.step, self.boundary)

    def eq5(self, text: str) -> list[int]:
        lat = self.lattice(text).arcsort("olabel")
        return path_of(pynini.intersect(lat, self.abpe).connect(), self.boundary)


def paragraph_table(text: str, tokenizers: list[tuple[str, str, bool]], repeat: int, trials: int, max_arcs: int,
                    progress) -> Results:
    res = Results()
    table = Table(
        "paragraph", f"Sec. 6.4.1: canonical tokenization of a {len(text)}-character paragraph, time per trial",
        repeat,
        [("tokenizer", "tokenizer", "text"), ("vocab", "vocab", "int"), ("pretokens", "pre-tokens", "int"),
         ("tokens", "tokens", "int"), ("hf", "HF encode", "time"), ("implicit", "automaton (implicit)", "time"),
         ("eq5", "automaton (Eq. 5)", "time"), ("slowdown", "implicit/HF", "ratio"),
         ("equal", "= HF", "bool")],
        inputs={"paragraph": text, "chars": len(text), "trials": trials},
        plot={"x": "vocab", "y": ["hf", "implicit", "eq5"], "ylabel": "time per trial (s)", "log": True,
              "where": "trained"},
    )
    for name, path, trained in tokenizers:
        progress(f"paragraph: {name} ...")
        via = ViaAutomaton(path, max_arcs, progress, name)
        expected = via.hf.encode(text, add_special_tokens=False).ids
        row = {"tokenizer": name, "trained": trained, "vocab": via.model.vocab_size,
               "pretokens": len(pretokenize(via.hf, text)), "tokens": len(expected), "abpe": via.abpe_note}

        def batch(fn):
            return lambda: [fn(text) for _ in range(trials)]

        cell, _ = common.measure(repeat, batch(lambda s: via.hf.encode(s, add_special_tokens=False).ids), warmup=True)
        row["hf"] = common.per_unit(cell, trials)
        got = via.implicit(text)
        cell, _ = common.measure(repeat, batch(via.implicit))
        row["implicit"] = common.per_unit(cell, trials)
        equal = got == expected
        res.check(f"paragraph {name}: automaton (implicit) = HF encode", equal,
                  f"{len(got)} vs {len(expected)} tokens"
                  + ("" if equal else f", first difference at {_diff(got, expected)}"))
        if via.abpe is not None:
            got5 = via.eq5(text)
            cell, _ = common.measure(repeat, batch(via.eq5))
            row["eq5"] = common.per_unit(cell, trials)
            res.check(f"paragraph {name}: automaton (Eq. 5) = HF encode", got5 == expected,
                      f"{len(got5)} vs {len(expected)} tokens")
            equal = equal and got5 == expected
        else:
            row["eq5"] = common.skipped(via.abpe_note)
        row["equal"] = equal
        row["slowdown"] = common.ratio(row["implicit"], row["hf"])
        table.rows.append(row)
    table.notes += [
        f"Time per trial: each run tokenizes the paragraph {trials} times; median of {repeat} runs. HF: "
        "Tokenizer.encode without special tokens (its word cache is warm). Automaton: HF's normalizer and "
        "pre-tokenizer; the pre-tokens joined by a boundary label form one string acceptor A; its lattice "
        "MIN(PROJ(A∘T)) (T with a boundary loop), and the canonical path via the implicit A_BPE (depth-first) or "
        "the explicit A_BPE (Eq. 5, where it fits under --max-arcs); no word cache.",
        "= HF: the automaton's token ids equal HF's for every method run.",
    ]
    res.tables.append(table)
    return res


def _diff(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
