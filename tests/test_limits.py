"""Limits in the library: estimates that only refuse what cannot fit, repetitions built by powers, the guard.

* the regex's lower bound (``regex.states_at_least``) never exceeds the minimal DFA's states;
* the powers/chain construction of ``x{m,n}`` gives the same language as pynini's closure
  (Thompson, the construction before) and as Python's ``re``;
* the bound on A o T (``promote.composition_at_least``) never exceeds the composition;
* the index counts before building;
* ``guard.run``: exit codes, time and memory limits, signals and the temporary files of a
  killed child.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pynini
import pytest
import regex as mrab_regex  # the regex module (tokfst_cli.text.regex is "regex" here)
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tokfst_cli.decoding.index import build_index
from tokfst_cli.errors import LimitError
from tokfst_cli.promotion.promote import arc_arrays, composition_at_least
from tokfst_cli.support import guard
from tokfst_cli.support.files import atomic_write, temp_prefix
from tokfst_cli.text import regex
from tokfst_cli.text.regex import compile_regex, flatten, parse, states_at_least

from .helpers import accepts, finals, transitions

ATOMS = st.sampled_from(["a", "b", "é", "中", ".", "[ab]", "[^a]", "ab", "(?:ab|c)", "x", "(?:a|ab)", "(?:a*b)"])

pytestmark = pytest.mark.wallclock  # `make test` runs this module alone, after the parallel part


@st.composite
def repeated(draw, depth=3):
    """Regexes with (nested) bounded and unbounded repetitions."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(ATOMS)
    sub = lambda: draw(repeated(depth=depth - 1))  # noqa: E731
    kind = draw(st.sampled_from(["rep", "rep", "rep", "cat", "alt", "star"]))
    if kind == "cat":
        return sub() + sub()
    if kind == "alt":
        return f"(?:{sub()}|{sub()})"
    if kind == "star":
        return f"(?:{sub()})*"
    lo = draw(st.integers(0, 4))
    hi = draw(st.one_of(st.none(), st.integers(lo, lo + 5)))
    return f"(?:{sub()}){{{lo},{'' if hi is None else hi}}}"


def thompson(node) -> pynini.Fst:
    """The construction before powers: pynini's closure of the base, copied m..n times."""
    ip = regex.ip
    if node is ip._EMPTY:
        return pynini.accep("")
    if node is ip._DOT:
        node = ip._CharGroup(frozenset("\n"), True)
    if isinstance(node, ip._CharGroup):
        return regex.ranges_acceptor(regex._char_class(node))
    if isinstance(node, ip._Concatenation):
        f = pynini.accep("")
        for part in node.parts:
            f.concat(thompson(part))
        return f
    if isinstance(node, ip.Pattern):
        if not node.options:
            return pynini.Fst()
        first, *rest = (thompson(o) for o in node.options)
        return first.union(*rest) if rest else first
    if node.max == 0:
        return pynini.accep("")
    return thompson(node.base).rmepsilon().closure(node.min, node.max if node.max is not None else 0)


def python_fullmatch(pattern: str, text: str) -> bool:
    """Python's fullmatch, by the regex module (re's syntax and answers here): re's engine
    backtracks for hours on nested nullable repetitions such as ``(?:(?:x?){3,})*`` against a
    text it rejects; a TimeoutError fails the test instead of hanging it."""
    return mrab_regex.fullmatch(pattern, text, timeout=10.0) is not None


LIMIT = 20_000  # states: examples whose automata pass it are skipped (determinization may blow up)


def minimal(f: pynini.Fst) -> pynini.Fst:
    d = pynini.determinize(f.rmepsilon(), nstate=LIMIT + 1)
    assume(d.num_states() <= LIMIT)
    return d.minimize()


def compiled(pattern: str) -> pynini.Fst:
    try:
        return compile_regex(pattern, max_states=LIMIT).fst
    except LimitError:
        assume(False)


def _accepts(fst: pynini.Fst, text: str) -> bool:
    return accepts(fst, [b + 1 for b in text.encode()], transitions(fst), finals(fst))


def build(pattern: str, max_states: int, **how) -> pynini.Fst:
    """The minimal DFA of ``pattern`` with the builder's thresholds overridden."""
    nfa = regex._Builder(pattern, max_states, **how).build(parse(pattern))
    return pynini.determinize(nfa.rmepsilon(), nstate=max_states + 1).minimize()


