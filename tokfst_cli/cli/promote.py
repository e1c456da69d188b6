"""``tokfst promote``: parse, run :func:`tokfst_cli.pipeline.build`, write (help: ``helptext.PROMOTE``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Optional

import typer

from tokfst_cli import pipeline
from tokfst_cli.automata.symbols import with_tables
from tokfst_cli.cli.common import Level, LevelOpt, MaxStates, Out, Tokenizer, read_pattern, read_text
from tokfst_cli.cli.errors import flag
from tokfst_cli.cli.output import OUT
from tokfst_cli.errors import InputError
from tokfst_cli.filters.compose import Filters
from tokfst_cli.grammar.pushdown import Pushdown
from tokfst_cli.promotion.promote import count_arcs
from tokfst_cli.support import cache
from tokfst_cli.support.files import destination
from tokfst_cli.tokenizer import model as tokmod


class Method(str, Enum):
    implicit = "implicit"
    precomputed = "precomputed"
    gadgets = "gadgets"
    product = "product"
    aho = "aho"


class Format(str, Enum):
    fst = "fst"
    index = "index"
    lazy = "lazy"
    auto = "auto"


@dataclass
class Report:
    """What promote says about what it wrote: a line on stderr (-v), one JSON object on stdout (--json:
    ``Result.summary`` or ``LazyForm.summary``, with the form written, OUT and its size in bytes)."""

    verbose: bool
    json: bool
    requested: str
    out: str | None
    symbols: str = "full"
    start: float = field(default_factory=time.perf_counter)

    def __call__(self, line: str | None, summary: dict, written: str, size: int) -> None:
        if self.verbose and line:
            OUT.say(line)
        if self.json:
            OUT.record({"format": written, "requested_format": self.requested, "out": self.out or "-", "bytes": size,
                        **summary, "total_seconds": round(time.perf_counter() - self.start, 6)})


def _report(verbose: bool, json_out: bool, fmt: "Format", out: str | None, symbols: "Symbols") -> Report:
    """-v and --json; --json with the artifact on stdout (OUT absent, '-', /dev/stdout) refused: the
    two would share stdout. --symbols other than full without --format fst refused too."""
    if symbols.value != "full" and fmt is not Format.fst:
        raise InputError(f"--symbols {symbols.value} names the labels of an .fst; --format {fmt.value} has no "
                         "symbol table", "drop --symbols, or use --format fst")
    if json_out and destination(out).kind == "stdout":
        raise InputError("--json prints the summary on stdout, where the artifact goes without OUT",
                         "give OUT a file path, or drop --json (-v prints the summary on stderr)")
    return Report(verbose, json_out, fmt.value, out, symbols.value)


SCRIPTS = typer.Option(None, "--scripts", metavar="SCRIPT,...",
                       help="Only text of these Unicode scripts (e.g. Latin,Greek,Han), plus Common and Inherited "
                            "characters (digits, punctuation, spaces, combining marks).")
ASCII = typer.Option(False, "--ascii", help="Only ASCII text.")
NFC = typer.Option(False, "--nfc", help="Only text in Unicode Normalization Form C (Pitfalls 2025 Sec. 4.1).")
NO_BYTE_TOKENS = typer.Option(False, "--no-byte-tokens",
                              help="No byte token (byte fallback <0xNN>, or a byte-level token that is a partial "
                                   "UTF-8 character) where a token spells the whole character.")
LITERAL_ASCII = typer.Option(False, "--literal-ascii",
                             help="ASCII only as character tokens, never as byte-fallback tokens; non-ASCII bytes "
                                  "stay allowed.")
FUSE_SPACES = typer.Option(False, "--fuse-spaces",
                           help="No isolated space token [ ][c...] where the fused token [ c...] exists "
                                "(Pitfalls 2025 Sec. 4.5).")
MAX_TOKENS = typer.Option(None, "--max-tokens", min=0, metavar="N",
                          help="Only sequences of at most N tokens (--format index: kept as the automaton and N, "
                               "no product).")
PROMPT = typer.Option(None, "--prompt", metavar="TEXT",
                      help="--canonical: token healing: the prompt's text before the regex's (see below).")
PROMPT_FILE = typer.Option(None, "--prompt-file", metavar="FILE", help="Read --prompt's text from a file.")
SCHEMA = typer.Option(None, "--schema", metavar="FILE",
                      help="A JSON Schema instead of a regex: the JSON texts valid under it ('-' = stdin).")
GRAMMAR = typer.Option(None, "--grammar", metavar="FILE",
                       help="A grammar instead of a regex: FILE.gbnf (llama.cpp's GBNF, start rule root) or "
                            "FILE.lark (Lark, start rule start); self-embedding ones need a stack (see below).")
ANY_JSON = typer.Option(False, "--any-json",
                        help="Any JSON document instead of a regex, nested to any depth (a grammar with a stack; "
                             "--whitespace applies).")


class Whitespace(str, Enum):
    compact = "compact"
    pretty = "pretty"
    flexible = "flexible"


WHITESPACE = typer.Option(Whitespace.compact, "--whitespace", help="--schema: the JSON texts' whitespace (see below).")
MAX_DEPTH = typer.Option(None, "--max-depth", min=0, metavar="N",
                         help="--schema with --recursion cut: nest $ref recursion and free values at most N deep "
                              "[default: 3].")


class SpecialText(str, Enum):
    exclude = "exclude"
    refuse = "refuse"


SPECIAL_TEXT = typer.Option(SpecialText.exclude, "--special-text",
                            help="--canonical: texts that contain a special token's content (<|endoftext|>, <s>: "
                                 "control tokens encode cuts out) are left out of the language (exclude; -v names "
                                 "them) or refused (refuse).")


class Recursion(str, Enum):
    auto = "auto"
    stack = "stack"
    cut = "cut"


RECURSION = typer.Option(Recursion.auto, "--recursion",
                         help="--schema: recursion ($ref) and free values ({}, true) nested to any depth with a stack "
                              "(stack: a pushdown automaton, or refused where it meets allOf/not/oneOf/if), cut at "
                              "--max-depth (cut: a finite automaton), or auto: stack where it can be, else cut "
                              "(always cut with --canonical, filters, --prompt, --terminals, --format index/lazy).")


class NumberSpellings(str, Enum):
    any = "any"
    shortest = "shortest"


NUMBER_SPELLINGS = typer.Option(NumberSpellings.any, "--number-spellings",
                                help="--schema: numbers in every JSON spelling of a valid value (any: 5.0, 2.50, -0; "
                                     "exponents only where no number is constrained beyond its sign) or in the "
                                     "shortest one alone (shortest: 5, 2.5, 0; one text per value).")
LENIENT = typer.Option(False, "--lenient", help="--schema: ignore unsupported keywords (listed in a warning).")
ANY_ORDER = typer.Option(False, "--any-order",
                         help="--schema: object properties (and const/enum objects' keys) in any order "
                              "(default: stable order).")
TERMINALS = typer.Option(None, "--terminals/--no-terminals",
                         help="Wildcard loops as terminal labels: one arc per length class whose token mask is "
                              "precomputed (Koo et al. 2024 Sec. 2.5.1; agnostic only). Default: on with --schema or a "
                              "(?P<TEXT_TOKEN>)/(?P<PARAGRAPH_TOKEN>) group, else off; --no-terminals expands "
                              "them into token arcs.", show_default=False)

FORMAT = typer.Option(Format.fst, "--format", help=(
    "fst: an OpenFst vector acceptor; index: a JSON state -> allowed-tokens index; lazy: the byte DFA's table, "
    "promoted state by state at decoding (constraint.load with the tokenizer; agnostic); auto: index, or lazy "
    "where the promoted automaton passes --max-states (said on stderr; see below)."))
CANONICAL = typer.Option(False, "--canonical",
                         help="Only canonical token sequences: what HF's tokenizer produces for the text "
                              "(BPE, or WordPiece with its normalizer and pre-tokenizer).")
METHOD = typer.Option(None, "--method",
                      help="--canonical, BPE: implicit (default; product with the implicit "
                           "A_BPE), precomputed (Eq. 5: explicit A_BPE, small vocabularies), "
                           "gadgets (Eq. 4: the merge gadget cascade, small vocabularies). "
                           "WordPiece: product (default; greedy checks on the fly), aho "
                           "(MIN(PROJ(X o T_Aho)) with T_Aho from compile-maxmatch).")
ARTIFACT = typer.Option(None, "--artifact", metavar="FILE",
                        help="--canonical: an implicit A_BPE from compile-bpe, or (--method aho) "
                             "a T_Aho .fst from compile-maxmatch (default: cached).")
class Symbols(str, Enum):
    full = "full"
    compact = "compact"
    none = "none"


SYMBOLS = typer.Option(Symbols.full, "--symbols",
                       help="--format fst: the token symbol tables: full (the whole vocabulary, input and output; "
                            "GPT-2: ~1.96 MB), compact (the tokens on the arcs only), none (numbers; see below).")
MAX_ARCS = typer.Option(2_000_000, "--max-arcs", min=1, metavar="N",
                        help="--canonical: refuse a materialized automaton with more arcs "
                             "(then use --format index).")


def promote_cmd(
    tokenizer: str = Tokenizer, out: Optional[str] = Out,
    regex: Optional[str] = typer.Option(None, "-e", "--regex", metavar="REGEX",
                                        help="The regex (Python re syntax, fullmatch)."),
    regex_file: Optional[str] = typer.Option(None, "-f", "--regex-file", metavar="FILE",
                                             help="Read the regex from a file ('-' = stdin)."),
    fmt: Format = FORMAT, symbols: Symbols = SYMBOLS,
    max_states: int = MaxStates,
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write tokfst's disk cache (lexicon, "
                                                            "filters, canonical artifacts): build everything afresh."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Print sizes and timings on stderr."),
    json_out: bool = typer.Option(False, "--json", help="Print -v's summary as one JSON object on stdout (needs a "
                                                        "file OUT: see below)."),
    canonical: bool = CANONICAL,
    method: Optional[Method] = METHOD,
    artifact: Optional[str] = ARTIFACT,
    max_arcs: int = MAX_ARCS,
    level: Level = LevelOpt, scripts: Optional[str] = SCRIPTS, ascii_only: bool = ASCII, nfc: bool = NFC,
    no_byte_tokens: bool = NO_BYTE_TOKENS, literal_ascii: bool = LITERAL_ASCII, fuse_spaces: bool = FUSE_SPACES,
    max_tokens: Optional[int] = MAX_TOKENS, prompt: Optional[str] = PROMPT, prompt_file: Optional[str] = PROMPT_FILE,
    schema: Optional[str] = SCHEMA, whitespace: Whitespace = WHITESPACE, max_depth: Optional[int] = MAX_DEPTH,
    lenient: bool = LENIENT, any_order: bool = ANY_ORDER, terminals: Optional[bool] = TERMINALS,
    grammar: Optional[str] = GRAMMAR, any_json: bool = ANY_JSON, recursion: Recursion = RECURSION,
    special_text: SpecialText = SPECIAL_TEXT, number_spellings: NumberSpellings = NUMBER_SPELLINGS,
) -> None:
    """Promote a regex to the automaton of all token sequences that spell it (Cognetta & Okazaki 2024 Eq. 3)."""
    report = _report(verbose, json_out, fmt, out, symbols)
    filters = _filters(scripts, ascii_only, nfc, no_byte_tokens, literal_ascii, fuse_spaces, max_tokens)
    prompt = read_prompt(prompt, prompt_file)
    recursion = _recursion(recursion, canonical, prompt, terminals, fmt, filters)
    source = (read_grammar(grammar, regex, regex_file, schema, max_states, any_json, whitespace.value)
              if grammar is not None or any_json else read_schema(
                  schema, regex, regex_file, whitespace.value, max_depth, lenient, any_order, max_states, recursion,
                  number_spellings.value))
    pattern = source.pattern if source is not None else read_pattern(regex, regex_file)
    if isinstance(source, Pushdown):  # a self-embedding grammar (or --any-json): its PDT
        return _write_pushdown(source, out, fmt, (canonical, filters, prompt, terminals), report)
    if fmt is Format.fst:
        OUT.refuse_binary_tty(out)
    if fmt is Format.lazy:
        return _write_lazy(tokenizer, source, pattern, filters, max_states, no_cache, out, report,
                           (canonical, prompt, terminals, method, artifact))
    auto = {"fallback": terminals is not True} if fmt is Format.auto else {}  # --terminals given: index only
    if terminals is None:
        terminals = not canonical and not filters.token_level() and (source is not None or _token_groups(pattern))
    model = _checked_model(tokenizer, canonical, method, level, filters, prompt, terminals, no_cache)
    with OUT.progress("promoting"):
        result = (pipeline.build_auto if auto else pipeline.build)(
            model, pattern, canonical=canonical, method=method.value if method else None,
            limits=pipeline.Limits(max_states, max_arcs), artifact=artifact, level=level.value,
            factorized_ok=fmt is not Format.fst, cache=not no_cache, filters=filters, prompt=prompt,
            automaton=source, terminals=terminals, special_text=special_text.value, **auto)
    _write(result, out, fmt, report)


def _recursion(recursion: Recursion, canonical: bool, prompt: str | None, terminals: bool | None, fmt: Format,
               filters: Filters) -> str:
    """--recursion as compiled: auto cuts when the other options need a finite automaton."""
    finite = (canonical or prompt is not None or bool(terminals) or fmt is not Format.fst or filters.text_level()
              or filters.token_level())
    return "cut" if finite and recursion is Recursion.auto else recursion.value


def _checked_model(tokenizer: str, canonical: bool, method: Method | None, level: Level, filters: Filters,
                   prompt: str | None, terminals: bool, no_cache: bool):
    """The tokenizer, loaded, with the options checked against it (``pipeline.check_*``)."""
    with OUT.progress("loading tokenizer"):
        model = _load(tokenizer, no_cache)
        pipeline.check_method(model, canonical, method.value if method else None, level.value)
        pipeline.check_options(model, canonical, filters, prompt, terminals)
    return model


def _load(tokenizer: str, no_cache: bool):
    """The tokenizer; --no-cache: not read from, nor kept in, the cache either."""
    with cache.bypassed(no_cache):
        return tokmod.load(tokenizer)


def _filters(scripts: str | None, *flags) -> Filters:
    """--scripts A,B and the other filter options as one ``Filters``."""
    return Filters(tuple(s.strip() for s in scripts.split(",") if s.strip()) if scripts else (), *flags)


def _check_lazy(canonical: bool, filters: Filters, prompt: str | None, terminals: bool | None,
                method: Method | None, artifact: str | None) -> None:
    """Refuse what --format lazy does not take, before anything is loaded: it is the agnostic
    automaton, filtered at most at the text level (``lazy.check_filters``)."""
    from tokfst_cli.promotion.lazy import check_filters  # deferred: start-up: only this path needs it

    given = [name for name, on in (("--canonical", canonical), ("--prompt", prompt is not None),
                                   ("--terminals", terminals is True), ("--method", method is not None),
                                   ("--artifact", artifact is not None)) if on]
    if given:
        raise InputError(f"--format lazy is the agnostic automaton promoted at decoding; it does not take "
                         f"{', '.join(given)}", "drop them, or use --format index", hint="lazy-options",
                         options=", ".join(given))
    check_filters(filters)


def _write_lazy(tokenizer: str, source, pattern: str, filters: Filters, max_states: int, no_cache: bool,
                out: str | None, report: Report, others: tuple) -> None:
    """--format lazy: ``pipeline.build_lazy`` of the byte DFA for the tokenizer (``others``: --canonical,
    --prompt, --terminals, --method, --artifact, refused by :func:`_check_lazy`)."""
    canonical, prompt, terminals, method, artifact = others
    _check_lazy(canonical, filters, prompt, terminals, method, artifact)
    OUT.refuse_binary_tty(out, "a lazy artifact")
    with OUT.progress("loading tokenizer"):
        model = _load(tokenizer, no_cache)
    with OUT.progress("compiling"):
        form = pipeline.build_lazy(model, pattern, automaton=source, limits=pipeline.Limits(max_states),
                                   cache=not no_cache, filters=filters)
    _write_form(form, out, report)


def _write_form(form: pipeline.LazyForm, out: str | None, report: Report) -> None:
    """The lazy artifact to OUT; -v/--json say its size."""
    data = form.to_bytes()
    OUT.data(out, data)
    summary = form.summary()
    report(f"tokfst: lazy artifact: {summary['states']} states of the byte DFA, {summary['classes']} classes of "
           f"bytes, {len(data)} bytes, in {(time.perf_counter() - report.start) * 1000:.1f} ms", summary, "lazy",
           len(data))


def _write_pushdown(pdt, out: str | None, fmt: Format, options: tuple, report: Report) -> None:
    """A grammar that needs a stack: its byte PDT as one .fst (parentheses named in its symbol
    table), which ``tokfst.load(path, tokenizer)`` decodes; nothing finite to index or filter.
    ``options``: --canonical, the filters, --prompt, --terminals (none of them taken)."""
    from tokfst_cli.grammar.pushdown import with_symbols  # deferred: start-up: only this path needs it

    canonical, filters, prompt, terminals = options
    if fmt is not Format.fst or canonical or filters.text_level() or filters.token_level() or prompt or terminals:
        raise InputError(f"{pdt.pattern} needs a stack (rules {', '.join(pdt.rules)}): it is written as a pushdown "
                         "automaton over bytes, without --format index/lazy, --canonical, filters or --prompt",
                         "drop those options (tokfst.load(FILE, tokenizer) decodes the .fst), or "
                         + ("cut the recursion (--recursion cut)" if pdt.source.startswith("json-schema:")
                            else "make the recursion left- or right-linear"), hint="grammar-pushdown")
    OUT.refuse_binary_tty(out)
    fst = with_symbols(pdt)
    size = OUT.fst(out, fst)
    report(f"tokfst: pushdown automaton: {fst.num_states()} states, {len(pdt.parens)} parenthesis pairs; "
           f"rules with a stack: {', '.join(pdt.rules)}",
           {"pattern": pdt.pattern, "states": fst.num_states(), "arcs": count_arcs(fst), "parentheses": len(pdt.parens),
            "rules": list(pdt.rules)}, "pushdown", size)


def _token_groups(pattern: str) -> bool:
    from tokfst_cli.text.groups import rewrite  # deferred: start-up: only this path needs it

    return any(g.name.endswith("_TOKEN") for g in rewrite(pattern)[1])


def read_schema(path: str | None, regex: str | None, regex_file: str | None, whitespace: str,
                max_depth: int | None, lenient: bool, any_order: bool, max_states: int, recursion: str = "cut",
                number_spellings: str = "any"):
    """--schema FILE compiled to its byte automaton or, recursive with a stack, its PDT (warnings on
    stderr); None without --schema."""
    if path is None:
        return None
    if regex is not None or regex_file is not None:
        raise InputError("give a regex (-e, -f) or --schema, not both", "drop one of them")

    from tokfst_cli.grammar.schema import compile_json  # deferred: start-up: only this path needs it
    from tokfst_cli.schema.refs import loads  # deferred: start-up: only this path needs it

    doc = loads(read_text(path, "schema file"), f"schema file {path}")
    with OUT.progress("compiling the schema"):
        got = compile_json(doc, recursion=recursion, whitespace=whitespace, lenient=lenient, any_order=any_order,
                           max_states=max_states, number_spellings=number_spellings,
                           **({"max_depth": max_depth} if max_depth is not None else {}))
    for warning in got.warnings:
        OUT.say(f"tokfst: warning: {warning}")
    return got.automaton


def read_grammar(path: str | None, regex: str | None, regex_file: str | None, schema: str | None, max_states: int,
                 any_json: bool = False, whitespace: str = "compact"):
    """--grammar FILE (.gbnf or .lark) compiled to its byte automaton or PDT; --any-json's PDT."""
    if regex is not None or regex_file is not None or schema is not None or (path is not None and any_json):
        raise InputError("give one of a regex (-e, -f), --schema, --grammar and --any-json", "drop the others")
    from tokfst_cli.grammar import any_json as json_grammar  # deferred: start-up: only this path needs it
    from tokfst_cli.grammar import load  # deferred: start-up: only this path needs it

    with OUT.progress("compiling the grammar"):
        if any_json:
            return json_grammar.any_json(whitespace, max_states)
        return load.compile_file(path, read_text(path, "grammar file"), max_states=max_states)


