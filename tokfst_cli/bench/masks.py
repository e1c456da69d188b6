"""Per-step masks along a decoding walk, tokfst vs outlines-core, llguidance and xgrammar (the
structured-generation practical; Koo et al. 2024 Sec. 2.4).

For each tokenizer and regex, one fixed sample string of the regex (:data:`SAMPLES` for the
catalogue's regexes, else :func:`generate`) is tokenized by Hugging Face
(``encode(text, add_special_tokens=False).ids``): the walk. Every engine of
:mod:`.engines` follows that walk from a fresh session, as a decoding loop meeting each
state for the first time, with cold CPU caches (:func:`evict`, as after a model's forward
pass): at each step the mask is filled as packed int32 words (timed),
the walk's next token is checked against it (a token outside the mask stops the walk and is
reported: a dead end or a missing token), and the token is accepted (timed apart). The mask
after the last token (where EOS would be offered) is timed too. ``--repeat`` timed walks
follow one untimed walk, which also records every mask for the agreement columns: a peer's
mask must equal tokfst's agnostic index mask as sets of token ids (ids without a surface,
EOS and special tokens, left out); a canonical mask must lie inside it. Where HF's ids do
not spell the sample (a normalizer, e.g. Llama-2's prefix '▁'), the engines that read token
surfaces (agnostic index, peers) follow :func:`longest_match` instead.
"""

from __future__ import annotations

import gc
import random
import re
import statistics
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pynini

from tokfst_cli.bench import common, engines
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.decoding.matcher import unpack
from tokfst_cli.errors import LimitError, TokfstError
from tokfst_cli.promotion import lexicon
from tokfst_cli.text import catalogue
from tokfst_cli.text.regex import compile_regex

SAMPLES = {  # catalogue name -> a string of its language (re.fullmatch-checked in the tests)
    "decimal": "3.14159",
    "json": '{"name":"Paul","age":30}',
    "date": "2024-05-17",
    "email": "john.smith@example.com",
    "cities": "Munich",
    "words100": "people",
    "pokedex": '{"alias":"bulba","description":"Se1 ok","type":"Grass","height_m":"0.7","weight_kg":"6.9",'
               '"evolution_stage":"Basic","legendary":"false","abilities":["Overgrow","Intimidate"]}',
    "words4": "the quick brown fox",
    "punct": "hello!",
    "accents": "éàü Émile",
}
GENERATED_BYTES = 24  # length a generated sample aims at
BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")


def default_regexes() -> dict[str, str]:
    """The bench set (six + Pokedex) and the free-text ``words4``."""
    return {**catalogue.default_set(), "words4": catalogue.MAXMATCH["words4"]}


# ---- the walk -----------------------------------------------------------------------------------
def generate(pattern: str, target: int = GENERATED_BYTES) -> str:
    """A string of the regex's language, fixed per pattern: a seeded random path of its minimal
    byte DFA of about ``target`` bytes, finished along a shortest path to a final state."""
    fst = compile_regex(pattern).fst
    zero = pynini.Weight.zero(fst.weight_type())
    arcs = {s: sorted((a.ilabel - 1, a.nextstate) for a in fst.arcs(s)) for s in fst.states()}
    final = {s for s in fst.states() if fst.final(s) != zero}
    dist = {s: 0 for s in final}  # bytes to a final state, by a backward breadth-first search
    while True:
        more = {s: dist[t] + 1 for s, out in arcs.items() if s not in dist for _, t in out if t in dist}
        if not more:
            break
        dist.update(more)
    rng, s, out = random.Random(zlib.crc32(pattern.encode("utf-8"))), fst.start(), bytearray()
    while s in dist:
        if len(out) >= target or not arcs[s] or (s in final and rng.random() < 0.15):
            if s in final:
                break
            b, s = min(((b, t) for b, t in arcs[s] if t in dist), key=lambda bt: dist[bt[1]])
        else:
            b, s = rng.choice([(b, t) for b, t in arcs[s] if t in dist])
        out.append(b)
    return out.decode("utf-8")


