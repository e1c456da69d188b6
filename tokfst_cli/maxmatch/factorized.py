"""Stages S+C for WordPiece, factorized output: the artifact when too big to materialize
(Cognetta & Okazaki 2024 Sec. 6.2).

Format ``tokfst-factorized-maxmatch`` v1: magic b"TOKFSTWPF\\0", u32 header length, JSON
header (format, version, fingerprint, regex, max_chars, states, sha256), then the text
automaton X (Pitfalls 2025 Sec. 3, :mod:`.wordtext`) as an OpenFst vector file. The pieces' tries
are rebuilt from the tokenizer when it is loaded, so loading needs the tokenizer. v2 (written
with a prompt): v1 plus the header field ``healing`` {prompt, kept, retokenized}; the decoder's
``initial()`` is the state after the ``kept`` token ids (``healing.py``), its ``healing`` the
field (None in v1).
"""

from __future__ import annotations

import pynini

from tokfst_cli.automata.fst_io import fst_bytes, parse_fst
from tokfst_cli.decoding.healing import resume, stored_version
from tokfst_cli.errors import InputError
from tokfst_cli.maxmatch.product import Canonical
from tokfst_cli.support.files import pack, read_artifact, unpack
from tokfst_cli.tokenizer.model import TokenizerModel, foreign

MAGIC = b"TOKFSTWPF\0"
FORMAT = "tokfst-factorized-maxmatch"
VERSION = 1
HEALED = 2  # v1 plus the header field ``healing`` (token healing)


def to_bytes(machine: Canonical, model: TokenizerModel, pattern: str) -> bytes:
    """The factorized form: the text automaton X and the tokenizer's fingerprint."""
    healing = getattr(machine, "healing", None)
    header = {"format": FORMAT, "version": VERSION if healing is None else HEALED, "fingerprint": model.fingerprint,
              "regex": pattern, "max_chars": machine.max_chars, "states": machine.text.num_states()}
    if healing is not None:
        header["healing"] = healing.to_json()
    return pack(MAGIC, header, fst_bytes(machine.text))


def from_bytes(data: bytes, model: TokenizerModel, source: str = "artifact") -> Canonical:
    """The lazy canonical machine of an artifact for ``model``; refuse a damaged or foreign one."""
    header, body = unpack(data, MAGIC, FORMAT, stored_version(data, MAGIC, (VERSION, HEALED)), source, "rebuild it",
                          hint="rebuild-factorized")
    if model.fingerprint != header.get("fingerprint"):
        raise foreign(source, header.get("fingerprint"), model)

    def damaged(why: str) -> InputError:
        return InputError(f"{source} is damaged ({why})", "rebuild it", hint="rebuild-factorized")

    max_chars = header.get("max_chars")
    if max_chars is not None and (type(max_chars) is not int or max_chars < 0):
        raise damaged("header fields")
    text = parse_fst(body, source, "rebuild it", hint="rebuild-factorized")
    if text.start() == pynini.NO_STATE_ID or header.get("states") != text.num_states():
        raise damaged("text automaton")
    return resume(Canonical(model, text, max_chars), header, header["version"] == HEALED, damaged)


def load(path: str, model: TokenizerModel) -> Canonical:
    """Read a factorized MaxMatch artifact for ``model``."""
    return from_bytes(read_artifact(path, hint="rebuild-factorized"), model, path)
