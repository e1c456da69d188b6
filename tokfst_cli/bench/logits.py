"""``tokfst bench logits``: what a tokfst constraint costs per generated token in transformers' ``generate``.

Per tokenizer, a tiny randomly initialized GPT-2-architecture model over its vocabulary
(:func:`tokfst_cli.decoding.logits.tiny_model`: 1 layer, 32 dimensions; nothing is downloaded), prompted
with BOS, samples (``do_sample=True``, ``max_new_tokens`` 32, one sequence per call). Per regex
and constraint (agnostic, and canonical: ``pipeline.build`` with the default limits, so
materialized or factorized as ``promote --format index`` would write it; and the agnostic lazy
decoder, ``constraint.lazy``, made afresh for every run so its masks are made while generating), each timed run is a
constrained ``generate`` with :class:`tokfst_cli.decoding.logits.ConstraintLogitsProcessor` (n tokens,
EOS included), then an unconstrained one of at most n tokens from the same model: the time per
generated token of both, their difference (the overhead), and the processor's own time per
call (consuming the last token, the masks, the -inf fill). The tiny model makes the model's
share small, so the overhead stands out; a real model adds its forward pass to both sides.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from tokfst_cli import pipeline
from tokfst_cli.bench import common
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.decoding import logits as hf  # its ConstraintLogitsProcessor imports torch: on first use
from tokfst_cli.decoding.matcher import DeadEnd
from tokfst_cli.errors import InputError
from tokfst_cli.promotion.lazy import LazyDecoder
from tokfst_cli.text import catalogue
from tokfst_cli.text.regex import compile_regex

MAX_NEW_TOKENS = 32
THREADS = 1  # torch's intra-op threads while measuring
ENDS = ("</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>", "[SEP]")
BEGINS = ("<s>", "<|begin_of_text|>", "<bos>", "[CLS]")
CONSTRAINTS = ("agnostic", "canonical", "lazy")


def default_regexes() -> dict[str, str]:
    return catalogue.six()


def special_ids(model) -> tuple[int, int]:
    """(BOS, EOS) of a tokenizer by the usual names; BOS is EOS where there is none (GPT-2)."""
    eos = next((model.token_id(t) for t in ENDS if model.token_id(t) is not None), None)
    if eos is None:
        raise InputError(f"{model.source} has no end-of-text token ({', '.join(ENDS)})",
                         "give a tokenizer with one", hint="bench-eos")
    bos = next((model.token_id(t) for t in BEGINS if model.token_id(t) is not None), eos)
    return bos, eos


def timed_generate(lm, prompt: list[int], constraint, eos: int, max_new: int) -> tuple[float, int]:
    """Wall time of one ``generate`` call and the tokens it generated (EOS counted)."""
    t, [ids] = common.timed(lambda: hf.generate(lm, prompt, constraint, eos_token_id=eos, do_sample=True,
                                             max_new_tokens=max_new))
    return t, min(len(ids) + 1, max_new)


def decoders(model, pattern: str, kind: str) -> tuple[str, Callable[[], object]]:
    """(form, a function giving the decoder of a run): the promoted constraint's one decoder, or a
    new lazy decoder per run (no mask made yet)."""
    if kind == "lazy":

        a = compile_regex(pattern)
        return "lazy", lambda: LazyDecoder(model, a)
    result = pipeline.build(model, pattern, canonical=kind == "canonical")
    decoder = result.decoder()
    return "materialized" if result.materialized else "factorized", lambda: decoder


def regex_row(lm, model, name: str, pattern: str, kind: str, runs: int) -> dict:
    """One row: ``runs`` timed pairs (constrained, unconstrained) after one untimed pair."""
    import torch  # deferred: optional dependency (tokfst[hf])


    bos, eos = special_ids(model)
    form, fresh = decoders(model, pattern, kind)
    row = {"tokenizer": name, "regex": pattern if len(pattern) <= 30 else pattern[:29] + "…",
           "constraint": "canonical" if kind == "canonical" else "agnostic", "form": form}
    cons, free, over, proc_t, lengths = [], [], [], [], []
    try:
        for i in range(runs + 1):
            torch.manual_seed(i)
            proc = hf.ConstraintLogitsProcessor(fresh(), eos_token_id=eos)
            tc, n = timed_generate(lm, [bos], proc, eos, MAX_NEW_TOKENS)
            tu, nu = timed_generate(lm, [bos], None, eos, n)
            if i == 0:
                continue  # warm-up: first masks, caches
            cons.append(tc / n)
            free.append(tu / nu)
            over.append(1e6 * (tc / n - tu / nu))
            proc_t.append(proc.seconds / max(proc.steps, 1))
            lengths.append(n)
    except DeadEnd as e:
        cell = common.error(f"dead end: {e}")
        return {**row, "tokens": None, "unconstrained": cell, "constrained": cell, "overhead_us": None,
                "processor": cell, "error": str(e)}
    return {**row, "tokens": int(statistics.median(lengths)), "unconstrained": common.ok(free),
            "constrained": common.ok(cons), "overhead_us": statistics.median(over), "processor": common.ok(proc_t)}


def logits_table(tokenizers: list[tuple[str, str, bool]], regexes: dict[str, str], runs: int, progress) -> Results:
    import torch  # deferred: optional dependency (tokfst[hf])


    res = Results()
    table = Table(
        "logits", "Constrained generation with transformers: time per generated token", runs,
        [("tokenizer", "tokenizer", "text"), ("regex", "regex", "text"), ("constraint", "constraint", "text"),
         ("form", "form", "text"), ("tokens", "tokens", "int"), ("unconstrained", "unconstrained", "time"),
         ("constrained", "constrained", "time"), ("overhead_us", "overhead µs", "float"),
         ("processor", "processor", "time")],
        inputs={"max_new_tokens": MAX_NEW_TOKENS, "model": "GPT-2 architecture, 1 layer, 32-dim, random (seed 0)",
                "torch_threads": THREADS, "torch": common.version_of("torch"),
                "transformers": common.version_of("transformers")})
    dead = []
    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        for name, path, _ in tokenizers:
            model = common.load_model(path, None)
            bos, eos = special_ids(model)
            lm = hf.tiny_model(model.vocab_size, bos, eos)
            for rname, pattern in regexes.items():
                for kind in CONSTRAINTS:
                    progress(f"logits: {name}: {rname} ({kind}), {runs} runs")
                    row = regex_row(lm, model, name, pattern, kind, runs)
                    table.rows.append(row)
                    if row["tokens"] is None:
                        dead.append(f"{name} {rname} {kind}: {row.pop('error')}")
    finally:
        torch.set_num_threads(threads)
    table.notes += [
        f"Per run: model.generate(do_sample=True, max_new_tokens={MAX_NEW_TOKENS}) from BOS, one sequence, with "
        "tokfst_cli.decoding.logits.ConstraintLogitsProcessor (constrained: n tokens, EOS included), "
        "then without it for "
        "at most n tokens (unconstrained). Medians over --repeat runs after one warm-up, per generated token.",
        "overhead µs: constrained minus unconstrained per token, run by run (median; noise can make it "
        "negative); processor: the processor's own time per call (consume the new token, the mask of each row, "
        f"the -inf fill). torch runs on {THREADS} thread (a shared machine's figures are steadier).",
        "model: a randomly initialized GPT-2-architecture model over the tokenizer's vocabulary (1 layer, "
        "32 dimensions): its forward pass is small, so the overhead stands out; torch's multinomial over the "
        "whole vocabulary is most of the unconstrained time.",
        "form: the canonical constraint as pipeline.build makes it with the default limits (materialized, or "
        "factorized past max_arcs); a dead end (an empty mask at a non-final state) is an error cell. lazy: the "
        "agnostic constraint.lazy decoder, a new one per run (each state's mask made when generation first "
        "reaches it).",
    ]
    res.tables.append(table)
    res.check("logits: no dead end met while generating", not dead, "; ".join(dead))
    return res