def sample_text(pattern: str) -> str:
    """The catalogue's sample for a catalogue regex, else the generated one."""
    by_pattern = {p: SAMPLES[n] for n, p in catalogue.catalogue().items() if n in SAMPLES}
    return by_pattern.get(pattern) or generate(pattern)


def spells(model, ids: list[int], text: str) -> bool:
    """Do the tokens' surfaces spell ``text``? (Not where a normalizer changes it: Llama-2's prefix '▁'.)"""
    return all(model.surfaces[t] for t in ids) and b"".join(model.surfaces[t] for t in ids) == text.encode("utf-8")


def longest_match(model, text: str) -> list[int] | None:
    """A tokenization of ``text`` over the surfaces, longest surface first at every position (the
    walk of the engines that read surfaces when HF's ids do not spell the text); None if some
    byte is the surface of no token."""
    by_surface: dict[bytes, int] = {}
    for t, s in model.lexicon_items():  # a byte-fallback token <0xNN> only for a byte nothing else spells
        if s not in by_surface or BYTE_TOKEN.fullmatch(model.tokens[by_surface[s]]):
            by_surface[s] = t
    data, i, out, longest = text.encode("utf-8"), 0, [], max(map(len, by_surface))
    while i < len(data):
        n = next((n for n in range(min(longest, len(data) - i), 0, -1) if data[i:i + n] in by_surface), 0)
        if not n:
            return None
        out.append(by_surface[data[i:i + n]])
        i += n
    return out


# ---- one walk through one session ---------------------------------------------------------------
@dataclass
class WalkRun:
    """Per-step times (ns) of one walk, where it stopped, and (recorded walks) the masks."""

    mask_ns: list[int] = field(default_factory=list)
    accept_ns: list[int] = field(default_factory=list)
    stop: str | None = None  # why the walk ended early
    accepting: bool = False
    masks: list[np.ndarray] = field(default_factory=list)


def allows(words: np.ndarray, token: int) -> bool:
    return token >> 5 < len(words) and bool((int(words[token >> 5]) >> (token & 31)) & 1)


def allowed_ids(words: np.ndarray, excluded: np.ndarray) -> np.ndarray:
    """Bool mask over the tokenizer's ids from packed words, ``excluded`` ids left out."""
    size = len(excluded)
    bits = unpack(words, size)  # words shorter than the vocabulary (a peer's own size): padded
    bits = np.pad(bits, (0, size - len(bits))) if len(bits) < size else bits
    return bits & ~excluded


def run_walk(session: engines.Session, walk: list[int], excluded: np.ndarray | None = None,
             spell=repr, each_step: bool = False) -> WalkRun:
    """Follow ``walk``: fill (timed), check the token is in the mask, accept (timed); the mask
    after the last token too. ``excluded`` given: record every mask (``allowed_ids``).
    ``each_step``: caches made cold (:func:`evict`, untimed) before every fill, as a model's
    forward pass does before each token."""
    clock, run = time.perf_counter_ns, WalkRun()
    gc_on = gc.isenabled()
    gc.disable()
    try:
        for i, token in enumerate(walk + [None]):
            if each_step and i:  # the walk's first step follows the evict() before the walk
                evict()
            t0 = clock()
            words = session.fill()
            run.mask_ns.append(clock() - t0)
            if excluded is not None:
                run.masks.append(allowed_ids(words, excluded))
            if token is None:
                break
            if not allows(words, token):
                run.stop = f"step {i + 1}: token {token} ({spell(token)}) not in the mask"
                break
            t0 = clock()
            ok = session.accept(token)
            run.accept_ns.append(clock() - t0)
            if not ok:
                run.stop = f"step {i + 1}: token {token} ({spell(token)}) refused by accept"
                break
    finally:
        if gc_on:
            gc.enable()
    run.accepting = run.stop is None and bool(session.accepting())
    return run


