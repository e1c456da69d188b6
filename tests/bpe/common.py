"""What the BPE tests share: the compiled real tokenizers, sampled sequences, small tokenizers.

``compiled(name)``: (model, implicit A_BPE attached to it, HF Tokenizer) of GPT-2 or Llama-2;
``trained_tokenizer``: a tokenizer.json trained here by HF's BpeTrainer; ``synthetic_tokenizer``:
a hand-written one with the corner cases of BPE merge lists.
"""

from __future__ import annotations

import json
import random
from functools import lru_cache

import numpy as np
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from tokfst_cli.bpe import implicit

from ..conftest import real, words100

REAL = ["gpt2", "llama2"]


@lru_cache(maxsize=None)
def compiled(name: str):
    model, _, hf = real(name)
    return model, implicit.compile_implicit(model).attach(model), hf


def normal_tokens(name: str) -> np.ndarray:
    """Tokens with a model-level text of their own (not special, not byte-fallback)."""
    _, imp, _ = compiled(name)
    return np.flatnonzero(imp.allowed & (imp.fb_byte < 0))


def sequences(name: str, n: int, seed: int) -> list[list[int]]:
    """Half HF tokenizations of random token concatenations (canonical), half random sequences."""
    model, _, hf = compiled(name)
    toks = normal_tokens(name)
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = rng.randint(2, 6)
        seq = [int(rng.choice(toks)) for _ in range(k)]
        if i % 2:
            seq = [t.id for t in hf.model.tokenize("".join(model.tokens[t] for t in seq))]
        out.append(seq)
    return out


CORPUS = ("the quick brown fox jumps over the lazy dog while the dogs bark at the moon "
          "banana bandana cabana anagram aaaa aaab abab baba abba cabbage").split()


def trained_tokenizer(tmp_path, vocab_size: int, **opts) -> str:
    tok = Tokenizer(models.BPE(unk_token="[UNK]", **{k: v for k, v in opts.items() if k != "ignore_merges"}))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(CORPUS * 20 + words100() * 5, trainers.BpeTrainer(
        vocab_size=vocab_size, show_progress=False, special_tokens=["[UNK]"], **opts))
    d = json.loads(tok.to_str())
    d["model"]["ignore_merges"] = bool(opts.get("ignore_merges"))
    path = tmp_path / f"t{vocab_size}-{len(opts)}.json"
    path.write_text(json.dumps(d))
    return str(path)


def synthetic_tokenizer(tmp_path, ignore_merges: bool) -> str:
    """Duplicate-result merges, (a, a) merges, ids out of merge order, a merge ranked before its
    operand's creation, and a repeated pair."""
    vocab = {"abc": 0, "c": 1, "b": 2, "a": 3, "ab": 4, "bc": 5, "ca": 6, "cab": 7, "bca": 8, "aa": 9, "aaa": 10,
             "x": 11, "y": 12, "z": 13, "yz": 14, "xyz": 15, "[UNK]": 16}
    merges = [["x", "yz"], ["a", "b"], ["b", "c"], ["c", "a"], ["a", "a"], ["ab", "c"], ["a", "bc"], ["c", "ab"],
              ["aa", "a"], ["y", "z"], ["b", "c"]]
    d = {"version": "1.0", "truncation": None, "padding": None, "normalizer": None, "pre_tokenizer": None,
         "post_processor": None, "decoder": None,
         "added_tokens": [{"id": 16, "content": "[UNK]", "single_word": False, "lstrip": False, "rstrip": False,
                           "normalized": False, "special": True}],
         "model": {"type": "BPE", "dropout": None, "unk_token": "[UNK]", "continuing_subword_prefix": None,
                   "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                   "ignore_merges": ignore_merges, "vocab": vocab, "merges": merges}}
    path = tmp_path / f"synthetic-{ignore_merges}.json"
    path.write_text(json.dumps(d))
    Tokenizer.from_file(str(path))  # HF accepts it
    return str(path)


def rank_table_tokenizer(tmp_path, frac: float = 0.02, shift: int = 3000, seed: int = 5) -> str:
    """GPT-2's vocabulary as a rank table with some ranks moved earlier (as when a vocabulary is
    extended by a second training), turned into HF merges the way tiktoken rank tables are
    converted: every split of a token into two tokens is a merge, ranked by the token's rank.
    Many tokens' traces then pop out of (rank, position) order."""
    from ..conftest import TOKENIZERS

    d = json.loads(TOKENIZERS["gpt2"].read_text())
    vocab = d["model"]["vocab"]
    rng = random.Random(seed)
    key = {t: float(i) - (rng.randint(1, shift) if len(t) > 1 and rng.random() < frac else 0) for t, i in vocab.items()}
    ranks = {t: r for r, t in enumerate(sorted(vocab, key=lambda t: (len(t) > 1, key[t])))}
    merges = []
    for tok, rank in ranks.items():
        splits = [(tok[:k], tok[k:]) for k in range(1, len(tok)) if tok[:k] in ranks and tok[k:] in ranks]
        merges += [(rank, ranks[a], ranks[b], a, b) for a, b in splits]
    merges.sort()
    d["model"]["vocab"] = ranks
    d["model"]["merges"] = [[a, b] for *_, a, b in merges]
    d["added_tokens"] = [dict(a, id=ranks[a["content"]]) for a in d.get("added_tokens") or []]
    path = tmp_path / f"rank-table-{frac}-{shift}-{seed}.json"
    path.write_text(json.dumps(d))
    Tokenizer.from_file(str(path))  # HF accepts it
    return str(path)
