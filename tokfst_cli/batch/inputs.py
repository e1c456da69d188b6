"""A batch's inputs: the files named or found in directories, their kinds, and each one's key.

A directory stands for the files below it (sorted, hidden ones and ``skip`` left out) whose
extension names a kind (:data:`KINDS`), or every file when the kind is given. The key of an
input is the sha256 of what its artifact depends on: the tokenizer's fingerprint, the input's
bytes and kind, the compile options and tokfst's version; a result stored under the same key is
the input's result (content-addressed: two inputs with the same bytes share one compile). An
input that cannot be read (permission denied, removed since it was found, not UTF-8) is a task
with its ``refusal`` (keyed by that message): the batch records it ``refused`` and goes on.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from tokfst_cli.batch.task import Options, Task
from tokfst_cli.errors import InputError
from tokfst_cli.support.meta import __version__

KINDS = {".re": "regex", ".json": "schema", ".gbnf": "grammar", ".lark": "grammar"}
KIND_NAMES = ("regex", "schema", "grammar")


def kind_of(path: Path, kind: str | None) -> str | None:
    """The kind given, else the one the extension names (None: not an input)."""
    return kind if kind is not None else KINDS.get(path.suffix.lower())


def find(inputs: list[str], kind: str | None = None, skip: str | os.PathLike | None = None) -> list[tuple[Path, str]]:
    """(path, kind) of every input file, in order, each once; InputError for a missing input or none."""
    skipped = Path(skip).resolve() if skip is not None else None
    found: dict[Path, tuple[Path, str]] = {}
    for name in inputs:
        p = Path(name)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                rel = f.relative_to(p).parts
                if any(part.startswith(".") for part in rel) or not f.is_file():
                    continue
                if skipped is not None and (f.resolve() == skipped or skipped in f.resolve().parents):
                    continue
                k = kind_of(f, kind)
                if k is not None:
                    found.setdefault(f.resolve(), (f, k))
        elif p.is_file():
            k = kind_of(p, kind)
            if k is None:
                raise InputError(f"{name}: the kind of input is not known from its extension",
                                 "name it .re, .json, .gbnf or .lark, or give the kind")
            found.setdefault(p.resolve(), (p, k))
        else:
            raise InputError(f"input {name} is neither a file nor a directory", "give existing files or directories")
    if not found:
        raise InputError("no input file found (.re, .json, .gbnf, .lark)", "give input files or directories of them")
    return list(found.values())


def key(fingerprint: str, kind: str, data: bytes, options: Options, unreadable: str = "") -> str:
    """The result key (module docstring); ``unreadable``: why the input's bytes could not be read."""
    doc = {"tokfst": __version__, "tokenizer": fingerprint, "kind": kind,
           "input": hashlib.sha256(data).hexdigest(), "options": options.to_json()}
    if unreadable:
        doc["unreadable"] = unreadable
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8")).hexdigest()


def tasks(files: list[tuple[Path, str]], tokenizer: str, fingerprint: str, options: Options, word=None) -> list[Task]:
    """One :class:`Task` per input file; an unreadable or non-UTF-8 one carries its ``refusal``."""
    out = []
    extra = {"word": word} if word is not None else {}
    for path, kind in files:
        try:
            data = path.read_bytes()
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            why = (f"not UTF-8 (byte {e.start}: {e.reason})" if isinstance(e, UnicodeDecodeError)
                   else e.strerror or str(e))
            message = (word or InputError.one_line)(InputError(f"cannot read input {path}: {why}",
                                                               "give readable UTF-8 files", hint="batch-unreadable"))
            out.append(Task(str(path), kind, "", key(fingerprint, kind, b"", options, message), tokenizer, options,
                            refusal=message, **extra))
            continue
        out.append(Task(str(path), kind, text, key(fingerprint, kind, data, options), tokenizer, options, **extra))
    return out
