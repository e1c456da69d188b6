"""Modular filters composed into the pipeline (Pitfalls 2025 Sec. 4): which ones a constraint asks for.

Text-level filters restrict the regex's language before stage P (stage A's output):
``scripts`` / ``ascii`` (Sec. 4.2, mono- vs multi-linguality; App. A.4), ``nfc`` (Sec. 4.1,
canonical Unicode): MIN(A ∩ F) with F a tokenizer-independent byte DFA (:mod:`.text`).
Token-level filters restrict stage S's token automaton before stage C: ``literal_ascii`` /
``no_byte_tokens`` (Sec. 4.3, characters vs bytes; :mod:`.bytes`), ``fuse_spaces`` (Sec. 4.5,
isolated spaces; :mod:`.tokens`), ``max_tokens`` (sequences of at most N tokens, Pitfalls 2025 App. B's
Gamma^k; :mod:`.length`): S ∩ F with F a DFA over token labels. Canonical filtering commutes with
both: C(S ∩ F) = C(S) ∩ F. A filter that leaves nothing raises ``EmptyLanguageError``
(hint ``filters-empty``); an unknown script ``InputError`` (hint ``scripts``)."""
