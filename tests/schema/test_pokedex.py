"""Seed 001 App. C: the Pokedex entry as a real JSON Schema, against the catalogue's regex and GPT-2.

The appendix writes each field as a regex; as a JSON Schema the fields are strings with a
``pattern`` or an ``enum``, all required, in that order, nothing else. The catalogue's
``POKEDEX`` regex flattens the same object to compact JSON; its description class takes
\\s as raw whitespace bytes, which JSON must escape (a raw tab is not valid inside a JSON
string), so the two automata agree exactly once the schema's texts are taken without
escapes and the regex's without control characters.
"""

from __future__ import annotations

import random
import string

import pynini
import pytest

from tokfst_cli import pipeline
from tokfst_cli.errors import DisallowedTokenError
from tokfst_cli.schema.compile import compile_schema
from tokfst_cli.schema.serialize import serialize
from tokfst_cli.text import catalogue
from tokfst_cli.text.regex import compile_regex

from .util import accepts

ABILITIES = ["Overgrow", "Blaze", "Torrent", "Shield Dust", "Intimidate", "Levitate", "Pressure", "Static"]
TYPES = ("Bug Dark Dragon Electric Fairy Fighting Fire Flying Ghost Grass Ground Ice Normal Poison Psychic Rock "
         "Steel Stellar Water").split()
DESCRIPTION_CHARS = string.ascii_letters + string.digits + "_ \t\n\r\f\v,.!"
POKEDEX = {
    "title": "Pokedex entry",
    "type": "object",
    "properties": {
        "alias": {"type": "string", "pattern": "^[a-z]{1,5}$"},
        "description": {"type": "string", "pattern": "^[A-Z][a-z][0-9][A-Za-z0-9_ \\t\\n\\r\\f\\v,.!]{1,3}$"},
        "type": {"enum": TYPES},
        "height_m": {"type": "string", "pattern": "^[0-9]{1,2}\\.[0-9]$"},
        "weight_kg": {"type": "string", "pattern": "^[0-9]{1,3}\\.[0-9]$"},
        "evolution_stage": {"enum": ["Basic", "Stage 1", "Stage 2"]},
        "legendary": {"enum": ["true", "false"]},
        "abilities": {"type": "array", "items": {"enum": ABILITIES}, "minItems": 1, "maxItems": 7},
    },
    "required": ["alias", "description", "type", "height_m", "weight_kg", "evolution_stage", "legendary",
                 "abilities"],
    "additionalProperties": False,
}


def entries(n: int, seed: int = 0) -> list[dict]:
    """``n`` random valid entries, drawn field by field from the appendix's regexes."""
    rng = random.Random(seed)

    def digits(lo: int, hi: int) -> str:
        return "".join(rng.choice(string.digits) for _ in range(rng.randint(lo, hi)))

    return [{
        "alias": "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 5))),
        "description": (rng.choice(string.ascii_uppercase) + rng.choice(string.ascii_lowercase)
                        + rng.choice(string.digits)
                        + "".join(rng.choice(DESCRIPTION_CHARS) for _ in range(rng.randint(1, 3)))),
        "type": rng.choice(TYPES),
        "height_m": digits(1, 2) + "." + digits(1, 1),
        "weight_kg": digits(1, 3) + "." + digits(1, 1),
        "evolution_stage": rng.choice(["Basic", "Stage 1", "Stage 2"]),
        "legendary": rng.choice(["true", "false"]),
        "abilities": [rng.choice(ABILITIES) for _ in range(rng.randint(1, 7))],
    } for _ in range(n)]


def broken(entry: dict, rng: random.Random) -> dict:
    """The entry with one field made invalid."""
    bad = dict(entry)
    field, value = rng.choice([("alias", "toolong"), ("description", "lowercase"), ("type", "Cosmic"),
                               ("height_m", "100.0"), ("weight_kg", "1.25"), ("legendary", True),
                               ("abilities", []), ("abilities", ["Blaze"] * 8), ("extra", 1)])
    bad[field] = value
    return bad


@pytest.fixture(scope="module")
def automaton():
    return compile_schema(POKEDEX).automaton


def test_the_schema_accepts_200_entries_and_rejects_broken_ones(automaton):
    fst = automaton.fst.copy().arcsort("ilabel")
    rng = random.Random(1)
    for entry in entries(200):
        assert accepts(fst, serialize(entry, POKEDEX))
        assert not accepts(fst, serialize(broken(entry, rng), POKEDEX))


def _without(pattern: str, fst: pynini.Fst) -> pynini.Fst:
    f = compile_regex(pattern).fst.set_input_symbols(None).set_output_symbols(None)
    g = fst.copy().set_input_symbols(None).set_output_symbols(None)
    return pynini.intersect(g.arcsort("olabel"), f.arcsort("ilabel"))


def test_the_schema_is_the_catalogue_regex_up_to_escapes(automaton):
    regex = compile_regex(catalogue.POKEDEX).fst
    assert pynini.equivalent(pynini.determinize(_without(r"[^\\]*", automaton.fst)).minimize(),
                             pynini.determinize(_without(r"[^\x00-\x1f]*", regex)).minimize())
    tab = serialize({**entries(1)[0], "description": "Ab1\t"}, POKEDEX)
    assert "\\t" in tab and accepts(automaton.fst.copy().arcsort("ilabel"), tab)


def test_the_canonical_gpt2_automaton_accepts_the_encodings(automaton, tokenizer):
    """Issue #15: the canonical automaton accepts HF's encoding of 200 generated entries."""
    model, hf = tokenizer("gpt2"), tokenizer.hf("gpt2")
    decoder = pipeline.build(model, automaton.pattern, automaton=automaton, canonical=True).decoder()

    def walks(text: str) -> bool:
        s = decoder.initial()
        try:
            for t in hf.encode(text, add_special_tokens=False).ids:
                s = decoder.advance(s, t)
        except DisallowedTokenError:
            return False
        return decoder.is_final(s)

    rng = random.Random(2)
    for entry in entries(200, seed=3):
        assert walks(serialize(entry, POKEDEX))
        assert not walks(serialize(broken(entry, rng), POKEDEX))
