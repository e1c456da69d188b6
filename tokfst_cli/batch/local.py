"""The local executor: a pool of forked worker processes, each running a :class:`Work`'s tasks.

The parent prepares once (:meth:`Work.prepare`; the batch's :class:`Compile`: the tokenizer, T,
the kernels) and forks ``jobs`` workers, which inherit it. Each worker takes one task at a time
over a pipe and sends back its result (the batch's: the record, the artifact written by the
worker itself when the pool has an ``out`` directory, else its bytes). While it runs, a task may
send notes (``emit``), each of which starts its time limit afresh (a stage done). The parent keeps
the limits from outside: a task past ``Limits.timeout`` has its worker killed; a worker that dies
(native code aborts, a SIGKILL, memory past ``Limits.max_memory``, which each worker's address
space is capped at) leaves its task to :meth:`Work.ended` (the batch: ``timeout``, ``crashed``,
or ``limit`` for a memory death). Either way a fresh worker is forked and the other tasks go on;
a worker is also replaced after ``recycle`` tasks (memory a long run leaves behind).
``on_start(task, pid)`` is told which worker took which task.
"""

from __future__ import annotations

import contextlib
import gc
import glob
import multiprocessing as mp
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from tokfst_cli.batch import task as task_mod
from tokfst_cli.batch.task import ARTIFACTS, Limits, Task
from tokfst_cli.errors import TokfstError
from tokfst_cli.support.files import temp_prefix

RECYCLE = 1000  # tasks a worker runs before it is replaced
Result = tuple[Task, dict, "bytes | None"]


@dataclass(frozen=True)
class Ending:
    """How a task ended without a result: ``returncode`` its worker's (-signal or an exit code;
    None: killed past its time), after ``seconds`` since its last note; ``notes`` the notes it
    sent; ``fresh`` whether it was its worker's first task."""

    returncode: int | None
    seconds: float
    limits: Limits
    notes: list = field(default_factory=list)
    fresh: bool = False

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


class Work:
    """What the pool runs. This one is the batch's compile (:func:`task.execute`): another job
    (``tokfst bench schemas``' engines) subclasses it, with tasks of its own."""

    def prepare(self, first: Any) -> None:
        """In the parent, before the workers are forked (what they all inherit)."""
        task_mod.prepare(first.tokenizer, first.options)

    def start(self, limits: Limits) -> None:
        """In a new worker, before its first task."""
        task_mod.cap_memory(limits.max_memory)

    def run(self, t: Any, emit: Callable[[Any], None], out: Path | None) -> tuple:
        """In a worker: the task's result (the batch: record, artifact bytes or None when written)."""
        rec, data = task_mod.execute(t)
        if out is not None and data is not None:
            with contextlib.suppress(TokfstError):  # not written here: the parent tries and words the failure
                rec, data = task_mod.store(out, rec, data), None
        return rec, data

    def noted(self, t: Any, note: Any) -> None:
        """In the parent: a note the task sent."""

    def ended(self, t: Any, end: Ending) -> tuple:
        """In the parent: the result of a task its worker did not finish."""
        if end.timed_out:
            return task_mod.timed_out(t, end.limits, end.seconds), None
        return task_mod.death(t, end.returncode, end.limits, end.seconds), None


def _worker(conn, work: Work, limits: Limits, out: Path | None, parent: int) -> None:
    """A worker's loop: tasks in, ("note", x)... ("done", result) out, until None or the parent is gone."""
    from tokfst_cli.support import guard  # deferred: start-up: only this path needs it

    code = 0
    try:
        task_mod.quiet_signals()
        guard._die_with_parent(parent)
        work.start(limits)
        while True:
            t = conn.recv()
            if t is None:
                break
            result = work.run(t, lambda note: conn.send(("note", note)), out)
            conn.send(("done", result))
    except (EOFError, OSError):
        code = 0
    except BaseException:  # noqa: BLE001 - the parent sees the death and words it
        code = 1
    finally:
        os._exit(code)


@dataclass
class _Slot:
    proc: mp.Process
    conn: object
    tasks: deque = field(default_factory=deque)  # sent to it: the first one running, the next queued
    started: float = 0.0  # when the running task started, or sent its last note
    done: int = 0
    notes: list = field(default_factory=list)
    gone: bool = False  # its pipe closed: the worker died


