"""``tokfst bench``: the paper's tables and peer comparisons (issue #5).

Modules, one per thing measured, plus plumbing:
    promotion     Table 1: canonical promotion time, Eq. 4 (gadgets) vs Eq. 5 (precomputed A_BPE)
                  vs the implicit form, each cell in its own process under a timeout
    size          Table 2: A_BPE size (states, stored arcs, bytes) per representation
    tokenization  Sec. 6.4.1: a paragraph tokenized via the automaton vs HF's encode
    peers         tokfst vs outlines-core's Index on one vocabulary and a regex set
    masks         per-step mask lookup: tokfst's index vs the naive per-token partial match
    corpus        the training corpus, cached trained tokenizers, the edit-distance automaton
    regexes       the default regex set (the six of the foundation issue, the Pokedex object)
    common        machine facts, versions, timing, the result document
    isolate       running one measurement in a child process with a timeout
    report        rich/Markdown tables, JSON, CSV and plots
"""
