"""``tokfst --help``, every subcommand's help, and usage errors (exit 2, a usage line, no colour).

In process (tests.runner.run): help and usage text come from the command objects alone; the
``no_color`` fixture removes the colour settings from the environment as make_env does for
subprocesses, and the captured stderr is, like a pipe, not a terminal. The two entry points, the
console script and ``python -m tokfst_cli``, are each run once as a real process.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ..runner import ANSI, make_env, run, tokfst

SUBCOMMANDS = ["compile-bpe", "compile-maxmatch", "promote", "canonical-check", "draw", "sample", "bench", "doctor",
               "cache", "count", "inspect", "encode", "compile-batch"]


def test_root_help_lists_the_six_subcommands():
    r = run("--help")
    assert r.rc == 0 and not r.err
    text = r.out.decode()
    section = text.split("Commands:", 1)[1]
    listed = [m.group(1) for m in re.finditer(r"^  (\S+)\s", section, re.M)]
    assert sorted(listed) == sorted(SUBCOMMANDS)


@pytest.mark.parametrize("cmd", SUBCOMMANDS)
def test_subcommand_help(cmd):
    r = run(cmd, "--help")
    assert r.rc == 0, r.err
    assert f"tokfst {cmd}" in r.out.decode()
    assert not r.err


@pytest.mark.parametrize("cmd", ["compile-maxmatch", "promote", "canonical-check"])
def test_missing_tokenizer_is_a_usage_error(no_color, cmd):
    r = run(cmd)
    assert r.rc == 2
    assert r.out == b""
    assert b"TOKENIZER" in r.err
    assert b"Traceback" not in r.err and not ANSI.search(r.err)


def test_console_script_and_python_dash_m_are_the_same_command():
    script = tokfst("--help", env=make_env())
    module = subprocess.run([sys.executable, "-m", "tokfst_cli", "--help"], capture_output=True, env=make_env(),
                            timeout=120)
    assert script.rc == module.returncode == 0, (script.err, module.stderr)
    assert script.out == module.stdout and b"Commands:" in script.out
