"""Library errors worded for the command line: flag names and remedies, in one place.

The library raises errors with data (:mod:`tokfst_cli.errors`); here a limit's parameter
becomes its flag (``max_states`` -> ``--max-states``) and a ``hint`` key or a limit's remedy
becomes a command-line fix.
"""

from __future__ import annotations

from tokfst_cli.errors import LimitError, TokfstError

FLAGS = {"max_states": "--max-states", "max_arcs": "--max-arcs", "max_tokens": "--max-tokens", "max_len": "--max-len"}

# The exit codes: (code, short meaning, full meaning). The one table behind tokfst --help (short),
# README's Conventions and the man page's EXIT STATUS (full; scripts/gen_docs.py renders both).
EXIT_CODES = (
    (0, "ok", "Success; canonical-check: every line is canonical."),
    (1, "non-canonical or empty result",
     "canonical-check: some line is not canonical. Otherwise a runtime error: an empty result (a regex "
     "no token sequence spells), an output that cannot be written, Graphviz's dot missing or failing; "
     "also internal errors (rerun with --debug for a traceback)."),
    (2, "bad input or usage",
     "Bad input or usage: an unknown option or missing argument, a malformed or unreadable input file, "
     "an unsupported regex or tokenizer."),
    (3, "a limit",
     "A limit was reached: --max-states or --max-arcs (refused from an estimate before building when "
     "one applies, else as soon as a construction passes it), --timeout or --max-memory. The message "
     "names the stage, the limit and the size reached."),
    (129, "hung up", "Hung up (SIGHUP)."),
    (130, "interrupted", "Interrupted (SIGINT, Ctrl-C)."),
    (143, "terminated", "Terminated (SIGTERM)."),
)


def exit_codes_line() -> str:
    """The exit codes in one sentence, for ``tokfst --help``."""
    return "Exit codes: " + "; ".join(f"{code} {short}" for code, short, _ in EXIT_CODES) + "."


# the command line's wording of the guard's limits (tokfst_cli.support.guard): --timeout and --max-memory;
# {timeout} is the duration as given (--timeout 0.6 is 0.6 s, never rounded)
TIME_LIMIT = "time limit: {stage} still running after {timeout} s{size} (--timeout {timeout}); " \
             "raise --timeout or simplify the input"
LATE = "warning: time limit: --timeout {timeout} came after the output was written and the command still ran " \
       "{grace:g} s later; stopped it (the output is complete)"
MEMORY_LIMIT = "memory limit: {stage} needed more than --max-memory {limit}{size}; " \
               "raise --max-memory (0 = no limit) or simplify the input"

# limit remedies: {flag} is the limit's flag
REMEDIES = {
    "simplify": "simplify the regex or schema, or raise {flag}",
    "factorized": "write the factorized form with --format index, or raise {flag}",
    "product": "use --method product with --format index (the factorized form), or raise {flag}",
    "implicit": "use the implicit form (compile-bpe --form implicit, promote --method implicit) or raise {flag}",
    "vocabulary": "raise {flag} or use a smaller vocabulary",
    "lower": "lower {flag}",
    "table": "simplify the regex or schema: the factorized form's co-reachability table holds a bit per state "
             "and class",
    None: "raise {flag}",
}

# command-line wording of an error's message, by hint (else the library's message)
MESSAGES = {
    "method-needs-canonical": "--method needs --canonical",
    "method-family": "--method {method} is not for {family} tokenizers",
    "gadgets-level": "--method gadgets builds the model-level automaton only",
    "precomputed-ignore-merges": "--method precomputed cannot apply ignore_merges per pre-token",
    "prompt-needs-canonical": "--prompt heals tokens by canonical promotion only",
    "prompt-max-tokens": "--max-tokens cannot be combined with --prompt",
    "filters-factorized": "the token filters ({names}) need the materialized automaton, which passes --max-arcs",
    "filters-empty": "the filters ({names}) leave no string of the regex",
    # what: canonical promotion, token filters
    "terminals-agnostic": "--terminals builds agnostic automata only, not with {what}",
    "lazy-filters": "--format lazy applies the text filters only (--scripts, --ascii, --nfc), not {flags}",
}

