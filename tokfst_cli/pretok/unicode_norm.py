"""Stage P's Unicode normalizers (Pitfalls 2025 Sec. 3.1): HF's NFC, NFD, NFKC and NFKD, exactly.

Each is modelled as the identity on its normal-form language F = {x : HF's normalizer leaves x
unchanged}, a minimal DFA over UTF-8 bytes. That is exact on F, and the normalizer's image over
all texts is F (it is idempotent), so P's image stays exact; a regex with texts outside F is
refused (``image.OutsideDomain``), never approximated.

F follows the algorithm of HF's Rust crate: decompose every character (d(c): canonical for
NFD/NFC, compatibility for NFKD/NFKC), sort each run of non-starters stably by combining class
(ccc), and for NFC/NFKC compose (C: each character with the last starter, unless an uncomposed
character of ccc 0 or >= its own lies between). With "stable" = unchanged alone:

* NFD/NFKD: x is in F iff every character is stable and no two adjacent marks a, b have
  ccc(a) > ccc(b) > 0.
* NFC/NFKC: x is in F iff every character is stable, marks are in that canonical order, and
  (i) no starter S followed by marks B* (each ccc(B) < ccc(c): c is not blocked) then a mark c
  where c composes with S's composee at that point: d(S)'s starters composed with d(S)'s trailing
  marks of ccc <= ccc(c), which sort before c; (ii) no starter S next to a starter c where S
  composes with d(c)'s first character (Hangul L+V, LV+T, the Indic two-part vowels).
  Why: while no mark of x composes, d(S)'s trailing marks are never blocked (x's marks before
  them have a smaller ccc) and compose as in S alone, so C writes S and x's marks unchanged; once
  a mark of x composes, the marks written lack it, and no trailing mark of d(S) can stand in for
  it (an equal one sorts first). NFKC's F is NFC's on NFKC-stable characters (their
  compatibility and canonical decompositions are equal, checked).

F's states are (ccc of the last mark, the marks that would still compose, the starters that would
compose next): 4,920 for NFC, 24,715 over bytes; NFD's 55 (:func:`char_dfa`, then
:mod:`.classdfa`). Every table is read off ``tokenizers`` (HF's crate has an older Unicode than
Python's ``unicodedata``): one NFKD probe over all scalar values gives the characters it leaves
unchanged and the non-starters; the few thousand others are probed under each form; the order of
the combining classes is HF's own stable sort of all non-starters. The composition pairs are the
canonical decompositions ``unicodedata`` names (immutable across versions) for the composites HF
knows, each checked against HF's NFC, and C(d(S)) == S is checked for every composite S. Tables
and DFAs are cached on disk per tokenizers version; ``tests/pretok/test_unicode_norm.py``
compares F with HF on every table entry and on generated texts.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pynini

from tokfst_cli.automata.fst_io import cached_fst
from tokfst_cli.errors import InputError, UsageError
from tokfst_cli.pretok import charclass
from tokfst_cli.pretok.classdfa import to_bytes
from tokfst_cli.support import cache
from tokfst_cli.support.cache import cache_dir
from tokfst_cli.support.files import FORMAT_VERSION

FORMS = ("NFC", "NFD", "NFKC", "NFKD")
COMPOSING = ("NFC", "NFKC")
VERSION = 1  # of the construction (cache keys)
PROBE_BEFORE, PROBE_AFTER = "\u0345", "\u0334"  # ccc 240 (the largest) and 1 (the smallest)
HANGUL = (0xAC00, 0xD7A3)


class UnreadableTables(InputError):
    """HF's normalization tables did not read back consistently (refused, never approximated)."""

    def __init__(self, form: str, detail: str):
        super().__init__(f"the tokenizer's normalizer {form} is not modelled by tokfst's preprocessing P: the "
                         f"installed tokenizers' Unicode tables read back inconsistently ({detail})",
                         "use another version of tokenizers", kind="normalizer", name=form)


@dataclass(frozen=True)
class Tables:
    """HF's normalization data: stable characters per form, combining-class ranks, decompositions, pairs."""

    stable: dict[str, list[tuple[int, int]]]  # form -> ranges of characters it leaves unchanged alone
    rank: dict[int, int]  # NFD-stable non-starter -> rank of its combining class (1 = smallest)
    decomposition: dict[int, tuple[int, ...]]  # NFC-stable composite -> its canonical decomposition
    pairs: dict[tuple[int, int], int]  # (composee, next character) -> primary composite