@pytest.mark.parametrize("how", ["default", "chain or closure", "chain or powers"])
@given(repeated(), st.lists(st.text(st.sampled_from(list("abcxé中")), max_size=14), max_size=12))
@settings(max_examples=100, deadline=None)
def test_repetitions_equal_the_closure_and_re(how, pattern, texts):
    """Every route for x{m,n} (closure of the NFA, chain, closure of the minimal DFA, powers)
    gives pynini's closure (the construction before) and Python's re."""
    reference = minimal(thompson(parse(pattern)))
    if how == "default":
        fst = compiled(pattern)
    else:
        try:
            fst = build(pattern, LIMIT, small=0, closure_budget=None if how == "chain or closure" else 0)
        except LimitError:
            assume(False)  # powers determinize concatenations: some blow up (the limit then names them)
    assert pynini.equivalent(fst, reference), pattern
    for text in texts:
        assert _accepts(fst, text) == python_fullmatch(pattern, text), (pattern, text)
    assert 0 < states_at_least(parse(pattern)) <= fst.num_states()


@given(repeated())
@settings(max_examples=60, deadline=None)
def test_lengths_are_the_shortest_and_longest_words(pattern):
    fst = compiled(pattern)
    ln = regex.lengths(parse(pattern))
    zero = pynini.Weight.zero(fst.weight_type())
    level, seen, depth = {fst.start()}, {fst.start()}, 0  # breadth first: the shortest word
    while not any(fst.final(s) != zero for s in level):
        level = {a.nextstate for s in level for a in fst.arcs(s)} - seen
        seen |= level
        depth += 1
    assert ln.minlen == depth
    cyclic = fst.properties(pynini.CYCLIC, True) == pynini.CYCLIC
    assert (ln.maxlen is None) == cyclic
    if not cyclic:  # the longest path of the (trim, acyclic) minimal DFA
        longest: dict[int, int] = {}
        stack = [(fst.start(), iter([a.nextstate for a in fst.arcs(fst.start())]))]
        while stack:  # depth first without recursion; acyclic, so each state is entered once
            s, successors = stack[-1]
            for t in successors:
                if t not in longest:
                    stack.append((t, iter([a.nextstate for a in fst.arcs(t)])))
                    break
            else:
                stack.pop()
                longest[s] = max([1 + longest[a.nextstate] for a in fst.arcs(s)]
                                 + ([0] if fst.final(s) != zero else []))
        assert ln.maxlen == longest[fst.start()]


def test_nested_repetitions_flatten_only_without_gaps():
    def flat(p):
        node = parse(p).options[0].parts[0]
        base, lo, hi = flatten(node)
        return lo, hi

    assert flat("(?:.{1,200}){1,200}") == (1, 40000)
    assert flat("(?:a{2,3}){4,}") == (8, None)
    assert flat("(?:a{3}){2}") == (6, 6)
    assert flat("(?:a{2}){0,3}") == (0, 3)  # a{0}, a{2}, a{4}, a{6}: gaps, not flattened
    assert flat("(?:a{0,2}){0,3}") == (0, 6)
    assert flat("(?:(?:a{1,2}){2,3}){1,2}") == (2, 12)


def test_the_blow_ups_of_the_issue_are_refused_before_building():
    start = time.monotonic()
    with pytest.raises(LimitError) as e:
        compile_regex("a{99999999}")
    assert e.value.at_least and e.value.value == 100_000_000 and e.value.limit == "max_states"
    assert "would have at least 100000000 states (> max_states 1000000)" in str(e.value)
    with pytest.raises(LimitError):
        compile_regex("(?:[ab]{1000}){1001}")  # finite: longest word 1,001,000 bytes
    with pytest.raises(LimitError):
        compile_regex("(?i)(?:x{500}){3000}")  # flags: counted in characters
    assert time.monotonic() - start < 1
    # what fits is built: big repetitions of prefix-free and of other bases
    assert compile_regex("[0-9]{1000}").fst.num_states() == 1001
    assert compile_regex("(ab){5000}").fst.num_states() == 10001
    assert compile_regex("(a|ab){3000}").fst.num_states() == 6001
    assert compile_regex("(?:.{1,20}){1,20}").fst.num_states() == 3201
    assert compile_regex("a{1000000}", max_states=1_000_001).fst.num_states() == 1_000_001


def test_an_intermediate_past_the_limit_is_named():
    with pytest.raises(LimitError) as e:
        compile_regex("(?:(?:a|b)*a(?:a|b){12}){3}", max_states=2000)
    assert "repeat" in e.value.stage or "repetition" in e.value.stage or "byte automaton" in e.value.stage


