"""Canonical BPE (seed 000 Sec. 6.3-6.5): HF merge semantics, gadgets, the canonical automaton."""
