"""``tokfst bench``: the paper's tables, peer comparisons and the product's own benchmarks.

Modules, one per mode (thing measured), plus plumbing:
    promotion     table1: canonical promotion time, Eq. 4 (gadgets) vs Eq. 5 (precomputed A_BPE)
                  vs the implicit form, each cell in its own process under a timeout
    size          table2: A_BPE size (states, stored arcs, bytes) per representation
    tokenization  paragraph (Sec. 6.4.1): a paragraph tokenized via the automaton vs HF's encode
    peers         peers: tokfst vs outlines-core's Index on one vocabulary and a regex set
    masks         masks: per-step masks along HF's tokenization at fresh states, tokfst vs outlines-core,
                  llguidance, xgrammar
    engines       the constraint engines (tokfst and peers) behind one per-step interface
    logits        logits: the transformers logits processor's cost per generated token
    ready         ready: regex -> ready constraint, tokfst vs xgrammar, llguidance, outlines-core
    promote       promote: regex to token automaton warm and cold (whole processes), by step
    canonical     canonical: canonical BPE, compile-bpe, canonical-check per pair, per regex
    maxmatch      maxmatch: canonical MaxMatch, compile-maxmatch cold, product vs T_Aho per regex
    check         check: canonical-check --input text throughput and peak RSS vs HF's encode, and the
                  WordPiece factorized switch
    run           one run: validating the options, training, running the modes, the outputs
    corpus        the training corpus, cached trained tokenizers, the edit-distance automaton
    common        machine facts, versions, timing, cold processes, the result document
    isolate       running one measurement in a child process with a timeout
    report        rich/Markdown tables, JSON, CSV and plots
The regexes come from :mod:`tokfst_cli.text.catalogue`.
"""
