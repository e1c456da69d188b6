"""Tests of tokfst_cli.bpe: the canonical BPE automaton (implicit, explicit, gadgets) and canonical promotion."""
