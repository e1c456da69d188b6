"""Stage C for BPE, factorized output: the agnostic automaton + implicit A_BPE in one file
(Cognetta & Okazaki 2024 Sec. 6.5).

Format ``tokfst-factorized`` version 3 (version 4: the same plus ``healing``), integers little-endian:
    magic    b"TOKFSTFAC\\0"
    u32      header length H, then H bytes of JSON: format, version, fingerprint, regex,
             start, states, arcs, sha256 (of the rest of the file), implicit_bytes, and
             ``marked`` (true: the automaton is S_M over pre-tokenized text, whose pre-token
             boundary is the label one past the last token id; ``bpe.pretokenized``)
             ``live``: {pairs, width, specials}, the co-reachability table's sizes;
             version 4 only (written with a prompt, ``healing``): ``healing``: {prompt,
             kept, retokenized}; ``initial()`` is the state after the ``kept`` token ids,
             walked from ``start`` at load (a version 3 reader would start before them);
             version 5 only (``max_tokens``, ``bpe.counted``): ``max_tokens`` N (also
             at the payload's end, so the checksum covers it), and ``live.columns`` (classes + 1)
    payload  zlib-compressed: offsets int64[states + 1], labels int32[arcs] (token ids,
             sorted per state), nexts int32[arcs], finals uint8[states]; then the live
             units (``liveness``): pair keys int64[pairs], live bits uint8[pairs, width]
             (one bit per class and WHOLE, packed), special keys int64[specials], special
             live uint8[specials]; version 5: then the fewest tokens to a final state,
             uint32[pairs, columns] and uint32[specials] (0xFFFFFFFF: none within N), N u64
    then     the implicit A_BPE artifact (``implicit.to_bytes``), implicit_bytes long

Python API: ``load(path, model=None)`` returns a ``product.Factorized`` (or, marked, a
``pretokenized.MarkedFactorized``; version 5: either within N tokens, a
``counted.CountedFactorized``) with ``initial()``,
``mask(state)`` (bool over token ids), ``advance(state, token)``, ``is_final(state)`` and
``healing`` (a ``healing.Healing``, or None).
"""

from __future__ import annotations

import zlib

import numpy as np

from tokfst_cli.bpe import implicit
from tokfst_cli.bpe.counted import CountedFactorized
from tokfst_cli.bpe.live_table import NO_PATH, Liveness
from tokfst_cli.bpe.pretokenized import MarkedFactorized
from tokfst_cli.bpe.product import Factorized
from tokfst_cli.decoding.healing import resume, stored_version
from tokfst_cli.errors import InputError, InternalError
from tokfst_cli.support.files import pack, read_artifact, unpack
from tokfst_cli.tokenizer.model import TokenizerModel, foreign

MAGIC = b"TOKFSTFAC\0"
FORMAT = "tokfst-factorized"
VERSION = 3  # 3: the co-reachability table (``liveness``) after the arcs
HEALED = 4  # 4: version 3 plus the header field ``healing`` (token healing, ``healing.py``)
COUNTED = 5  # 5: version 3 plus ``max_tokens`` and the distances of the co-reachability table


def to_bytes(decoder, pattern: str) -> bytes:
    """The artifact of a factorized decoder (``product.Factorized`` or ``pretokenized.MarkedFactorized``,
    or either within N tokens: ``counted.CountedFactorized``)."""
    limit = decoder.limit if isinstance(decoder, CountedFactorized) else None
    decoder = decoder.base if limit is not None else decoder
    marked = not isinstance(decoder, Factorized)
    n = len(decoder.finals)
    lab, nxt = zip(*(decoder._arcs(s) for s in range(n))) if n else ((), ())
    offsets = np.r_[0, np.cumsum([len(x) for x in lab])].astype("<i8")
    live = decoder.live.to_arrays()
    width = live["live_bits"].shape[1] if live["live_bits"].ndim == 2 else 0
    dist = [live["dist"].astype("<u4").tobytes(), live["special_dist"].astype("<u4").tobytes(),
            np.array([limit], "<u8").tobytes()] if limit is not None else []
    payload = zlib.compress(b"".join([offsets.tobytes(),
                                      np.concatenate(lab or [np.zeros(0)]).astype("<i4").tobytes(),
                                      np.concatenate(nxt or [np.zeros(0)]).astype("<i4").tobytes(),
                                      decoder.finals.astype(np.uint8).tobytes(),
                                      live["pair_keys"].astype("<i8").tobytes(),
                                      np.ascontiguousarray(live["live_bits"], np.uint8).tobytes(),
                                      live["special_keys"].astype("<i8").tobytes(),
                                      live["special_live"].astype(np.uint8).tobytes(), *dist]), 6)
    imp = decoder.imp
    imp_bytes = implicit.to_bytes(imp)
    healing = getattr(decoder, "healing", None)
    header = {"format": FORMAT, "version": COUNTED if limit is not None else VERSION if healing is None else HEALED,
              "marked": marked,
              "fingerprint": imp.fingerprint, "regex": pattern,
              "start": int(decoder.start), "states": n, "arcs": int(offsets[-1]), "payload_bytes": len(payload),
              "implicit_bytes": len(imp_bytes),
              "live": {"pairs": len(live["pair_keys"]), "width": width, "specials": len(live["special_keys"])}}
    if healing is not None:
        header["healing"] = healing.to_json()
    if limit is not None:
        header["max_tokens"] = limit
        header["live"]["columns"] = decoder.live.dist.shape[1]
    return pack(MAGIC, header, payload + imp_bytes)


