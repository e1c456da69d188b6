"""Stage A for grammars (Koo et al. 2024 Sec. 3): GBNF and Lark grammars read into one IR (ir), and
compiled to byte automata where their recursion is left- or right-linear (regular).

    ir           the grammar IR both readers produce
    gbnf         llama.cpp's GBNF, read with a Lark grammar of GBNF
    lark_reader  Lark grammars, read with lark itself
    regular      the regular subset as a byte DFA (self-embedding refused by name)
"""
