"""Stage A for text (Cognetta & Okazaki 2024 Sec. 5; Pitfalls 2025 Sec. 3): regexes to byte automata,
regex groups and syntactic sugar (Koo et al. 2024 Table 1), terminal labels, and the regex catalogue."""
