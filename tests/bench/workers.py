"""Worker targets for the bench's failure-path tests, in a module of their own: a spawned child
imports only this (the standard library), so its start-up stays far below the tests' limits even
on a loaded machine (the test module itself imports the pipeline and every peer)."""

from __future__ import annotations

import time
from pathlib import Path


def slow_worker(spec: dict, emit) -> None:
    """A worker whose files named slow* never finish their first stage."""
    emit({"kind": "setup", "seconds": 0.0, "restart": True})
    for path in spec["files"]:
        name = Path(path).name
        while name.startswith("slow"):
            time.sleep(0.05)
        emit({"kind": "schema", "file": name, "status": "compiled", "restart": True})