def load(path: str, model: TokenizerModel | None = None) -> Factorized:
    """Read a factorized artifact; refuse a damaged one or one for another tokenizer."""
    return from_bytes(read_artifact(path, hint="rebuild-factorized"), model, path)


def from_bytes(data: bytes, model: TokenizerModel | None = None, source: str = "artifact"):
    """The decoder of a factorized artifact's bytes (``model`` checks the fingerprint)."""
    path = source
    version = stored_version(data, MAGIC, (VERSION, HEALED, COUNTED))
    header, body = unpack(data, MAGIC, FORMAT, version, path, "rebuild it",
                          hint="rebuild-factorized")

    def damaged(why: str) -> InputError:
        return InputError(f"{path} is damaged ({why})", "rebuild it", hint="rebuild-factorized")

    fields = {k: header.get(k) for k in ("states", "arcs", "start", "payload_bytes")}
    lv = header.get("live")
    fields.update({k: lv.get(k) for k in ("pairs", "width", "specials")} if isinstance(lv, dict) else {"pairs": None})
    counted = header["version"] == COUNTED
    if counted:
        fields["max_tokens"] = header.get("max_tokens")
        fields["columns"] = lv.get("columns") if isinstance(lv, dict) else None
    if any(type(v) is not int or v < 0 for v in fields.values()) or not isinstance(header.get("fingerprint"), str):
        raise damaged("header fields")
    n, m, start, size = fields["states"], fields["arcs"], fields["start"], fields["payload_bytes"]
    npair, width, nspec = fields["pairs"], fields["width"], fields["specials"]
    if model is not None and model.fingerprint != header["fingerprint"]:
        raise foreign(path, header["fingerprint"], model)
    try:
        raw = zlib.decompress(body[:size])
    except zlib.error:
        raise damaged("payload does not decompress") from None
    cols = fields.get("columns", 0)
    at = np.cumsum([0, 8 * (n + 1), 4 * m, 4 * m, n, 8 * npair, npair * width, 8 * nspec, nspec,
                    4 * npair * cols, 4 * nspec if counted else 0, 8 if counted else 0])
    if len(raw) != at[-1] or not start < n:
        raise damaged("payload size")
    offsets = np.frombuffer(raw, "<i8", n + 1, at[0])
    labels = np.frombuffer(raw, "<i4", m, at[1]).astype(np.int64)
    nexts = np.frombuffer(raw, "<i4", m, at[2]).astype(np.int64)
    finals = np.frombuffer(raw, np.uint8, n, at[3])
    live = {"pair_keys": np.frombuffer(raw, "<i8", npair, at[4]).astype(np.int64),
            "live_bits": np.frombuffer(raw, np.uint8, npair * width, at[5]).reshape(npair, width),
            "special_keys": np.frombuffer(raw, "<i8", nspec, at[6]).astype(np.int64),
            "special_live": np.frombuffer(raw, np.uint8, nspec, at[7])}
    if counted:
        live["dist"] = np.frombuffer(raw, "<u4", npair * cols, at[8]).reshape(npair, cols)
        live["special_dist"] = np.frombuffer(raw, "<u4", nspec, at[9])
        if int(np.frombuffer(raw, "<u8", 1, at[10])[0]) != fields["max_tokens"]:
            raise damaged("max_tokens field")
        for d in (live["dist"], live["special_dist"]):
            if ((d != NO_PATH) & (d > fields["max_tokens"])).any():
                raise damaged("co-reachability table")
    for k in ("pair_keys", "special_keys"):
        if len(live[k]) and (live[k][0] < 0 or (np.diff(live[k]) <= 0).any()):
            raise damaged("co-reachability table")
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
        decoder = _with_live(MarkedFactorized, arcs, finals, start, imp, live, damaged)
    else:
        decoder = _with_live(Factorized, arcs, finals, start, imp, live, damaged)
    if counted:
        return CountedFactorized(decoder, fields["max_tokens"])
    return resume(decoder, header, header["version"] == HEALED, damaged)


def _with_live(kind, arcs, finals, start, imp, live, damaged):
    """The decoder with the stored co-reachability table (its width checked against the classes)."""
    try:
        decoder = kind(arcs, finals, start, imp, live=lambda word, arcs3: Liveness.from_arrays(word, arcs3, live))
    except (ValueError, InternalError):  # a table that does not fit its classes: damaged
        raise damaged("co-reachability table") from None
    decoder.live.warm()  # every unit's live tokens made at load, not at a decoding step
    return decoder
