"""Stage C for BPE: canonical BPE (Cognetta & Okazaki 2024 Sec. 6.3-6.5): HF merge semantics, gadgets,
the canonical automaton."""
