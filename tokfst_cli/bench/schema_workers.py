"""JSON Schema compilers in worker processes, for ``tokfst bench schemas``.

:func:`run_engine` runs one engine (tokfst or a peer of :mod:`.engines`) over a list of schema
files on ``compile-batch``'s local pool (:class:`tokfst_cli.batch.local.Pool`, one spawned
worker at a time: a fresh interpreter, the :class:`Engine` work): a worker sets the engine up
once, caps its address space (:data:`MAX_MEMORY` more than after its set-up) and takes the files
one after another; each finished stage (tokfst: compile, lazy, promotion, walk; peers: compile)
is a note that gives the next stage the whole time limit. A worker past its time limit is
killed, one that dies (native code past the memory cap) is reported, and a fresh worker goes on
with the next file.

Per file, a dict: ``status`` (compiled, refused, limit, memory, error, timeout; refused is
tokfst's InputError while compiling the schema), ``stage`` and ``reason``/``detail`` when it
failed (``refusal``: the InputError's data), and the stages' timing cells and sizes.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tokfst_cli.batch.local import Ending, Pool, Work
from tokfst_cli.batch.task import Limits
from tokfst_cli.bench import common
from tokfst_cli.bench.engines import LLGUIDANCE, OUTLINES, PEERS, THREADS, XGRAMMAR

TOKFST = "tokfst"
STAGES = {TOKFST: ("compile", "lazy", "promotion", "walk"), **{p: ("compile",) for p in PEERS}}
MAX_MEMORY = 4 << 30  # bytes a worker may map beyond its set-up (the machine is shared)
WALK_TEXTS, MAX_BYTES = 10, 4096  # random texts drawn for the walk (the longest is walked), their bound


# ---- in a worker --------------------------------------------------------------------------------------
def cap_memory(extra: int) -> None:
    """Cap this process's address space at its size now plus ``extra`` bytes: past it allocations
    fail (native code aborts quietly, which the parent reports as "memory"); no core file."""
    from tokfst_cli.support import guard  # deferred: loaded in the worker process, timed as its set-up

    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            size = int(f.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = min(c for c in (size + extra, soft, hard) if c != resource.RLIM_INFINITY)
    guard._touch_thread_locals()  # the supervisor's preparations for a capped child
    guard._quiet_terminate()
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def outcome(e: BaseException, stage: str) -> dict:
    """A failed file: status, stage, a short reason and the whole message."""
    from tokfst_cli.bench.masks import one_line  # deferred: loaded in the worker process, timed as its set-up

    # deferred: loaded in the worker process, timed as its set-up
    from tokfst_cli.errors import InputError, LimitError, TokfstError

    detail = (e.one_line() if isinstance(e, TokfstError) else one_line(e))[:400]
    out = {"stage": stage, "detail": detail}
    if isinstance(e, LimitError):
        return {**out, "status": "limit", "reason": f"{stage}: {e.stage} > {e.limit} {e.bound}"}
    if isinstance(e, MemoryError):
        return {**out, "status": "memory", "reason": f"{stage}: out of memory"}
    if isinstance(e, InputError) and stage == "compile":
        data = {k: str(v) for k, v in e.data.items()}
        short = str(e)
        for v in data.values():
            short = short.replace(v, "…") if len(v) > 3 else short
        reason = (f"keyword {data['keyword']}" if "keyword" in data else
                  "$ref to another document" if e.hint == "schema-ref" else f"{e.hint}: {short[:60]}")
        return {**out, "status": "refused", "reason": reason, "refusal": {"hint": e.hint, **data}}
    return {**out, "status": "error", "reason": f"{stage}: {detail[:80]}"}


def random_text(fst, seed: int) -> str | None:
    """A random text of the byte DFA's language (``pynini.randgen``: uniform among the arcs and
    stopping, at every state), or None (longer than :data:`MAX_BYTES`, or not UTF-8)."""
    import pynini  # deferred: optional dependency (the bench extra)

    path = pynini.randgen(fst, npath=1, seed=seed, max_length=MAX_BYTES)
    if path.num_states() == 0:
        return None
    data, s = bytearray(), path.topsort().start()
    while path.num_arcs(s):
        arc = next(iter(path.arcs(s)))
        data += bytes([arc.ilabel - 1]) if arc.ilabel else b""
        s = arc.nextstate
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def steered_text(fst, seed: int, budget: int = MAX_BYTES // 2) -> str:
    """A random text of the byte DFA (or its ``ByteTable``, made once for many texts) that ends:
    uniform among the classes of bytes A reads (then among a class's bytes) and, at a final
    state, stopping, for ``budget`` bytes; then steered, each byte one that brings a final state
    nearer (``ByteTable.distances``), ending at the first final state. For DFAs whose uniform
    texts (:func:`random_text`) run past :data:`MAX_BYTES`."""
    # deferred: loaded in the worker process, timed as its set-up
    from tokfst_cli.promotion.byte_table import ByteTable, of_automaton

    table = fst if isinstance(fst, ByteTable) else of_automaton(fst)
    dist, n, rng = table.distances(), table.states, np.random.default_rng(seed)
    members = [np.flatnonzero(table.label_class[:257] == c) for c in range(table.delta.shape[1])]
    data, s = bytearray(), table.start
    while True:
        row = table.delta[s]
        classes = np.flatnonzero(row < n)
        if len(data) >= budget:
            if table.final[s]:
                break
            classes = classes[dist[row[classes]] < dist[s]]
        elif table.final[s] and rng.integers(len(classes) + 1) == 0:
            break
        c = int(rng.choice(classes))
        data.append(int(rng.choice(members[c])) - 1)  # labels are bytes + 1
        s = int(row[c])
    return data.decode("utf-8")


def draw_walk(fst, model, hf) -> tuple[str, list[int]]:
    """The longest of :data:`WALK_TEXTS` random texts of the schema's byte DFA (none within
    :data:`MAX_BYTES`: a :func:`steered_text`), and the walk: HF's tokenization of it (where the
    ids do not spell it, a normalizer: ``masks.longest_match``)."""
    # deferred: loaded in the worker process, timed as its set-up
    from tokfst_cli.bench.masks import longest_match, spells

    texts = [t for t in (random_text(fst, seed) for seed in range(WALK_TEXTS)) if t is not None]
    text = max(texts, key=len) if texts else steered_text(fst, 0)
    ids = hf.encode(text, add_special_tokens=False).ids
    walk = ids if spells(model, ids, text) else longest_match(model, text)
    if walk is None:
        raise RuntimeError("no tokenization of the random text over the token surfaces")
    return text, walk


def fresh_masks(decoder, walk: list[int]) -> tuple[list[int], bool]:
    """ns of the packed mask (``engines.bitmask``) at each state the walk reaches for the first
    time (the start, then after each token), and whether the decoder accepts the whole walk."""
    from tokfst_cli.bench.engines import bitmask  # deferred: loaded in the worker process, timed as its set-up
    from tokfst_cli.errors import DisallowedTokenError  # deferred: loaded in the worker process, timed as its set-up

    clock, seen, times, state = time.perf_counter_ns, set(), [], decoder.initial()
    gc.disable()  # as masks.run_walk: no collection inside a timed lookup
    try:
        for token in [*walk, None]:
            if state not in seen:
                seen.add(state)
                t0 = clock()
                bitmask(decoder, state)
                times.append(clock() - t0)
            if token is None:
                return times, bool(decoder.is_final(state))
            try:
                state = decoder.advance(state, token)
            except DisallowedTokenError:
                return times, False
    finally:
        gc.enable()


def walk_masks(result, walk: list[int], repeat: int) -> dict:
    """Decoder load (``Result.decoder()``) and the median mask time at the walk's fresh states, a
    fresh decoder per timed walk."""
    loads, medians, accepted = [], [], True
    for _ in range(repeat):
        t, decoder = common.timed(result.decoder)
        times, ok = fresh_masks(decoder, walk)
        loads.append(t)
        medians.append(statistics.median(times) / 1e9)
        accepted &= ok
    return {"load": common.ok(loads), "mask": common.ok(medians), "steps": len(walk), "fresh": len(times),
            "walk_accepted": accepted}


def lazy_stage(model, hf, automaton, repeat: int) -> tuple[dict, tuple | None]:
    """The lazy decoder (``lazy.LazyDecoder``) of compile_schema's ``automaton`` (its table from
    the byte classes): ready (the decoder and its first mask) and the median mask at the walk's
    fresh states, a new decoder per timed walk (each of its masks a walk of the trie); and the
    walk drawn (``draw_walk``), or None."""
    from tokfst_cli.bench.masks import one_line  # deferred: loaded in the worker process, timed as its set-up
    from tokfst_cli.errors import TokfstError  # deferred: loaded in the worker process, timed as its set-up
    from tokfst_cli.promotion.lazy import LazyDecoder  # deferred: loaded in the worker process, timed as its set-up

    def ready():
        decoder = LazyDecoder(model, automaton)
        decoder.bitmask(decoder.initial())

    try:
        cell, _ = common.measure(repeat, ready)
        load = lazy_load(model, automaton, repeat)
    except Exception as e:  # noqa: BLE001 - a refusal or a failure is the lazy cell
        why = e.one_line() if isinstance(e, TokfstError) else one_line(e)
        return {"lazy": common.error(why[:400])}, None
    try:
        drawn = draw_walk(automaton.fst, model, hf)
    except Exception as e:  # noqa: BLE001 - no walk: the eager walk fails the same way and says so
        return {"lazy": cell, **load, "lazy_mask": common.error(one_line(e)[:400])}, None
    medians, accepted = [], True
    for _ in range(repeat):
        times, ok = fresh_masks(LazyDecoder(model, automaton), drawn[1])
        medians.append(statistics.median(times) / 1e9)
        accepted &= ok
    return {"lazy": cell, **load, "lazy_mask": common.ok(medians), "lazy_accepted": accepted}, drawn


def lazy_load(model, automaton, repeat: int) -> dict:
    """The lazy artifact (``promote --format lazy``) of the byte DFA, written once: its size, and
    ``constraint.load`` of the file + the first mask (what a server pays for a schema compiled
    ahead), a check that this first mask is the in-memory decoder's."""
    import tempfile  # deferred: optional dependency (the bench extra)

    from tokfst_cli import constraint  # deferred: loaded in the worker process, timed as its set-up
    from tokfst_cli.promotion import lazy  # deferred: loaded in the worker process, timed as its set-up
    from tokfst_cli.promotion.byte_table import to_bytes  # deferred: loaded in the worker process, timed as its set-up

    table = lazy.table_for(model, automaton)
    data = to_bytes(table, model.fingerprint)
    with tempfile.TemporaryDirectory(prefix="tokfst-bench-lazy-") as d:
        path = os.path.join(d, "schema.lazy")
        with open(path, "wb") as f:
            f.write(data)

        def load():
            decoder = constraint.load(path, model)
            return decoder.bitmask(decoder.initial())

        cell, first = common.measure(repeat, load, True)
    fresh = lazy.LazyDecoder(model, table)
    return {"lazy_load": cell, "lazy_bytes": len(data),
            "lazy_load_same": bool((first == fresh.bitmask(fresh.initial())).all())}


