"""The cache (tokfst_cli.support.cache): sealed entries verified on read, listing, clearing, and concurrency.

Unit tests in process; then the issue's resource test with real processes: 8 concurrent
``promote`` and ``compile-bpe`` runs on GPT-2 sharing one cold cache give identical
outputs and leave only entries that verify; ``kill -9`` at random moments leaves no entry that
fails to verify (writes are atomic; reads verify anyway), and a later run succeeds with the
same output. A damaged entry (truncated, bit-flipped, unsealed) is rebuilt.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pynini

from tokfst_cli.automata.fst_io import CACHE_VERSION, cached_fst, fst_bytes
from tokfst_cli.support import cache
from tokfst_cli.support.files import seal, unseal

from .runner import TOKFST, make_env, run_many, tool

FP = "ab" * 32


def test_store_and_load_verify_the_seal(tmp_path):
    p = tmp_path / "v1-lexicon-x.fst"
    assert cache.store(p, b"content") and cache.load(p) == b"content"
    assert unseal(p.read_bytes()) == (b"content", True)
    data = p.read_bytes()
    for bad in (data[:-1], data[:5], b"", b"content", data[:3] + b"X" + data[4:]):
        p.write_bytes(bad)
        assert cache.load(p) is None, bad
    assert cache.load(tmp_path / "missing") is None
    sealed = seal(b"x")
    cache.store(p, sealed)  # already sealed: not sealed twice
    assert p.read_bytes() == sealed


def test_a_damaged_fst_entry_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKFST_CACHE", str(tmp_path))
    built = []

    def build():
        built.append(1)
        return pynini.accep("abc")

    f = cached_fst("lexicon-" + FP, build)
    path = tmp_path / f"v{CACHE_VERSION}-lexicon-{FP}.fst"
    assert path.exists() and len(built) == 1
    assert tool("fstinfo", path).returncode == 0  # a sealed entry is still an OpenFst file
    assert pynini.equal(cached_fst("lexicon-" + FP, build), f) and len(built) == 1
    good = path.read_bytes()
    for bad in (good[: len(good) // 2], good[:-1], good[:-20] + bytes(20), unseal(good)[0]):
        path.write_bytes(bad)
        assert pynini.equal(cached_fst("lexicon-" + FP, build), f)
        assert path.read_bytes() == good
    assert len(built) == 5


def test_entries_read_once_per_process_and_again_when_rewritten(tmp_path, monkeypatch):
    """The in-process memo: a second use reads no file; the caller's copy can be mutated without
    touching the memo; an entry rewritten or removed on disk is read (or built) anew."""
    monkeypatch.setenv("TOKFST_CACHE", str(tmp_path))
    reads, built = [], []
    real_load = cache.load
    monkeypatch.setattr(cache, "load", lambda path: reads.append(path) or real_load(path))
    name = "lexicon-" + "cd" * 32
    first = cached_fst(name, lambda: built.append(1) or pynini.accep("abc"))
    first.add_arc(first.start(), pynini.Arc(120, 120, 0, first.start()))  # the caller mutates its copy
    again = cached_fst(name, lambda: built.append(1) or pynini.accep("abc"))
    assert len(built) == 1 and len(reads) == 1  # the miss only
    assert pynini.equal(again, pynini.accep("abc"))
    path = tmp_path / f"v{CACHE_VERSION}-{name}.fst"
    other = fst_bytes(pynini.accep("xy"))
    time.sleep(0.01)
    path.write_bytes(other)  # another process rewrote the entry
    assert pynini.equal(cached_fst(name, lambda: pynini.accep("abc")), pynini.accep("xy")) and len(reads) == 2
    path.unlink()  # tokfst cache clear
    assert pynini.equal(cached_fst(name, lambda: built.append(1) or pynini.accep("abc")), pynini.accep("abc"))
    assert len(built) == 2 and path.exists()
    with cache.bypassed():  # nothing read, written or remembered
        assert pynini.equal(cached_fst(name, lambda: built.append(1) or pynini.accep("q")), pynini.accep("q"))
    assert len(built) == 3


def test_entries_kinds_and_verification(tmp_path):
    cache.store(tmp_path / f"v1-lexicon-{FP}.fst", b"T")
    cache.store(tmp_path / f"v1-bpe-{FP}.tokfst", b"A")
    cache.store(tmp_path / "v1-pretables-0123.json", b"{}")
    cache.store(tmp_path / "v1-maxmatch-dom-0123.fst", b"D")
    (tmp_path / f"v1-taho-{FP}.fst").write_bytes(b"unsealed")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "bpe-0123456789abcdef-v300-tokenizers0.23.3.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / ".notes.txt.tmp").write_text("mine")
    found = {e.name: (e.kind, e.verified) for e in cache.entries(tmp_path)}
    assert found == {
        f"v1-lexicon-{FP}.fst": ("lexicon", True), f"v1-bpe-{FP}.tokfst": ("bpe", True),
        "v1-pretables-0123.json": ("pretables", True), "v1-maxmatch-dom-0123.fst": ("maxmatch-dom", True),
        f"v1-taho-{FP}.fst": ("taho", False),
        "bench/bpe-0123456789abcdef-v300-tokenizers0.23.3.json": ("bench-tokenizer", True),
    }
    summary = cache.summary(tmp_path, check=True)
    assert summary["entries"] == 6 and summary["unverified"] == 1 and summary["writable"]


def test_clear_removes_only_tokfst_files(tmp_path):
    cache.store(tmp_path / f"v1-lexicon-{FP}.fst", b"T")
    (tmp_path / f".v1-bpe-{FP}.tokfst.{os.getpid()}.abcd_123.tmp").write_bytes(b"half")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "bpe-0123456789abcdef-v300-tokenizers0.23.3.json").write_text("{}")
    for foreign in ("notes.txt", ".notes.txt.tmp", "v1-lexicon.txt"):
        (tmp_path / foreign).write_text("keep")
    files, freed = cache.clear(tmp_path)
    assert files == 3 and freed > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [".notes.txt.tmp", "notes.txt", "v1-lexicon.txt"]


def test_prune_removes_temporaries_of_dead_writers(tmp_path):
    p = subprocess.Popen(["true"])
    p.wait()
    dead = p.pid
    live = os.getppid()
    stale = tmp_path / f".v1-lexicon-{FP}.fst.{dead}.abcdefgh.tmp"
    alive = tmp_path / f".v1-lexicon-{FP}.fst.{live}.abcdefgh.tmp"
    old = tmp_path / f".v1-lexicon-{FP}.fst.abcdefgh.tmp"  # without a pid: removed when old
    for f in (stale, alive, old):
        f.write_bytes(b"x")
    os.utime(old, (time.time() - 2 * cache.STALE_SECONDS,) * 2)
    assert cache.prune(tmp_path) == 2
    assert [f.name for f in tmp_path.iterdir()] == [alive.name]


def test_writable(tmp_path):
    assert cache.writable(tmp_path) and cache.writable(tmp_path / "new" / "deeper")
    (tmp_path / "file").write_text("")
    assert not cache.writable(tmp_path / "file" / "below")


# --- real processes ------------------------------------------------------------------------------

REGEX = "(Cologne|Berlin|[0-9]{2})"


def jobs(d: Path, env: dict, n: int = 4) -> dict:
    out = {}
    for i in range(n):
        out[("promote", i)] = (("promote", "gpt2", d / f"p{i}.fst", "-e", REGEX), {"env": env})
        out[("compile-bpe", i)] = (("compile-bpe", "gpt2", d / f"c{i}.bpe"), {"env": env})
    return out


def all_verify(root: Path, kinds: set[str]) -> None:
    entries = cache.entries(root)
    assert {e.kind for e in entries} == kinds, entries
    assert all(e.verified for e in entries), [e.name for e in entries if not e.verified]


def test_concurrent_runs_share_one_cold_cache(tmp_path):
    root = tmp_path / "cache"
    runs = run_many(jobs(tmp_path, make_env(root)), workers=8)
    for key, r in runs.items():
        assert r.rc == 0, (key, r.err)
    for kind, suffix in (("promote", "fst"), ("compile-bpe", "bpe")):
        outputs = {(tmp_path / f"{kind[0]}{i}.{suffix}").read_bytes() for i in range(4)}
        assert len(outputs) == 1, kind
    all_verify(root, {"lexicon", "bpe", "tokenizer"})  # gpt2.json is kept read (large)
    assert cache.temporaries(root) == []


def test_kill_9_at_random_moments_leaves_no_bad_entry(tmp_path):
    root = tmp_path / "cache"
    env = make_env(root)
    rng = random.Random(13)
    procs = []
    for key, (args, _) in jobs(tmp_path, env).items():
        procs.append(subprocess.Popen([str(TOKFST), *map(str, args)], env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE))
    start = time.monotonic()
    doomed = sorted(rng.sample(range(len(procs)), 6), key=lambda _: rng.random())
    for i in doomed:
        time.sleep(max(0.0, start + rng.uniform(0.2, 3.0) - time.monotonic()))
        procs[i].send_signal(signal.SIGKILL)
    for p in procs:
        p.wait(300)
    cache.prune(root)  # temporaries of the killed writers
    assert cache.temporaries(root) == []
    for e in cache.entries(root):
        assert e.verified, e.name
    # a later run succeeds and agrees with an untouched one
    later = run_many({"again": (("promote", "gpt2", tmp_path / "again.fst", "-e", REGEX, "--canonical"),
                                {"env": env}),
                      "fresh": (("promote", "gpt2", tmp_path / "fresh.fst", "-e", REGEX, "--canonical"),
                                {"env": make_env(tmp_path / "fresh-cache")})})
    assert later["again"].rc == 0 and later["fresh"].rc == 0, (later["again"].err, later["fresh"].err)
    assert (tmp_path / "again.fst").read_bytes() == (tmp_path / "fresh.fst").read_bytes()
    # --canonical: T_M, P and the A_BPE's classes too
    all_verify(root, {"lexicon", "bpe", "model-lexicon", "pretok", "tokenizer", "bpe-classes"})


def test_fst_bytes_are_sealed():
    data = fst_bytes(pynini.accep("a"))
    assert unseal(data)[1] is True and unseal(fst_bytes(pynini.accep("a"), sealed=False))[1] is None
