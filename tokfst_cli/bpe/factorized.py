"""Stage C for BPE, factorized output: the agnostic automaton + implicit A_BPE in one file (seed 000 Sec. 6.5).

Format ``tokfst-factorized`` version 2, integers little-endian:
    magic    b"TOKFSTFAC\\0"
    u32      header length H, then H bytes of JSON: format, version, fingerprint, regex,
             start, states, arcs, sha256 (of the rest of the file), implicit_bytes, and
             ``marked`` (true: the automaton is S_M over pre-tokenized text, whose pre-token
             boundary is the label one past the last token id; ``bpe.pretokenized``)
    payload  zlib-compressed: offsets int64[states + 1], labels int32[arcs] (token ids,
             sorted per state), nexts int32[arcs], finals uint8[states]
    then     the implicit A_BPE artifact (``implicit.to_bytes``), implicit_bytes long

Python API: ``load(path, model=None)`` returns a ``product.Factorized`` (or, marked, a
``pretokenized.MarkedFactorized``) with ``initial()``,
``mask(state)`` (bool over token ids), ``advance(state, token)`` and ``is_final(state)``.
"""

from __future__ import annotations

import zlib

import numpy as np
import pynini

from ..artifacts import pack, read_artifact, unpack
from ..errors import InputError
from ..tokenizer import TokenizerModel
from . import implicit
from .product import Factorized, sorted_arcs

MAGIC = b"TOKFSTFAC\0"
FORMAT = "tokfst-factorized"
VERSION = 2


def to_bytes(agnostic: pynini.Fst, imp: implicit.ImplicitBpe, pattern: str, marked: bool = False) -> bytes:
    zero = pynini.Weight.zero(agnostic.weight_type())
    n = agnostic.num_states()
    labels, nexts, offsets = [], [], [0]
    for s in range(n):
        lab, nxt = sorted_arcs(agnostic, s)
        labels.append(lab)
        nexts.append(nxt)
        offsets.append(offsets[-1] + len(lab))
    finals = np.array([agnostic.final(s) != zero for s in range(n)], np.uint8)
    payload = zlib.compress(b"".join([np.array(offsets, "<i8").tobytes(),
                                      np.concatenate(labels or [np.zeros(0)]).astype("<i4").tobytes(),
                                      np.concatenate(nexts or [np.zeros(0)]).astype("<i4").tobytes(),
                                      finals.tobytes()]), 6)
    imp_bytes = implicit.to_bytes(imp)
    header = {"format": FORMAT, "version": VERSION, "marked": marked, "fingerprint": imp.fingerprint, "regex": pattern,
              "start": agnostic.start(), "states": n, "arcs": offsets[-1], "payload_bytes": len(payload),
              "implicit_bytes": len(imp_bytes)}
    return pack(MAGIC, header, payload + imp_bytes)


def load(path: str, model: TokenizerModel | None = None) -> Factorized:
    """Read a factorized artifact; refuse a damaged one or one for another tokenizer."""
    return from_bytes(read_artifact(path, hint="rebuild-factorized"), model, path)


def from_bytes(data: bytes, model: TokenizerModel | None = None, source: str = "artifact"):
    """The decoder of a factorized artifact's bytes (``model`` checks the fingerprint)."""
    path = source
    header, body = unpack(data, MAGIC, FORMAT, VERSION, path, "rebuild it", hint="rebuild-factorized")

    def damaged(why: str) -> InputError:
        return InputError(f"{path} is damaged ({why})", "rebuild it", hint="rebuild-factorized")

    fields = {k: header.get(k) for k in ("states", "arcs", "start", "payload_bytes")}
    if any(type(v) is not int or v < 0 for v in fields.values()) or not isinstance(header.get("fingerprint"), str):
        raise damaged("header fields")
    n, m, start, size = fields["states"], fields["arcs"], fields["start"], fields["payload_bytes"]
    if model is not None and model.fingerprint != header["fingerprint"]:
        raise InputError(f"{path} was built for another tokenizer", "rebuild it for this tokenizer")
    try:
        raw = zlib.decompress(body[:size])
    except zlib.error:
        raise damaged("payload does not decompress") from None
    if len(raw) != 8 * (n + 1) + 8 * m + n or not start < n:
        raise damaged("payload size")
    offsets = np.frombuffer(raw, "<i8", n + 1, 0)
    labels = np.frombuffer(raw, "<i4", m, 8 * (n + 1)).astype(np.int64)
    nexts = np.frombuffer(raw, "<i4", m, 8 * (n + 1) + 4 * m).astype(np.int64)
    finals = np.frombuffer(raw, np.uint8, n, 8 * (n + 1) + 8 * m)
    if offsets[0] != 0 or offsets[-1] != m or (np.diff(offsets) < 0).any():
        raise damaged("state offsets")
    if (m and (labels.min() < 0 or nexts.min() < 0 or nexts.max() >= n)) or (finals > 1).any():
        raise damaged("arcs")
    imp = implicit.from_bytes(body[size:], header["fingerprint"], path)
    marked = header.get("marked", False)
    if type(marked) is not bool or (m and labels.max() >= imp.vocab_size + marked):
        raise damaged("arcs")
    if model is not None:
        imp.attach(model)
    finals = finals.astype(bool)
    arcs = lambda s: (labels[offsets[s]:offsets[s + 1]], nexts[offsets[s]:offsets[s + 1]])  # noqa: E731
    if marked:
        from .pretokenized import MarkedFactorized

        return MarkedFactorized(arcs, finals, start, imp)
    return Factorized(arcs, finals, start, imp)
