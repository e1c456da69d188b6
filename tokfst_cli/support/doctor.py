"""What a bug report needs: versions of tokfst, Python, its libraries and tools, and the cache's state.

:func:`report` returns one dict (``tokfst doctor --json`` prints it): ``tokfst``, ``python``,
``platform``, ``packages`` (installed distribution versions, None when missing), ``tools``
(OpenFst's command line tools and Graphviz's ``dot``: path and version, None when missing),
``cache`` (:func:`tokfst_cli.support.cache.summary`) and ``missing`` (what is absent, with the fix).
Nothing here raises: a missing piece is reported, not an error.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from importlib import metadata

from tokfst_cli.support import cache
from tokfst_cli.support.meta import __version__

PACKAGES = ("pynini", "tokenizers", "numpy", "numba", "interegular", "lark", "regex", "graphviz", "typer", "rich")
OPTIONAL = {"graphviz"}  # the Python package; only `tokfst draw` needs it
# optional packages: who needs them (reported with their versions, never as missing)
EXTRAS = {"torch": "tokfst[hf]: the logits processor", "transformers": "tokfst[hf]: the logits processor",
          "xgrammar": "tokfst bench (a peer)", "llguidance": "tokfst bench (a peer)",
          "outlines-core": "tokfst bench (a peer)", "tiktoken": "tokfst bench encode (a peer)",
          "pydantic": "schemas from Pydantic models"}
FIXES = {
    "fstinfo": "apt-get install libfst-tools (OpenFst's fstinfo, fstprint, fstdraw)",
    "dot": "apt-get install graphviz (needed by tokfst draw for svg, pdf, png)",
}


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _run(argv: list[str]) -> str | None:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (p.stdout + p.stderr).strip()
    return text.splitlines()[0].strip() if text else None


def openfst_tools() -> dict:
    """fstinfo's path and the OpenFst version of the tools (Debian's libfst-tools when dpkg knows it)."""
    path = shutil.which("fstinfo")
    version = None
    if path and shutil.which("dpkg-query"):
        out = _run(["dpkg-query", "-W", "-f", "${Version}", "libfst-tools"])
        version = out if out and "no packages" not in out.lower() else None
    if path and version is None:
        version = "installed (version unknown)" if _run([path, "--help"]) else None
    return {"path": path, "version": version}


def graphviz_dot() -> dict:
    path = shutil.which("dot")
    out = _run([path, "-V"]) if path else None
    return {"path": path, "version": out.replace("dot - graphviz version", "").strip() if out else None}


def pynini_openfst() -> str | None:
    """The OpenFst library bundled with pynini (its soname, e.g. libfst.so.26), when found."""
    try:
        files = metadata.files("pynini") or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        m = re.fullmatch(r"libfst-[0-9a-f]+\.so\.(\d+)(?:\.\d+)*", f.name)
        if m:
            return f"libfst.so.{m.group(1)}"
    return None


def report() -> dict:
    """Versions, tools and the cache's state (see the module docstring)."""
    packages = {name: package_version(name) for name in PACKAGES}
    tools = {"openfst": openfst_tools(), "dot": graphviz_dot()}
    missing = []
    for name, version in packages.items():
        if version is None:
            need = "tokfst draw" if name in OPTIONAL else "tokfst"
            missing.append({"what": f"Python package {name}", "needed_by": need,
                            "fix": f"pip install {name} (in tokfst's environment)"})
    for key, tool in (("openfst", "fstinfo"), ("dot", "dot")):
        if tools[key]["path"] is None:
            missing.append({"what": f"command {tool}", "needed_by": "the OpenFst tools" if key == "openfst"
                            else "tokfst draw (svg, pdf, png)", "fix": FIXES[tool]})
    summary = cache.summary(check=True)
    if not summary["writable"]:
        missing.append({"what": f"a writable cache directory ({summary['location']})", "needed_by": "caching",
                        "fix": "set TOKFST_CACHE to a writable directory"})
    return {
        "tokfst": __version__,
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "packages": packages,
        "optional": {name: {"version": package_version(name), "for": why} for name, why in EXTRAS.items()},
        "pynini_openfst": pynini_openfst(),
        "tools": tools,
        "cache": summary,
        "environment": {k: os.environ[k] for k in ("TOKFST_CACHE", "XDG_CACHE_HOME", "NO_COLOR") if k in os.environ},
        "missing": missing,
    }
