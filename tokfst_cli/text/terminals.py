"""Terminal labels (Koo et al. 2024 Sec. 2.5.1): wildcards as precomputed token masks instead of arcs.

A *kind* is a character class (:data:`KINDS`); its tokens M_K are those whose surface is one or
more whole UTF-8 characters of the class. A *terminal* (:class:`Terminal`) is a kind and a
length condition on the token's characters: exactly ``lo`` (``period`` 0), or ``lo``,
``lo + period``, ... One arc labelled by a terminal stands for one token of its mask.

Two sources:

* wildcard loops, found in the byte automaton A itself (:func:`mark`): a state q is
  *K-uniform* when every character of K leads from q to one state next_K(q). From such a q a
  token of M_K with l characters lands at next_K^l(q) whenever the states passed are
  K-uniform. Following that chain until it cycles (``[^"]*``: a loop) or ends in a state
  where no character of K goes on (``[^"]{0,64}"``: a bounded string), every token of M_K
  from q is either covered by one terminal arc per length class, or has no path at all. So
  the terminal arcs replace M_K's arcs at q *exactly*: the expanded automaton accepts the
  same token sequences, straddling tokens (``."`` ending a string) stay explicit arcs, and
  no token is both explicit and in a terminal's mask at q.
* the token-level groups ``(?P<TEXT_TOKEN>)`` and ``(?P<PARAGRAPH_TOKEN>)`` of a regex: one
  token of the kind's mask, any length (Koo et al. 2024's meaning; A carries a placeholder label).
  Here an explicit arc may also allow a token of the mask; explicit arcs take precedence,
  then terminals in label order (Koo et al. 2024's rule).

Promotion (``promote.promote``) composes A'' (this module's :func:`mark`: A plus a self-loop
per token *signature*, the set of kinds a token belongs to, left out at K-states for
signatures holding K, plus the terminal arcs) with T'' (``lexicon.build(signed=True)``: every
token spelled after its signature label, terminals passed through), so the covered tokens'
trie branches are never entered.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np
import pynini

from tokfst_cli.automata import utf8
from tokfst_cli.automata.arrays import fst_arrays, fst_from_arrays, unique
from tokfst_cli.tokenizer.model import TokenizerModel

_ALL = [(0, utf8.MAX_CODE_POINT)]
KINDS: dict[str, list[tuple[int, int]]] = {  # label order = precedence order
    "TEXT": utf8.remove_surrogates(_ALL),
    "PARAGRAPH": utf8.complement([(0x0A, 0x0A)]),
    "JSON_STRING": utf8.complement([(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]),
    "UNQUOTED": utf8.complement([(0x00, 0x1F), (0x23, 0x23), (0x3A, 0x3A)]),
    "WORD": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
    "ALNUM": [(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)],
    "HOST": [(0x2D, 0x2D), (0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)],
    "ALPHA": [(0x41, 0x5A), (0x61, 0x7A)],
    "LOWER": [(0x61, 0x7A)],
    "UPPER": [(0x41, 0x5A)],
    "HEX": [(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)],
    "DIGITS": [(0x30, 0x39)],
}  # each kind holds every non-ASCII character or none
KIND_NAMES = tuple(KINDS)
TOKEN_GROUPS = {"TEXT_TOKEN": "TEXT", "PARAGRAPH_TOKEN": "PARAGRAPH"}  # regex group -> kind (one token)
PLACEHOLDER_BASE = 1000  # A's label for the token-level group of kind k: PLACEHOLDER_BASE + k
SIGNATURE_BASE = 1 << 12  # A''/T'' label of the signature s (a bit set over KINDS)
SECOND_BASE = 1 << 13  # A''/T'' label of the signature of a token's rest after its first (ASCII) character
TERMINAL_BASE = 1 << 14  # A''/T'' label of the artifact's terminal j
_NAME = re.compile(r"<(\w+):(\d+)(\+(?:(\d+)n)?)?(?:@U\+([0-9A-F]{4}))?(?:!(\w+))?>\Z")


@dataclass(frozen=True, order=True)
class Terminal:
    """One token of kind ``kind`` with ``lo`` characters (``period`` 0) or lo, lo + p, ...; with a
    ``prefix``: the token is that ASCII character and then such characters (the prefix not
    counted); ``unless``: tokens of that kind's mask left out."""

    kind: str
    lo: int
    period: int = 0  # 0: exactly lo characters; p: lo, lo + p, lo + 2p, ...
    prefix: str = ""
    unless: str = ""

    @property
    def name(self) -> str:
        length = (f"{self.lo}" if self.period == 0 else f"{self.lo}+" if self.period == 1
                  else f"{self.lo}+{self.period}n")
        prefix = f"@U+{ord(self.prefix):04X}" if self.prefix else ""
        return f"<{self.kind}:{length}{prefix}{'!' + self.unless if self.unless else ''}>"

    @classmethod
    def parse(cls, name: str) -> Terminal | None:
        m = _NAME.match(name)
        if m is None or m.group(1) not in KINDS or (m.group(6) and m.group(6) not in KINDS):
            return None
        period = 0 if not m.group(3) else int(m.group(4) or 1)
        return cls(m.group(1), int(m.group(2)), period, chr(int(m.group(5), 16)) if m.group(5) else "",
                   m.group(6) or "")

    def mask(self, model: TokenizerModel) -> np.ndarray:
        """Bool over token ids: the tokens this terminal stands for."""
        c = classes(model)
        k = KIND_NAMES.index(self.kind)
        if self.prefix:
            chars, member = c.chars - 1, c.rest[k] & (c.first == ord(self.prefix))
        else:
            chars, member = c.chars, c.member[k]
        length = chars >= self.lo if self.period else chars == self.lo
        if self.period > 1:
            length &= (chars - self.lo) % self.period == 0
        out = member & length
        if self.unless:
            out &= ~c.member[KIND_NAMES.index(self.unless)]
        return out


