"""``tokfst bench check``: canonical-check throughput and memory, the WordPiece switch.

Input: :func:`sample_lines`, --lines lines of generated text (fixed seed; ~83 bytes a line,
20,000 lines ~1.6 MB): common English words, random letter strings, numbers, punctuation,
capitals, accented and CJK words, a URL. Per --tokenizer (any family), cache warm (one
untimed run first):
    tokfst       ``tokfst canonical-check TOKENIZER --input text FILE`` as a whole process
                 (--cold-repeat runs, output to /dev/null); every line must be canonical
                 (HF's own tokenization, checked: exit status 0)
    start-up     the same command on an empty file: the fixed cost (load, checker)
    HF encode    in this process, ``Tokenizer.encode(line, add_special_tokens=False)`` per
                 line and ``encode_batch`` of all lines (the tokenizer loaded beforehand)
    HF cold      a whole Python process: import tokenizers, load, read the file, ``encode``
                 each line
    ratios       tokfst / HF cold (both whole processes), and (tokfst - start-up) / HF encode
                 (the per-line work against HF's)
Per --tokenizer and --rss-mb size (the input repeated to that size): peak RSS of the
canonical-check process (ru_maxrss, measured by a small launcher process: a child forked from
this benchmark would count the benchmark's own pages), one run; flat when streaming.
Per WordPiece --tokenizer and regex (default: ``[a-z]+( [a-z]+){0,3}`` and ``[a-z]+ [a-z]+``):
    cold         ``tokfst promote TOKENIZER -e REGEX --canonical --format index OUT`` (--cold-repeat)
    in-process   ``pipeline.build(..., canonical=True)`` + the artifact's bytes, model loaded
    BFS          ``maxmatch.product.materialize`` until its LimitError: what deciding the switch
                 cost before the size probe (``product.exceeds``)
"""

from __future__ import annotations

import os
import random
import sys
import tempfile

from tokfst_cli.bench import common
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.errors import LimitError
from tokfst_cli.maxmatch import product
from tokfst_cli.pipeline import Limits, accept, build, preprocess
from tokfst_cli.text.catalogue import words100

REGEXES = {"words4": r"[a-z]+( [a-z]+){0,3}", "two words": r"[a-z]+ [a-z]+"}
EXTRA = ["naïve", "café", "Zürich", "中文", "☃", "déjà", "vu", "2024", "3.14", "e-mail", "don't", "C++",
         "x86_64", "https://example.com/a?b=c", "#tag", "@user", "(see", "below)", '"quoted"', "tokenizers",
         "unaffable"]
HF_COLD = ("import sys\nfrom tokenizers import Tokenizer\nt = Tokenizer.from_file(sys.argv[1])\nt.no_padding()\n"
           "t.no_truncation()\nfor line in open(sys.argv[2], encoding='utf-8').read().splitlines():\n"
           "    t.encode(line, add_special_tokens=False).ids\n")


def sample_lines(n: int, seed: int = 0, width: int = 80) -> list[str]:
    """n lines of generated text, about ``width`` characters each (deterministic)."""
    rng = random.Random(seed)
    common_words = words100()
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = []
    for _ in range(n):
        words: list[str] = []
        length, target = 0, rng.randint(width // 2, width * 3 // 2)
        while length < target:
            r = rng.random()
            if r < 0.7:
                w = rng.choice(common_words)
            elif r < 0.85:
                w = "".join(rng.choice(letters) for _ in range(rng.randint(2, 12)))
            elif r < 0.92:
                w = str(rng.randint(0, 10 ** rng.randint(1, 6)))
            else:
                w = rng.choice(EXTRA)
            if rng.random() < 0.1:
                w = w.capitalize()
            if rng.random() < 0.08:
                w += rng.choice(".,;:!?")
            words.append(w)
            length += len(w) + 1
        out.append(" ".join(words))
    return out


def write_lines(path: str, lines: list[str], size: int | None = None) -> int:
    """Write the lines (repeated until ``size`` bytes when given); the bytes written."""
    block = ("\n".join(lines) + "\n").encode("utf-8")
    with open(path, "wb") as f:
        if size is None:
            f.write(block)
            return len(block)
        written = 0
        while written < size:
            part = block[:size - written]
            part = part[:part.rfind(b"\n") + 1]
            if not part:
                break
            f.write(part)
            written += len(part)
    return written


def run_child(cmd: list[str], cwd: str) -> tuple[float, int, int]:
    """(wall seconds, exit status, peak RSS in bytes) of one whole process, output discarded; it must
    exit 0 or 1."""
    wall, rc, rss, err = common.launch(cmd, cwd)
    if rc not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} exited {rc}: {err.strip()}")
    return wall, rc, rss


