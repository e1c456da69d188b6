"""Stage S on demand, its input: a byte DFA as a table over its classes of bytes; the lazy artifact.

The lazy decoder (:mod:`.lazy`) reads A, the trimmed byte DFA of a regex or a JSON Schema, as
one int32 table: a row per state (plus a dead row), a column per class of bytes that A cannot
tell apart (two labels are one class iff from every state both lead to the same state, or
nowhere; a JSON Schema's DFA reads a few dozen classes, not 256). That table is all the decoder
needs besides the tokenizer's trie, so it is also what ``tokfst promote --format lazy`` writes:
a tokfst container (``artifacts.pack``: magic, JSON header with the format version, the
tokenizer's fingerprint and checksums, then the zlib-compressed table, the class of each label
and the final states). Loading it (``constraint.load(path, tokenizer)``) reads arrays: no regex,
no schema, no OpenFst.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import pynini

from tokfst_cli.automata import label_classes
from tokfst_cli.automata.arrays import FstArrays, fst_arrays, unique
from tokfst_cli.errors import EmptyLanguageError, InputError, LimitError
from tokfst_cli.promotion.trie import MAX_CELLS
from tokfst_cli.support.files import pack, unpack
from tokfst_cli.text.regex import ByteAutomaton, determinize_bounded
from tokfst_cli.text.terminals import placeholder_kinds
from tokfst_cli.tokenizer.model import foreign

MAGIC = b"TOKFSTLAZY"
FORMAT = "tokfst-lazy"
VERSION = 1
LABELS = 258  # A's labels are bytes + 1 (1-256); 0 (epsilon) and 257 are never read
MAX_STATES = 1_000_000  # states of A's DFA when the automaton given must be determinized first
_DFA = pynini.I_DETERMINISTIC | pynini.NO_EPSILONS | pynini.ACCESSIBLE | pynini.COACCESSIBLE | pynini.UNWEIGHTED


@dataclass(frozen=True)
class ByteTable:
    """A trim byte DFA: ``delta`` (states + 1) x classes int32, where class 0 and the last row are
    dead (value ``states``: no transition); ``label_class`` the class of each label 0-257;
    ``final`` per state; ``start``; ``source`` the regex or the schema's name."""

    delta: np.ndarray
    label_class: np.ndarray
    final: np.ndarray
    start: int
    source: str

    @property
    def states(self) -> int:
        return len(self.final)

    def distances(self) -> np.ndarray:
        """Bytes from each state to a final state (breadth first over reversed transitions); A is
        trim, so every state has one."""
        n = self.states
        dist = np.where(self.final, 0, n + 1).astype(np.int64)
        src = np.repeat(np.arange(n), self.delta.shape[1])
        dst = self.delta[:n].ravel()
        keep = dst < n
        src, dst = src[keep], dst[keep]
        frontier = np.flatnonzero(self.final)
        d = 0
        while len(frontier):
            d += 1
            reached = unique(src[np.isin(dst, frontier)])
            frontier = reached[dist[reached] > d]
            dist[frontier] = d
        return dist


def of_arrays(a: FstArrays, source: str, max_cells: int = MAX_CELLS,
              classes: label_classes.Classes | None = None) -> ByteTable:
    """The table of a deterministic acceptor's arrays (labels 1-256; the caller checks them), over
    its classes of bytes (:func:`..label_classes.of`); ``classes``: ``a`` is over these classes'
    representatives (:class:`..label_classes.Classed`). LimitError past ``max_cells`` cells,
    counted before the table is built."""
    n = len(a.final)
    rep = label_classes.of([a]).rep
    present = np.zeros(label_classes.BYTES, bool)
    present[a.ilabel] = True
    if classes is not None:  # a byte is its representative's: coarser classes of classes
        rep, present = rep[classes.rep], present[classes.rep]
    reps = unique(rep[present])  # the classes of the bytes on some arc, by their first byte
    label_class = np.zeros(LABELS, np.int32)
    label_class[:label_classes.BYTES] = np.where(present, np.searchsorted(reps, rep) + 1, 0)
    cells = (n + 1) * (len(reps) + 1)
    if cells > max_cells:
        raise LimitError("A's table over its classes of bytes", "max_cells", max_cells, cells, unit="cells",
                         at_least=False)
    delta = np.full((n + 1, len(reps) + 1), n, np.int32)
    own = rep[a.ilabel] == a.ilabel  # the arcs of each class's first byte
    delta[a.src[own], label_class[a.ilabel[own]]] = a.nextstate[own]
    return ByteTable(delta, label_class, a.final.astype(bool), int(a.start), source)


def _deterministic(a: pynini.Fst, max_states: int) -> pynini.Fst:
    """A as a trim, epsilon-free, deterministic acceptor (a copy where it is not one), determinized
    by ``regex``'s own step, which stops past ``max_states`` (LimitError)."""
    if a.properties(_DFA, False) == _DFA or a.properties(_DFA, True) == _DFA:  # known bits first: a test reads
        return a                                                                # every arc
    d = determinize_bounded(a.copy(), max_states)
    if d.num_states() > max_states:
        raise LimitError("the lazy decoder's byte DFA", "max_states", max_states, remedy="simplify")
    return d.connect()


