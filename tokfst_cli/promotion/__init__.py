"""Stage S, promotion (Cognetta & Okazaki 2024 Sec. 5): the lexicon transducer T, A o T walked over T's trie,
and its on-demand form (the byte table and the lazy decoder)."""
