"""Shared fixtures: the real tokenizers (``tokenizer``), a private artifact cache, a colour-free env.

The real tokenizers (GPT-2, bundled with the package; Llama-2 and BERT, copied into tests/data)
are loaded once per session and shared by every test::

    def test_x(tokenizer):
        model = tokenizer("bert")          # the TokenizerModel
        lex = tokenizer.lexicon("bert")    # its lexicon transducer T
        hf = tokenizer.hf("bert")          # Hugging Face's Tokenizer (shared: do not reconfigure it
                                           # except with no_padding()/no_truncation())
        path = tokenizer.path("bert")      # the tokenizer.json
        arg = tokenizer.arg("gpt2")        # TOKENIZER as given on the command line ("gpt2": bundled)

Module-level helpers that cannot take a fixture use :func:`real` (the same objects) and
:func:`words100`. The command line is run through :mod:`tests.runner`.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import sys
from collections.abc import Callable
from functools import cache, lru_cache
from pathlib import Path
from typing import TypeVar

import pynini
import pytest
from hypothesis import HealthCheck, settings
from tokenizers import Tokenizer

import tokfst_cli
from tokfst_cli.promotion import lexicon
from tokfst_cli.tokenizer import model as tokmod
from tokfst_cli.tokenizer.model import TokenizerModel

from .runner import COLOR_VARS

T = TypeVar("T")
DATA = Path(__file__).parent / "data"
PACKAGE_DATA = Path(tokfst_cli.__file__).parent / "data"
TOKENIZERS = {
    "gpt2": PACKAGE_DATA / "gpt2.json",  # bundled with the package; not copied twice
    "llama2": DATA / "llama2.json",
    "bert": DATA / "bert-base-uncased.json",
}


# Whatever calls `tokfst` by name (bash completion in test_docs.py) finds the one beside this
# interpreter, activated venv or not; tests/runner.py runs it by its full path.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")


# Hypothesis profiles of the bad-input battery (tests/cli/test_battery*.py, tests/test_damage.py):
# "battery" keeps `make test` within its time budget; TOKFST_BATTERY=full runs "battery-full".
settings.register_profile("battery", deadline=None, max_examples=25,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("battery-full", settings.get_profile("battery"), max_examples=400)
BATTERY = settings.get_profile("battery-full" if os.environ.get("TOKFST_BATTERY") == "full" else "battery")


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Tests never touch the user's cache. Under pytest-xdist (`make test` runs two workers) the
    workers share one (the cache takes concurrent writers: tests/test_cache.py), so what one worker
    compiled cold the other reads warm."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent / "cache" if os.environ.get("PYTEST_XDIST_WORKER") else None
    if shared is not None:
        shared.mkdir(exist_ok=True)
    os.environ["TOKFST_CACHE"] = str(shared or tmp_path_factory.mktemp("cache"))
    yield


# Hypothesis budgets: `make test` runs every property test at a fraction of the examples its
# @settings names (at least MIN_EXAMPLES), sized so the suite stays within its time budget;
# TOKFST_TEST_PROFILE=thorough (`make test-thorough`) runs them in full.
PROFILE = os.environ.get("TOKFST_TEST_PROFILE", "quick")
SCALE = {"quick": 0.3, "thorough": 1.0}[PROFILE]
MIN_EXAMPLES = 5


def budget(n: int, floor: int = 5) -> int:
    """A fixed sample size of a test (walks, sampled strings or paths) at this profile: ``n`` under
    ``thorough``, SCALE of it (at least ``floor``) under ``quick``, as the Hypothesis budgets."""
    return n if SCALE == 1.0 else max(floor, min(n, round(n * SCALE)))


def pytest_collection_modifyitems(config, items):
    if SCALE == 1.0:
        return
    seen = set()
    for item in items:
        fn = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
        inner = getattr(fn, "hypothesis", None)
        if inner is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        current = getattr(fn, "_hypothesis_internal_use_settings", None) or settings.default
        wanted = max(MIN_EXAMPLES, int(current.max_examples * SCALE))
        if wanted < current.max_examples:
            fn._hypothesis_internal_use_settings = settings(current, max_examples=wanted)


def pytest_configure(config):
    config.addinivalue_line("markers", "wallclock: asserts how long something takes (a limit's contract, with "
                            "margins); `make test` runs these alone, after the parallel part, on an idle machine")


def shared(tmp_path_factory, key: str, build: Callable[[Path], T]) -> T:
    """A module fixture's value built once for every pytest-xdist worker: the first worker to ask
    builds it (``build(directory)``, a directory both workers see) under a file lock and pickles it;
    the other waits for the lock and reads it, rather than running the same processes again."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    value_file = root / f"shared-{key}.pickle"
    with open(root / f"shared-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if value_file.exists():
            return pickle.loads(value_file.read_bytes())
        directory = root / f"shared-{key}"
        directory.mkdir()
        value = build(directory)
        value_file.write_bytes(pickle.dumps(value))
        return value


@pytest.fixture
def no_color(monkeypatch):
    """This process's environment without colour settings (as runner.make_env gives subprocesses)."""
    for var in COLOR_VARS:
        monkeypatch.delenv(var, raising=False)


class Tokenizers:
    """The real tokenizers by name, each part loaded on first use and kept for the session."""

    names = tuple(TOKENIZERS)

    def __call__(self, name: str) -> TokenizerModel:
        return _model(name)

    def lexicon(self, name: str) -> pynini.Fst:
        return _lexicon(name)

    def hf(self, name: str) -> Tokenizer:
        return _hf(name)

    def path(self, name: str) -> Path:
        return TOKENIZERS[name]

    def arg(self, name: str) -> str:
        """The TOKENIZER argument of the command line: the bundled name, else the file."""
        return name if name in tokmod.BUNDLED else str(TOKENIZERS[name])


@cache
def _model(name: str) -> TokenizerModel:
    return tokmod.load(str(TOKENIZERS[name]))


@cache
def _lexicon(name: str) -> pynini.Fst:
    return lexicon.build(_model(name))


@cache
def _hf(name: str) -> Tokenizer:
    return Tokenizer.from_file(str(TOKENIZERS[name]))


TOKENIZER = Tokenizers()


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizers:
    """``tokenizer(name)`` -> TokenizerModel; ``.lexicon``, ``.hf``, ``.path``, ``.arg`` (see above)."""
    return TOKENIZER


def real(name: str):
    """(TokenizerModel, lexicon T, HF Tokenizer) for a real tokenizer: the ``tokenizer`` fixture's objects."""
    return _model(name), _lexicon(name), _hf(name)


@lru_cache(maxsize=1)
def words100() -> list[str]:
    return (PACKAGE_DATA / "words100.txt").read_text().split()


@pytest.fixture(scope="module")
def torch_one_thread():
    """The machine is shared: torch on one thread (its own pool would fight the other tests);
    for the modules that run a model (``pytestmark = pytest.mark.usefixtures(...)``)."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)