COMPOSE_REGEXES = ["[0-9]{4}", ".{1,3}", "[a-z]+", "ab|cd", "(hello|world)+", r"\w{2}[0-9]?", ".{0,6}",
                   "[a-f0-9]{2,8}", "(?:é|中)+x", "[^a]{3}", "(?:ab){0,40}"]


def test_composition_bound_is_a_lower_bound(tokenizer):
    from tokfst_cli.promotion import lexicon

    model = tokenizer("gpt2")
    lex = lexicon.lexicon(model)
    for pattern in COMPOSE_REGEXES:
        a = compile_regex(pattern).fst.arcsort("olabel")
        bound = composition_at_least(model, a)
        actual = pynini.compose(a, lex, connect=True).num_states()
        assert a.num_states() <= bound <= actual, (pattern, bound, actual)


def test_composition_is_refused_from_the_bound(tokenizer):
    from tokfst_cli.promotion import lexicon
    from tokfst_cli.promotion.promote import promote

    model = tokenizer("gpt2")
    a = regex.compile_regex(".{1,1000}")
    with pytest.raises(LimitError) as e:
        promote(model, a, lexicon.lexicon(model), max_states=100_000)
    assert e.value.stage == "A o T" and e.value.at_least and e.value.value > 100_000


def test_arc_arrays_read_every_arc():
    f = compile_regex("[0-9]{2}-(ab|c)*é").fst
    src, label, dst = arc_arrays(f)
    want = sorted((s, a.ilabel, a.nextstate) for s in f.states() for a in f.arcs(s))
    assert sorted(zip(src.tolist(), label.tolist(), dst.tolist())) == want


def test_index_counts_before_building(tokenizer):
    model = tokenizer("gpt2")
    from tokfst_cli import pipeline

    fst = pipeline.build(model, "[0-9]{2}").fst
    arcs = sum(fst.num_arcs(s) for s in fst.states())
    with pytest.raises(LimitError) as e:
        build_index(fst, model, "[0-9]{2}", max_arcs=arcs - 1)
    assert e.value.limit == "max_arcs"
    with pytest.raises(LimitError):
        build_index(fst, model, "[0-9]{2}", max_states=fst.num_states() - 1)
    index = build_index(fst, model, "[0-9]{2}", max_states=fst.num_states(), max_arcs=arcs)
    assert index["stats"]["arcs"] == arcs


class _BFS(Exception):
    """Raised by a stand-in for ``maxmatch.product.materialize``: the BFS was reached."""


def test_aho_route_refuses_free_text_from_the_size_bound(tokenizer, monkeypatch):
    """``--method aho`` on free text: the size bound (``product.exceeds``) proves the canonical
    automaton too big, with the BFS's own error, without running the BFS up to --max-arcs (about
    2-3 s on BERT); where the bound is inconclusive (``[0-9]+``) the BFS still decides."""
    from tokfst_cli import pipeline
    from tokfst_cli.maxmatch import composition, product

    def bfs(*args, **kwargs):
        raise _BFS

    monkeypatch.setattr(product, "materialize", bfs)
    monkeypatch.setattr(composition, "maxmatch_artifact", lambda model, artifact: None)  # T_Aho: not needed here
    model = tokenizer("bert")
    with pytest.raises(LimitError) as e:
        pipeline.build(model, "[a-z]+( [a-z]+)*", canonical=True, method="aho")
    assert (e.value.stage, e.value.limit, e.value.bound, e.value.remedy) == \
        ("the canonical automaton", "max_arcs", 2_000_000, "product")
    with pytest.raises(_BFS):
        pipeline.build(model, "[0-9]+", canonical=True, method="aho")


# ---- the guard ---------------------------------------------------------------------------------

def test_guard_passes_the_exit_code_and_the_stage():
    from tokfst_cli.support.progress import report, stage

    def work() -> int:
        with stage("B: building"):
            report(12)
            return 7

    out = guard.run(work)
    assert (out.code, out.reason, out.stage, out.size) == (7, None, "B: building", 12)


def stops_with_one_line(work, signum: int, line: str, ignored: bool, capfd) -> None:
    """``work`` in a guarded child ends with 128 + signum and ``line`` on stderr; the handler of
    ``signum`` (set to the default by the caller where it was ignored) restored."""
    try:
        out = guard.run(work)
    finally:
        if ignored:
            signal.signal(signum, signal.SIG_IGN)
    assert (out.code, out.reason) == (128 + signum, None)
    assert capfd.readouterr().err.splitlines() == [line]


