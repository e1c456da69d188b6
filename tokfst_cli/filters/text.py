"""Text-level filters on stage A's byte DFA (Pitfalls 2025 Sec. 4.1, 4.2, App. A.4): scripts, ASCII, NFC.

Each filter is a language F over UTF-8 bytes (labels byte + 1, as stage A's), independent of
the tokenizer: its minimal DFA is built once per process (``functools`` cache; the scripts' also
on disk) and the regex's language becomes MIN(A ∩ F), still a minimal DFA, before stage P.

* ``scripts``: texts whose every character has one of the given values of the Unicode Script
  property (the ``regex`` package's ``\\p{Script=...}`` tables) or Common or Inherited (digits,
  punctuation, spaces, combining marks), the closure of their UTF-8 encodings
  (``utf8.sequences``). Names are matched as Unicode's loose matching does (case, spaces,
  ``_`` and ``-`` ignored; long names and four-letter codes, e.g. ``Greek`` or ``Grek``).
* ``ascii``: texts of U+0000-U+007F.
* ``nfc``: texts in Normalization Form C, exactly as Hugging Face's NFC normalizer leaves them
  (``pretok.unicode_norm.normal_form``). Stage A accepts valid UTF-8 only, so none of these has to
  exclude invalid byte sequences.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from functools import lru_cache

import numpy as np
import pynini

from tokfst_cli.automata import utf8
from tokfst_cli.automata.fst_io import cached_fst
from tokfst_cli.automata.fsts import ranges_acceptor
from tokfst_cli.errors import EmptyLanguageError, InputError
from tokfst_cli.pretok.unicode_norm import normal_form

ALWAYS = ("Common", "Inherited")  # Script values every script filter lets through
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9 _-]*")


def _loose(name: str) -> str:
    """A Script value name under Unicode's loose matching (UAX44-LM3): case, blanks, '_', '-' ignored."""
    return re.sub(r"[\s_-]", "", name).upper()


@lru_cache(maxsize=1)
def script_values() -> dict[str, str]:
    """Loose name (long name or code) -> display name, for every Script value ``regex`` knows.

    Read from ``regex``'s own property table; ``{}`` if this version of ``regex`` does not expose
    it (then names are checked by compiling ``\\p{Script=name}``)."""
    try:
        import regex._regex as core  # deferred: the regex package's Unicode tables (start-up)

        values = core.get_properties()["SCRIPT"][1]
    except (ImportError, AttributeError, KeyError, TypeError):
        return {}
    by_id: dict[int, list[str]] = {}
    for name, value in values.items():
        by_id.setdefault(value, []).append(name)
    out = {}
    for names in by_id.values():
        long = max(names, key=len)  # the long name; the others are codes and aliases
        for n in names:
            out[n] = long.capitalize()
    return out


def known_scripts() -> list[str]:
    """The display names of the Script values (long names), sorted."""
    return sorted(set(script_values().values()) - {"Unknown", "Katakanaorhiragana"})


def check_script(name: str) -> str:
    """The loose form of a Script value's long name (``Grek`` -> ``GREEK``); InputError(hint="scripts")
    for an unknown one."""
    key = _loose(name) if _NAME.fullmatch(name) else ""
    values = script_values()
    if key and key in values:
        return _loose(values[key])
    if key and not values and _compiles(key):
        return key
    known = known_scripts()
    close = difflib.get_close_matches(name.capitalize(), known, n=3)
    suggestion = f" (did you mean {', '.join(close)}?)" if close else ""
    raise InputError(f"unknown Unicode script {name!r}{suggestion}",
                     f"use Unicode Script names, e.g. Latin, Greek, Cyrillic, Han; known: {', '.join(known)}",
                     hint="scripts", script=name, suggestion=suggestion, known=", ".join(known), count=len(known))


def _compiles(key: str) -> bool:
    import regex  # deferred: the regex package's Unicode tables (start-up)

    try:
        regex.compile(rf"\p{{Script={key}}}")
        return True
    except regex.error:
        return False


@lru_cache(maxsize=1)
def _all_scalars() -> str:
    """Every Unicode scalar value once, in order (surrogates left out)."""
    cps = np.concatenate([np.arange(utf8.SURROGATES[0]), np.arange(utf8.SURROGATES[1] + 1, utf8.MAX_CODE_POINT + 1)])
    return cps.astype("<u4").tobytes().decode("utf-32-le")


@lru_cache(maxsize=None)
def script_ranges(key: str) -> tuple[tuple[int, int], ...]:
    """The code point ranges of Script value ``key`` (a loose name, :func:`check_script`)."""
    import regex  # deferred: the regex package's Unicode tables (start-up)

    gap = utf8.SURROGATES[1] - utf8.SURROGATES[0] + 1

    def cp(i: int) -> int:  # position in _all_scalars() -> code point
        return i if i < utf8.SURROGATES[0] else i + gap

    spans = (m.span() for m in regex.finditer(rf"\p{{Script={key}}}+", _all_scalars()))
    return tuple(utf8.ranges_of_ranges((cp(a), cp(b - 1)) for a, b in spans))


def _closure_dfa(ranges: list[tuple[int, int]]) -> pynini.Fst:
    """The minimal DFA of (UTF-8 of ``ranges``)*, ilabel-sorted."""
    f = ranges_acceptor(ranges).closure().rmepsilon()
    return pynini.determinize(f).minimize().arcsort("ilabel")


@lru_cache(maxsize=None)
def scripts_filter(keys: tuple[str, ...]) -> pynini.Fst:
    """F for the Script values ``keys`` (sorted loose names) plus Common and Inherited (cached on
    disk per ``regex`` version)."""
    import regex  # deferred: the regex package's Unicode tables (start-up)


    every = sorted({*keys, *map(_loose, ALWAYS)})
    digest = hashlib.sha256(",".join(every).encode()).hexdigest()[:16]
    return cached_fst(f"filter-scripts-{regex.__version__}-{digest}",
                      lambda: _closure_dfa(utf8.ranges_of_ranges([r for k in every for r in script_ranges(k)])))


@lru_cache(maxsize=1)
def ascii_filter() -> pynini.Fst:
    """F = [\\x00-\\x7f]*: one state."""
    return _closure_dfa([(0, 0x7F)])


def nfc_filter() -> pynini.Fst:
    """F = the texts HF's NFC leaves unchanged (cached by ``unicode_norm``)."""
    return normal_form("NFC")


def filters_for(scripts: tuple[str, ...], ascii_only: bool, nfc: bool) -> list[pynini.Fst]:
    """The DFAs of the text filters asked for (cheapest first); InputError for an unknown script."""
    out = []
    if ascii_only:
        out.append(ascii_filter())
    if scripts:
        out.append(scripts_filter(tuple(sorted({check_script(s) for s in scripts}))))
    if nfc:
        out.append(nfc_filter())
    return out


def restrict(fst: pynini.Fst, dfas: list[pynini.Fst], names: list[str]) -> pynini.Fst:
    """MIN(A ∩ F1 ∩ F2 ...): A's symbol tables kept; EmptyLanguageError if nothing is left."""
    out = fst
    for f in dfas:  # F is ilabel-sorted: A needs no sorting
        out = pynini.intersect(out, f)
    out.minimize()
    if out.start() == pynini.NO_STATE_ID or out.num_states() == 0:
        raise EmptyLanguageError(f"no string of the regex's language passes the text filters ({', '.join(names)})",
                                 "widen the regex or drop a filter", hint="filters-empty", names=", ".join(names))
    return out.set_input_symbols(fst.input_symbols()).set_output_symbols(fst.output_symbols())
