"""Stage C for WordPiece: canonical MaxMatch (WordPiece, Cognetta & Okazaki 2024 Sec. 6.2) along the
Pitfalls 2025 pipeline.

    preprocess   P: BertNormalizer + BertPreTokenizer as a byte transducer (Pitfalls 2025 Sec. 3.1)
    taho         T_Aho: LinMaxMatch tries and the MaxMatch transducer (Cognetta & Okazaki 2024 Alg. 7-8)
    wordtext     X = MIN(PROJ(A o P o U)): the regex's pre-tokenized text, [UNK] words marked
    product      S + C: the canonical automaton as a deterministic product (lazy or materialized)
    composition  S + C the paper's way: MIN(PROJ(X o T_Aho))
    factorized   the factorized artifact (X + fingerprint) and its loader
"""