# ---- reading the tables off HF ----------------------------------------------------------------
def _normalize(form: str, texts: list[str]) -> list[str]:
    from tokenizers import normalizers as nm  # deferred: HF's tokenizers only where the oracle is asked (start-up)

    out = getattr(nm, form)().normalize_str("\0".join(texts)).split("\0")
    if len(out) != len(texts):
        raise UnreadableTables(form, "a probe lost its separators")
    return out


def _probe_all() -> tuple[np.ndarray, np.ndarray]:
    """NFKD of PROBE_BEFORE c PROBE_AFTER for every scalar c but NUL: (NFKD-stable, non-starter) flags.

    A stable c is in its output; it is reordered iff 0 < ccc(c) (the probes' classes are 240 and 1)."""
    from tokenizers import normalizers as nm  # deferred: HF's tokenizers only where the oracle is asked (start-up)

    scalars = charclass.MAX_CP + 1 - (charclass.SURROGATES[1] - charclass.SURROGATES[0] + 1)
    cps = charclass._code_point(np.arange(1, scalars))  # no NUL: it is the separator
    grid = np.empty((len(cps), 4), np.uint32)
    grid[:, 0], grid[:, 1], grid[:, 2], grid[:, 3] = ord(PROBE_BEFORE), cps, ord(PROBE_AFTER), 0
    probe = grid.tobytes().decode("utf-32-le")
    out = nm.NFKD().normalize_str(probe).split("\0")
    if len(out) != len(cps) + 1:
        raise UnreadableTables("NFKD", "a probe lost its separators")
    same = np.fromiter((a == b for a, b in zip(out, probe.split("\0"))), bool, len(cps))
    stable, mark = same.copy(), np.zeros(len(cps), bool)
    for i in np.flatnonzero(~same).tolist():
        c = chr(cps[i])
        if c in out[i]:
            stable[i] = mark[i] = True
    return cps, np.c_[stable, mark]


def _ranks(marks: list[str]) -> dict[int, int]:
    """Combining-class ranks of NFD-stable non-starters: HF's stable sort of all of them, then
    NFD(b a) for each neighbour pair a <= b tells equal from smaller."""
    run = _normalize("NFD", ["".join(marks)])[0]
    if sorted(run) != sorted(marks):
        raise UnreadableTables("NFD", "reordering the non-starters changed them")
    swapped = [o != run[i + 1] + run[i] for i, o in
               enumerate(_normalize("NFD", [run[i + 1] + run[i] for i in range(len(run) - 1)]))]
    rank, r = {}, 1
    for i, c in enumerate(run):
        r += bool(i and swapped[i - 1])
        rank[ord(c)] = r
    return rank


def _hangul_pair(s: int) -> tuple[int, int]:
    i = s - HANGUL[0]
    if i % 28:
        return s - i % 28, 0x11A7 + i % 28  # LV + T
    return 0x1100 + i // 588, 0x1161 + (i % 588) // 28  # L + V


def _read_off() -> Tables:
    """Probe HF: every scalar once (NFKD), then the few thousand that NFKD changes under each form."""
    cps, flags = _probe_all()
    k_stable, k_mark = flags[:, 0], flags[:, 1]
    changed = [chr(c) for c in cps[~k_stable].tolist()]  # NFD/NFC/NFKC can only change these
    nfd, nfc, nfkc = (_normalize(f, changed) for f in ("NFD", "NFC", "NFKC"))
    d_stable = [c for c, o in zip(changed, nfd) if o == c]
    d_marks = [c for c, o in zip(d_stable, _normalize("NFD", [PROBE_BEFORE + c + PROBE_AFTER for c in d_stable]))
               if o != PROBE_BEFORE + c + PROBE_AFTER]
    rank = _ranks([chr(c) for c in cps[k_mark].tolist()] + d_marks)
    unstable = {"NFKD": set(changed), **{f: {c for c, o in zip(changed, out) if o != c}
                                         for f, out in (("NFD", nfd), ("NFC", nfc), ("NFKC", nfkc))}}
    stable = {f: charclass.complement(charclass.ranges_of(np.array(sorted(map(ord, u)), np.int64)))
              for f, u in unstable.items()}
    composites = [c for c, o in zip(changed, nfd) if o != c and c not in unstable["NFC"]]
    is_composite = set(composites)
    decomposition = {ord(c): tuple(map(ord, o)) for c, o in zip(changed, nfd) if c in is_composite}
    kc = [c for c in changed if c not in unstable["NFKC"]]  # NFKC-stable, NFKD-unstable: composites only
    if not is_composite.issuperset(kc) or [decomposition[ord(c)] for c in kc] != [
            tuple(map(ord, o)) for o in _normalize("NFKD", kc)]:
        raise UnreadableTables("NFKC", "an NFKC-stable character's compatibility and canonical decompositions differ")
    pairs = {}
    for c in composites:
        s = ord(c)
        if HANGUL[0] <= s <= HANGUL[1]:
            pairs[_hangul_pair(s)] = s
            continue
        dec = unicodedata.decomposition(c).split()
        if len(dec) != 2 or dec[0].startswith("<"):
            raise UnreadableTables("NFC", f"no canonical pair for U+{s:04X}")
        pairs[int(dec[0], 16), int(dec[1], 16)] = s
    tables = Tables(stable, rank, decomposition, pairs)
    _check(tables)
    return tables


