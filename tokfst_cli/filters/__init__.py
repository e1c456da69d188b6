"""Modular filters (Pitfalls 2025 Sec. 4), between stages A and S (text level) and S and C (token level).

    compose   which filters a constraint asks for (``Filters``), applied in order
    text      scripts, ascii, nfc: byte DFAs intersected with stage A's output
    bytes     literal_ascii, no_byte_tokens: token DFAs over the vocabulary
    tokens    fuse_spaces, and the token-level product in bulk
    length    max_tokens: at most N tokens (App. B's Gamma^k)
    product   intersections over arc arrays
"""

from tokfst_cli import compat

__getattr__ = compat.forward(__name__, "compose")  # release 0.1's tokfst_cli.filters.Filters & co., with a warning