@pytest.mark.parametrize("signum,line", [(signal.SIGTERM, "tokfst: terminated"),
                                         (signal.SIGINT, "tokfst: interrupted")])
def test_a_signal_outside_the_commands_handling_still_says_one_line(capfd, signum, line):
    """A signal the command does not catch itself (it came while the command line was being set
    up, or as it returned) ends the child with 128 + signum and the one line, not silently."""
    # as from a terminal: a shell's background job (pytest run with `&`) inherits SIGINT ignored,
    # and tokfst rightly leaves an ignored signal ignored (guard.handled_signals)
    ignored = signal.getsignal(signum) == signal.SIG_IGN
    if ignored:
        signal.signal(signum, signal.default_int_handler)

    def work() -> int:
        os.kill(os.getpid(), signum)  # delivered here: _on_signal raises Interrupted inside work
        time.sleep(5)
        return 0

    stops_with_one_line(work, signum, line, ignored, capfd)


CALLBACK = """
def cb(ref):  # as importlib's module-lock clean-up: a weak-reference callback
    os.kill(os.getpid(), signum)
    for _ in range(1000):
        pass
"""


@pytest.mark.parametrize("where", ["<frozen importlib._bootstrap>", "finalizer"])
@pytest.mark.parametrize("signum,line", [(signal.SIGTERM, "tokfst: terminated"),
                                         (signal.SIGINT, "tokfst: interrupted")])
def test_a_signal_inside_a_callback_python_cannot_raise_from_still_stops(capfd, signum, line, where):
    """A signal that lands in a weak-reference callback or a finalizer (where Python prints an
    exception as "Exception ignored" and drops it) stops the command a moment later, with the
    one line and no traceback."""
    import weakref  # deferred: this test only

    ignored = signal.getsignal(signum) == signal.SIG_IGN
    if ignored:
        signal.signal(signum, signal.default_int_handler)

    def work() -> int:
        names = {"os": os, "signum": signum}
        if where == "finalizer":
            exec(compile("class Held:\n    def __del__(self):\n        cb(None)\n" + CALLBACK, "held", "exec"), names)
            names["Held"]()
        else:
            exec(compile(CALLBACK, where, "exec"), names)

            class Target:
                pass

            target = Target()
            ref = weakref.ref(target, names["cb"])  # noqa: F841 (kept alive so its callback runs)
            del target
        time.sleep(5)
        return 0

    stops_with_one_line(work, signum, line, ignored, capfd)


def test_guard_time_limit_kills_and_removes_temporary_files(tmp_path):
    target = tmp_path / "out.bin"

    def work() -> int:
        def slow(tmp: str) -> None:
            with open(tmp, "wb") as f:
                f.write(b"partial")
                f.flush()
                time.sleep(60)
        atomic_write(target, slow)
        return 0

    start = time.monotonic()
    out = guard.run(work, timeout=0.5, temp_dirs=[str(tmp_path)])
    assert out.code == 3 and out.reason == "time" and time.monotonic() - start < 3
    assert len(out.removed) == 1 and os.path.basename(out.removed[0]).startswith(".out.bin.")
    assert list(tmp_path.iterdir()) == []


