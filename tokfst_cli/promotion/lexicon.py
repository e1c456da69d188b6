"""Stage S's transducer T: characters to subwords (Cognetta & Okazaki 2024 Sec. 5.1, Alg. 6; Koo et al. 2024 Sec. 2.3).

A byte trie over the token surfaces, closed under concatenation: reading the last byte of a
token emits the token and returns to the root, which is the start and only final state. T
is epsilon-free and input-deterministic up to the emit/continue choice, so for a deterministic
A, rmepsilon(PROJ(A o T)) is deterministic (Lemma 1) and needs no determinization.
"""

from __future__ import annotations

import pynini

from tokfst_cli.automata.fst_io import cached_fst
from tokfst_cli.automata.symbols import MARKER, byte_table, text_byte_table, token_table
from tokfst_cli.text.terminals import SECOND_BASE, SIGNATURE_BASE, signatures
from tokfst_cli.tokenizer.model import TokenizerModel


def build(model: TokenizerModel, marked: bool = False, signed: bool = False) -> pynini.Fst:
    """T for every token that has a surface (added/special tokens are left out).

    ``marked``: T_M over the *model text* (``TokenizerModel.model_items``), which also passes the
    pre-token boundary ``symbols.MARKER`` through as the label :func:`marker_label` (stage P's
    output, Pitfalls 2025 Sec. 3.1). ``signed``: T'' for terminal labels: each token is read after
    its signature label (``terminals.signatures``), one sub-trie per signature."""
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    root = f.add_state()
    f.set_start(root)
    f.set_final(root)
    children: dict[tuple[int, int], int] = {}
    if marked:
        f.add_arc(root, pynini.Arc(MARKER, marker_label(model), one, root))
    firsts = rests = None
    if signed:
        firsts, rests = (x.tolist() for x in signatures(model))

    def child(node: int, label: int) -> int:
        nxt = children.get((node, label))
        if nxt is None:
            nxt = children[(node, label)] = f.add_state()
            f.add_arc(node, pynini.Arc(label, 0, one, nxt))
        return nxt

    for tid, surface in (model.model_items() if marked else model.lexicon_items()):
        node = root if firsts is None else child(root, SIGNATURE_BASE + firsts[tid])
        last = len(surface) - 1
        for k, b in enumerate(surface):
            if k == last:
                f.add_arc(node, pynini.Arc(b + 1, tid + 1, one, root))
                break
            node = child(node, b + 1)
            if k == 0 and rests is not None and rests[tid]:
                node = child(node, SECOND_BASE + rests[tid])
    f.arcsort("ilabel")
    f.set_input_symbols(text_byte_table() if marked else byte_table())
    f.set_output_symbols(token_table(model))
    return f


def marker_label(model: TokenizerModel) -> int:
    """The label of the pre-token boundary among token labels: one past the last token's."""
    return model.vocab_size + 1


def lexicon(model: TokenizerModel, cache: bool = True, marked: bool = False, signed: bool = False) -> pynini.Fst:
    """T (or T_M, or T''), built once per tokenizer and cached on disk by fingerprint."""
    if not cache or not model.fingerprint:
        return build(model, marked, signed)
    name = "model-lexicon" if marked else "signed-lexicon-4" if signed else "lexicon"
    return cached_fst(f"{name}-{model.fingerprint}", lambda: build(model, marked, signed))
