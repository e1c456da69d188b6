"""Automata helpers that know nothing of stages: OpenFst files and arc arrays, symbol tables, UTF-8 ranges,
byte classes, packed token bitsets and their compiled kernels, and generic graph helpers."""
