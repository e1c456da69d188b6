"""Library errors worded for the command line: flag names and remedies, in one place.

The library raises errors with data (:mod:`tokfst_cli.errors`); here a limit's parameter
becomes its flag (``max_states`` -> ``--max-states``) and a ``hint`` key or a limit's remedy
becomes a command-line fix.
"""

from __future__ import annotations

from ..errors import LimitError, TokfstError

FLAGS = {"max_states": "--max-states", "max_arcs": "--max-arcs"}

# limit remedies: {flag} is the limit's flag
REMEDIES = {
    "simplify": "simplify the regex or raise {flag}",
    "factorized": "write the factorized form with --format index, or raise {flag}",
    "product": "use --method product with --format index (the factorized form), or raise {flag}",
    "implicit": "use --form implicit or raise {flag}",
    "vocabulary": "raise {flag} or use a smaller vocabulary",
    "rectangles": "this vocabulary's merge order defeats the rectangle construction",
    None: "raise {flag}",
}

# command-line wording of an error's message, by hint (else the library's message)
MESSAGES = {
    "method-needs-canonical": "--method needs --canonical",
    "method-family": "--method {method} is not for {family} tokenizers",
}

HINTS = {
    "rebuild-factorized": "rebuild it with tokfst promote --canonical --format index",
    "rebuild-implicit": "rebuild it with tokfst compile-bpe",
    "method-needs-canonical": "add --canonical, or drop --method",
    "method-family": "use one of: {allowed}",
    "vocab": "e.g. --vocab a,b,ab",
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
    fix = HINTS[e.hint].format(**e.data) if e.hint in HINTS else None
    if e.hint in MESSAGES:
        return f"{MESSAGES[e.hint].format(**e.data)}; {fix or e.fix}"
    return e.one_line(flag, fix)
