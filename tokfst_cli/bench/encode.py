"""``tokfst bench encode``: text -> token ids (:mod:`tokfst_cli.encoder`) against Hugging Face's
``encode`` and tiktoken, on real text and on pathological runs (Incremental BPE 2026 Sec. 5).

* ``encode``: throughput (MB/s, one thread) per tokenizer and corpus: prose (the bench corpus,
  Python's documentation), code (tokfst's own sources), mixed (a seeded mix of scripts, emoji,
  digits and code fragments; the same every run), each cut to ``--encode-mb`` MB; whether the
  ids equal HF's.
* ``encode_worst``: time per byte of runs of one character (``'a' * 2^k``, spaces, digits,
  newlines) and of random code points, k = 12 .. ``--max-log``; the ratio of the largest
  run's per-byte time to the smallest's (flat: about 1).
* ``encode_stream``: the same corpora fed to ``Encoder.stream`` in 64-byte chunks: the cost
  of eager output over plain encoding, and the most characters held back.
* build: the encoder's construction (stage P's transducer, the merge table, the kernel's first
  call) and the resident memory it adds, per tokenizer.

tiktoken runs where the tokenizer is byte-level with a ``Split``-free ByteLevel pre-tokenizer
(GPT-2's regex): its ``Encoding`` is built here from the tokenizer.json (a token's rank: the
rank of the merge that makes it, bytes below), nothing downloaded; its ids are checked too.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from tokenizers import Tokenizer

from tokfst_cli.bench import common
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.bench.corpus import load_corpus
from tokfst_cli.encoder.encode import Encoder
from tokfst_cli.pretok.build import GPT2_PATTERN
from tokfst_cli.tokenizer.model import TokenizerModel, bytes_to_unicode, unicode_to_bytes

MIXED = ["the quick brown fox ", "Привет, мир! ", "漢字とひらがな、カタカナ。", "中文分词测试，", "naïve café ",
         "😀👍🏽🇩🇪 ", "def f(x):\n    return x + 1\n", "12345 67.89 ", "\t\n\n", "{\"a\": [1, 2, 3]} ", "١٢٣ ",
         "e\u0301 "]
RUNS = {"a": "a", "space": " ", "digit": "7", "newline": "\n"}
BUILD = """import json, resource, sys, time
from tokfst_cli.tokenizer.model import load
m = load(sys.argv[1])
from tokfst_cli.encoder.encode import Encoder
t = time.perf_counter()
Encoder(m).encode("warm up 123")
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")]  # this process's own peak
kb = int(hwm[0].split()[1]) if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # (maxrss survives exec)
print(json.dumps({"s": time.perf_counter() - t, "kb": kb}))
"""


def corpora(mb: float, corpus: str | None) -> dict[str, str]:
    """Prose, code and mixed text, each cut to about ``mb`` MB (at a character boundary)."""
    size = int(mb * 1e6)
    code = "".join(p.read_text(encoding="utf-8") for p in sorted(Path(__file__).parents[1].rglob("*.py")))
    rng = random.Random(0)
    mixed = "".join(rng.choice(MIXED) for _ in range(size // 8))
    out = {"prose": load_corpus(corpus).text, "code": code, "mixed": mixed}
    return {k: (v * (size // max(len(v.encode()), 1) + 1)).encode()[:size].decode("utf-8", "ignore")
            for k, v in out.items()}


def tiktoken_encoding(model: TokenizerModel, data: dict):
    """(a tiktoken Encoding of a byte-level BPE with GPT-2's regex, its rank -> HF id), or (None, reason);
    ``data``: the tokenizer's normalizer and pre_tokenizer specs."""
    try:
        import tiktoken  # deferred: an optional peer
    except ImportError:
        return None, "tiktoken not installed (pip install tiktoken)"
    pre = data.get("pre_tokenizer") or {}
    if model.style != "byte-level" or pre.get("type") != "ByteLevel" or not pre.get("use_regex", True) \
            or pre.get("add_prefix_space") or data.get("normalizer"):
        return None, "not a byte-level BPE with GPT-2's regex alone"
    inv, ranks = unicode_to_bytes(), {}
    for token in model.tokens:
        if len(token) == 1 and token in inv:
            ranks[bytes([inv[token]])] = inv[token]
    for rank, (a, b) in enumerate(model.merges):
        ranks.setdefault(bytes(inv[c] for c in model.tokens[a] + model.tokens[b]), 256 + rank)
    to_id = {r: model.token_id("".join(bytes_to_unicode()[x] for x in key)) for key, r in ranks.items()}
    top = max(ranks.values()) + 1
    specials = {a["content"]: top + k for k, a in enumerate(model.added_tokens)}
    to_id.update({top + k: a["id"] for k, a in enumerate(model.added_tokens)})
    enc = tiktoken.Encoding("tokfst-bench", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    return (enc, to_id), None


def _rate(seconds: dict | None, size: int) -> float | None:
    """MB/s of a time cell's median."""
    med = common.median_of(seconds)
    return size / 1e6 / med if med else None


def encode_tables(tokenizers: list[tuple[str, str, bool]], repeat: int, corpus: str | None, mb: float,
                  max_log: int, progress) -> Results:
    res = Results()
    texts = corpora(mb, corpus)
    through = Table("encode", f"encode throughput, one thread, {mb:g} MB per corpus: tokfst vs HF and tiktoken",
                    repeat, [("tokenizer", "tokenizer", "text"), ("corpus", "corpus", "text"), ("mb", "MB", "float"),
                             ("tokfst", "tokfst MB/s", "float"), ("hf", "HF MB/s", "float"),
                             ("tiktoken", "tiktoken MB/s", "float"), ("ratio", "tokfst/HF speed", "ratio"),
                             ("exact", "ids equal HF", "text")],
                    inputs={"corpora": {k: len(v.encode()) for k, v in texts.items()}})
    worst = Table("encode_worst", "time per byte of one-character runs and random code points",
                  repeat, [("tokenizer", "tokenizer", "text"), ("input", "input", "text"), ("bytes", "bytes", "int"),
                           ("tokfst", "tokfst ns/byte", "float"), ("hf", "HF ns/byte", "float"),
                           ("tiktoken", "tiktoken ns/byte", "float")])
    stream = Table("encode_stream", "eager output: Encoder.stream in 64-byte chunks vs encode", repeat,
                   [("tokenizer", "tokenizer", "text"), ("corpus", "corpus", "text"), ("encode", "encode", "time"),
                    ("stream", "stream", "time"), ("overhead", "stream/encode", "ratio"),
                    ("held", "most chars held", "int"), ("cold", "build, empty cache", "time"),
                    ("build", "build, cached", "time"), ("rss", "peak RSS MB", "float")])
    failures: list[str] = []
    for name, path, _ in tokenizers:
        model = common.load_model(path, None)
        hf = Tokenizer.from_file(model.source)
        progress(f"encode: {name}: build")
        (cold, _), (warm, rss) = _builds(model.source)
        enc = _ready(model)
        tik, why = tiktoken_encoding(model, {"normalizer": model.normalizer, "pre_tokenizer": model.pre_tokenizer})
        for cname, text in texts.items():
            progress(f"encode: {name}: {cname}")
            size = len(text.encode())
            mine, ids = common.measure(repeat, lambda: enc.encode(text))
            theirs, oracle = common.measure(repeat, lambda: hf.encode(text, add_special_tokens=False).ids)
            row = {"tokenizer": name, "corpus": cname, "mb": size / 1e6, "tokfst": _rate(mine, size),
                   "hf": _rate(theirs, size), "tokfst_s": mine, "hf_s": theirs,
                   "exact": "yes" if ids == oracle else "NO"}
            res.check(f"encode {name} {cname} equals HF", ids == oracle)
            if tik is not None:
                cell, got = common.measure(repeat, lambda: tik[0].encode(text, allowed_special="all"))
                row["tiktoken"], row["tiktoken_s"] = _rate(cell, size), cell
                if [tik[1][r] for r in got] != oracle:
                    row["exact"] += " (tiktoken differs)"
            else:
                row["tiktoken_s"] = common.skipped(why)
            row["ratio"] = common.ratio(theirs, mine)
            through.rows.append(row)
            progress(f"encode: {name}: {cname}: stream")
            plain = common.measure(repeat, lambda: enc.encode(text))[0]
            streamed, held = common.measure(repeat, lambda: _stream(enc, text))
            stream.rows.append({"tokenizer": name, "corpus": cname, "encode": plain, "stream": streamed,
                                "overhead": common.ratio(streamed, plain), "held": held, "cold": common.ok([cold]),
                                "build": common.ok([warm]), "rss": rss})
        for label, text in _pathological(max_log):
            progress(f"encode: {name}: {label}")
            size = len(text.encode())
            row = {"tokenizer": name, "input": label, "bytes": size}
            for key, fn in (("tokfst", lambda: enc.encode(text)),
                            ("hf", lambda: hf.encode(text, add_special_tokens=False)),
                            ("tiktoken", (lambda: tik[0].encode(text, allowed_special="all")) if tik else None)):
                try:
                    row[key] = None if fn is None else common.median_of(common.measure(repeat, fn)[0]) * 1e9 / size
                except Exception as e:  # a peer's own failure (HF's regex stack on a 1M run) is a result
                    row[key], row[f"{key}_error"] = None, f"{type(e).__name__}: {str(e)[:120]}"
                    failures.append(f"{key} on {name}, {label}: {row[f'{key}_error']}")
            worst.rows.append(row)
    through.notes.append("tokfst: tokfst_cli.encoder.Encoder.encode (added tokens, stage P's transducer applied with "
                         "pynini, HF's BPE merges in a numba kernel, memoized per pre-token); HF: "
                         "Tokenizer.encode(text, add_special_tokens=False); tiktoken: an Encoding built from the "
                         "tokenizer.json (byte-level with GPT-2's regex only). Medians of the runs; ratio > 1: tokfst "
                         "faster.")
    worst.notes.append("Flat is a per-byte time that does not grow with the input; tokfst merges a pre-token in "
                       "O(n log n) (HF's heap), so 'a' * 2^k grows by log factors at most. — : failed "
                       "(below) or not run.")
    worst.notes += [f"Failed: {f}" for f in failures]
    stream.notes.append("build: a fresh process makes Encoder(tokenizer) and encodes a few words (stage P's "
                        "transducers, the merge table, numba's kernel from its on-disk cache), with tokfst's cache "
                        "empty, then filled; peak RSS: the process's, tokenizer included.")
    stream.notes.append("held: the most characters the stream kept back at once (a model without a pre-tokenizer, "
                        "Llama-2, emits inside its one pre-token as the last tokens of the prefixes settle: "
                        "encoder.incremental).")
    res.tables += [through, worst, stream]
    return res


def _builds(path: str) -> list[tuple[float, float]]:
    """(seconds, peak resident MB of the process) of ``Encoder(tokenizer)`` and its first encode in
    a fresh process (the tokenizer loaded first, not timed), with an empty tokfst cache, then with
    it filled."""
    with tempfile.TemporaryDirectory(prefix="tokfst-bench-encode-") as cache:
        env = {**os.environ, "TOKFST_CACHE": cache}
        out = []
        for _ in range(2):
            got = subprocess.run([sys.executable, "-c", BUILD, path], capture_output=True, text=True, env=env,
                                 check=True)
            doc = json.loads(got.stdout)
            out.append((doc["s"], doc["kb"] / 1024))
    return out


def _ready(model: TokenizerModel) -> Encoder:
    """An encoder with its kernel compiled (or read from numba's cache) and its tables made."""
    enc = Encoder(model)
    enc.encode("warm up the kernel: 12345 ab")
    enc.stream().finish()
    return enc


def _stream(enc: Encoder, text: str) -> int:
    """``text`` through a stream in 64-byte chunks; the most characters held back."""
    s, data = enc.stream(), text.encode()
    for i in range(0, len(data), 64):
        s.feed(data[i:i + 64])
    s.finish()
    return s.held


def _pathological(max_log: int) -> list[tuple[str, str]]:
    rng = random.Random(1)
    out = [(f"{name} x 2^{k}", ch * 2 ** k) for name, ch in RUNS.items() for k in range(12, max_log + 1, 4)]
    points = [c for c in range(0x20, 0x30000) if not 0xD800 <= c < 0xE000]
    return out + [(f"random code points x 2^{k}", "".join(chr(rng.choice(points)) for _ in range(2 ** k)))
                  for k in sorted({12, min(16, max_log)})]
