"""One input of a batch compiled: the task function every executor runs.

A :class:`Task` carries what a worker needs and nothing of the machine that made it: the input's
text (not its path, so a cluster's workers need no shared file system), its kind, the tokenizer
(a name or a path every worker can load) and the compile :class:`Options`. :func:`execute` turns
it into a record (``status``, ``exit_code``, ``message``, stage times and sizes) and the
artifact's bytes; the caller writes them. It never raises for the input's sake: tokfst's errors
are the statuses (``refused``: bad input or an empty language, the error's exit code; ``limit``:
a size limit or memory, exit 3), any other exception is ``crashed`` (exit 1, a bug).

:func:`prepare` loads the tokenizer and warms what the options' compiles read (the lexicon T, the
compiled kernels) once per process; :func:`isolated` runs one task in a forked child under a
time and a memory limit, for executors whose workers must outlive a task that aborts (Ray, Dask).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import select
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from tokfst_cli import pipeline
from tokfst_cli.errors import InputError, LimitError, TokfstError
from tokfst_cli.filters.compose import NONE, Filters
from tokfst_cli.support import progress
from tokfst_cli.support.files import write_bytes

ARTIFACTS = "artifacts"  # OUT's folder of artifacts
STATUSES = ("compiled", "refused", "limit", "timeout", "crashed")
FORMATS = ("fst", "index", "lazy")
SUFFIX = {"fst": ".fst", "index": ".index.json", "lazy": ".lazy", "factorized": ".factorized",
          "pushdown": ".pdt.fst"}
MEMORY_SIGNALS = (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS)  # how native code dies past RLIMIT_AS


@dataclass(frozen=True)
class Options:
    """What an artifact depends on besides the input and the tokenizer (they make its key)."""

    canonical: bool = False
    format: str = "fst"
    filters: Filters = NONE
    max_states: int = 1_000_000
    max_arcs: int = 2_000_000
    level: str = "pipeline"
    whitespace: str = "compact"  # JSON Schemas: the texts' whitespace
    symbols: str = "full"  # the fst format's symbol tables (automata.symbols.with_tables)

    def to_json(self) -> dict:
        return {**asdict(self), "filters": {k: list(v) if isinstance(v, tuple) else v
                                             for k, v in asdict(self.filters).items()}}


@dataclass(frozen=True)
class Limits:
    """A task's time (seconds) and memory (bytes) limits; None: no limit."""

    timeout: float | None = None
    max_memory: int | None = None


def _one_line(e: TokfstError) -> str:
    return e.one_line()


@dataclass(frozen=True)
class Task:
    """One input: ``input`` names it (a path, shown), ``text`` is its content, ``key`` its result key.
    ``word`` words a library error as one line (the command line passes its own, naming flags);
    ``refusal``: why the input could not be read (its record is ``refused``, nothing runs)."""

    input: str
    kind: str
    text: str
    key: str
    tokenizer: str
    options: Options = Options()
    word: Callable[[TokfstError], str] = field(default=_one_line, compare=False)
    refusal: str = ""


# ---- in a worker -------------------------------------------------------------------------------
_PREPARED: dict[tuple, Any] = {}


def prepare(tokenizer: str, options: Options):
    """The tokenizer, loaded once per process, with what its compiles read warmed (T, the kernels):
    a throw-away constraint of the same options; a failure is left for the real tasks to report."""
    from tokfst_cli.tokenizer.model import load  # deferred: start-up: only this path needs it

    key = (tokenizer, options)
    if key not in _PREPARED:
        model = load(tokenizer)
        with contextlib.suppress(Exception):
            _compile(Task("<warm-up>", "regex", "[a-z]{1,3}", "", tokenizer, options), model)
        _PREPARED[key] = model
    return _PREPARED[key]


def execute(task: Task) -> tuple[dict, bytes | None]:
    """The task's record and artifact bytes (None unless compiled); see the module docstring."""
    start = time.perf_counter()
    stages: dict[str, float] = {}
    marks: list[tuple[str, float]] = []

    def seen(name: str, size, elapsed: float) -> None:
        if not marks or marks[-1][0] != name:
            marks.append((name, time.perf_counter() - elapsed))

    unlisten = progress.listen(seen)
    record = {"input": task.input, "kind": task.kind, "key": task.key}
    data = None
    try:
        model = prepare(task.tokenizer, task.options)
        t0 = time.perf_counter()
        data, form, sizes = _compile(task, model)
        record.update(status="compiled", exit_code=0, message="", form=form, sizes=sizes)
        record["times"] = {"compile": round(time.perf_counter() - t0, 6)}
    except LimitError as e:
        record.update(status="limit", exit_code=3, message=task.word(e))
    except TokfstError as e:
        record.update(status="refused", exit_code=e.exit_code, message=task.word(e))
    except MemoryError:
        where = progress.current() or "the compile"
        record.update(status="limit", exit_code=3, message=f"memory limit: {where} ran out of memory")
    except Exception as e:  # noqa: BLE001 - a bug in tokfst: this input's status, not the batch's end
        record.update(status="crashed", exit_code=1, message=f"internal error: {type(e).__name__}: {e}"[:500])
    finally:
        unlisten()
    end = time.perf_counter()
    for (name, t), nxt in zip(marks, [t for _, t in marks[1:]] + [end]):
        stages[name] = round(stages.get(name, 0.0) + nxt - t, 6)
    record["times"] = {**record.get("times", {}), "total": round(end - start, 6), "stages": stages}
    record.setdefault("sizes", {})["input_bytes"] = len(task.text.encode("utf-8"))
    return record, data


