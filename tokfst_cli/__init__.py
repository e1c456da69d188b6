"""tokfst: compile and inspect tokenizer automata (Cognetta & Okazaki, seed 000)."""

__version__ = "0.1.0"