@dataclass
class Classes:
    """Per token id: kind membership of the whole token and of its rest after an ASCII first character."""

    member: np.ndarray  # (kinds, tokens) bool
    rest: np.ndarray  # (kinds, tokens) bool: 2+ characters, the first ASCII, the rest in the kind
    chars: np.ndarray  # characters (0 where not whole UTF-8 characters)
    first: np.ndarray  # the first character's code point if ASCII and 2+ characters, else -1


def classes(model: TokenizerModel) -> Classes:
    """The :class:`Classes` of the model's tokens, computed once per model."""
    got = model.__dict__.get("_terminal_classes")
    if got is None:
        n = model.vocab_size
        got = Classes(np.zeros((len(KINDS), n), bool), np.zeros((len(KINDS), n), bool),
                      np.zeros(n, np.int64), np.full(n, -1, np.int64))
        excluded = [_excluded_ascii(k) | (set() if wide(k) else {0x80}) for k in KINDS]  # 0x80: any non-ASCII
        for tid, surface in model.lexicon_items():
            try:
                text = surface.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if not text:
                continue
            got.chars[tid] = len(text)
            cps = {min(ord(ch), 0x80) for ch in text}
            rest = {min(ord(ch), 0x80) for ch in text[1:]} if len(text) > 1 and ord(text[0]) < 0x80 else None
            if rest is not None:
                got.first[tid] = ord(text[0])
            for k, bad in enumerate(excluded):
                got.member[k, tid] = not (cps & bad)
                got.rest[k, tid] = rest is not None and not (rest & bad)
        model.__dict__["_terminal_classes"] = got
    return got


def _bits(member: np.ndarray) -> np.ndarray:
    return (member.astype(np.int64) << np.arange(len(KINDS))[:, None]).sum(axis=0)


def signatures(model: TokenizerModel) -> tuple[np.ndarray, np.ndarray]:
    """Per token id, the bit sets of the kinds holding the token, and holding its rest after an
    ASCII first character (0: no such rest)."""
    c = classes(model)
    return _bits(c.member), _bits(c.rest)


@functools.cache
def _excluded_ascii(kind: str) -> frozenset[int]:
    return frozenset(cp for lo, hi in utf8.complement(KINDS[kind]) if lo < 0x80 for cp in range(lo, min(hi, 0x7F) + 1))


def wide(kind: str) -> bool:
    """Does the kind hold the non-ASCII characters (all of them)?"""
    return KINDS[kind][-1][1] >= 0x80


class _Table:
    """A's byte transitions: arcs grouped by state (CSR), dense rows of 256 made on demand."""

    def __init__(self, a: pynini.Fst):
        arr = self.arrays = fst_arrays(a)
        self.n = len(arr.final)
        byte = arr.ilabel <= 256
        self.src, self.byte, self.dst = arr.src[byte], arr.ilabel[byte] - 1, arr.nextstate[byte]
        self.offsets = np.zeros(self.n + 1, np.int64)
        np.cumsum(np.bincount(self.src, minlength=self.n), out=self.offsets[1:])
        self._rows: dict[int, np.ndarray] = {}

    def row(self, q: int) -> np.ndarray:
        got = self._rows.get(q)
        if got is None:
            got = self._rows[q] = np.full(256, -1, np.int64)
            b, e = self.offsets[q], self.offsets[q + 1]
            got[self.byte[b:e]] = self.dst[b:e]
        return got

    def same_on(self, chars: list[int]) -> np.ndarray:
        """The states whose arcs on the bytes ``chars`` all exist and share one target, or all miss."""
        on = np.isin(self.byte, chars)
        count = np.bincount(self.src[on], minlength=self.n)
        big = np.full(self.n, -1, np.int64)
        small = np.full(self.n, 1 << 62, np.int64)
        np.maximum.at(big, self.src[on], self.dst[on])
        np.minimum.at(small, self.src[on], self.dst[on])
        return np.flatnonzero(((count == len(chars)) & (big == small)) | (count == 0))

    def ends(self, q: int, seqs: list) -> set[int]:
        """The states (-1: none) where the characters of the byte-range sequences lead from q."""
        out: set[int] = set()
        for seq in seqs:
            cur = [q]
            for lo, hi in seq:
                cur = unique(np.concatenate([self.row(s)[lo:hi + 1] for s in cur]))
                if cur[0] < 0:
                    out.add(-1)
                    cur = cur[1:].tolist()
                    if not cur:
                        break
                else:
                    cur = cur.tolist()
            out.update(cur)
            if len(out) > 1:
                break
        return out