# ---- agreement ----------------------------------------------------------------------------------
@dataclass
class Agreement:
    """How an engine's masks relate to the reference (tokfst's agnostic index) along the walk."""

    compared: int  # steps with both masks
    differing: int  # steps where the relation fails
    first: int | None = None  # first such step (1-based)
    only_ref: int = 0  # at the first such step: ids only in the reference
    only_other: int = 0  # ... ids only in the other mask
    example: int | None = None  # one id of the difference

    @property
    def holds(self) -> bool:
        return self.differing == 0


def compare_masks(ref: list[np.ndarray], other: list[np.ndarray], subset: bool = False) -> Agreement:
    """Equality (or, ``subset``, other within ref) of two mask sequences, step by step."""
    n = min(len(ref), len(other))
    bad = [i for i in range(n) if (other[i] & ~ref[i]).any() or (not subset and (ref[i] & ~other[i]).any())]
    if not bad:
        return Agreement(n, 0)
    i = bad[0]
    only_ref, only_other = np.flatnonzero(ref[i] & ~other[i]), np.flatnonzero(other[i] & ~ref[i])
    example = int(only_other[0]) if len(only_other) else int(only_ref[0])
    return Agreement(n, len(bad), i + 1, 0 if subset else len(only_ref), len(only_other), example)


def without(mask: np.ndarray, ids: list[int]) -> np.ndarray:
    """``mask`` with ``ids`` cleared (a peer's EOS choice, where the tokenizer names none)."""
    if not ids:
        return mask
    out = mask.copy()
    out[ids] = False
    return out


def describe(a: Agreement, subset: bool, other: str, spell=repr) -> str:
    rel = "⊆ index" if subset else "= index"
    if a.holds:
        return f"{rel} at {a.compared}/{a.compared} steps"
    parts = [] if subset else [f"{a.only_ref} only in the index"]
    parts.append(f"{a.only_other} only in {other}")
    return (f"not {rel} at {a.differing}/{a.compared} steps; first at step {a.first}: {', '.join(parts)} "
            f"(e.g. {a.example} {spell(a.example)})")


# ---- cells ---------------------------------------------------------------------------------------
def one_line(err: Exception) -> str:
    return f"{type(err).__name__}: {err}".split("\n")[0]


def reason(cell: dict | None) -> str:
    """What a skipped or failed cell says, for the table's text column ("" otherwise)."""
    if not isinstance(cell, dict):
        return ""
    return {"skipped": cell.get("reason", ""), "error": f"error: {cell.get('error', '')}"}.get(cell["status"], "")


def cells(runs: list[WalkRun]) -> dict:
    """median, p99 (of the mask times) and accept (median) per run, as timing cells over the runs."""
    def per_run(key, stat):
        return common.ok([stat(getattr(r, key)) / 1e9 for r in runs]) if all(getattr(r, key) for r in runs) else None

    return {"median": per_run("mask_ns", statistics.median),
            "p99": per_run("mask_ns", lambda xs: float(np.percentile(xs, 99))),
            "accept": per_run("accept_ns", statistics.median)}


def speller(model) -> Callable[[int], str]:
    """Token id -> its surface for messages."""
    def spell(t: int) -> str:
        s = model.surfaces[t] if 0 <= t < len(model.surfaces) else None
        return repr(s.decode("utf-8", "replace")) if s else "no surface"

    return spell


def walk_text(run: WalkRun, truncated: bool) -> str:
    if run.stop is not None:
        return f"stopped at {run.stop}"
    if truncated:
        return "truncated (--steps)"
    return "complete" if run.accepting else "not accepting at the end"


# ---- rows ----------------------------------------------------------------------------------------
EVICT_BYTES = 64 << 20  # twice the 32 MB L3 of the bench machine
_evict_buffer: np.ndarray | None = None


