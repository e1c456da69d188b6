"""The benchmark corpus, the BPE tokenizers trained on it, and the inputs drawn from it.

Corpus: a text file, or every ``*.txt`` file under a directory (sorted by path), read as UTF-8.
The default is the reST sources of Debian's ``python3.11-doc`` (about 12 MB of English).

Tokenizers: HF ``BpeTrainer`` with a GPT-2-like byte-level setup (ByteLevel pre-tokenizer
without prefix space, ByteLevel decoder, all 256 bytes as the initial alphabet, no special
tokens), cached under ``cache_dir()/bench`` by corpus fingerprint, vocabulary size and
tokenizers version.

Inputs (Cognetta & Okazaki 2024 Table 1, Sec. 6.4.1): ``draw_words`` draws N distinct words from the running
text (frequency-weighted, fixed seed); ``edit_distance_one`` is the minimal DFA of all strings
within edit distance one of them over the corpus's word alphabet; ``paragraph`` picks a prose
paragraph of about the requested length.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from pathlib import Path

import pynini

from tokfst_cli.errors import InputError
from tokfst_cli.support.cache import cache_dir
from tokfst_cli.support.files import write_bytes
from tokfst_cli.text.regex import ByteAutomaton

DEFAULT_CORPUS = "/usr/share/doc/python3.11/html/_sources"
WORD = re.compile(r"[A-Za-z]+")
SEED = 0


@dataclass
class Corpus:
    path: str
    files: list[Path]
    text: str
    sha256: str

    def describe(self) -> dict:
        return {"path": self.path, "files": len(self.files), "chars": len(self.text),
                "bytes": len(self.text.encode("utf-8")), "sha256": self.sha256}


def load_corpus(path: str | None) -> Corpus:
    """Read the corpus; a one-line error naming the fix when it is missing or empty."""
    given = path is not None
    p = Path(path or DEFAULT_CORPUS)
    if not p.exists():
        if given:
            raise InputError(f"corpus not found: {p}", "give a text file or a directory of *.txt files",
                             hint="bench-corpus")
        raise InputError(f"the default corpus {p} is missing",
                         "install it with 'apt-get install python3.11-doc' or give another corpus",
                         hint="bench-default-corpus")
    files = sorted(f for f in p.rglob("*.txt") if f.is_file()) if p.is_dir() else [p]
    if not files:
        raise InputError(f"no *.txt files under {p}", "give a text file or a directory of *.txt files",
                         hint="bench-corpus")
    digest = hashlib.sha256()
    parts = []
    for f in files:
        try:
            data = f.read_bytes()
            parts.append(data.decode("utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"cannot read corpus file {f}: {getattr(e, 'strerror', None) or e}",
                             "give UTF-8 text files") from None
        digest.update(str(f.relative_to(p) if p.is_dir() else f.name).encode() + b"\0" + data + b"\0")
    text = "\n".join(parts)
    if not WORD.search(text):
        raise InputError(f"corpus {p} has no words", "give English text")
    return Corpus(str(p), files, text, digest.hexdigest())


# ---- trained tokenizers ----------------------------------------------------------------------
def tokenizers_version() -> str:
    import tokenizers  # deferred: HF's tokenizers only where the oracle is asked (start-up)

    return tokenizers.__version__


def trained_path(corpus: Corpus, vocab_size: int) -> Path:
    return cache_dir() / "bench" / f"bpe-{corpus.sha256[:16]}-v{vocab_size}-tokenizers{tokenizers_version()}.json"


def train(corpus: Corpus, vocab_size: int) -> tuple[Path, bool]:
    """(path of the tokenizer.json, was it trained now) for a byte-level BPE of ``vocab_size``."""
    path = trained_path(corpus, vocab_size)
    if path.exists():
        return path, False
    # deferred: HF's tokenizers only where the oracle is asked (start-up)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus.text.split("\n\n"), trainer)
    write_bytes(str(path), tok.to_str(pretty=False).encode("utf-8"))
    return path, True


# ---- inputs drawn from the corpus ------------------------------------------------------------
def draw_words(corpus: Corpus, n: int, seed: int = SEED) -> list[str]:
    """n distinct words ([A-Za-z]+) drawn from the running text, frequency-weighted, fixed seed."""
    tokens = WORD.findall(corpus.text)
    distinct = len(set(tokens))
    if distinct < n:
        raise InputError(f"the corpus has {distinct} distinct words, fewer than the {n} asked for",
                         "ask for fewer words or give a larger corpus", hint="bench-words")
    rng = random.Random(seed)
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < n:
        w = tokens[rng.randrange(len(tokens))]
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def alphabet(corpus: Corpus) -> list[str]:
    """The characters of the corpus's words (ASCII letters that occur)."""
    return sorted(set("".join(set(WORD.findall(corpus.text)))))


def edit_distance_one(words: list[str], sigma: list[str]) -> ByteAutomaton:
    """Minimal DFA (byte labels b + 1) of all strings within edit distance one of a word.

    Per word an NFA with an unedited and an edited copy of its positions: the edited copy is
    reached by one deletion, substitution or insertion of a character of ``sigma``; then
    rmepsilon, determinize and minimize over the union.
    """
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    start = f.add_state()
    f.set_start(start)
    if any(len(c.encode("utf-8")) != 1 for c in sigma):
        raise InputError("the edit alphabet must be single-byte characters", "use an ASCII corpus alphabet")
    sig = sorted({ord(c) + 1 for c in sigma})
    for w in words:
        b = [x + 1 for x in w.encode("utf-8")]
        clean = [start] + [f.add_state() for _ in b]
        edited = [f.add_state() for _ in range(len(b) + 1)]
        f.set_final(clean[-1])
        f.set_final(edited[-1])
        for i, x in enumerate(b):
            f.add_arc(clean[i], pynini.Arc(x, x, one, clean[i + 1]))
            f.add_arc(edited[i], pynini.Arc(x, x, one, edited[i + 1]))
            f.add_arc(clean[i], pynini.Arc(0, 0, one, edited[i + 1]))  # deletion
            for c in sig:
                if c != x:
                    f.add_arc(clean[i], pynini.Arc(c, c, one, edited[i + 1]))  # substitution
        for i in range(len(b) + 1):
            for c in sig:
                f.add_arc(clean[i], pynini.Arc(c, c, one, edited[i]))  # insertion
    dfa = pynini.determinize(f.rmepsilon()).minimize()
    return ByteAutomaton(dfa, f"edit distance <= 1 of {len(words)} words")


def paragraph(corpus: Corpus, chars: int) -> str:
    """The prose paragraph (blank-line separated, lines joined by spaces) whose length is closest
    to ``chars``; prose = starts with a capital letter, ends with '.', no reST markup."""
    best, best_gap = None, None
    for block in re.split(r"\n\s*\n", corpus.text):
        lines = block.split("\n")
        if any(not ln.strip() or ln[:1].isspace() or ln.lstrip()[:2] in ("..", "* ", "- ", "==", "--", "**", "::")
               or set(ln.strip()) <= set("=-~^*#+`") for ln in lines):
            continue
        text = " ".join(ln.strip() for ln in lines)
        if not (text[:1].isupper() and text.endswith(".")) or any(c in text for c in "`*|_<>[]{}"):
            continue
        gap = abs(len(text) - chars)
        if best_gap is None or gap < best_gap:
            best, best_gap = text, gap
    if best is None:
        raise InputError("the corpus has no prose paragraph",
                         "give an English corpus with blank-line separated paragraphs", hint="bench-paragraph")
    return best
