"""Tests of the modular filters (Pitfalls 2025 Sec. 4, issue #14)."""