def tokfst_one(model, lex, hf, doc, repeat: int, stage: Callable[..., None], terminals: bool) -> dict:
    from tokfst_cli.automata.arrays import fst_arrays  # deferred: loaded in the worker process, timed as its set-up
    from tokfst_cli.pipeline import build  # deferred: loaded in the worker process, timed as its set-up
    from tokfst_cli.schema.compile import compile_schema  # deferred: loaded in the worker process, timed as its set-up
    from tokfst_cli.text.regex import ByteAutomaton  # deferred: loaded in the worker process, timed as its set-up

    try:
        cell, compiled = common.measure(repeat, lambda: compile_schema(doc))
        a = compiled.automaton
        stage("compile", compile=cell, byte_states=a.fst.num_states())
    except Exception as e:  # noqa: BLE001 - every failure is the file's status
        return outcome(e, "compile")
    lazy, drawn = lazy_stage(model, hf, a, repeat)
    stage("lazy", **lazy)
    try:
        def unexpanded():  # the promotion pays for expanding the byte classes, each run
            return a if a.classed is None else ByteAutomaton(None, a.pattern, classed=a.classed)

        cell, result = common.measure(repeat, lambda: build(model, a.pattern, automaton=unexpanded(), lexicon=lex,
                                                             terminals=terminals))
        per_state = np.bincount(fst_arrays(result.fst).src, minlength=result.fst.num_states())
        stage("promotion", promote=cell, states=result.fst.num_states(), arcs=int(per_state.sum()),
              max_out=int(per_state.max(initial=0)))
    except Exception as e:  # noqa: BLE001 - every failure is the file's status
        return outcome(e, "promotion")
    try:
        text, walk = drawn or draw_walk(a.fst, model, hf)
        return {"status": "compiled", "walk_bytes": len(text.encode("utf-8")), **walk_masks(result, walk, repeat)}
    except Exception as e:  # noqa: BLE001 - compiled all the same: the mask cell and the reason say what failed
        failed = outcome(e, "walk")
        return {**failed, "status": "compiled", "mask": common.error(failed["detail"])}


