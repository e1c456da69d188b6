"""The bulk Fst builder and the artifact container against OpenFst's own constructions."""

from __future__ import annotations

import numpy as np
import pynini
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli.automata.arrays import fst_arrays, fst_from_arrays
from tokfst_cli.errors import InputError
from tokfst_cli.support.files import pack, unpack

from .runner import tool


@given(st.integers(1, 30), st.lists(st.tuples(st.integers(0, 29), st.integers(0, 70000), st.integers(0, 29)),
                                    max_size=200), st.data())
@settings(max_examples=100, deadline=None)
def test_bulk_builder_equals_add_arc(n, arcs, data):
    arcs = [(s % n, lab, d % n) for s, lab, d in arcs]
    finals = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    start = data.draw(st.integers(0, n - 1))
    src = np.array([a[0] for a in arcs], np.int64)
    lab = np.array([a[1] for a in arcs], np.int64)
    dst = np.array([a[2] for a in arcs], np.int64)
    out = np.where(lab % 3 == 0, 0, lab + 1)  # epsilons on both sides, counted per state by the ConstFst format
    bulk = fst_from_arrays(n, start, finals, src, lab, out, dst)
    ref = pynini.Fst()
    one = pynini.Weight.one(ref.weight_type())
    ref.add_states(n)
    ref.set_start(start)
    for s in np.flatnonzero(finals):
        ref.set_final(int(s))
    for s, label, d in sorted(arcs, key=lambda a: a[0]):  # stable: same arc order per state
        ref.add_arc(s, pynini.Arc(label, 0 if label % 3 == 0 else label + 1, one, d))
    assert pynini.equal(bulk, ref)
    assert bulk.verify()
    for s in range(n):
        assert (bulk.num_input_epsilons(s), bulk.num_output_epsilons(s)) == (
            ref.num_input_epsilons(s), ref.num_output_epsilons(s))
    back = fst_arrays(ref.set_input_symbols(pynini.SymbolTable()))  # the bulk reader, symbols dropped on a copy
    assert back.start == start and back.final.tolist() == finals.tolist()
    assert list(zip(back.src.tolist(), back.ilabel.tolist(), back.olabel.tolist(), back.nextstate.tolist())) == [
        (s, a.ilabel, a.olabel, a.nextstate) for s in ref.states() for a in ref.arcs(s)]


def test_bulk_fst_is_read_by_openfst_tools(tmp_path):
    f = fst_from_arrays(3, 0, np.array([False, False, True]), np.array([0, 1, 1]), np.array([5, 6, 7]),
                        np.array([5, 6, 7]), np.array([1, 2, 0]))
    path = tmp_path / "b.fst"
    f.write(str(path))
    out = tool("fstinfo", path)
    assert out.returncode == 0 and "# of arcs                                         3" in out.stdout.decode()


def test_container_refuses_damage():
    blob = pack(b"MAGIC\0", {"format": "f", "version": 1}, b"payload")
    header, body = unpack(blob, b"MAGIC\0", "f", 1, "x", "fix")
    assert body == b"payload" and header["format"] == "f"
    for bad in (blob[:-1], blob[:8], b"OTHER\0" + blob[6:], blob.replace(b"payload", b"paylaod")):
        with pytest.raises(InputError):
            unpack(bad, b"MAGIC\0", "f", 1, "x", "fix")
    with pytest.raises(InputError, match="expected f v2"):
        unpack(blob, b"MAGIC\0", "f", 2, "x", "fix")