HINTS = {
    "rebuild-factorized": "rebuild it with tokfst promote --canonical --format index",
    "rebuild-implicit": "rebuild it with tokfst compile-bpe",
    "rebuild-index": "rebuild it with tokfst promote --format index",
    "method-needs-canonical": "add --canonical, or drop --method",
    "method-family": "use one of: {allowed}",
    "gadgets-level": "add --level model, or use --method implicit",
    "precomputed-ignore-merges": "use --method implicit, or --level model",
    "added-token": "exclude that text from the regex, or use --level model",
    "special-text": "allow text without it, or give --special-text refuse to see the refusal",
    "added-token-normalized": "mark it \"normalized\": false in the tokenizer.json, or drop --canonical",
    "unmodelled-added-token": "check sequences without it, or use --level model",
    "normalizer-domain": "restrict the regex to {normalizer}-normalized text, or use --level model",
    "level": "use --level pipeline or --level model",
    "prompt-needs-canonical": "add --canonical",
    "prompt-max-tokens": "drop --max-tokens or --prompt",
    "prompt-added-token": "give --prompt only the text after its last added token",
    "filters-factorized": "raise --max-arcs, or drop the token filters",
    "filters-empty": "widen the regex or drop a filter flag",
    "scripts": "use Unicode Script names with --scripts, e.g. Latin,Greek,Cyrillic,Han",
    "max-tokens": "give --max-tokens 0 or more",
    "inspect-token-filters": "inspect the regex without token-level filters",
    "schema-keyword": "remove it from the schema, or add --lenient to ignore it",
    "terminals-agnostic": "add --no-terminals (wildcards are then expanded into token arcs)",
    "lazy-filters": "drop them, or use --format index",
    "token-groups": "promote without --canonical and filters, or write a text wildcard such as [^\\n]+",
    "terminals-need-tokenizer": "load it with its tokenizer (--tokenizer)",
    "vocab": "e.g. --vocab a,b,ab",
    # count, sample --uniform, inspect
    "count-infinite": "give --max-len N",
    "pushdown-max-len": "give --max-len N: the decoder's states within N tokens of the start are explored",
    "sample-no-string": "raise --max-len, or check the artifact",
    "sample-max-len": "bound paths with --max-tokens, or add --uniform strings",
    "inspect-no-string": "raise --max-len",
    "inspect-bpe": "inspect an artifact of this tokenizer (ARTIFACT)",
    "draw-format": "use --format dot to inspect the source",
    "graphviz": "install Debian's graphviz package (apt-get install graphviz) or use --format dot",
    # tokfst bench
    "bench-vocab-sizes": "e.g. --vocab-sizes 4000,8000",
    "bench-methods": "choose from --methods {allowed}",
    "bench-named": "choose from --named {allowed}",
    "bench-timeout": "e.g. --timeout 600",
    "bench-plot": "drop --plot, or use table1, table2, paragraph, masks or all",
    "bench-output": "give a file name to --{output}",
    "bench-family": "give a {family} tokenizer.json with --tokenizer",
    "bench-corpus": "give a text file or a directory of *.txt files with --corpus",
    "bench-default-corpus": "install it with 'apt-get install python3.11-doc' or give --corpus PATH",
    "bench-words": "lower --words or give a larger --corpus",
    "bench-paragraph": "give an English --corpus with blank-line separated paragraphs",
}


def flag(name: str) -> str:
    return FLAGS.get(name, name)


def word(e: TokfstError) -> str:
    """The one-line message for the command line: ``problem; fix``."""
    if isinstance(e, LimitError):
        return e.one_line(flag, REMEDIES.get(e.remedy, REMEDIES[None]).format(flag=flag(e.limit)))
    names = str(e.data.get("names", "")).split(", ")
    data = {**e.data, "flags": ", ".join(f"--{n.replace('_', '-')}" for n in names if n)}
    fix = HINTS[e.hint].format(**data) if e.hint in HINTS else None
    if e.hint in MESSAGES:
        return f"{MESSAGES[e.hint].format(**data)}; {fix or e.fix}"
    return e.one_line(flag, fix)