def tokfst_setup(tokenizer: str, terminals: bool):
    from tokenizers import Tokenizer  # deferred: loaded in the worker process, timed as its set-up

    from tokfst_cli.promotion import lazy, lexicon  # deferred: loaded in the worker process, timed as its set-up
    from tokfst_cli.tokenizer import model as tokmod  # deferred: loaded in the worker process, timed as its set-up

    model = common.load_model(tokenizer, None)
    lex, hf = lexicon.lexicon(model), Tokenizer.from_file(str(tokmod.resolve_path(tokenizer)))
    warm = lazy.decoder(model, "[a-z]+")  # what every process pays once (T's layout, numba's kernels), not a schema
    warm.bitmask(warm.initial())
    return lambda doc, repeat, stage: tokfst_one(model, lex, hf, doc, repeat, stage, terminals)


def peer_compiler(name: str, tokenizer: str) -> Callable[[str], object]:
    """The peer's compile(schema text), its tokenizer objects set up (``engines``)."""
    from tokfst_cli.bench import engines  # deferred: loaded in the worker process, timed as its set-up

    model = common.load_model(tokenizer, None)
    engine = {OUTLINES: engines.Outlines, LLGUIDANCE: engines.LLGuidance, XGRAMMAR: engines.XGrammar}[name](
        model, tokenizer)
    if engine.missing is not None:
        raise RuntimeError(f"{name} {engine.missing}")
    if name == OUTLINES:
        from outlines_core.json_schema import build_regex_from_schema  # deferred: optional dependency (the bench extra)

        return lambda text: engine.oc.Index(build_regex_from_schema(text, whitespace_pattern=""), engine.vocabulary)
    if name == LLGUIDANCE:
        def compile_llg(text: str):
            grammar = engine.llg.LLMatcher.grammar_from_json_schema(text, overrides={"whitespace_flexible": False})
            matcher = engine.llg.LLMatcher(engine.tokenizer, grammar)
            if matcher.is_error():
                raise ValueError(matcher.get_error())
            return matcher

        return compile_llg
    compiler = engine.xgr.GrammarCompiler(engine.info, max_threads=THREADS, cache_enabled=False)
    return lambda text: compiler.compile_json_schema(text, any_whitespace=False, separators=(",", ":"),
                                                     strict_mode=False)


