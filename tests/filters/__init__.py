"""Tests of the modular filters (seed 001 Sec. 4, issue #14)."""
