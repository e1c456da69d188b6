"""Plumbing below every stage: atomic files, seals and containers, the on-disk cache, progress,
the supervisor (time and memory limits), the bug-report doctor, and the package's version."""