def cold(n: int, cmd: list[str], cwd: str) -> tuple[dict, int]:
    """A timing cell of n whole processes and the last exit status."""
    runs, rc = [], 0
    for _ in range(n):
        t, rc, _ = run_child(cmd, cwd)
        runs.append(t)
    return common.ok(runs), rc


def throughput_row(name: str, path: str, data: str, empty: str, nlines: int, repeat: int, d: str,
                   res: Results) -> dict:
    from tokenizers import Tokenizer  # deferred: HF's tokenizers only where the oracle is asked (start-up)

    check = common.tokfst_command() + ["canonical-check", os.path.abspath(path), "--input", "text"]
    run_child(check + [data], d)  # warm the cache (implicit A_BPE, all-text X)
    row = {"tokenizer": name, "lines": nlines, "bytes": os.path.getsize(data)}
    row["tokfst"], rc = cold(repeat, check + [data], d)
    res.check(f"check {name}: HF's tokenization of every line is canonical", rc == 0, f"exit status {rc}")
    row["startup"], _ = cold(repeat, check + [empty], d)
    hf = Tokenizer.from_file(path)
    hf.no_padding()
    hf.no_truncation()
    with open(data, encoding="utf-8") as f:
        lines = f.read().splitlines()
    row["hf_encode"], _ = common.measure(repeat, lambda: [hf.encode(x, add_special_tokens=False).ids for x in lines])
    row["hf_batch"], _ = common.measure(
        repeat, lambda: [e.ids for e in hf.encode_batch(lines, add_special_tokens=False)])
    row["hf_cold"], _ = cold(repeat, [sys.executable, "-c", HF_COLD, os.path.abspath(path), data], d)
    row["ratio_cold"] = common.ratio(row["tokfst"], row["hf_cold"])
    work = common.median_of(row["tokfst"]) - common.median_of(row["startup"])
    row["ratio_work"] = work / common.median_of(row["hf_encode"])
    return row


def rss_rows(name: str, path: str, lines: list[str], sizes: list[int], d: str) -> list[dict]:
    rows = []
    check = common.tokfst_command() + ["canonical-check", os.path.abspath(path), "--input", "text"]
    for mb in sizes:
        data = os.path.join(d, f"rss-{mb}.txt")
        size = write_lines(data, lines, mb * 1_000_000)
        wall, rc, rss = run_child(check + [data], d)
        os.unlink(data)
        rows.append({"tokenizer": name, "input_mb": mb, "input_bytes": size, "rss": rss,
                     "time": common.ok([wall]), "canonical": rc == 0})
    return rows


def promote_rows(name: str, path: str, regexes: dict[str, str], repeat: int, d: str) -> list[dict]:

    model = common.load_model(path, None)
    limits = Limits()
    rows = []
    for rname, pattern in regexes.items():
        out = os.path.join(d, "promoted.tfz")
        cmd = common.tokfst_command() + ["promote", os.path.abspath(path), "-e", pattern, "--canonical",
                                         "--format", "index", out]
        run_child(cmd, d)  # warm the cache (stage P's tables)
        row = {"tokenizer": name, "regex": rname, "pattern": pattern}
        row["cold"], _ = cold(repeat, cmd, d)
        row["warm"], result = common.measure(repeat, lambda: _promoted(build(model, pattern, canonical=True)))
        row["form"] = "materialized" if result.materialized else "factorized"
        row["probe"] = result.overflow is not None and result.overflow.value is None
        text = preprocess(model, accept(pattern), canonical=True)

        def bfs():
            try:
                product.materialize(product.machine_of_text(model, text), limits.max_states, limits.max_arcs)
            except LimitError:
                pass

        row["bfs"], _ = common.measure(repeat, bfs)
        row["speedup"] = common.ratio(row["bfs"], row["warm"])
        rows.append(row)
    return rows


def _promoted(result):
    if not result.materialized:
        result.to_bytes()
    return result


