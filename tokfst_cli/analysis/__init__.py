"""Analysis of built constraints: canonical-check, counting and uniform sampling, random walks and steering,
structure and skip rates, drawings and marginalization. Reads every layer below; nothing below reads it."""
