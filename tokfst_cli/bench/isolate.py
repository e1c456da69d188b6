"""Run one measurement in a child process, so a runaway one can be stopped (``--timeout``).

The child (``multiprocessing`` with the spawn method: a fresh interpreter, no inherited state)
calls ``function(spec, emit)``; every ``emit(dict)`` is one message to the parent, e.g. one
finished timed run. The parent gives the child ``limit`` seconds, kills it when they run out,
and keeps the messages received so far. A message with ``"restart": True`` (the end of a
precomputation) starts a fresh ``limit``, so a cell's precomputation and its timed runs each
get the whole limit. The child's start-up (imports) counts against the first one.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import time
import traceback
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Outcome:
    messages: list[dict] = field(default_factory=list)
    result: Any = None
    timed_out: bool = False
    error: str | None = None

    def of_kind(self, kind: str) -> list[dict]:
        return [m for m in self.messages if m.get("kind") == kind]


def _child(conn, target: str, spec: dict) -> None:
    module, name = target.split(":")
    try:
        fn = getattr(importlib.import_module(module), name)
        result = fn(spec, conn.send)
        conn.send({"kind": "done", "result": result})
    except BaseException as e:  # noqa: BLE001 - reported to the parent as one line
        msg = getattr(e, "one_line", None)
        text = msg() if callable(msg) else f"{type(e).__name__}: {e}"
        conn.send({"kind": "error", "error": text.replace("\n", " "), "trace": traceback.format_exc()})
    finally:
        conn.close()


def run(target: str, spec: dict, limit: float) -> Outcome:
    """Run ``target`` ("module:function") in a child with ``limit`` seconds (see the module doc)."""
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, target, spec), daemon=True)
    proc.start()
    send.close()
    out = Outcome()
    deadline = time.monotonic() + limit
    try:
        while True:
            if not recv.poll(max(0.0, deadline - time.monotonic())):
                out.timed_out = True
                return out
            try:
                msg = recv.recv()
            except EOFError:
                proc.join(5)
                out.error = f"the measuring process died (exit code {proc.exitcode}; out of memory?)"
                return out
            if msg.get("kind") == "done":
                out.result = msg.get("result")
                return out
            if msg.get("kind") == "error":
                out.error = msg["error"]
                return out
            out.messages.append(msg)
            if msg.get("restart"):
                deadline = time.monotonic() + limit
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(10)
        recv.close()
