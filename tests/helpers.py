"""Test utilities: walking, sampling and enumerating small automata; HF reference tokenization."""

from __future__ import annotations

import random
import re

import pynini
from tokenizers import Tokenizer

from tokfst_cli.text.catalogue import FOUNDATION
from tokfst_cli.tokenizer.model import SPACE_MARK, TokenizerModel, bytes_to_unicode

SIX_REGEXES = dict(FOUNDATION)  # the five fixed ones; add_words_regex adds the sixth


def add_words_regex(regexes: dict[str, str], words: list[str]) -> dict[str, str]:
    return {**regexes, "words100": "(" + "|".join(words) + ")"}


def transitions(fst: pynini.Fst) -> dict[int, dict[int, int]]:
    """state -> {label: next} of a deterministic acceptor."""
    out: dict[int, dict[int, int]] = {}
    for s in fst.states():
        d = out.setdefault(s, {})
        for arc in fst.arcs(s):
            assert arc.ilabel not in d, "automaton is not deterministic"
            d[arc.ilabel] = arc.nextstate
    return out


def finals(fst: pynini.Fst) -> set[int]:
    zero = pynini.Weight.zero(fst.weight_type())
    return {s for s in fst.states() if fst.final(s) != zero}


def accepts(fst: pynini.Fst, labels: list[int], delta=None, fin=None) -> bool:
    delta = delta if delta is not None else transitions(fst)
    fin = fin if fin is not None else finals(fst)
    s = fst.start()
    for x in labels:
        s = delta.get(s, {}).get(x)
        if s is None:
            return False
    return s in fin


def sample_paths(fst: pynini.Fst, n: int, seed: int = 0, stop: float = 0.25, max_len: int = 60) -> list[list[int]]:
    """n random accepted label sequences of a trim acceptor.

    Each step picks a uniformly random arc, or (half the time, and always past max_len) an arc
    that brings a final state closer, so every walk ends even where finals are rare.
    """
    rng = random.Random(seed)
    delta = {s: [(a.ilabel, a.nextstate) for a in fst.arcs(s)] for s in fst.states()}
    fin = finals(fst)
    dist = distance_to_final({s: [t for _, t in arcs] for s, arcs in delta.items()}, fin)
    closer = {s: [(x, t) for x, t in arcs if dist[t] < dist[s]] for s, arcs in delta.items()}
    out = []
    while len(out) < n:
        s, path = fst.start(), []
        while True:
            if s in fin and (not delta[s] or rng.random() < stop or len(path) > max_len):
                out.append(path)
                break
            greedy = s not in fin and (len(path) > max_len or rng.random() < 0.5)
            label, s = rng.choice(closer[s] if greedy else delta[s])
            path.append(label)
    return out


def distance_to_final(succ: dict[int, list[int]], fin) -> dict[int, int]:
    """Arcs from each state to the nearest final state (BFS on reversed arcs; 10**9 if none)."""
    back: dict[int, set[int]] = {}
    for s, targets in succ.items():
        for t in targets:
            back.setdefault(t, set()).add(s)
    dist = {s: 0 for s in fin}
    frontier = list(dist)
    while frontier:
        nxt = []
        for t in frontier:
            for s in back.get(t, ()):
                if s not in dist:
                    dist[s] = dist[t] + 1
                    nxt.append(s)
        frontier = nxt
    return {s: dist.get(s, 10**9) for s in succ}


def enumerate_paths(fst: pynini.Fst, limit: int = 2_000_000) -> set[tuple[int, ...]]:
    """All accepted label sequences of an acyclic acceptor."""
    delta = {s: [(a.ilabel, a.nextstate) for a in fst.arcs(s)] for s in fst.states()}
    fin = finals(fst)
    out: set[tuple[int, ...]] = set()
    stack = [(fst.start(), ())]
    while stack:
        s, path = stack.pop()
        if s in fin:
            out.add(path)
            assert len(out) <= limit
        for label, t in delta[s]:
            stack.append((t, path + (label,)))
    return out