def peer_setup(name: str, tokenizer: str):
    compile_text = peer_compiler(name, tokenizer)

    def one(doc, repeat: int, stage) -> dict:
        try:
            cell, _ = common.measure(repeat, lambda: compile_text(json.dumps(doc)))
        except Exception as e:  # noqa: BLE001 - a peer refusing or failing on the schema: its status
            return outcome(e, "compile")
        return {"status": "compiled", "compile": cell}

    return one


def _one_line(e: BaseException) -> str:
    """A failure as the bench words it: tokfst's one line, or ``Type: message``, on one line."""
    msg = getattr(e, "one_line", None)
    return (msg() if callable(msg) else f"{type(e).__name__}: {e}").replace("\n", " ")


def failed(engine: str, row: dict, limit: float, error: str | None, memory: bool = False) -> dict:
    """The row of a file whose stage after ``row["done"]`` did not end: a timeout (``error``
    None), a worker death (``memory``: native code past the cap) or an error; a failed walk leaves
    the file compiled, its mask cell saying what happened."""
    stages = STAGES[engine]
    stage = stages[stages.index(row["done"]) + 1] if "done" in row else stages[0]
    if error is None:
        row.update(status="timeout", stage=stage, reason=f"{stage} > {limit:g} s", detail=f"{stage} over {limit:g} s")
    elif memory:
        row.update(status="memory", stage=stage, reason=f"{stage}: memory cap", detail=error)
    else:
        row.update(status="error", stage=stage, reason=f"{stage}: {error[:80]}", detail=error)
    if stage == "walk":
        row["mask"] = common.timeout(limit) if error is None else common.error(row["detail"])
        row["status"] = "compiled"
    return row


