"""Bad-input battery, artifacts: every header field changed, a bit flip in every section.

Artifacts: the implicit A_BPE (``compile-bpe``), the BPE and WordPiece factorized forms
(``promote --canonical --format index`` past ``--max-arcs``), the JSON index, and ``.fst``
files (sealed by tokfst, or plain from OpenFst). A damaged artifact is refused with an
InputError (on the command line: exit 2, one line), never a crash; when a damaged file still
loads, it answers exactly as the intact one (the damage hit bytes that carry no meaning, such
as a hex digit's case in a JSON escape, or the seal's magic, leaving a plain OpenFst file).
Plain ``.fst`` files carry no checksum: there the promise is no crash (OpenFst would abort on a
huge count; :func:`tokfst_cli.automata.fst_io.check_openfst` refuses those first).

Library calls in process for the generated damage (fast); the command line in process for
exit codes and messages, and as a subprocess where OpenFst itself would abort the process.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pynini
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokfst_cli import constraint, pipeline
from tokfst_cli.automata.fst_io import FST_MAGIC, fst_bytes, parse_fst
from tokfst_cli.bpe import factorized as bpe_factorized
from tokfst_cli.bpe import implicit
from tokfst_cli.errors import InputError
from tokfst_cli.maxmatch import factorized as mm_factorized
from tokfst_cli.support.files import SEAL_SIZE
from tokfst_cli.tokenizer import model as tokmod

from .cli.test_battery import BASES
from .conftest import BATTERY
from .runner import make_env, run, run_many

BPE = tokmod.from_json(BASES["bpe"], "bpe.json")
WORDPIECE = tokmod.from_json(BASES["wordpiece"], "wordpiece.json")
TINY = pipeline.Limits(max_arcs=1)  # forces the factorized form


def build_artifacts() -> dict[str, bytes]:
    imp = implicit.compile_implicit(BPE).attach(BPE)
    bpe_fac = pipeline.build(BPE, "[a-c]+", canonical=True, limits=TINY, cache=False)
    wp_fac = pipeline.build(WORDPIECE, "[a-c]+( [a-c]+)?", canonical=True, limits=TINY)
    mat = pipeline.build(BPE, "(ab|c|abc)+[0-9]", canonical=True, cache=False)
    assert not bpe_fac.materialized and not wp_fac.materialized and mat.materialized
    return {
        "implicit": implicit.to_bytes(imp),
        "bpe-factorized": bpe_fac.to_bytes(),
        "wordpiece-factorized": wp_fac.to_bytes(),
        "index": json.dumps(mat.index()).encode(),
        "fst": fst_bytes(mat.fst),
        "fst-plain": fst_bytes(mat.fst, sealed=False),
    }


ARTIFACTS = build_artifacts()
CONTAINERS = {"implicit": implicit.MAGIC, "bpe-factorized": bpe_factorized.MAGIC,
              "wordpiece-factorized": mm_factorized.MAGIC}


def load(kind: str, data: bytes):
    """The decoder (or, for the implicit A_BPE, the artifact) of ``data``; InputError when refused."""
    if kind == "implicit":
        return implicit.from_bytes(data, BPE.fingerprint, "x.bpe").attach(BPE)
    if kind == "bpe-factorized":
        return bpe_factorized.from_bytes(data, BPE, "x.tfz")
    if kind == "wordpiece-factorized":
        return mm_factorized.from_bytes(data, WORDPIECE, "x.tfz")
    if kind == "index":
        return constraint._index(data, "x.json")
    return constraint.FstDecoder(parse_fst(data, "x.fst"), BPE.vocab_size)


def answers(kind: str, obj) -> list:
    """What an artifact says: verdicts on probe sequences (implicit), else a walk of its states."""
    if kind == "implicit":
        rng = np.random.default_rng(0)
        seqs = [list(map(int, rng.integers(0, BPE.vocab_size, k))) for k in (1, 2, 2, 3, 5, 8) * 20]
        seqs += [[BPE.token_id("ab"), BPE.token_id("c")], [BPE.token_id("a"), BPE.token_id("b")]]
        return [obj.first_violation(s) for s in seqs] + [obj.info()]
    out, frontier, seen = [], [obj.initial()], 0
    while frontier and seen < 40:
        s = frontier.pop(0)
        seen += 1
        mask = np.flatnonzero(obj.mask(s))
        out.append((tuple(mask.tolist()), bool(obj.is_final(s))))
        frontier += [obj.advance(s, int(t)) for t in mask[:4]]
    return out


EXPECTED = {kind: answers(kind, load(kind, data)) for kind, data in ARTIFACTS.items()}


def refused_or_same(kind: str, data: bytes) -> None:
    try:
        obj = load(kind, data)
    except InputError as e:
        assert "\n" not in e.one_line()
        return
    assert answers(kind, obj) == EXPECTED[kind], "a damaged artifact gave another answer"


def test_intact_artifacts_load():
    for kind, data in ARTIFACTS.items():
        assert answers(kind, load(kind, data)) == EXPECTED[kind]


# --- containers: every header field -----------------------------------------------------------

def split(kind: str, data: bytes) -> tuple[bytes, dict, bytes]:
    magic = CONTAINERS[kind]
    (hlen,) = struct.unpack_from("<I", data, len(magic))
    start = len(magic) + 4
    return magic, json.loads(data[start:start + hlen]), data[start + hlen:]


def repack(magic: bytes, header: dict, body: bytes) -> bytes:
    h = json.dumps(header, sort_keys=True).encode()
    return magic + struct.pack("<I", len(h)) + h + body


def other_values(v) -> list:
    """Values different from ``v``: of its own type, and of others."""
    if isinstance(v, bool):
        same = [not v]
    elif isinstance(v, int):
        same = [v + 1, v - 1, 0, -1, 2 ** 40]
    elif isinstance(v, str):
        same = [v + "x", v[:-1], ""]
    elif isinstance(v, list):
        same = [v[:-1], v + [v[0]] if v else [0], []]
    elif isinstance(v, dict):
        same = [{**v, "x": 1}, {}]
    else:
        same = []
    out = []
    for x in same + [None, "1", 1.5, [], {}]:
        if (x != v or type(x) is not type(v)) and x not in out:
            out.append(x)
    return out


FIELDS = [(kind, key, i) for kind in CONTAINERS for key in sorted(split(kind, ARTIFACTS[kind])[1])
          for i in range(len(other_values(split(kind, ARTIFACTS[kind])[1][key])))]


@pytest.mark.parametrize("kind,key,i", FIELDS, ids=[f"{k}-{f}-{i}" for k, f, i in FIELDS])
def test_every_header_field_changed_is_refused(kind, key, i):
    magic, header, body = split(kind, ARTIFACTS[kind])
    header[key] = other_values(header[key])[i]
    with pytest.raises(InputError):
        load(kind, repack(magic, header, body))


def test_nested_header_fields_changed_are_refused():
    magic, header, body = split("implicit", ARTIFACTS["implicit"])
    for change in (lambda h: h["arrays"][0].update(dtype="<i8"), lambda h: h["arrays"][3].update(shape=[1]),
                   lambda h: h["arrays"][1].update(name="allowed"), lambda h: h["counts"].update(states=1)):
        h = json.loads(json.dumps(header))
        change(h)
        with pytest.raises(InputError):
            load("implicit", repack(magic, h, body))


def test_header_without_checksum_is_checked_field_by_field():
    """Artifacts from before the header checksum: their fields are still validated."""
    magic, header, body = split("implicit", ARTIFACTS["implicit"])
    del header["checksum"]
    assert answers("implicit", load("implicit", repack(magic, header, body))) == EXPECTED["implicit"]
    for key, value in (("vocab_size", header["vocab_size"] + 1), ("vocab_size", "40"), ("fingerprint", 7),
                       ("arrays", header["arrays"][:-1]), ("arrays", "x")):
        with pytest.raises(InputError):
            load("implicit", repack(magic, {**header, key: value}, body))


# --- a bit flip in every section ---------------------------------------------------------------

def sections(kind: str, data: bytes) -> dict[str, tuple[int, int]]:
    """name -> [start, end) of the artifact's parts."""
    if kind in CONTAINERS:
        magic, header, body = split(kind, data)
        start = len(data) - len(body)
        out = {"magic": (0, len(magic)), "length": (len(magic), len(magic) + 4),
               "header": (len(magic) + 4, start), "body": (start, len(data))}
        if kind == "bpe-factorized":
            cut = start + header["payload_bytes"]
            out.update(body=(start, cut), implicit=(cut, len(data)))
        return out
    if kind == "index":
        return {"document": (0, len(data))}
    n = len(data) - (SEAL_SIZE if kind == "fst" else 0)
    out = {"fst header": (0, 60), "symbols and states": (60, n)}
    if kind == "fst":
        out.update({"seal magic": (n, n + 10), "seal digest": (n + 10, len(data))})
    return out