@dataclass
class Marked:
    """A'' for promotion with terminals: its FST and the artifact's terminals (label j)."""

    fst: pynini.Fst
    terminals: list[Terminal]


class _Kind:
    """One kind's character tests on A: K-uniform states and their next_K, and dead states."""

    def __init__(self, table: _Table, kind: str):
        self.table, self.kind = table, kind
        self.ascii = sorted(set(range(128)) - _excluded_ascii(kind))
        # [] if not wide
        self.seqs = list(utf8.sequences([(max(lo, 0x80), hi) for lo, hi in KINDS[kind] if hi >= 0x80]))
        self.candidates = table.same_on(self.ascii)

    def uniform(self) -> dict[int, int]:
        """q -> next_K(q) for the K-uniform states."""
        out: dict[int, int] = {}
        for q in self.candidates.tolist():
            first = int(self.table.row(q)[self.ascii[0]])
            if first >= 0 and self.table.ends(q, self.seqs) | {first} == {first}:
                out[q] = first
        return out

    def dead(self, q: int) -> bool:
        """No character of K goes on from q."""
        return int(self.table.row(q)[self.ascii].max()) < 0 and self.table.ends(q, self.seqs) <= {-1}


def _chain(q: int, nxt: dict[int, int], kind: _Kind, longest: int) -> list[tuple[tuple[int, int], int]] | None:
    """((lo, period), target) terminal arcs at the K-uniform q, or None when q cannot be blocked:
    the chain reaches, within ``longest`` characters, a state where some characters of K go on
    and others do not."""
    seen, path = {q: 0}, [q]
    while len(path) - 1 < longest:
        status = nxt.get(path[-1])
        if status is None:
            if kind.dead(path[-1]):
                break
            return None
        if status in seen:  # a cycle: lengths from i0 on repeat with the period
            i0, period = seen[status], len(path) - seen[status]
            arcs = [((ell, 0), path[ell]) for ell in range(1, i0)]
            for r in range(period):
                lo = i0 + r if i0 + r > 0 else period
                arcs.append(((lo, period), path[i0 + r]))
            return [x for x in arcs if x[0][0] <= longest]
        seen[status] = len(path)
        path.append(status)
    return [((ell, 0), path[ell]) for ell in range(1, len(path))]


def _blockable(model: TokenizerModel, table: _Table) -> dict[int, tuple[str, list]]:
    """Per state q, the kind whose tokens terminal arcs replace at q and those arcs (``_chain``):
    among the kinds for which q is K-uniform and blockable, the one with the most tokens."""
    c = classes(model)
    sizes = c.member.sum(axis=1)
    chosen: dict[int, tuple[str, list]] = {}
    for k in np.argsort(-sizes, kind="stable").tolist():
        if sizes[k] == 0:
            continue
        longest = int(c.chars[c.member[k]].max())
        tests = _Kind(table, KIND_NAMES[k])
        nxt = tests.uniform()
        for q in nxt:
            if q not in chosen:
                arcs = _chain(q, nxt, tests, longest)
                if arcs is not None:
                    chosen[q] = (KIND_NAMES[k], arcs)
    return chosen


@functools.cache
def _subset(kind: str, of: str) -> bool:
    return _excluded_ascii(of) <= _excluded_ascii(kind) and (wide(of) or not wide(kind))


