"""The regex catalogue: every named regex the benchmarks (``tokfst bench``) and the tests use.

FOUNDATION  the five fixed regexes of the foundation issue; the sixth is the 100-word
            alternation of ``data/words100.txt`` (``words100``, :func:`six`)
POKEDEX     Pitfalls 2025 App. C's Pokedex JSON object flattened to one regex (compact JSON; its
            \\w and \\s written out as the ASCII classes they are in Python's re and
            interegular, so every engine reads the same language)
MAXMATCH    the three free-text regexes of the MaxMatch issue: up to four words, a word
            and a punctuation mark, accented letters

Sets: :func:`six` (promote, canonical), :func:`default_set` (six + pokedex: peers, masks),
:func:`maxmatch_set` (six + MAXMATCH), :func:`catalogue` (every named regex, for selection
by name).
"""

from __future__ import annotations

from importlib import resources

from tokfst_cli.errors import InputError

FOUNDATION = {
    "decimal": r"([0-9]+)?\.[0-9]+",
    "json": r'\{"name":("John"|"Paul"),"age":(20|30)\}',
    "date": r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
    "email": r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,6}",
    "cities": r"(Cologne|Berlin|Bonn|Munich)",
}

_W = "A-Za-z0-9_"
_S = r" \t\n\r\f\v"
_ABILITY = '"(Overgrow|Blaze|Torrent|Shield Dust|Intimidate|Levitate|Pressure|Static)"'
_TYPES = ("Bug|Dark|Dragon|Electric|Fairy|Fighting|Fire|Flying|Ghost|Grass|Ground|Ice|Normal|Poison|"
          "Psychic|Rock|Steel|Stellar|Water")
POKEDEX_FIELDS = [
    ("alias", '"[a-z]{1,5}"'),
    ("description", f'"[A-Z][a-z][0-9][{_W}{_S},\\.!]{{1,3}}"'),
    ("type", f'"({_TYPES})"'),
    ("height_m", r'"[0-9]{1,2}\.[0-9]{1}"'),
    ("weight_kg", r'"[0-9]{1,3}\.[0-9]{1}"'),
    ("evolution_stage", '"(Basic|Stage 1|Stage 2)"'),
    ("legendary", '"(true|false)"'),
    ("abilities", rf"\[{_ABILITY}(,{_ABILITY}){{0,6}}\]"),
]
POKEDEX = r"\{" + ",".join(f'"{k}":{v}' for k, v in POKEDEX_FIELDS) + r"\}"

MAXMATCH = {
    "words4": r"[a-z]+( [a-z]+){0,3}",
    "punct": r"[a-z]+[.,!?]",
    "accents": r"[àáâäèéêëìíîïòóôöùúûüçñ]+( [A-Za-zÉÈÖ]+)?",
}


def words100() -> list[str]:
    """The 100 words of ``data/words100.txt``."""
    return (resources.files("tokfst_cli") / "data" / "words100.txt").read_text(encoding="ascii").split()


def alternation(words: list[str]) -> str:
    return "(" + "|".join(words) + ")"


def six() -> dict[str, str]:
    """name -> pattern: the six regexes of the foundation issue."""
    return {**FOUNDATION, "words100": alternation(words100())}


def default_set() -> dict[str, str]:
    """The six and the Pokedex object."""
    return {**six(), "pokedex": POKEDEX}


def maxmatch_set() -> dict[str, str]:
    """The six and the three free-text regexes of the MaxMatch issue."""
    return {**six(), **MAXMATCH}


def catalogue() -> dict[str, str]:
    """Every named regex."""
    return {**default_set(), **MAXMATCH}


def read_regex_file(path: str) -> list[str]:
    """One pattern per line; blank lines and lines starting with '#' are skipped."""
    try:
        text = open(path, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read regex file {path}: {getattr(e, 'strerror', None) or e}",
                         "give a readable UTF-8 file, one pattern per line") from None
    pats = [ln.rstrip("\r") for ln in text.split("\n") if ln.strip() and not ln.startswith("#")]
    if not pats:
        raise InputError(f"regex file {path} has no patterns", "put one pattern per line")
    return pats