SECTIONS = [(kind, name) for kind in ARTIFACTS for name in sections(kind, ARTIFACTS[kind])]


def flip(data: bytes, lo: int, hi: int, draw) -> bytes:
    i = draw(st.integers(lo, hi - 1))
    bit = draw(st.integers(0, 7))
    out = bytearray(data)
    out[i] ^= 1 << bit
    return bytes(out)


@pytest.mark.parametrize("kind,section", [s for s in SECTIONS if s[0] != "index"],
                         ids=[f"{k}-{n}" for k, n in SECTIONS if k != "index"])
@BATTERY
@given(data=st.data())
def test_a_bit_flip_is_refused_or_harmless(kind, section, data):
    lo, hi = sections(kind, ARTIFACTS[kind])[section]
    damaged = flip(ARTIFACTS[kind], lo, hi, data.draw)
    if kind == "fst-plain":  # no checksum: the promise is no crash
        try:
            load(kind, damaged)
        except InputError:
            pass
        return
    refused_or_same(kind, damaged)


@pytest.mark.parametrize("kind", [k for k in ARTIFACTS if k != "index"])
@BATTERY
@given(data=st.data())
def test_truncation_is_refused(kind, data):
    cut = data.draw(st.integers(0, len(ARTIFACTS[kind]) - 1))
    damaged = ARTIFACTS[kind][:cut]
    if kind == "fst":  # cut just before the seal: a plain, intact OpenFst file (inside it: truncated)
        refused_or_same(kind, damaged)
    elif kind == "fst-plain":
        try:
            load(kind, damaged)
        except InputError:
            pass
    else:
        with pytest.raises(InputError):
            load(kind, damaged)


