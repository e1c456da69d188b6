"""Write a BPE tokenizer.json whose merges are converted from a rank table, as tiktoken's are.

The rank table is the vocabulary of one or more tokenizer.json files, in order (the first
file's tokens by id, then the next file's new tokens by id), cut at --size tokens; with
--displace FRAC,SHIFT a fraction FRAC of the multi-character tokens moves up to SHIFT ranks
earlier (as when a vocabulary is extended by a second training). Every split of a token into
two tokens becomes a merge ranked by the token's rank (ties by the parts' ranks), which is how
rank tables are turned into Hugging Face merge lists. Such lists have many tokens whose merge
traces pop out of rank order; ``tokfst bench compile`` measures compile-bpe on them.

    python scripts/rank_table.py big.json gpt4o.json gemma3.json --size 262144
    python scripts/rank_table.py odd.json tokfst_cli/data/gpt2.json --displace 0.02,3000
"""

from __future__ import annotations

import argparse
import json
import random


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("inputs", nargs="+", help="tokenizer.json files whose vocabularies make the rank table")
    ap.add_argument("--size", type=int, default=None, help="tokens in the rank table (default: all)")
    ap.add_argument("--displace", default=None, metavar="FRAC,SHIFT")
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args()
    docs = [json.load(open(p, encoding="utf-8")) for p in a.inputs]
    order: list[str] = []
    seen: set[str] = set()
    for d in docs:
        for tok, _ in sorted(d["model"]["vocab"].items(), key=lambda kv: kv[1]):
            if tok not in seen:
                seen.add(tok)
                order.append(tok)
    if a.size:
        singles = [t for t in order if len(t) == 1]
        multi = [t for t in order if len(t) > 1][: max(0, a.size - len(singles))]
        keep = set(singles) | set(multi)
        order = [t for t in order if t in keep]
    key = {t: float(i) for i, t in enumerate(order)}
    if a.displace:
        frac, shift = a.displace.split(",")
        rng = random.Random(a.seed)
        for t in order:
            if len(t) > 1 and rng.random() < float(frac):
                key[t] -= rng.randint(1, int(shift))
    ranks = {t: r for r, t in enumerate(sorted(order, key=lambda t: (len(t) > 1, key[t])))}
    merges = []
    for tok, rank in ranks.items():
        merges += [(rank, ranks[tok[:k]], ranks[tok[k:]], tok[:k], tok[k:])
                   for k in range(1, len(tok)) if tok[:k] in ranks and tok[k:] in ranks]
    merges.sort()
    d = docs[0]
    d["model"].update(vocab=ranks, merges=[[x, y] for *_, x, y in merges], byte_fallback=False, unk_token=None,
                      ignore_merges=False)
    d["added_tokens"] = [dict(t, id=ranks[t["content"]]) for t in d.get("added_tokens") or [] if t["content"] in ranks]
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(d, f, ensure_ascii=False)
    print(f"{a.out}: {len(ranks)} tokens, {len(merges)} merges")


if __name__ == "__main__":
    main()