def read_prompt(prompt: str | None, prompt_file: str | None) -> str | None:
    """The prompt from --prompt or --prompt-file (read as is: no newline dropped)."""
    if prompt is not None and prompt_file is not None:
        raise InputError("give at most one of --prompt and --prompt-file", "see 'tokfst promote --help'")
    return read_text(prompt_file, "prompt file") if prompt_file is not None else prompt


def _write(result: pipeline.Result | pipeline.LazyForm, out: str | None, fmt: Format, report: Report) -> None:
    if isinstance(result, pipeline.LazyForm):  # --format auto past --max-states
        OUT.say(f"tokfst: {result.reason.message(flag)}: writing the lazy form instead of the index (--format auto)")
        OUT.refuse_binary_tty(out, "a lazy artifact")
        return _write_form(result, out, report)
    if report.verbose and result.excluded:
        OUT.say(f"tokfst: left out the texts that contain the special tokens {', '.join(map(repr, result.excluded))} "
                "(--special-text refuse refuses them)")
    if report.verbose and result.cut:
        more = len(result.cut) - 8
        shown = ", ".join(map(repr, result.cut[:8])) + (f" and {more} more" if more > 0 else "")
        OUT.say(f"tokfst: cut out as encode does, each a pre-token of its own: the added tokens {shown}")
    if result.healing is not None:
        h = result.healing
        OUT.say(f"tokfst: keep the prompt's first {len(h.kept)} tokens: {' '.join(map(str, h.kept)) or '(none)'}; "
                f"the constraint re-tokenizes the last {h.retokenized} of encode(prompt)")
    max_arcs = result.limits.max_arcs
    if not result.materialized:
        OUT.say(f"tokfst: the canonical automaton exceeds {flag('max_arcs')} {max_arcs}; writing the factorized form")
        OUT.refuse_binary_tty(out)
        data = result.to_bytes()
        OUT.data(out, data)
        return report(None, result.summary(), "factorized", len(data))
    size = (OUT.fst(out, with_tables(result.fst, report.symbols, result.model.vocab_size)) if fmt is Format.fst
            else OUT.document(out, result.index()))
    if not (report.verbose or report.json):
        return
    summary = result.summary()  # with --max-tokens the index holds the automaton and N: no product for the message
    report(f"tokfst: {summary['states']} states, {summary['arcs']} arcs, promoted in {result.seconds * 1000:.1f} ms"
           + (f"; {len(result.terminals)} terminal labels" if result.terminals else ""), summary,
           "fst" if fmt is Format.fst else "index", size)