def check_table(tokenizers: list[tuple[str, str, bool]], regexes: dict[str, str], nlines: int, rss_mb: list[int],
                repeat: int, progress) -> Results:
    """``tokenizers``: (name, path, trained) of --tokenizer, any family; every figure over ``repeat`` runs
    (processes and in-process alike), the RSS runs once per size."""
    res = Results()
    lines = sample_lines(nlines)
    runs = repeat
    tp = Table("check", "canonical-check --input text: throughput vs HF's encode", runs,
               [("tokenizer", "tokenizer", "text"), ("lines", "lines", "int"), ("bytes", "input", "bytes"),
                ("tokfst", "tokfst (process)", "time"), ("startup", "start-up (empty input)", "time"),
                ("hf_encode", "HF encode (in-process)", "time"), ("hf_batch", "HF encode_batch (in-process)", "time"),
                ("hf_cold", "HF encode (process)", "time"), ("ratio_cold", "tokfst / HF (processes)", "ratio"),
                ("ratio_work", "(tokfst - start-up) / HF encode", "ratio")],
               inputs={"lines": nlines, "generator": "tokfst_cli.bench.check.sample_lines(seed=0)"})
    mem = Table("check_rss", "canonical-check --input text: peak RSS by input size (streaming)", runs,
                [("tokenizer", "tokenizer", "text"), ("input_mb", "input MB", "int"), ("input_bytes", "input", "bytes"),
                 ("rss", "peak RSS", "bytes"), ("time", "time (1 run)", "once"),
                 ("canonical", "all canonical", "bool")],
                inputs={"rss_mb": rss_mb})
    wp = Table("check_promote", "WordPiece: the materialized/factorized switch (promote --canonical --format index)",
               runs, [("tokenizer", "tokenizer", "text"), ("regex", "regex", "text"), ("form", "form", "text"),
                      ("probe", "switched by the size probe", "bool"), ("cold", "tokfst promote (process)", "time"),
                      ("warm", "in-process", "time"), ("bfs", "BFS to the limit (before)", "time"),
                      ("speedup", "BFS / in-process", "ratio")],
               inputs={"regexes": regexes})
    with tempfile.TemporaryDirectory(prefix="tokfst-bench-check-") as d:
        data, empty = os.path.join(d, "lines.txt"), os.path.join(d, "empty.txt")
        write_lines(data, lines)
        write_lines(empty, [])
        for name, path, _ in tokenizers:
            progress(f"check: {name}: canonical-check and HF on {nlines:,} lines")
            tp.rows.append(throughput_row(name, path, data, empty, nlines, runs, d, res))
            progress(f"check: {name}: peak RSS for {', '.join(f'{m} MB' for m in rss_mb)}")
            mem.rows += rss_rows(name, path, lines, rss_mb, d)
            if common.load_model(path, None).family == "wordpiece":
                progress(f"check: {name}: WordPiece promotion")
                wp.rows += promote_rows(name, path, regexes, runs, d)
    for r in mem.rows:
        res.check(f"check {r['tokenizer']} {r['input_mb']} MB: every line canonical", r["canonical"])
    tp.notes.append(
        f"tokfst: `tokfst canonical-check TOKENIZER --input text FILE` as a whole process (cache warm, output to "
        f"/dev/null); start-up: the same on an empty file; HF encode: `encode(line, add_special_tokens=False)` per "
        f"line in this process (tokenizer loaded), encode_batch: all lines in one call (HF's threads); HF encode "
        f"(process): python + import tokenizers + load + encode per line. Medians of {runs} runs; both ratios "
        "come from this run.")
    mem.notes.append("Peak RSS: ru_maxrss of the canonical-check process, as a small launcher process sees it (a "
                     "child forked from the benchmark itself would count its pages); one run per size; the input is "
                     "the generated lines repeated to the size (whole lines).")
    res.tables += [tp, mem] + ([wp] if wp.rows else [])
    if wp.rows:
        wp.notes.append(
            f"cold: the whole `tokfst promote ... --canonical --format index OUT` process (cache warm); in-process: "
            f"pipeline.build + the factorized bytes; BFS: maxmatch.product.materialize up to its LimitError (the "
            f"attempt the switch made before the size probe). Medians of {runs} runs.")
    return res
