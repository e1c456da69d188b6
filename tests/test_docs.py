"""The generated shell completions and man page: fresh, complete, and the bash completion works.

Regenerate with ``python scripts/gen_docs.py`` after changing the command line.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gen_docs.py"


def _load_gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen_docs = _load_gen_docs()
MAN = ROOT / gen_docs.MAN_PAGE


def _man_sections(text: str, macro: str) -> dict[str, str]:
    """Roff source split at ``.SH``/``.SS`` headings: heading (unescaped) -> body."""
    parts = re.split(rf"^{re.escape(macro)} (.+)$", text, flags=re.M)
    return {heading.strip('"').replace("\\-", "-"): body for heading, body in zip(parts[1::2], parts[2::2])}


# --- (a) freshness ------------------------------------------------------------------------------


def test_generated_files_are_fresh():
    """completions/* and man/tokfst.1 match what the generator makes from the installed CLI."""
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"{proc.stderr.strip()}\n(run: python scripts/gen_docs.py)"


def test_man_page_is_fresh_in_process():
    assert MAN.read_text(encoding="utf-8") == gen_docs.render_man(), \
        "man/tokfst.1 is stale; run: python scripts/gen_docs.py"


def test_a_new_option_makes_the_man_page_stale(monkeypatch, capsys):
    """Adding an option to a command changes the man page, and --check then fails naming it."""
    group, ctx = gen_docs.command_tree()
    promote = group.commands["promote"]
    new = copy.copy(next(p for p in promote.params if gen_docs.is_option(p) and p.is_flag))
    new.name, new.opts, new.secondary_opts, new.help = "frobnicate", ["--frobnicate"], [], "Frobnicate."
    promote.params.append(new)
    text = gen_docs.render_man(group, ctx)
    assert text != MAN.read_text(encoding="utf-8")
    assert "\\fB\\-\\-frobnicate\\fR" in _man_sections(text, ".SS")["promote"]

    files = {path: (ROOT / path).read_text(encoding="utf-8") for path in gen_docs.COMPLETIONS}
    files[gen_docs.MAN_PAGE] = text
    monkeypatch.setattr(gen_docs, "render_all", lambda: files)
    assert gen_docs.main(["--check"]) == 1
    assert gen_docs.MAN_PAGE in capsys.readouterr().err


# --- (b) completeness, derived from the command tree ---------------------------------------------


def test_man_page_documents_every_command_and_long_option():
    group, _ = gen_docs.command_tree()
    commands = gen_docs.visible_commands(group)
    assert len(commands) >= 2
    text = MAN.read_text(encoding="utf-8")
    sections = _man_sections(text, ".SH")
    subsections = _man_sections(sections["COMMANDS"], ".SS")
    assert list(subsections) == [name for name, _ in commands]  # every command, in registered order
    for name, cmd in commands:
        body = subsections[name]
        assert f"\\fBtokfst {gen_docs.esc(name)}\\fR" in body  # the usage line
        for opt in gen_docs.long_options(cmd):
            assert f"\\fB{gen_docs.esc(opt)}\\fR" in body, f"man page: {name} lacks {opt}"
        for line in inspect.cleandoc(cmd.help or "").partition("\f")[0].splitlines():
            if line.strip() and line.strip() != "\b":
                assert gen_docs.esc(line.strip()) in body, f"man page: {name} lacks help line {line!r}"
    for opt in gen_docs.long_options(group):
        assert f"\\fB{gen_docs.esc(opt)}\\fR" in sections["OPTIONS"], f"man page lacks global {opt}"
    for heading in ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "ENVIRONMENT", "FILES", "SEE ALSO"):
        assert heading in sections


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff not installed (optional)")
def test_man_page_renders_cleanly():
    proc = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-P-cbou", str(MAN)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    group, _ = gen_docs.command_tree()
    plain = re.sub(r"\s+", " ", proc.stdout)
    for name, cmd in gen_docs.visible_commands(group):
        assert f"tokfst {name}" in plain  # ASCII hyphens, not U+2010/U+2212
        for opt in gen_docs.long_options(cmd):
            assert opt in plain


# --- (c) the bash completion script works --------------------------------------------------------

BASH_DRIVER = r"""
source "$1" || exit 3
spec=$(complete -p tokfst) || exit 4
func=${spec##*-F }; func=${func%% *}
COMP_WORDS=("${@:2}")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
"$func" tokfst "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"""


def _bash_complete(*words: str) -> list[str]:
    bash = shutil.which("bash")
    exe = gen_docs.tokfst_command()
    if bash is None or len(exe) != 1:
        pytest.skip("needs bash and an installed tokfst executable")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("_TOKFST_", "_TYPER_", "BASH_"))}
    env["PATH"] = os.path.dirname(exe[0]) + os.pathsep + env.get("PATH", "")
    env.pop("ENV", None)
    proc = subprocess.run([bash, "--norc", "--noprofile", "-c", BASH_DRIVER, "bash",
                           str(ROOT / "completions" / "tokfst.bash"), *words],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


@pytest.mark.parametrize(("words", "expected"), [
    (("tokfst", "pro"), "promote"),
    (("tokfst", "promote", "--max"), "--max-states"),
])
def test_bash_completion(words, expected):
    assert expected in _bash_complete(*words)


def test_bash_completion_lists_every_command():
    group, _ = gen_docs.command_tree()
    assert _bash_complete("tokfst", "") == [name for name, _ in gen_docs.visible_commands(group)]
