"""Stage C for BPE: an exact re-statement of Hugging Face's BPE model (``tokenizers`` models/bpe;
Cognetta & Okazaki 2024 Sec. 6.3).

Used to derive structure (reachability, merge traces, spines), never as the test oracle.
Semantics reproduced:
- word -> initial symbols: one per character (continuing_subword_prefix on non-first,
  end_of_word_suffix on the last); a character missing from the vocabulary becomes its
  ``<0xNN>`` byte tokens when byte_fallback holds and they all exist, else ``unk_token``
  (consecutive unknowns fused into one with fuse_unk), else nothing (HF drops it);
- merges: a min-heap on (rank, position of the left symbol); ties go to the leftmost pair;
  token ids never decide. A repeated pair keeps its last rank; a queue entry is stale when the
  pair at its position no longer produces its token;
- ignore_merges: a word that is itself a token is that token.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from tokfst_cli.errors import InputError
from tokfst_cli.tokenizer.model import TokenizerModel, merge_result


@dataclass(frozen=True)
class Event:
    """One merge as the heap performs it: left symbol at ``pos`` absorbs its right neighbour."""

    rank: int
    pos: int
    left: int
    right: int
    new: int


class HfBpe:
    """HF BPE inference over token ids."""

    def __init__(self, model: TokenizerModel):
        if model.family != "bpe":
            raise InputError(f"{model.source} is not a BPE tokenizer", "give a BPE tokenizer.json")
        self.model = model
        self.ids = model.model_vocab()
        prefix = model.options.get("continuing_subword_prefix") or ""
        self.prefix = prefix
        self.suffix = model.options.get("end_of_word_suffix") or ""
        toks, ids = model.tokens, self.ids
        if len(model.merge_new) == len(model.merges):
            self.new_ids = model.merge_new
        elif prefix:
            self.new_ids = [ids[merge_result(toks[a], toks[b], prefix)] for a, b in model.merges]
        else:
            self.new_ids = [ids[toks[a] + toks[b]] for a, b in model.merges]
        # a repeated pair keeps its last rank
        self.merges: dict[tuple[int, int], tuple[int, int]] = dict(
            zip(map(tuple, model.merges), zip(range(len(self.new_ids)), self.new_ids)))
        self.unk: str | None = model.options.get("unk_token") or None
        self.unk_id = self.ids.get(self.unk) if self.unk else None
        self.byte_fallback = bool(model.options.get("byte_fallback"))
        self.fuse_unk = bool(model.options.get("fuse_unk"))
        self.ignore_merges = bool(model.options.get("ignore_merges"))

    def initial_symbols(self, word: str, prefix_first: bool = False, suffix_last: bool = True) -> list[int]:
        """The symbols HF starts merging from (``merge_word`` before ``merge_all``).

        ``prefix_first``/``suffix_last`` place the word's first/last character inside a word,
        as when deriving a ``##`` piece or a piece without ``</w>``.
        """
        out: list[int] = []
        unk: int | None = None  # a pending (possibly fused) unknown
        last = len(word) - 1
        for i, ch in enumerate(word):
            s = ch
            if (i > 0 or prefix_first) and self.prefix:
                s = self.prefix + s
            if i == last and suffix_last and self.suffix:
                s = s + self.suffix
            tid = self.ids.get(s)
            if tid is not None:
                if unk is not None:
                    out.append(unk)
                    unk = None
                out.append(tid)
                continue
            if self.byte_fallback:
                fb = [self.ids.get(f"<0x{b:02X}>") for b in s.encode("utf-8")]
                if all(t is not None for t in fb):
                    out.extend(fb)  # HF adds these before any pending unknown
                    continue
            if self.unk_id is None:
                if self.unk is not None:
                    raise InputError(f"the unk_token {self.unk!r} is not in the vocabulary (HF fails on {ch!r} too)",
                                     "give a tokenizer.json whose unk_token is a token")
                continue  # no unk_token: HF drops the character
            if unk is not None and not self.fuse_unk:
                out.append(unk)
            unk = self.unk_id
        if unk is not None:
            out.append(unk)
        return out

    def merge_all(self, symbols: list[int], trace: list[Event] | None = None) -> list[int]:
        """HF's ``Word::merge_all``: apply merges by (rank, position) until none applies."""
        n = len(symbols)
        c = list(symbols)
        prev = list(range(-1, n - 1))
        nxt = list(range(1, n + 1))
        alive = [True] * n
        merges = self.merges
        heap = []
        for i in range(n - 1):
            m = merges.get((c[i], c[i + 1]))
            if m is not None:
                heap.append((m[0], i, m[1]))
        heapq.heapify(heap)
        while heap:
            rank, pos, new = heapq.heappop(heap)
            if not alive[pos] or nxt[pos] >= n:
                continue
            right = nxt[pos]
            m = merges.get((c[pos], c[right]))
            if m is None or m[1] != new:
                continue  # stale entry
            if trace is not None:
                trace.append(Event(rank, pos, c[pos], c[right], new))
            c[pos] = new
            alive[right] = False
            nxt[pos] = nxt[right]
            if nxt[pos] < n:
                prev[nxt[pos]] = pos
            if prev[pos] >= 0:
                m = merges.get((c[prev[pos]], new))
                if m is not None:
                    heapq.heappush(heap, (m[0], prev[pos], m[1]))
            if nxt[pos] < n:
                m = merges.get((new, c[nxt[pos]]))
                if m is not None:
                    heapq.heappush(heap, (m[0], pos, m[1]))
        return [c[i] for i in range(n) if alive[i]]

    def tokenize(self, word: str) -> list[int]:
        """HF's ``BPE::tokenize`` of one pre-token (model-level text), as token ids."""
        if not word:
            return []
        if self.ignore_merges:
            tid = self.ids.get(word)
            if tid is not None:
                return [tid]
        return self.merge_all(self.initial_symbols(word))
