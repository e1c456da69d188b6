"""``tokfst promote``: regex -> token automaton (thin wrapper over ``promote``/``index``)."""

from __future__ import annotations

import json
import time
from enum import Enum
from typing import Optional

import pynini
import typer

from .. import lexicon
from .. import tokenizer as tokmod
from ..artifacts import write_bytes, write_fst
from ..index import build_index
from .. import wordpiece
from ..bpe import factorized, implicit
from ..aho import maxmatch_artifact, maxmatch_promote
from ..wordtext import longest_word
from ..bpe.explicit import explicit_automaton
from ..bpe.gadgets import promote_gadgets
from ..bpe.product import materialize
from ..errors import InputError, LimitError
from ..promote import count_arcs, promote
from ..regex import compile_regex
from ..symbols import token_table
from .common import MaxStates, progress, say, read_pattern, refuse_binary_tty


class Method(str, Enum):
    implicit = "implicit"
    precomputed = "precomputed"
    gadgets = "gadgets"
    product = "product"
    aho = "aho"


BPE_METHODS = (Method.implicit, Method.precomputed, Method.gadgets)


class Format(str, Enum):
    fst = "fst"
    index = "index"


def promote_cmd(
    tokenizer: str = typer.Argument(..., metavar="TOKENIZER", help="tokenizer.json path, or a bundled name (gpt2)."),
    out: Optional[str] = typer.Argument(None, metavar="OUT", help="Output file; absent or '-' = stdout."),
    regex: Optional[str] = typer.Option(None, "-e", "--regex", metavar="REGEX", help="The regex (Python re syntax, fullmatch)."),
    regex_file: Optional[str] = typer.Option(None, "-f", "--regex-file", metavar="FILE",
                                             help="Read the regex from a file ('-' = stdin)."),
    fmt: Format = typer.Option(Format.fst, "--format", help="fst: an OpenFst vector acceptor; index: a JSON state -> allowed-tokens index."),
    max_states: int = MaxStates,
    no_cache: bool = typer.Option(False, "--no-cache", help="Build the lexicon transducer afresh; do not cache."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Print sizes and timings on stderr."),
    canonical: bool = typer.Option(False, "--canonical",
                                   help="Only canonical token sequences: what HF's tokenizer produces for the text "
                                        "(BPE, or WordPiece with its normalizer and pre-tokenizer)."),
    method: Optional[Method] = typer.Option(None, "--method",
                                            help="--canonical, BPE: implicit (default; product with the implicit "
                                                 "A_BPE), precomputed (Eq. 5: explicit A_BPE, small vocabularies), "
                                                 "gadgets (Eq. 4: the merge gadget cascade, small vocabularies). "
                                                 "WordPiece: product (default; greedy checks on the fly), aho "
                                                 "(MIN(PROJ(X o T_Aho)) with T_Aho from compile-maxmatch)."),
    artifact: Optional[str] = typer.Option(None, "--artifact", metavar="FILE",
                                           help="--canonical: an implicit A_BPE from compile-bpe, or (--method aho) "
                                                "a T_Aho .fst from compile-maxmatch (default: cached)."),
    max_arcs: int = typer.Option(2_000_000, "--max-arcs", min=1, metavar="N",
                                 help="--canonical: refuse a materialized automaton with more arcs "
                                      "(then use --format index)."),
) -> None:
    """Promote a regex to the automaton of all token sequences that spell it (seed 000 Eq. 3).

    The result accepts exactly the sequences of TOKENIZER's tokens whose concatenated surface
    bytes are a UTF-8 string matching REGEX in full: MIN(PROJ(A o T)) for the regex's byte
    automaton A and the tokenizer's lexicon transducer T. It is tokenization-agnostic:
    non-canonical segmentations are accepted too. Added and special tokens never appear.
    Surfaces: byte-level BPE tokens spell their bytes (Ġ is a space), SentencePiece-style
    tokens read ▁ as a space and <0xNN> as byte NN, WordPiece ## pieces are glued to the
    piece before them (word boundaries come with canonical MaxMatch).

    \b
    --format fst    an OpenFst vector acceptor; labels are token id + 1 (0 = epsilon), with
                    embedded symbol tables named tokfst-tokens-<fingerprint>, readable by
                    fstinfo, fstprint and fstdraw. Binary: not written to a terminal.
    --format index  JSON: initial, finals, masks (sorted allowed token ids, shared by all
                    states with the same set: coalescence), per state its mask and next
                    states, and stats (masks, states in shared masks, single-token states).

    Regexes: Python re syntax, matched in full, over all of Unicode (negated classes and .
    included; . excludes newline unless (?s)); \\d, \\w and \\s are ASCII classes as in
    interegular; \\uXXXX, \\UXXXXXXXX and \\N{NAME} escapes work; (?i) folds case per
    character with str.lower/str.upper. Anchors, backreferences and lookaround are refused.
    A regex file holds one pattern; one trailing newline is dropped.

    --canonical keeps only what Hugging Face's tokenizer produces (without special tokens).
    BPE: the product with the canonical BPE automaton (see compile-bpe). WordPiece: the
    regex's text first goes through the tokenizer's normalizer and pre-tokenizer, as in HF
    (BertNormalizer, Lowercase, BertPreTokenizer, WhitespaceSplit; other configurations are
    refused): a regex over text the normalizer changes, e.g. upper case or accents for an
    uncased model, yields the tokens of the normalized text (-e 'John' gives "john"), never
    an empty result; whitespace between words leaves no trace in the tokens; punctuation
    and CJK characters are words by themselves; a word of more than max_input_chars_per_word
    characters, or one with no complete greedy parse, is [UNK] alone. Then each word is
    tokenized greedily, longest piece first, "##" pieces after the first.

    The canonical automaton is materialized and minimized while it stays under --max-arcs
    (finite sets, dates, numbers); free text such as [a-z]+ has millions of canonical arcs
    (BERT: 6,248 states and 25.3 M arcs for one word), so with --format index tokfst then
    writes the factorized form: the text automaton plus the tokenizer fingerprint (BPE:
    tokfst-factorized; WordPiece: tokfst-factorized-maxmatch), whose masks are computed per
    step by the Python API (tokfst_cli.bpe.factorized.load, tokfst_cli.wordpiece.load).

    The lexicon transducer is built once per tokenizer and cached under
    $XDG_CACHE_HOME/tokfst (or $TOKFST_CACHE), keyed by the tokenizer's fingerprint.

    \b
    Examples:
      tokfst promote gpt2 -e '[0-9]{4}-[0-9]{2}-[0-9]{2}' date.fst
      tokfst promote llama2.json -f email.re --format index > email.json
      tokfst promote gpt2 -e '(Cologne|Berlin)' | fstprint | head
      tokfst promote bert.json -e '[0-9]{4}-[0-9]{2}-[0-9]{2}' --canonical date.fst
      tokfst promote bert.json -e '[a-z]+( [a-z]+){0,3}' --canonical --format index > words.tfz
    """
    pattern = read_pattern(regex, regex_file)
    if fmt is Format.fst:
        refuse_binary_tty(out)
    with progress("loading tokenizer"):
        model = tokmod.load(tokenizer)
        _check_method(model, canonical, method)
        maxmatch = canonical and model.family == "wordpiece"  # needs no lexicon transducer T
        lex = None if maxmatch else lexicon.lexicon(model, cache=not no_cache)
    start = time.perf_counter()
    with progress("promoting"):
        automaton = compile_regex(pattern, max_states=max_states)
        if maxmatch:
            fst = _canonical_maxmatch(model, automaton.fst, fmt, method, artifact, max_states, max_arcs, pattern, out)
            if fst is not None:
                table = token_table(model)
                fst.set_input_symbols(table)
                fst.set_output_symbols(table)
        else:
            fst = promote(model, automaton, lex, max_states=max_states).fst
            if canonical:
                fst = _canonical(model, fst, fmt, method or Method.implicit, artifact, max_arcs, pattern, out)
    elapsed = time.perf_counter() - start
    if fst is None:
        pass  # the factorized artifact is written
    elif fmt is Format.fst:
        write_fst(out, fst)
    else:
        index = build_index(fst, model, pattern)
        write_bytes(out, (json.dumps(index, ensure_ascii=False) + "\n").encode("utf-8"))
    if verbose and fst is not None:
        say(f"tokfst: {fst.num_states()} states, {count_arcs(fst)} arcs, promoted in {elapsed * 1000:.1f} ms")


def _check_method(model, canonical: bool, method: Method | None) -> None:
    if method is None:
        return
    if not canonical:
        raise InputError("--method needs --canonical", "add --canonical, or drop --method")
    wordpiece = model.family == "wordpiece"
    if wordpiece == (method in BPE_METHODS):
        allowed = "product, aho" if wordpiece else "implicit, precomputed, gadgets"
        raise InputError(f"--method {method.value} is not for {model.family} tokenizers", f"use one of: {allowed}")


def _canonical_maxmatch(model, automaton, fmt, method, artifact, max_states, max_arcs, pattern, out):
    """Canonical MaxMatch: the product (materialized, or factorized when too big) or the aho composition."""
    machine = wordpiece.canonical_machine(model, automaton, max_states)
    if method is Method.aho:
        taho = maxmatch_artifact(model, artifact)
        if longest_word(machine.text) is None:  # determinizing free text would exhaust memory first
            try:
                wordpiece.materialize(machine, max_states, max_arcs)
            except LimitError as e:
                raise LimitError(str(e), "use --method product with --format index (the factorized form)") from None
        return maxmatch_promote(model, automaton, taho, max_states)
    return _materialized_or_factorized(lambda: wordpiece.materialize(machine, max_states, max_arcs),
                                       lambda: wordpiece.to_bytes(machine, model, pattern), fmt, max_arcs, out)


def _materialized_or_factorized(materialize_fn, factorized_fn, fmt, max_arcs, out):
    """The materialized automaton; past --max-arcs an error (--format fst) or the factorized form written."""
    try:
        return materialize_fn()
    except LimitError as e:
        if fmt is Format.fst:
            raise LimitError(f"{e}", "write the factorized form with --format index") from None
    say(f"tokfst: the canonical automaton exceeds --max-arcs {max_arcs}; writing the factorized form")
    refuse_binary_tty(out)
    write_bytes(out, factorized_fn())
    return None


def _canonical(model, agnostic, fmt, method, artifact, max_arcs, pattern, out):
    """Canonical BPE promotion: materialized (.fst, or an index when it fits) or factorized."""
    if method is Method.gadgets:
        return promote_gadgets(compile_regex(pattern), model)
    imp = implicit.load_or_compile(model, artifact)
    if method is Method.precomputed:
        abpe = explicit_automaton(imp, model, max_arcs=max_arcs)
        return pynini.intersect(agnostic.copy().arcsort("olabel"), abpe.arcsort("ilabel")).connect().minimize()
    return _materialized_or_factorized(lambda: materialize(agnostic, imp, max_arcs=max_arcs),
                                       lambda: factorized.to_bytes(agnostic, imp, pattern), fmt, max_arcs, out)
