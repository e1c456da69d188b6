"""Stage P for BPE tokenizers (Pitfalls 2025 Sec. 3.1): HF's normalizers and pre-tokenizers as transducers.

    charclass     the character sets of a Split pattern, read off HF's own regex engine
    pattern       an HF Split pattern as a priority NFA
    marked        leftmost-first match ends (RE2's ordered threads) and the marked language of a cut
    split         find_iter's cut with HF's delimiter behaviours as a transducer (also Replace)
    unicode_norm  NFC, NFD, NFKC, NFKD: the DFA of the texts each leaves unchanged, from HF's tables
    classdfa      a DFA over code point classes as a DFA over UTF-8 bytes, in bulk
    build         a tokenizer.json's normalizer and pre-tokenizer blocks as one transducer P
"""