def _dead(pid: int) -> bool:
    """Gone, or a zombie left for init to reap."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except FileNotFoundError:
        return True


def test_guard_time_limit_kills_what_the_child_started(tmp_path):
    """A process the command started (Graphviz's dot) dies with it at the limit: no orphan runs on."""
    pidfile = tmp_path / "pid"

    def work() -> int:
        p = subprocess.Popen(["sleep", "60"])
        pidfile.write_text(str(p.pid))
        p.wait()
        return 0

    out = guard.run(work, timeout=0.5)
    assert out.code == 3 and out.reason == "time"
    assert _dead(int(pidfile.read_text()))


def test_guard_temp_file_pattern_matches_atomic_write():
    name = temp_prefix("x.fst", 4242) + "abcd_123.tmp"
    assert guard.temp_file_pattern(4242).fullmatch(name)
    assert not guard.temp_file_pattern(424).fullmatch(name)


def test_guard_signal_in_native_code_is_forced_after_the_grace(tmp_path):
    """A child that cannot run Python (here: signals blocked, as in a long OpenFst call) is
    killed after the grace period; its temporary file goes with it."""
    target = tmp_path / "o.fst"

    def work() -> int:
        def stuck(tmp: str) -> None:
            open(tmp, "wb").close()
            signal.pthread_sigmask(signal.SIG_BLOCK, guard.FORWARDED)
            time.sleep(60)
        atomic_write(target, stuck)
        return 0

    def send_later():
        time.sleep(0.4)
        os.kill(os.getpid(), signal.SIGTERM)

    import threading

    threading.Thread(target=send_later, daemon=True).start()
    start = time.monotonic()
    out = guard.run(work, temp_dirs=[str(tmp_path)], grace=0.5)
    assert out.code == 143 and out.reason == "signal" and time.monotonic() - start < 3
    assert list(tmp_path.iterdir()) == []


def test_guard_memory_limit():
    def hog() -> int:
        try:
            bytearray(400 << 20)
        except MemoryError:
            return 3
        return 0

    out = guard.run(hog, max_memory=300 << 20)  # (the peak is measured on the command line: test_limits in cli/)
    assert out.code == 3 and out.reason is None
    assert guard.run(lambda: len(bytearray(10 << 20)) and 0, max_memory=0).code == 0


def test_guard_memory_the_child_cannot_word_is_still_the_limit():
    """A MemoryError past what the command catches (its start, its own error handling) is the limit."""
    def worse() -> int:
        raise MemoryError

    out = guard.run(worse, max_memory=300 << 20)
    assert out.code == 3 and out.reason == "memory"
    assert guard.run(lambda: 0, max_memory=1 << 70).code == 0  # past what setrlimit takes: no cap at all


@pytest.mark.parametrize("text,value", [("4G", 4 << 30), ("500M", 500 << 20), ("1.5g", int(1.5 * (1 << 30))),
                                        ("123456", 123456), ("0", None), ("64KiB", 64 << 10)])
def test_sizes(text, value):
    assert guard.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "x", "-1G", "4Q", "200%"])
def test_bad_sizes(text):
    with pytest.raises(ValueError):
        guard.parse_size(text)


@pytest.mark.filterwarnings("ignore")
@given(base=st.sampled_from([".", "[a-c]", "[^x]", "ab", "(a|bc)", "é", "[0-9]{2}", "(x|中)", "(a*b)", "(a|b)c*d"]),
       m=st.integers(0, 4), extra=st.integers(0, 6), unbounded=st.booleans())
@settings(max_examples=60, deadline=None)
def test_chain_bound_extrapolates_exactly(tokenizer, base, m, extra, unbounded):
    """For a regex that is one bounded repetition of a finite prefix-free group, the bound from chains of
    2 and 3 copies equals ``composition_at_least`` of the whole minimal A (the chain is minimal and
    its copies alike), so it never exceeds the composition; A is unchanged by the check; an
    unbounded repetition is not checked."""
    from tokfst_cli.promotion.promote import chain_bound

    model = tokenizer("gpt2")
    n = None if unbounded else m + extra
    if (n or m + 1) < 4:
        return  # fewer copies: nothing to extrapolate (the check is skipped)
    pattern = f"({base}){{{m},{'' if n is None else n}}}"
    seen = []
    check = chain_bound(model, 10 ** 9)

    def spy(chain, copies):
        check(chain, copies)
        b2, b3 = composition_at_least(model, chain(2)), composition_at_least(model, chain(3))
        seen.append(b2 + (copies - 2) * (b3 - b2))

    tree = parse(pattern)  # small=0: chained whatever the size (compile_regex chains past 4,096 states)
    a = regex._Builder(pattern, 10 ** 6, small=0, chain_check=spy, root=regex._sole_repetition(tree)).build(tree)
    a = minimal(a)
    assert pynini.equivalent(a, compiled(pattern))
    if n is None or "*" in base:  # x{m,}, and an infinite x: not checked
        assert seen == []
        return
    (bound,) = seen
    assert bound == composition_at_least(model, a)
    composed = pynini.compose(a.copy().arcsort("olabel"), tokenizer.lexicon("gpt2"), connect=True)
    assert bound <= composed.num_states()


def test_the_nested_dot_repetition_is_refused_in_a_second():
    """The issue's ``(.{1,200}){1,200}`` on GPT-2: refused from chains of 2 and 3 copies, before
    the 320,001-state byte automaton is built."""
    from .runner import run

    r = run("promote", "gpt2", "-e", "(.{1,200}){1,200}", os.devnull)
    assert r.rc == 3 and "A o T would have at least" in r.err.decode(), r.err
