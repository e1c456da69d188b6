"""A small mixed batch (regexes, a schema, a grammar, a bad regex, one past a limit) and helpers."""

from __future__ import annotations

import json
from pathlib import Path

from tokfst_cli.batch import run
from tokfst_cli.batch.task import Limits, Options

INPUTS = {
    "date.re": "[0-9]{4}-[0-9]{2}-[0-9]{2}\n",
    "answer.re": "yes|no|maybe\n",
    "same-as-answer.re": "yes|no|maybe\n",  # the same bytes: one compile, two records
    "words/email.re": "[a-z]{1,4}@[a-z]{2,3}\\.(com|org)\n",
    "words/hex.re": "0x[0-9a-f]{2,4}\n",
    "bad.re": "(unclosed\n",
    "big.re": "x{2000000}\n",  # refused from an estimate: more than 1,000,000 states
    "point.json": json.dumps({"type": "object", "properties": {"ok": {"type": "boolean"},
                                                               "size": {"enum": ["S", "M", "L"]}},
                              "required": ["ok", "size"]}),
    "yesno.gbnf": 'root ::= "yes" | "no" | "y" [0-9]\n',
}
EXPECTED = {"bad.re": "refused", "big.re": "limit"}  # every other input: compiled


def make_inputs(d: Path, names=None) -> Path:
    for name, text in INPUTS.items():
        if names is None or name in names:
            (d / name).parent.mkdir(parents=True, exist_ok=True)
            (d / name).write_text(text, encoding="utf-8")
    return d


def request(inputs: Path, out: Path, executor: str = "local", jobs: int = 2, **kw) -> run.Request:
    return run.Request("gpt2", [str(inputs)], str(out), Options(), executor=executor, jobs=jobs,
                       limits=kw.pop("limits", Limits(timeout=120)), **kw)


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / run.RESULTS).read_text(encoding="utf-8").splitlines()]


def outcome(out: Path, root: Path) -> dict[str, tuple]:
    """input (relative to ``root``) -> (status, exit code, artifact sha256) of the last record."""
    return {Path(r["input"]).relative_to(root).as_posix(): (r["status"], r["exit_code"], r.get("sha256"))
            for r in records(out)}