def _compile(task: Task, model) -> tuple[bytes, str, dict]:
    """(artifact bytes, its form, sizes) of one input; tokfst's errors propagate."""
    from tokfst_cli.automata.fst_io import fst_bytes  # deferred: start-up: only this path needs it
    from tokfst_cli.automata.symbols import with_tables  # deferred: start-up: only this path needs it
    from tokfst_cli.grammar.pushdown import Pushdown, with_symbols  # deferred: start-up: only this path needs it

    o = task.options
    source = _source(task)
    finite = o.canonical or o.format != "fst" or o.filters.text_level() or o.filters.token_level()
    if isinstance(source, Pushdown):
        if finite:
            raise InputError(f"{source.pattern} needs a stack (rules {', '.join(source.rules)}): it is written as a "
                             "pushdown automaton over bytes, the fst format only, agnostic and without filters",
                             "drop those options, or make the recursion left- or right-linear",
                             hint="grammar-pushdown")
        fst = with_symbols(source)
        return fst_bytes(fst), "pushdown", {"states": fst.num_states()}
    pattern = source.pattern if source is not None else _pattern(task.text, task.input)
    if o.format == "lazy":
        return _lazy(task, model, source, pattern)
    terminals = not o.canonical and not o.filters.token_level() and (source is not None or _token_groups(pattern))
    result = pipeline.build(model, pattern, canonical=o.canonical, limits=pipeline.Limits(o.max_states, o.max_arcs),
                            level=o.level, factorized_ok=o.format == "index", filters=o.filters, automaton=source,
                            terminals=terminals)
    if not result.materialized:
        return result.to_bytes(), "factorized", {}
    fst = result.fst
    sizes = {"states": fst.num_states(), "arcs": sum(fst.num_arcs(s) for s in fst.states())}
    if o.format == "fst":
        return fst_bytes(with_tables(fst, o.symbols, model.vocab_size)), "fst", sizes
    import json  # deferred: start-up: only this path needs it

    return (json.dumps(result.index(), ensure_ascii=False) + "\n").encode("utf-8"), "index", sizes


def _source(task: Task):
    """A schema's or a grammar's byte automaton (or pushdown automaton); None for a regex."""
    o = task.options
    finite = o.canonical or o.format != "fst" or o.filters.text_level() or o.filters.token_level()
    if task.kind == "schema":
        from tokfst_cli.grammar.schema import compile_json  # deferred: start-up: only this path needs it
        from tokfst_cli.schema.refs import loads  # deferred: start-up: only this path needs it

        doc = loads(task.text, f"schema file {task.input}")  # not JSON, or nested too deeply: refused
        return compile_json(doc, recursion="cut" if finite else "auto", whitespace=o.whitespace,
                            max_states=o.max_states).automaton
    if task.kind == "grammar":
        from pathlib import Path  # deferred: start-up: only this path needs it

        from tokfst_cli.grammar.load import compile_grammar, format_of  # deferred: start-up: only this path needs it

        return compile_grammar(task.text, format_of(task.input), source=task.input, max_states=o.max_states,
                               import_paths=[str(Path(task.input).resolve().parent)])
    return None


def _pattern(text: str, name: str) -> str:
    """A regex file's pattern: its text without one trailing newline."""
    text = text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text
    if not text:
        raise InputError(f"regex file {name} is empty", "put one pattern in the file")
    return text


def _token_groups(pattern: str) -> bool:
    from tokfst_cli.text.groups import rewrite  # deferred: start-up: only this path needs it

    return any(g.name.endswith("_TOKEN") for g in rewrite(pattern)[1])