def of_automaton(automaton: ByteAutomaton | pynini.Fst, max_states: int = MAX_STATES,
                 max_cells: int = MAX_CELLS) -> ByteTable:
    """The table of a byte automaton (a regex's or a schema's; any acceptor of labels 1-256:
    determinized within ``max_states`` and trimmed first). Refused by name: token-level groups
    (``lazy-groups``), weighted automata, transducers, other labels (``lazy-labels``)."""
    source = automaton.pattern if isinstance(automaton, ByteAutomaton) else "the automaton"
    if isinstance(automaton, ByteAutomaton) and automaton.classed is not None:  # a trim DFA (compile_schema's)
        return of_arrays(automaton.classed.arrays, source, max_cells, automaton.classed.classes)
    fst = automaton.fst if isinstance(automaton, ByteAutomaton) else automaton
    if fst.input_symbols() is not None:
        kinds = placeholder_kinds(fst)
        if kinds:
            raise InputError(f"the lazy decoder does not expand token-level groups ({', '.join(kinds)})",
                             "promote the pattern (pipeline.build), whose terminal labels carry them",
                             hint="lazy-groups")
    a = _deterministic(fst, max_states)
    if a.start() == pynini.NO_STATE_ID or a.num_states() == 0:
        raise EmptyLanguageError(f"{source!r} matches no string", "check the pattern")
    arrays = fst_arrays(a)
    if arrays.weighted or (arrays.ilabel != arrays.olabel).any() or (arrays.ilabel > 256).any() \
            or (arrays.ilabel < 1).any():
        raise InputError("the lazy decoder reads unweighted byte acceptors (labels 1-256)",
                         "give the byte DFA of a regex or a schema", hint="lazy-labels")
    return of_arrays(arrays, source, max_cells)


# ---- the artifact -------------------------------------------------------------------------------
def to_bytes(table: ByteTable, fingerprint: str) -> bytes:
    """The lazy artifact of ``table`` for the tokenizer of ``fingerprint``."""
    n, k = table.delta.shape[0] - 1, table.delta.shape[1]
    payload = zlib.compress(b"".join([np.ascontiguousarray(table.delta, "<i4").tobytes(),
                                      table.label_class.astype("<i4").tobytes(),
                                      table.final.astype(np.uint8).tobytes()]), 6)
    header = {"format": FORMAT, "version": VERSION, "fingerprint": fingerprint, "source": table.source,
              "start": table.start, "states": n, "classes": k, "payload_bytes": len(payload)}
    return pack(MAGIC, header, payload)


def from_bytes(data: bytes, source: str = "artifact", fingerprint: str | None = None) -> ByteTable:
    """The table of a lazy artifact's bytes; InputError for a damaged one, or (``fingerprint``
    given) one built for another tokenizer."""
    header, body = unpack(data, MAGIC, FORMAT, VERSION, source, "rebuild it (tokfst promote --format lazy)",
                          hint="rebuild-lazy")

    def damaged(why: str) -> InputError:
        return InputError(f"{source} is damaged ({why})", "rebuild it (tokfst promote --format lazy)",
                          hint="rebuild-lazy")

    fields = {k: header.get(k) for k in ("start", "states", "classes", "payload_bytes")}
    if any(type(v) is not int or v < 0 for v in fields.values()) or not isinstance(header.get("fingerprint"), str):
        raise damaged("header fields")
    if fingerprint is not None and fingerprint != header["fingerprint"]:
        raise foreign(source, header["fingerprint"], fingerprint)
    n, k = fields["states"], fields["classes"]
    cells = (n + 1) * k
    size = 4 * cells + 4 * LABELS + n  # what the header promises; no more is inflated
    try:
        raw = zlib.decompressobj().decompress(body[:fields["payload_bytes"]], size + 1)
    except zlib.error:
        raise damaged("payload does not decompress") from None
    if len(raw) != size or not fields["start"] < n or k < 1:
        raise damaged("payload size")
    delta = np.frombuffer(raw, "<i4", cells).reshape(n + 1, k).astype(np.int32)
    label_class = np.frombuffer(raw, "<i4", LABELS, 4 * cells).astype(np.int32)
    final = np.frombuffer(raw, np.uint8, n, 4 * cells + 4 * LABELS).astype(bool)
    if delta.min() < 0 or delta.max() > n or (delta[n] != n).any() or (delta[:, 0] != n).any() \
            or label_class.min() < 0 or label_class.max() >= k or label_class[0] or label_class[LABELS - 1]:
        raise damaged("a transition or class out of range")
    src = header.get("source")
    return ByteTable(delta, label_class, final, fields["start"], src if isinstance(src, str) else source)
