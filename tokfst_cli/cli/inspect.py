"""``tokfst inspect``: the structure of token automata and their skip rates on a regex (help: ``helptext.INSPECT``)."""

from __future__ import annotations

import json
from typing import Optional

import typer

from tokfst_cli import constraint, pipeline
from tokfst_cli.analysis import counting, inspection
from tokfst_cli.cli.common import MaxStates, Tokenizer, out_not_an_automaton, read_pattern
from tokfst_cli.cli.count import MaxArcs
from tokfst_cli.cli.output import OUT
from tokfst_cli.errors import InputError
from tokfst_cli.tokenizer import model as tokmod

ROWS = [("states", "states"), ("arcs", "arcs"), ("finals", "final states"), ("masks", "distinct masks"),
        ("states_in_shared_masks", "states in shared masks"), ("single_token_states", "single-token states"),
        ("final_only_states", "final states with no token"), ("skippable_steps", "skippable steps"),
        ("skip_rate", "skip rate")]


def render(report: dict) -> str:
    """One row per measure, one column per automaton; then the samples and first tokens."""
    names = list(report["automata"])
    rows = [("", *names)]
    for key, label in ROWS:
        cells = [report["automata"][n].get(key) for n in names]
        if any(c is not None for c in cells):
            rows.append((label, *("-" if c is None else f"{c:.1%}" if key == "skip_rate" else f"{c:,}"
                                  for c in cells)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(r, widths))).rstrip()
             for r in rows]
    if "samples" in report:
        first = report["first_tokens"]
        lines.append(f"samples: {report['samples']:,} strings of at most {report['max_len']} bytes, drawn uniformly "
                     f"among {report['strings']:,}; {report['steps']:,} decoding steps")
        lines.append(f"non-canonical first tokens: {first['noncanonical']:,} of the agnostic automaton's "
                     f"{first['agnostic']:,} ({first['share']:.1%})")
    if "within_tokens" in report:
        lines.append(f"pushdown: the decoder's states within {report['within_tokens']} tokens of the start")
    return "".join(line + "\n" for line in lines)


def inspect_cmd(
    tokenizer: str = Tokenizer,
    artifact: Optional[str] = typer.Argument(None, metavar="ARTIFACT",
                                             help="An artifact of tokfst promote (not with -e/-f)."),
    out: Optional[str] = typer.Argument(None, metavar="OUT", help="Output file; absent or '-' = stdout."),
    regex: Optional[str] = typer.Option(None, "-e", "--regex", metavar="REGEX",
                                        help="Build the regex's canonical and agnostic automata and walk samples."),
    regex_file: Optional[str] = typer.Option(None, "-f", "--regex-file", metavar="FILE",
                                             help="Read the regex from a file ('-' = stdin)."),
    samples: int = typer.Option(inspection.SAMPLES, "--samples", min=1, metavar="N", help="Texts to draw."),
    seed: int = typer.Option(0, "--seed", min=0, metavar="S", help="Seed of the draws."),
    max_len: Optional[int] = typer.Option(None, "--max-len", min=0, metavar="N",
                                          help="Draw texts of at most N bytes (needed for an infinite language); a "
                                               "grammar's pushdown ARTIFACT: its decoder's states within N tokens."),
    json_out: bool = typer.Option(False, "--json", help="One JSON object."),
    max_arcs: int = MaxArcs,
    max_states: int = MaxStates,
) -> None:
    """Inspect token automata: structure, coalescence and skip rates (Pitfalls 2025 Sec. 3.3.1)."""
    if regex is not None or regex_file is not None:
        if artifact is not None and out is not None:
            raise InputError("give ARTIFACT or a regex (-e, -f), not both", "drop one of them")
        pattern, out = read_pattern(regex, regex_file), out if out is not None else artifact
        out_not_an_automaton(out)
        with OUT.progress("loading tokenizer"):
            model = tokmod.load(tokenizer)
        with OUT.progress("inspecting"):
            report = inspection.inspect_regex(model, pattern, samples, seed, max_len,
                                              pipeline.Limits(max_states=max_states)).to_json()
    elif artifact is None:
        raise InputError("give ARTIFACT or a regex (-e REGEX, -f FILE)", "see 'tokfst inspect --help'")
    else:
        with OUT.progress("loading"):
            model = tokmod.load(tokenizer)
            fst, cut = counting.acceptor(constraint.load(artifact, model), max_arcs, max_len)
        report = {"artifact": artifact, "automata": {"artifact": inspection.structure(fst)}}
        if cut:  # a grammar's pushdown artifact: its states within --max-len tokens
            report["within_tokens"] = max_len
    OUT.data(out, (json.dumps(report, ensure_ascii=False) + "\n" if json_out else render(report)).encode("utf-8"))