def evict() -> int:
    """Read EVICT_BYTES, so a walk starts with cold CPU caches, as a decoding step does after the
    model's forward pass (a full garbage collection used to do this as a side effect; since
    :func:`common.collect` freezes the survivors it no longer sweeps the heap)."""
    global _evict_buffer
    if _evict_buffer is None:
        _evict_buffer = np.ones(EVICT_BYTES // 8, np.int64)
    return int(_evict_buffer.sum())


def measure_regex(engs: list[engines.Engine], pattern: str, walks: dict[str, list[int]], truncated: bool,
                  repeat: int, excluded: np.ndarray, spell, res: Results, label: str,
                  each_step: bool = False) -> list[dict]:
    """The rows of one (tokenizer, regex): one per engine. ``walks``: "hf" (HF's ids, the canonical
    engines' walk) and "surface" (the others': the same ids where they spell the sample; None if
    no tokenization spells it)."""
    same = walks["hf"] == walks["surface"]
    compiled, rows, engs_by_name = {}, {}, {e.name: e for e in engs}
    for e in engs:
        row = rows[e.name] = {"engine": e.name, "steps": 0, "walk": "", "detail": "", "agree": None}
        why = e.missing or (None if e.name in engines.CANONICAL or walks["surface"] is not None
                            else "no tokenization of the sample over the token surfaces")
        if why is not None:
            row["median"], row["detail"] = common.skipped(why), why
            continue
        try:
            compiled[e.name] = e.compile(pattern)
        except LimitError as err:
            row["median"] = common.skipped(f"does not fit: {err.one_line()}")
        except TokfstError as err:
            row["median"] = common.error(err.one_line())
        except Exception as err:  # noqa: BLE001 - a peer refuses the pattern: say so in the cell
            row["median"] = common.error(one_line(err))
        row["detail"] = reason(row.get("median"))
    runs: dict[str, list[WalkRun]] = {n: [] for n in compiled}
    for rep in range(repeat + 1):  # rep 0: untimed, records the masks
        for e in engs:
            if e.name not in runs or rows[e.name].get("median", {}).get("status") == "error":
                continue
            try:
                session = e.session(compiled[e.name])
                common.collect()
                evict()
                walk = walks["hf" if e.name in engines.CANONICAL else "surface"]
                runs[e.name].append(run_walk(session, walk, excluded if rep == 0 else None, spell, each_step))
            except Exception as err:  # noqa: BLE001 - an engine failing mid-walk is a cell, not a crash
                rows[e.name]["median"] = common.error(one_line(err))
                rows[e.name]["detail"] = reason(rows[e.name]["median"])
    done = {n: rs for n, rs in runs.items() if rows[n].get("median", {}).get("status") != "error"}
    ref = done[engines.INDEX][0] if engines.INDEX in done else None
    for name, rs in done.items():
        row = rows[name]
        first, timed = rs[0], rs[1:]
        row.update(cells(timed), steps=len(first.mask_ns), walk=walk_text(first, truncated))
        tokfst = name in engines.TOKFST
        if name == engines.INDEX:
            row["detail"] = "(the reference)"
        if tokfst:
            res.check(f"masks {label} {name}: the walk is allowed to the end",
                      first.stop is None and (truncated or first.accepting), row["walk"])
        if name in engines.CANONICAL and not same:
            row["detail"] = "HF's ids do not spell the sample (normalizer): not compared with the index"
        elif ref is not None and name != engines.INDEX:
            eos = [t for t in engs_by_name[name].eos if 0 <= t < len(excluded)]
            subset = name in engines.CANONICAL
            a = compare_masks([without(m, eos) for m in ref.masks], [without(m, eos) for m in first.masks],
                              subset=subset)
            row["agree"], row["detail"] = a.holds, describe(a, subset, name, spell)
            if tokfst:
                what = "canonical masks within" if subset else "masks equal to"
                res.check(f"masks {label} {name}: {what} the agnostic index's", a.holds, row["detail"])
    for row in rows.values():
        if row["engine"] in engines.TOKFST:
            for peer in engines.PEERS:
                row[f"vs_{peer}"] = common.ratio(rows.get(peer, {}).get("median"), row.get("median"))
    return list(rows.values())


def masks_table(tokenizers: list[tuple[str, str, bool]], regexes: dict[str, str], repeat: int, steps: int | None,
                progress, each_step: bool = False) -> Results:
    from tokenizers import Tokenizer  # deferred: HF's tokenizers only where the oracle is asked (start-up)


    res = Results()
    table = Table(
        "masks", "Masks per decoding step along HF's tokenization, fresh states: tokfst vs peers", repeat,
        [("tokenizer", "tokenizer", "text"), ("vocab", "vocab", "int"), ("regex", "regex", "text"),
         ("engine", "engine", "text"), ("steps", "steps", "int"), ("median", "mask median", "time"),
         ("p99", "mask p99", "time"), ("accept", "accept median", "time"),
         ("vs_outlines-core", "outlines/this", "ratio"), ("vs_llguidance", "llguidance/this", "ratio"),
         ("vs_xgrammar", "xgrammar/this", "ratio"), ("agree", "agrees", "bool"), ("walk", "walk", "text"),
         ("detail", "masks vs tokfst index", "text")],
        inputs={"regexes": regexes, "samples": {}, "walks": {}, "setup_s": {}, "max_steps": steps,
                "evict_each_step": each_step,
                "versions": {d: common.version_of(d) for d in ("llguidance", "xgrammar", "torch", "transformers")}},
    )
    for name, path, _ in tokenizers:
        model = common.load_bpe(path)
        hf = Tokenizer.from_file(path)
        excluded = ~np.array([bool(s) for s in model.surfaces])
        setup = table.inputs["setup_s"][name] = {}
        progress(f"masks: {name}: setting up the engines ...")
        engs = engines.engines(model, path, lexicon.lexicon(model), setup.__setitem__)
        spell = speller(model)
        for rname, pattern in regexes.items():
            progress(f"masks: {name}: {rname} ...")
            text = table.inputs["samples"][rname] = sample_text(pattern)
            ids = hf.encode(text, add_special_tokens=False).ids
            full = {"hf": ids, "surface": ids if spells(model, ids, text) else longest_match(model, text)}
            walks = table.inputs["walks"].setdefault(name, {})[rname] = {k: w[:steps] if steps and w else w
                                                                        for k, w in full.items()}
            truncated = any(w is not None and len(walks[k]) < len(w) for k, w in full.items())
            for row in measure_regex(engs, pattern, walks, truncated, repeat, excluded, spell, res, f"{name} {rname}",
                                     each_step):
                table.rows.append({"tokenizer": name, "vocab": model.vocab_size, "regex": rname, **row})
    table.notes += [
        "The walk: HF's encode(sample, add_special_tokens=False).ids of one fixed sample string per regex "
        "(inputs.samples). steps: masks computed along it (one per token, and the one after the last token, where "
        "EOS is chosen). Every engine starts each walk from a fresh session and cold CPU caches (64 MB read "
        + ("before every step, as a model's forward pass would (--evict-each-step)" if each_step else
           "before it, as a model's forward pass would") + ") (tokfst: a fresh decoder, the "
        "factorized one reloaded from its artifact bytes; peers: a new Guide/LLMatcher/GrammarMatcher), so each "
        "mask is the first lookup at its state. mask: the bitmask ready for logits (packed int32 words; the "
        "factorized decoder and the peers fill a buffer allocated with the session, the index returns its "
        "precomputed row); "
        f"median and p99 over the steps of a walk, medians over {repeat} timed walks after an untimed one. "
        "accept: the token's advance. Where HF's ids do not spell the sample (a normalizer: Llama-2's prefix '▁'), "
        "the agnostic index and the peers, which read token surfaces, follow the longest-match tokenization of the "
        "sample instead (inputs.walks: hf, surface), and the canonical rows are not compared with the index.",
        "x/this: the peer's median mask time over this engine's (above 1: this engine is faster). agrees: the mask "
        "equals tokfst's agnostic index mask at every step (peers) or lies inside it (canonical forms), as sets of "
        "token ids with EOS and special tokens left out. walk: complete, or where a token of HF's tokenization "
        "was not allowed.",
    ]
    res.tables.append(table)
    return res