def _check(t: Tables) -> None:
    """Every pair composes under HF's NFC; every composite's decomposition composes back to it
    (the crate's algorithm, :func:`compose_run`); decompositions start with a starter."""
    keys = list(t.pairs)
    for (a, b), o in zip(keys, _normalize("NFC", [chr(a) + chr(b) for a, b in keys])):
        if o != chr(t.pairs[a, b]):
            raise UnreadableTables("NFC", f"U+{a:04X} U+{b:04X} does not compose to U+{t.pairs[a, b]:04X}")
    for s, d in t.decomposition.items():
        if d[0] in t.rank or compose_run(t, d) != [s]:
            raise UnreadableTables("NFC", f"U+{s:04X} does not compose back from its decomposition")


def compose_run(t: Tables, chars: tuple[int, ...]) -> list[int]:
    """The crate's canonical composition of a canonically ordered decomposed text."""
    out: list[int] = []
    composee, last = None, None  # last: rank of the last uncomposed mark since the composee
    marks: list[int] = []
    for ch in chars:
        r = t.rank.get(ch, 0)
        if composee is None:
            if r:
                out.append(ch)
            else:
                composee = ch
            continue
        if last is None or last < r:
            new = t.pairs.get((composee, ch))
            if new is not None:
                composee = new
                continue
        if r == 0:
            out += [composee] + marks
            composee, last, marks = ch, None, []
            continue
        marks.append(ch)
        last = r
    return out + ([composee] if composee is not None else []) + marks


def _cache_path():
    import tokenizers  # deferred: HF's tokenizers only where the oracle is asked (start-up)


    return cache_dir() / f"v{FORMAT_VERSION}-pretok-unicode-{tokenizers.__version__}-{VERSION}.json"


@lru_cache(maxsize=None)
def tables() -> Tables:
    """HF's tables, read off ``tokenizers`` (cached on disk per tokenizers version)."""
    path = _cache_path()
    data = cache.load(path)
    if data is not None:
        try:
            raw = json.loads(data)
            return Tables({f: [tuple(r) for r in v] for f, v in raw["stable"].items()},
                          {int(k): v for k, v in raw["rank"].items()},
                          {int(k): tuple(v) for k, v in raw["decomposition"].items()},
                          {(a, b): r for a, b, r in raw["pairs"]})
        except (ValueError, KeyError, TypeError):
            pass
    t = _read_off()
    cache.store(path, json.dumps({"stable": t.stable, "rank": t.rank, "decomposition": t.decomposition,
                                  "pairs": [[a, b, r] for (a, b), r in t.pairs.items()]}).encode())
    return t


# ---- F: a DFA over character classes, then over UTF-8 bytes ------------------------------------
@dataclass(frozen=True)
class Starter:
    """What a starter S does to what follows: the marks that would compose with S's composee when
    unblocked (``danger``), the starters that would compose with S next to it (``left_of``: first
    characters of their decompositions) and the first character of S's own decomposition if some
    starter composes with it (``first``)."""

    danger: frozenset[int] = frozenset()
    left_of: frozenset[int] = frozenset()
    first: int | None = None


