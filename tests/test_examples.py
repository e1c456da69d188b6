"""Every example in README.md and docs/*.md runs: the ``tokfst ...`` lines of ```sh blocks and the
```python blocks, in document order, from a temporary directory that sees ``examples/`` and
``tests/`` as the repository root does.

* a ```sh line whose first word is ``tokfst`` (continuation lines with a trailing backslash
  joined) must exit 0, or the code a trailing ``# exit N`` comment names; a plain command runs in
  this process (``runner.run_line``: the CLI's ``main`` with its argv), a line a shell must read
  (``|``, redirections, ``$``) through ``bash -c`` (with ``pipefail``, so ``tokfst`` on either side
  of the pipe counts); a line ending in ``# not run: REASON`` is skipped (peers, network, longer
  than 20 s); the console script itself is tested by the subprocess tests (tests/cli);
* a ```python block runs in this process as a script (``__main__``), unless the line before its
  fence is ``<!-- not run: REASON -->``.

Each document gets its own directory, so a file one example writes is there for the next ones
(``tokfst promote ... date.json`` then ``tokfst.load("date.json", ...)``). docs/results/ is not
run: it records measurements, with the commands that made them.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from .runner import run_line, run_python, strip_comment

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```(\w*)\s*$")
NOT_RUN_BLOCK = re.compile(r"^<!--\s*not run:\s*\S.*-->\s*$")
NOT_RUN_LINE = re.compile(r"#\s*not run:\s*\S")
EXIT = re.compile(r"#\s*exit\s+(\d+)\b")


def tokfst_bin() -> str:
    here = Path(sys.executable).parent / "tokfst"
    found = str(here) if here.exists() else shutil.which("tokfst")
    if not found:
        pytest.skip("no installed tokfst executable")
    return found


def examples(path: Path) -> list[tuple[str, int, str, int | None]]:
    """(kind, line number, code, expected exit) in document order: kind 'sh', 'python' or 'skip'."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = lines[i + 1:j]
        skipped = i > 0 and NOT_RUN_BLOCK.match(lines[i - 1].strip())
        if lang == "python":
            out.append(("skip" if skipped else "python", start + 2, "\n".join(body) + "\n", None))
        elif lang == "sh":
            k = 0
            while k < len(body):
                first = k
                line = body[k]
                while line.endswith("\\") and k + 1 < len(body):
                    k += 1
                    line = line[:-1] + " " + body[k].strip()
                k += 1
                words = line.split()
                if not words or words[0] != "tokfst":
                    continue
                if NOT_RUN_LINE.search(line):
                    out.append(("skip", start + 2 + first, line, None))
                    continue
                code = EXIT.search(line)
                out.append(("sh", start + 2 + first, line, int(code.group(1)) if code else 0))
        i = j + 1
    return out


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    return tmp_path


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(tokfst_bin()).parent) + os.pathsep + env.get("PATH", "")
    env.pop("TOKFST_DEBUG", None)
    return env


def test_the_example_reader():
    text = ("```sh\ntokfst a -e 'x#y' out  # exit 2\necho no\ntokfst b \\\n  --c  # not run: slow\n```\n"
            "<!-- not run: needs a GPU -->\n```python\nprint(1)\n```\n```python\nprint(2)\n```\n")
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"tokfst-example-reader-{os.getpid()}.md"
    path.write_text(text, encoding="utf-8")
    try:
        got = examples(path)
    finally:
        path.unlink()
    assert [(k, c.strip(), e) for k, _, c, e in got] == [
        ("sh", "tokfst a -e 'x#y' out  # exit 2", 2), ("skip", "tokfst b  --c  # not run: slow", None),
        ("skip", "print(1)", None), ("python", "print(2)", None)]
    assert strip_comment("tokfst a -e 'x#y' out  # exit 2") == "tokfst a -e 'x#y' out"


def test_every_document_has_examples():
    assert any(kind != "skip" for kind, *_ in examples(ROOT / "README.md"))


RUNNABLE = [p for p in DOCS if any(kind != "skip" for kind, *_ in examples(p))]


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_run(path, workdir):
    ran = 0
    for kind, line, code, expected in examples(path):
        where = f"{path.relative_to(ROOT)}:{line}"
        if kind == "skip":
            continue
        if kind == "sh":
            proc = run_line(code, workdir, _env())
            assert proc.returncode == expected, (
                f"{where}: {code.strip()}\nexit {proc.returncode}, expected {expected}\n{proc.stderr[-2000:]}")
        else:
            run_python(code, where, workdir)
        ran += 1
    assert ran