class Pool:
    """``jobs`` forked workers running ``work`` under ``limits`` (module docstring); ``out``: the
    batch's output directory, where the workers write the artifacts. Each worker is sent up to
    ``depth`` tasks ahead (the next one waits in its pipe, so it never waits for this process)
    while more tasks than workers are pending. ``start``: how workers are made, ``fork`` (they
    inherit what :meth:`Work.prepare` made) or ``spawn`` (a fresh interpreter each, which must
    unpickle ``work``: a measurement that wants no state of this process)."""

    def __init__(self, jobs: int, limits: Limits = Limits(), recycle: int = RECYCLE,
                 on_start: Callable[[Any, int], None] | None = None, out: str | os.PathLike | None = None,
                 work: Work | None = None, depth: int = 2, start: str = "fork"):
        self.jobs, self.limits, self.recycle, self.on_start = max(1, jobs), limits, max(1, recycle), on_start
        self.out = Path(out) if out is not None else None
        self.work = work if work is not None else Work()
        self.depth = max(1, depth)
        self.ctx = mp.get_context(start)
        self.slots: list[_Slot] = []
        self.pending: deque = deque()

    def _spawn(self) -> _Slot:
        mine, theirs = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker, args=(theirs, self.work, self.limits, self.out, os.getpid()),
                                daemon=True)
        proc.start()
        theirs.close()
        return _Slot(proc, mine)

    def _retire(self, slot: _Slot, kill: bool = False) -> None:
        with contextlib.suppress(OSError, ValueError):
            if kill:
                os.kill(slot.proc.pid, signal.SIGKILL)
            else:
                slot.conn.send(None)
        slot.proc.join(5 if not kill else None)
        if slot.proc.is_alive():
            slot.proc.kill()
            slot.proc.join()
        slot.conn.close()
        if kill:
            self._clean(slot.proc.pid)

    def _clean(self, pid: int) -> None:
        """Remove the temporary file of an artifact a killed or dead worker was writing."""
        if self.out is not None:
            for tmp in glob.glob(os.path.join(self.out, ARTIFACTS, f"{temp_prefix('*', pid)}*.tmp")):
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    def run(self, tasks: Iterable[Any]) -> Iterator[tuple]:
        """Each task's (task, *result), in the order they finish."""
        self.pending = deque(tasks)
        if not self.pending:
            return
        self.work.prepare(self.pending[0])  # once, inherited by every worker
        gc.freeze()  # what is there now stays out of the workers' collections: fewer pages copied on write
        self.slots = [self._spawn() for _ in range(min(self.jobs, len(self.pending)))]
        try:
            while self.pending or any(s.tasks for s in self.slots):
                self._dispatch()
                yield from self._collect()
        finally:
            for s in self.slots:
                self._retire(s, kill=bool(s.tasks))
            self.slots = []
            gc.unfreeze()

    def _dispatch(self) -> None:
        for ahead in range(self.depth):  # one task to every idle worker first, then the next ones
            for s in self.slots:
                if (len(s.tasks) == ahead and self.pending and s.done + ahead < self.recycle
                        and (ahead == 0 or len(self.pending) > len(self.slots))):
                    t = self.pending.popleft()
                    s.tasks.append(t)
                    if ahead == 0:
                        self._started(s)
                    try:
                        s.conn.send(t)
                    except OSError:  # died idle: its death is seen below, with this task in flight
                        pass

    def _started(self, s: _Slot) -> None:
        s.started, s.notes = time.monotonic(), []
        if self.on_start is not None:
            self.on_start(s.tasks[0], s.proc.pid)

    def _receive(self, s: _Slot) -> Iterator[tuple]:
        """The results that came (each task's notes on the way start its time afresh)."""
        try:
            while s.conn.poll():
                kind, body = s.conn.recv()
                if kind == "note":
                    s.notes.append(body)
                    s.started = time.monotonic()
                    self.work.noted(s.tasks[0], body)
                    continue
                t = s.tasks.popleft()
                s.done += 1
                if s.tasks:
                    self._started(s)
                yield t, *body
        except (EOFError, OSError):
            s.gone = True

    def _collect(self) -> Iterator[tuple]:
        busy = [s for s in self.slots if s.tasks]
        timeout = None
        if self.limits.timeout is not None:
            timeout = max(0.0, min(s.started for s in busy) + self.limits.timeout - time.monotonic())
        ready = set(wait([s.conn for s in busy] + [s.proc.sentinel for s in busy], timeout))
        for i, s in enumerate(self.slots):
            if not s.tasks:
                continue
            if s.conn in ready:
                yield from self._receive(s)
            elapsed = time.monotonic() - s.started
            if not s.tasks:  # recycled only while work is left (else the end of the run retires it)
                if s.gone or (s.done >= self.recycle and self.pending):
                    self._retire(s)
                    self.slots[i] = self._spawn()
            elif s.gone or s.proc.sentinel in ready:
                s.proc.join()
                s.conn.close()
                self._clean(s.proc.pid)
                self.slots[i] = self._spawn()
                yield from self._lost(s, Ending(s.proc.exitcode, elapsed, self.limits, s.notes, s.done == 0))
            elif self.limits.timeout is not None and elapsed >= self.limits.timeout:
                self._retire(s, kill=True)
                self.slots[i] = self._spawn()
                yield from self._lost(s, Ending(None, elapsed, self.limits, s.notes, s.done == 0))

    def _lost(self, s: _Slot, end: Ending) -> Iterator[tuple]:
        """The running task ended without a result; the ones queued behind it go back to be sent again."""
        t = s.tasks.popleft()
        self.pending.extendleft(reversed(s.tasks))
        s.tasks.clear()
        yield t, *self.work.ended(t, end)