def _starters(t: Tables) -> dict[int, Starter]:
    """The starters that take part in a composition (every other starter is inert)."""
    by_first: dict[int, list[int]] = {}
    for a, b in t.pairs:
        by_first.setdefault(a, []).append(b)
    chains: dict[int, list[tuple[int, int]]] = {k: [(k, 1)] for k in by_first}  # [(composee, from rank)]
    for s, d in t.decomposition.items():
        last = max(i for i, c in enumerate(d) if c not in t.rank)
        head = compose_run(t, d[: last + 1])
        if len(head) != 1:
            raise UnreadableTables("NFC", f"U+{s:04X}'s starters do not compose alone")
        chain = [(head[0], 1)]
        for m in d[last + 1:]:
            chain.append((t.pairs[chain[-1][0], m], t.rank[m]))
        chains[s] = chain
    seconds = {b for _, b in t.pairs if b not in t.rank}
    out = {}
    for s, chain in chains.items():
        danger = set()
        for j, (k, lo) in enumerate(chain):
            hi = chain[j + 1][1] - 1 if j + 1 < len(chain) else 1 << 30
            danger.update(c for c in by_first.get(k, ()) if c in t.rank and lo <= t.rank[c] <= hi)
        left_of = frozenset(c for c in by_first.get(s, ()) if c not in t.rank)
        first = t.decomposition.get(s, (s,))[0]
        out[s] = Starter(frozenset(danger), left_of, first if first in seconds else None)
    for s in seconds:
        out.setdefault(s, Starter(first=s))
    return {s: v for s, v in out.items() if v != Starter()}


def char_dfa(form: str, composing: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """F over character classes: (delta[state, class] or -1, class of every code point or -1).

    A state is (rank of the last character if a mark else 0, the marks that would compose if they
    came next, the starters that would compose with the previous character); all are final.
    ``composing=False``: stable characters in canonical order only (a superset of NFC's F)."""
    t = tables()
    stable = np.zeros(charclass.MAX_CP + 1, bool)
    for lo, hi in t.stable[form]:
        stable[lo:hi + 1] = True
    starters = _starters(t) if composing and form in COMPOSING else {}
    composable = set().union(*(s.danger for s in starters.values()))
    signature: dict[object, int] = {("starter", Starter()): 0}
    cls_of = np.where(stable, 0, -1).astype(np.int32)
    for c in sorted(t.rank):
        if stable[c]:
            cls_of[c] = signature.setdefault(("mark", t.rank[c], c if c in composable else None), len(signature))
    for c, s in sorted(starters.items()):
        if stable[c] and c not in t.rank:
            cls_of[c] = signature.setdefault(("starter", s), len(signature))
    kinds = list(signature)
    ranks = sorted({k[1] for k in kinds if k[0] == "mark"})
    of_rank = {q: np.array([j for j, k in enumerate(kinds) if k[0] == "mark" and k[1] == q]) for q in ranks}
    composing = [(j, k[2]) for j, k in enumerate(kinds) if k[0] == "mark" and k[2] is not None]
    starter_kinds = [(j, k[1]) for j, k in enumerate(kinds) if k[0] == "starter"]
    ids: dict[tuple, int] = {}
    todo: list[tuple] = []

    def state(key: tuple) -> int:
        if key not in ids:
            ids[key] = len(ids)
            todo.append(key)
        return ids[key]

    state((0, frozenset(), frozenset()))
    after_starter = np.full(len(kinds), -1, np.int32)
    for j, s in starter_kinds:
        after_starter[j] = state((0, s.danger, s.left_of))
    rows: dict[int, np.ndarray] = {}
    while todo:
        key = todo.pop()
        r, danger, left_of = key
        row = after_starter.copy()
        for j, s in starter_kinds:
            if s.first is not None and s.first in left_of:
                row[j] = -1
        for q in ranks:
            if q >= r:
                row[of_rank[q]] = state((q, frozenset(d for d in danger if t.rank[d] > q), frozenset()))
        for j, c in composing:
            if c in danger:
                row[j] = -1
        rows[ids[key]] = row
    return np.stack([rows[i] for i in range(len(ids))]), cls_of


@lru_cache(maxsize=None)
def normal_form(form: str) -> pynini.Fst:
    """The minimal DFA of F = {x : HF's normalizer ``form`` leaves x unchanged} over UTF-8 bytes
    (labels byte + 1; cached on disk per tokenizers version)."""
    import tokenizers  # deferred: HF's tokenizers only where the oracle is asked (start-up)


    if form not in FORMS:
        raise UsageError(f"not a Unicode normal form: {form}")

    def make() -> pynini.Fst:
        delta, cls_of = char_dfa(form)
        return to_bytes(delta, cls_of).minimize().arcsort("ilabel")

    return cached_fst(f"pretok-{form}-{tokenizers.__version__}-{VERSION}", make)


@lru_cache(maxsize=None)
def ordered_form(form: str) -> pynini.Fst:
    """The DFA of the texts of ``form``-stable characters with marks in canonical order (NFD's F for
    NFD; for NFC a superset of F of 55 states, a quick first test of containment)."""
    delta, cls_of = char_dfa(form, composing=False)
    return to_bytes(delta, cls_of).minimize().arcsort("ilabel")