@BATTERY
@given(data=st.data())
def test_index_bit_flip_is_refused_or_harmless(data):
    refused_or_same("index", flip(ARTIFACTS["index"], 0, len(ARTIFACTS["index"]), data.draw))


def test_index_every_field_changed_is_refused():
    """Fields a decoder reads, and the format, version and checksum, are checked; generator and
    stats are informational (a change there is harmless, never a wrong answer)."""
    from tokfst_cli.decoding.index import CHECKED

    doc = json.loads(ARTIFACTS["index"])
    assert "sha256" in doc
    for key in sorted(doc):
        for value in other_values(doc[key]):
            damaged = json.dumps({**doc, key: value}).encode()
            if key in (*CHECKED, "format", "version", "sha256"):
                with pytest.raises(InputError):
                    load("index", damaged)
            else:
                refused_or_same("index", damaged)
    for change in (lambda d: d["states"][0].update(mask=10 ** 6), lambda d: d["masks"][0].append(10 ** 6),
                   lambda d: d["tokenizer"].update(vocab_size=-1), lambda d: d["states"][0]["next"].append(0)):
        d = json.loads(ARTIFACTS["index"])
        change(d)
        with pytest.raises(InputError):
            load("index", json.dumps(d).encode())
        del d["sha256"]  # without a checksum: the structure is still checked
        with pytest.raises(InputError):
            load("index", json.dumps(d).encode())


# --- OpenFst files that would make OpenFst abort -------------------------------------------------

def fst_header(data: bytes) -> int:
    """Offset of the properties word in a vector FST's header."""
    pos = 4
    for _ in range(2):
        (n,) = struct.unpack_from("<i", data, pos)
        pos += 4 + n
    return pos + 8