def _lazy(task: Task, model, source, pattern: str) -> tuple[bytes, str, dict]:
    """The lazy artifact: the byte DFA's table with the tokenizer's fingerprint (agnostic only)."""
    from tokfst_cli.promotion import lazy  # deferred: start-up: only this path needs it
    from tokfst_cli.promotion.byte_table import to_bytes  # deferred: start-up: only this path needs it
    from tokfst_cli.text.regex import compile_regex  # deferred: start-up: only this path needs it

    if task.options.canonical:
        raise InputError("the lazy format is the agnostic automaton promoted at decoding; it is not canonical",
                         "drop canonical promotion, or use the index format")
    a = source if source is not None else compile_regex(pattern, task.options.max_states)
    table = lazy.table_for(model, a, task.options.max_states, filters=task.options.filters)
    return to_bytes(table, model.fingerprint), "lazy", {"states": table.states}


def store(out: Path, rec: dict, data: bytes) -> dict:
    """Write the artifact atomically to ``out/artifacts/KEY.SUFFIX`` (unless that file holds these
    bytes already: a run stopped before recording it) and return the record with its path, size,
    sha256 and the write's time (where the artifact is made, when it can: a worker)."""
    t0 = time.perf_counter()
    name = f"{ARTIFACTS}/{rec['key'][:32]}{SUFFIX[rec.get('form', 'fst')]}"
    path = Path(out) / name
    if not _holds(path, data):
        write_bytes(path, data)
    rec = {**rec, "artifact": name, "sha256": hashlib.sha256(data).hexdigest()}
    rec["sizes"] = {**rec.get("sizes", {}), "artifact_bytes": len(data)}
    rec["times"] = {**rec["times"], "write": round(time.perf_counter() - t0, 6)}
    return rec


def _holds(path: Path, data: bytes) -> bool:
    try:
        return path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


# ---- records made outside the task -------------------------------------------------------------
def failed(task: Task, status: str, message: str, exit_code: int, seconds: float = 0.0) -> dict:
    """The record of a task its worker did not finish (timeout, crashed, a memory death)."""
    return {"input": task.input, "kind": task.kind, "key": task.key, "status": status, "exit_code": exit_code,
            "message": message, "times": {"total": round(seconds, 6), "stages": {}},
            "sizes": {"input_bytes": len(task.text.encode("utf-8"))}}


def death(task: Task, returncode: int | None, limits: Limits, seconds: float) -> dict:
    """The record of a task whose worker died (``returncode``: -signal, or an exit code)."""
    if returncode is not None and returncode < 0:
        sig = signal.Signals(-returncode)
        if limits.max_memory and sig in MEMORY_SIGNALS:
            return failed(task, "limit", f"memory limit: the worker died of {sig.name} past max_memory "
                                         f"{limits.max_memory} bytes", 3, seconds)
        return failed(task, "crashed", f"the worker died of {sig.name}", 1, seconds)
    return failed(task, "crashed", f"the worker exited with code {returncode} without a result", 1, seconds)


def timed_out(task: Task, limits: Limits, seconds: float) -> dict:
    return failed(task, "timeout", f"time limit: still running after {seconds:.0f} s (timeout {limits.timeout:g} s)",
                  3, seconds)


def cap_memory(max_memory: int | None) -> None:
    """Cap this (worker) process so its resident memory stays under ``max_memory`` (the guard's
    address-space cap, no core file; native code past it aborts, which the parent words)."""
    if not max_memory:
        return
    import resource  # deferred: start-up: only this path needs it

    from tokfst_cli.support import guard  # deferred: start-up: only this path needs it

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    guard._touch_thread_locals()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = guard._address_space_cap(max_memory)
    cap = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
    if cap < guard.RLIM_MAX:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    guard._quiet_terminate()


def quiet_signals() -> None:
    """A worker leaves SIGINT and SIGHUP to its parent (which stops the batch), dies of SIGTERM,
    and dies of a fatal signal without Python's traceback dump (the parent words the death)."""
    import faulthandler  # deferred: start-up: only this path needs it

    faulthandler.disable()
    for s in (signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGTERM,))


# ---- one task in a forked child ----------------------------------------------------------------
def isolated(task: Task, limits: Limits = Limits()) -> tuple[dict, bytes | None]:
    """:func:`execute` in a child forked from this (prepared) process, under ``limits``: a child
    past its time is killed (``timeout``), one that dies is ``crashed`` (or ``limit`` for a memory
    death); this process lives on. Safe from any thread (no signal handler is installed)."""
    prepare(task.tokenizer, task.options)
    r, w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: compute, send the pickled result, exit without Python's clean-up
        code = 1
        try:
            os.close(r)
            quiet_signals()
            cap_memory(limits.max_memory)
            payload = memoryview(pickle.dumps(execute(task), protocol=pickle.HIGHEST_PROTOCOL))
            while payload:
                payload = payload[os.write(w, payload):]
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    chunks, deadline = [], None if limits.timeout is None else start + limits.timeout
    try:
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([r], [], [], wait)
            if not ready:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return timed_out(task, limits, time.monotonic() - start), None
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 0 and chunks:
        return pickle.loads(b"".join(chunks))
    return death(task, code, limits, time.monotonic() - start), None
