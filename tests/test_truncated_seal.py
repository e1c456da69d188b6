"""A ``.fst`` cut inside its seal is "truncated", not read as another tool's OpenFst file.

tokfst's ``.fst`` files end with a seal (``TOKFSTSUM1`` and a sha256, 42 bytes). Cut inside it,
the OpenFst structure before it is whole and the unfinished seal was taken for trailing bytes
of a foreign (unsealed) file: accepted without verification. Now bytes after the structure
that begin a seal are a truncation. Cut exactly at the seal, the file is a complete OpenFst
file without a seal (as OpenFst's own tools write them), read as such; cut further, the
structure itself says "truncated".
"""

from __future__ import annotations

import pytest

from tokfst_cli import pipeline
from tokfst_cli.automata.fst_io import fst_bytes, parse_fst
from tokfst_cli.errors import InputError
from tokfst_cli.support.files import SEAL_SIZE, cut_seal

from .runner import run


@pytest.fixture(scope="module")
def sealed(tokenizer) -> bytes:
    return fst_bytes(pipeline.build(tokenizer("gpt2"), "(ab|c)+").fst)


@pytest.mark.parametrize("cut", range(1, SEAL_SIZE))
def test_cut_inside_the_seal_is_truncated(sealed, cut):
    with pytest.raises(InputError, match=r"x\.fst is truncated \(its tokfst seal is cut short\)"):
        parse_fst(sealed[:-cut], "x.fst")


def test_cut_at_the_seal_is_an_openfst_file_and_further_is_truncated(sealed):
    assert parse_fst(sealed[:-SEAL_SIZE], "x.fst").num_states() > 0
    for cut in (SEAL_SIZE + 1, SEAL_SIZE + 13, len(sealed) // 2):
        with pytest.raises(InputError, match="truncated"):
            parse_fst(sealed[:-cut], "x.fst")


def test_what_counts_as_a_cut_seal():
    assert cut_seal(b"T") and cut_seal(b"TOKFSTSUM1") and cut_seal(b"TOKFSTSUM1" + b"\0" * 31)
    assert not cut_seal(b"") and not cut_seal(b"X") and not cut_seal(b"TOKFSTSUM1" + b"\0" * 32)


def test_the_command_line_says_truncated(sealed, tmp_path):
    path = tmp_path / "cut.fst"
    path.write_bytes(sealed[:-20])
    r = run("sample", "gpt2", path, "-n", "1")
    assert r.rc == 2 and len(r.err_lines) == 1 and "is truncated (its tokfst seal is cut short)" in r.err_lines[0], \
        r.err_lines