def mark(model: TokenizerModel, a: pynini.Fst, loops: bool = True) -> Marked | None:
    """A'' (see the module docstring), or None when A has neither wildcard loops nor token groups.

    At a blocked state q of kind K: one arc per length class of K's tokens (``_chain``), no
    self-loop on the signatures holding K. Where q's chain cycles (a loop: one or a few length
    classes), no self-loop either on the rest-signatures holding K (a token whose first
    character led into q), and a state p with an ASCII arc c into q gets one arc per length
    class for the tokens c + (K's tokens), less those already blocked at p itself. (Into a
    bounded chain, such tokens stay arcs: a prefixed label per exact length would multiply.)"""
    table = _Table(a)
    chosen = _blockable(model, table) if loops else {}
    arr = table.arrays
    placeholders = arr.ilabel >= PLACEHOLDER_BASE
    if not chosen and not placeholders.any():
        return None
    terminals: dict[Terminal, int] = {}
    labels: dict[tuple, int] = {}  # Terminal fields -> its label, or 0 for an empty mask
    new_src: list[int] = []
    new_lab: list[int] = []
    new_dst: list[int] = []

    def label(key: tuple) -> int:
        got = labels.get(key)
        if got is None:
            t = Terminal(*key)
            got = labels[key] = TERMINAL_BASE + terminals.setdefault(t, len(terminals)) if t.mask(model).any() else 0
        return got

    def add(q: int, key: tuple, target: int) -> None:
        got = label(key)
        if got:
            new_src.append(q), new_lab.append(got), new_dst.append(target)

    ilabel = arr.ilabel.copy()
    for i in np.flatnonzero(placeholders).tolist():
        t = Terminal(KIND_NAMES[int(arr.ilabel[i]) - PLACEHOLDER_BASE], 1, 1)
        ilabel[i] = TERMINAL_BASE + terminals.setdefault(t, len(terminals))
    src, lab, dst = [arr.src, new_src], [ilabel, new_lab], [arr.nextstate, new_dst]
    kind_bit = np.full(table.n, -1, np.int64)
    loop_bit = np.full(table.n, -1, np.int64)  # blocked states whose chain cycles
    for q, (kind, arcs) in sorted(chosen.items()):
        kind_bit[q] = KIND_NAMES.index(kind)
        if any(period for (_, period), _ in arcs):
            loop_bit[q] = kind_bit[q]
        for (lo, period), target in arcs:
            add(q, (kind, lo, period), target)
    into = np.flatnonzero((table.byte < 0x80) & (loop_bit[table.dst] >= 0))
    for p, b, q in zip(table.src[into].tolist(), table.byte[into].tolist(), table.dst[into].tolist()):
        kind, arcs = chosen[q]
        own = KIND_NAMES[kind_bit[p]] if kind_bit[p] >= 0 else ""
        unless = own if own and b not in _excluded_ascii(own) else ""
        if unless and _subset(kind, unless):
            continue  # every such token is one of p's own kind, blocked at p
        for (lo, period), target in arcs:
            add(p, (kind, lo, period, chr(b), unless), target)
    firsts, rests = signatures(model)
    ids = [tid for tid, _ in model.lexicon_items()]
    sigs = sorted(set(firsts[ids].tolist()))
    states = np.arange(table.n, dtype=np.int64)
    for base, values, bits in ((SIGNATURE_BASE, sigs, kind_bit),
                               (SECOND_BASE, sorted(set(rests[ids].tolist()) - {0}), loop_bit)):
        for s_ in values:
            keep = (bits < 0) | ((s_ >> np.maximum(bits, 0)) & 1 == 0)
            src.append(states[keep]), lab.append(np.full(int(keep.sum()), base + s_)), dst.append(states[keep])
    s_, l_, d_ = (np.concatenate([np.asarray(x, np.int64) for x in v]) for v in (src, lab, dst))
    fst = fst_from_arrays(table.n, arr.start, arr.final, s_, l_, l_, d_)
    return Marked(fst, sorted(terminals, key=terminals.get))


def placeholder_kinds(a: pynini.Fst) -> list[str]:
    """The kinds of the token-level groups (placeholder labels) in byte automaton A: read off its
    input symbol table, where ``regex.compile_regex`` names each placeholder it uses (no arc is read)."""
    table = a.input_symbols()
    if table is None:
        return []
    return [k for i, k in enumerate(KIND_NAMES) if table.member(PLACEHOLDER_BASE + i)]


def terminals_of(table: pynini.SymbolTable | None, vocab_size: int) -> list[Terminal]:
    """The terminals named in a token symbol table past the vocabulary (ids vocab_size + 1 + j)."""
    out: list[Terminal] = []
    if table is None:
        return out
    j = 0
    while table.member(vocab_size + 1 + j):
        t = Terminal.parse(table.find(vocab_size + 1 + j))
        if t is None:
            break
        out.append(t)
        j += 1
    return out


def with_names(table: pynini.SymbolTable, vocab_size: int, terminals: list[Terminal]) -> pynini.SymbolTable:
    """``table`` (tokens) with the terminals' names at ids vocab_size + 1 + j."""
    for j, t in enumerate(terminals):
        table.add_symbol(t.name, vocab_size + 1 + j)
    return table
