"""What kind of file a tokfst command was given, read off its first bytes: an artifact's name for
the one-line error of a command that cannot read that kind (``draw`` on a lazy artifact, ``inspect``
on compile-bpe's A_BPE).

tokfst's containers (``files.pack``) start with a ``TOKFST...`` magic, a u32 header length and a
JSON header naming ``format`` and ``version``; the index and bench reports are JSON objects with
the same two fields; OpenFst files start with OpenFst's magic number.
"""

from __future__ import annotations

import json
import struct

FST_MAGIC = 2125659606  # OpenFst's magic number
OPENFST_HEAD = FST_MAGIC.to_bytes(4, "little")

NAMES = {  # format -> what it is, as an error names it
    "tokfst-index": "tokfst index artifact",
    "tokfst-lazy": "tokfst lazy artifact",
    "tokfst-factorized": "tokfst factorized BPE artifact",
    "tokfst-factorized-maxmatch": "tokfst factorized WordPiece artifact",
    "tokfst-implicit-bpe": "tokfst implicit A_BPE",
    "tokfst-bench": "tokfst benchmark report",
}
MAGIC_SIZE = 10  # TOKFSTLAZY, TOKFSTFAC\0, TOKFSTWPF\0, TOKFSTBPE\0


def format_of(data: bytes) -> tuple[str, object] | None:
    """(format, version) of a tokfst container or JSON artifact; None for anything else."""
    if data.startswith(b"TOKFST") and len(data) >= MAGIC_SIZE + 4:
        (size,) = struct.unpack_from("<I", data, MAGIC_SIZE)
        header = _json(data[MAGIC_SIZE + 4:MAGIC_SIZE + 4 + size])
    elif data.lstrip()[:1] == b"{":
        header = _json(data)
    else:
        return None
    if not isinstance(header, dict) or not str(header.get("format", "")).startswith("tokfst-"):
        return None
    return str(header["format"]), header.get("version")


def _json(data: bytes):
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def describe(data: bytes) -> str | None:
    """"a tokfst lazy artifact (tokfst-lazy v1)", "an OpenFst file", or None (not a kind tokfst writes)."""
    if data.startswith(OPENFST_HEAD):
        return "an OpenFst file"
    got = format_of(data)
    if got is None:
        return None
    fmt, version = got
    return f"a {NAMES.get(fmt, f'tokfst file of format {fmt[:40]}')} ({fmt[:40]} v{str(version)[:10]})"