def damaged_fsts() -> dict[str, bytes]:
    plain = ARTIFACTS["fst-plain"]
    props = fst_header(plain)
    out = {}
    b = bytearray(plain)
    struct.pack_into("<q", b, props + 16, 1 << 40)  # num_states
    out["huge state count"] = bytes(b)
    b = bytearray(plain)
    struct.pack_into("<i", b, 4, 1 << 30)  # fst type string length
    out["huge string length"] = bytes(b)
    b = bytearray(plain)
    struct.pack_into("<i", b, 0, FST_MAGIC + 1)
    out["bad magic"] = bytes(b)
    fst = pynini.Fst.read_from_string(plain)
    b = bytearray(plain)
    # the first state's arc count: after the header and both symbol tables, past its final weight
    first_state = len(plain) - sum(12 + 16 * fst.num_arcs(s) for s in fst.states())
    struct.pack_into("<q", b, first_state + 4, 1 << 40)
    out["huge arc count"] = bytes(b)
    struct.pack_into("<q", b, first_state + 4, -5)
    out["negative arc count"] = bytes(b)
    b = bytearray(plain)
    struct.pack_into("<i", b, first_state + 12 + 12, 10 ** 6)  # first arc's next state
    out["next state out of range"] = bytes(b)
    b = bytearray(plain)
    struct.pack_into("<q", b, props + 8, 10 ** 6)  # start state
    out["start out of range"] = bytes(b)
    out["const fst"] = plain.replace(b"\x06\x00\x00\x00vector", b"\x05\x00\x00\x00const", 1)
    out["empty"] = b""
    out["truncated"] = plain[: len(plain) // 2]
    return out


DAMAGED_FSTS = damaged_fsts()


@pytest.mark.parametrize("name", list(DAMAGED_FSTS))
def test_damaged_fst_is_refused_in_process(name):
    with pytest.raises(InputError):
        parse_fst(DAMAGED_FSTS[name], "bad.fst")


def test_damaged_fst_never_aborts_the_process(tmp_path):
    """As a real process (OpenFst's abort would kill it): draw, promote --method aho --artifact."""
    env = make_env(tmp_path / "cache")
    jobs = {}
    for name, data in DAMAGED_FSTS.items():
        p = tmp_path / f"{name.replace(' ', '-')}.fst"
        p.write_bytes(data)
        jobs[name] = (("draw", p, tmp_path / f"{p.stem}.dot"), {"env": env})
    for name, r in run_many(jobs).items():
        assert r.rc == 2, (name, r.err)
        assert len(r.err_lines) == 1 and r.err_lines[0].startswith("tokfst: error: "), (name, r.err_lines)
        assert b"terminate" not in r.err and b"ERROR" not in r.err


# --- the command line on damaged artifacts ---------------------------------------------------------

def test_command_line_refuses_damaged_artifacts(tmp_path):
    tok = tmp_path / "bpe.json"
    tok.write_text(json.dumps(BASES["bpe"]))
    good = ARTIFACTS["implicit"]
    magic, header, body = split("implicit", good)
    flipped = bytearray(good)
    flipped[-10] ^= 1
    damaged = {
        "flipped": bytes(flipped),
        "header": repack(magic, {**header, "vocab_size": header["vocab_size"] + 1}, body),
        "truncated": good[:-100],
        "empty": b"",
    }
    for name, data in damaged.items():
        art = tmp_path / f"{name}.bpe"
        art.write_bytes(data)
        for args in (("compile-bpe", "--info", art), ("canonical-check", tok, "--artifact", art),
                     ("promote", tok, tmp_path / "out.fst", "-e", "ab", "--canonical", "--artifact", art)):
            r = run(*args, stdin="1 2\n")
            assert r.rc == 2, (name, args, r.err)
            assert len(r.err_lines) == 1 and str(art) in r.err_lines[0], (name, args, r.err_lines)
            assert not (tmp_path / "out.fst").exists()
    art = tmp_path / "good.bpe"
    art.write_bytes(good)
    assert run("canonical-check", tok, "--artifact", art, stdin="1 2\n").rc == 0


def test_sealed_fst_flip_reported_as_checksum_mismatch(tmp_path):
    data = bytearray(ARTIFACTS["fst"])
    data[len(data) // 2] ^= 4
    p = tmp_path / "x.fst"
    p.write_bytes(bytes(data))
    r = run("draw", p, tmp_path / "x.dot")
    assert r.rc == 2 and "checksum mismatch" in r.err_lines[0] and not (tmp_path / "x.dot").exists()
    Path(p).write_bytes(ARTIFACTS["fst"])
    assert run("draw", p, tmp_path / "x.dot").rc == 0