class Engine(Work):
    """One engine over schema files (the tasks: their paths) on the batch pool
    (:class:`tokfst_cli.batch.local.Pool`): a worker sets the engine up at its first file (timed,
    then its address space capped at ``max_memory`` more), then measures each file; each finished
    stage is a note that gives the next stage the whole time limit. In the parent, the notes make
    each file's row, and a file its worker did not finish is a timeout or a memory death."""

    def __init__(self, engine: str, tokenizer: str, repeat: int, terminals: bool, max_memory: int = MAX_MEMORY):
        self.engine, self.tokenizer, self.repeat, self.terminals = engine, tokenizer, repeat, terminals
        self.max_memory = max_memory
        self.one: Callable | None = None  # in a worker: the engine, set up
        self.setup: float | None = None  # in the parent: the set-up's seconds
        self.rows: dict[str, dict] = {}  # in the parent: file name -> its stages' data so far

    def prepare(self, first) -> None:
        """Nothing in the parent: each worker sets the engine up, timed."""

    def set_up(self) -> Callable:
        if self.engine == TOKFST:
            return tokfst_setup(self.tokenizer, self.terminals)
        return peer_setup(self.engine, self.tokenizer)

    def run(self, path, emit, out) -> tuple[dict, None]:
        if self.one is None:
            try:
                seconds, self.one = common.timed(self.set_up)
            except Exception as e:  # noqa: BLE001 - no file can run: the parent fails them all
                why = f"set-up failed: {_one_line(e)}"
                return {"status": "error", "stage": "setup", "reason": why, "detail": why}, None
            cap_memory(self.max_memory)
            emit({"kind": "setup", "seconds": seconds})
        done: dict = {}

        def stage(what: str, **data) -> None:
            done["done"] = what
            emit({"kind": "stage", "done": what, **data})

        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            return {"status": "error", "stage": "read", "reason": "not a JSON file", "detail": str(e)[:400]}, None
        try:
            return self.one(doc, self.repeat, stage), None
        except Exception as e:  # noqa: BLE001 - a stage that failed outside its own handling
            return failed(self.engine, done, 0.0, _one_line(e)), None

    def noted(self, path, note: dict) -> None:
        if note["kind"] == "setup":
            self.setup = note["seconds"]
        else:
            self.rows.setdefault(Path(path).name, {}).update({k: v for k, v in note.items() if k != "kind"})

    def ended(self, path, end: Ending) -> tuple[dict, None]:
        limit = end.limits.timeout
        row = self.rows.setdefault(Path(path).name, {})
        if end.fresh and not any(n["kind"] == "setup" for n in end.notes):  # its worker never set up
            why = (f"set-up over {limit:g} s" if end.timed_out else
                   f"set-up failed: the measuring process died (exit code {end.returncode})")
            return {"status": "error", "stage": "setup", "reason": why, "detail": why}, None
        if end.timed_out:
            return failed(self.engine, row, limit, None), None
        why = f"the measuring process died (exit code {end.returncode}; out of memory?)"
        return failed(self.engine, row, limit, why, memory=True), None


# ---- the parent ---------------------------------------------------------------------------------------
def run_engine(engine: str, tokenizer: str, files: list[Path], repeat: int, limit: float, progress,
               terminals: bool = True, work: type[Engine] = Engine) -> tuple[dict[str, dict], float | None]:
    """file name -> what the engine (``work``, one worker at a time of the batch pool) reported:
    status, cells, sizes; and the set-up seconds. ``terminals``: tokfst's promotion with terminal
    labels."""
    engine_work = work(engine, tokenizer, repeat, terminals, MAX_MEMORY)
    pool = Pool(1, Limits(timeout=limit), recycle=max(1, len(files)), work=engine_work, start="spawn")
    rows: dict[str, dict] = {}
    results = pool.run(files)
    try:
        for path, out, _ in results:
            rows[path.name] = {**engine_work.rows.get(path.name, {}), **out}
            progress(f"schemas: {engine}: {path.name}: {out['status']}")
            if out.get("stage") == "setup":  # the engine cannot be set up: no file can run
                rows.update({p.name: dict(out) for p in files if p.name not in rows})
                break
    finally:
        results.close()
    return rows, engine_work.setup
