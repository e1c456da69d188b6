"""The local executor: a pool of forked worker processes, each running :func:`task.execute`.

The parent prepares the tokenizer once (``task.prepare``: the model, T, the kernels) and forks
``jobs`` workers, which inherit it. Each worker takes one task at a time over a pipe and sends
back the record and the artifact's bytes. The parent keeps the limits from outside: a task past
``Limits.timeout`` has its worker killed (``timeout``); a worker that dies (native code aborts,
a SIGKILL, memory past ``Limits.max_memory``, which each worker's address space is capped at)
leaves its task ``crashed`` (or ``limit`` for a memory death). Either way a fresh worker is forked
and the other tasks go on; a worker is also replaced after ``recycle`` tasks (memory a long run
leaves behind). ``on_start(task, pid)`` is told which worker took which task.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import wait

from tokfst_cli.batch import task as task_mod
from tokfst_cli.batch.task import Limits, Task

RECYCLE = 1000  # tasks a worker runs before it is replaced
Result = tuple[Task, dict, "bytes | None"]


def _worker(conn, limits: Limits, parent: int) -> None:
    """A worker's loop: tasks in, (record, bytes) out, until None or the parent is gone."""
    from tokfst_cli.support import guard  # deferred: start-up: only this path needs it

    code = 0
    try:
        task_mod.quiet_signals()
        guard._die_with_parent(parent)
        task_mod.cap_memory(limits.max_memory)
        while True:
            t = conn.recv()
            if t is None:
                break
            conn.send(task_mod.execute(t))
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
    task: Task | None = None
    started: float = 0.0
    done: int = 0


class Pool:
    """``jobs`` forked workers under ``limits`` (module docstring)."""

    def __init__(self, jobs: int, limits: Limits = Limits(), recycle: int = RECYCLE,
                 on_start: Callable[[Task, int], None] | None = None):
        self.jobs, self.limits, self.recycle, self.on_start = max(1, jobs), limits, max(1, recycle), on_start
        self.ctx = mp.get_context("fork")
        self.slots: list[_Slot] = []

    def _spawn(self) -> _Slot:
        mine, theirs = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker, args=(theirs, self.limits, os.getpid()), daemon=True)
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

    def run(self, tasks: Iterable[Task]) -> Iterator[Result]:
        """Each task's (task, record, artifact bytes), in the order they finish."""
        pending = deque(tasks)
        if not pending:
            return
        task_mod.prepare(pending[0].tokenizer, pending[0].options)  # once, inherited by every worker
        self.slots = [self._spawn() for _ in range(min(self.jobs, len(pending)))]
        try:
            while pending or any(s.task is not None for s in self.slots):
                self._dispatch(pending)
                yield from self._collect()
        finally:
            for s in self.slots:
                self._retire(s, kill=s.task is not None)
            self.slots = []

    def _dispatch(self, pending: deque) -> None:
        for s in self.slots:
            if s.task is None and pending:
                s.task, s.started = pending.popleft(), time.monotonic()
                try:
                    s.conn.send(s.task)
                except OSError:  # died idle: its death is seen below, with this task in flight
                    pass
                if self.on_start is not None:
                    self.on_start(s.task, s.proc.pid)

    def _collect(self) -> Iterator[Result]:
        busy = [s for s in self.slots if s.task is not None]
        timeout = None
        if self.limits.timeout is not None:
            timeout = max(0.0, min(s.started for s in busy) + self.limits.timeout - time.monotonic())
        ready = set(wait([s.conn for s in busy] + [s.proc.sentinel for s in busy], timeout))
        for i, s in enumerate(self.slots):
            if s.task is None:
                continue
            t, got = s.task, None
            if s.conn in ready:
                with contextlib.suppress(EOFError, OSError):
                    got = s.conn.recv()
            elapsed = time.monotonic() - s.started
            if got is not None:
                s.task, s.done = None, s.done + 1
                yield t, *got
                if s.done >= self.recycle:
                    self._retire(s)
                    self.slots[i] = self._spawn()
            elif s.conn in ready or s.proc.sentinel in ready:
                s.proc.join()
                self.slots[i] = self._replace(s)
                yield t, task_mod.death(t, s.proc.exitcode, self.limits, elapsed), None
            elif self.limits.timeout is not None and elapsed >= self.limits.timeout:
                self._retire(s, kill=True)
                self.slots[i] = self._spawn()
                yield t, task_mod.timed_out(t, self.limits, elapsed), None

    def _replace(self, dead: _Slot) -> _Slot:
        dead.conn.close()
        return self._spawn()