def segmentations(text: bytes, pieces: dict[bytes, list[int]]) -> set[tuple[int, ...]]:
    """All token-id sequences whose surfaces concatenate to text (brute force DP)."""
    maxlen = max(len(p) for p in pieces)
    memo: dict[int, set[tuple[int, ...]]] = {len(text): {()}}
    for i in range(len(text) - 1, -1, -1):
        acc: set[tuple[int, ...]] = set()
        for j in range(i + 1, min(len(text), i + maxlen) + 1):
            for tid in pieces.get(text[i:j], ()):
                acc.update((tid,) + rest for rest in memo[j])
        memo[i] = acc
    return memo[0]


def count_segmentations(text: bytes, pieces: dict[bytes, list[int]]) -> int:
    maxlen = max(len(p) for p in pieces)
    ways = [0] * (len(text) + 1)
    ways[len(text)] = 1
    for i in range(len(text) - 1, -1, -1):
        ways[i] = sum(len(pieces.get(text[i:j], ())) * ways[j] for j in range(i + 1, min(len(text), i + maxlen) + 1))
    return ways[0]


def segmentation_lattice(texts: list[bytes], pieces: dict[bytes, list[int]]) -> pynini.Fst:
    """Acceptor of all segmentations of the texts (labels id + 1), built position by position."""
    maxlen = max(len(p) for p in pieces)
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    start = f.add_state()
    f.set_start(start)
    for text in texts:
        pos = [start] + [f.add_state() for _ in text]
        f.set_final(pos[-1])
        for i in range(len(text)):
            for j in range(i + 1, min(len(text), i + maxlen) + 1):
                for tid in pieces.get(text[i:j], ()):
                    f.add_arc(pos[i], pynini.Arc(tid + 1, tid + 1, one, pos[j]))
    return pynini.determinize(f.connect()).minimize()


def surface_index(model: TokenizerModel) -> dict[bytes, list[int]]:
    idx: dict[bytes, list[int]] = {}
    for tid, s in model.lexicon_items():
        idx.setdefault(s, []).append(tid)
    return idx


def spell(model: TokenizerModel, ids: list[int]) -> bytes:
    return b"".join(model.surfaces[i] for i in ids)


def hf_model_ids(hf: Tokenizer, model: TokenizerModel, text: str) -> list[int]:
    """HF's *model* tokenization of text (no normalizer), in the model's own alphabet.

    Byte-level: the text's bytes mapped through GPT-2's bytes-to-unicode; SentencePiece: spaces
    as "▁"; WordPiece: the model runs per pre-token (it sees one word at a time).
    """
    if model.style == "byte-level":
        b2u = bytes_to_unicode()
        pieces = ["".join(b2u[b] for b in text.encode("utf-8"))]
    elif model.style == "sentencepiece":
        pieces = [text.replace(" ", SPACE_MARK)]
    elif model.family == "wordpiece":
        pieces = [w for w, _ in hf.pre_tokenizer.pre_tokenize_str(text)]
    else:
        pieces = [text]
    return [t.id for p in pieces for t in hf.model.tokenize(p)]


def fullmatch(pattern: str, data: bytes) -> bool:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return re.fullmatch(pattern, text) is not None


def svg_texts(data: bytes) -> list[str]:
    """The text elements of an SVG document (what a drawing shows)."""
    import xml.etree.ElementTree as ET

    return [t.text or "" for t in ET.fromstring(data).iter("{http://www.w3.org/2000/svg}text")]


def isomorphic(a: pynini.Fst, b: pynini.Fst) -> bool:
    """The same automaton up to state numbers. OpenFst's Isomorphic alone is not enough: it maps
    a's states onto b's and can accept an a with more states than b (seen with pynini 2.1.7: a
    13-state product against its 12-state minimization), so the counts and both directions are checked."""
    return a.num_states() == b.num_states() and pynini.isomorphic(a, b) and pynini.isomorphic(b, a)
