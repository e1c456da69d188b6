"""A neutral model of a Hugging Face ``tokenizer.json``, the input of every stage (Cognetta & Okazaki 2024 Sec. 2, 6).

Every token gets its *surface*: the bytes it spells (Cognetta & Okazaki 2024 Sec. 3.1, CHAR_Gamma).
Byte-level BPE undoes GPT-2's bytes-to-unicode map; SentencePiece-style BPE reads "▁" as a
space and ``<0xNN>`` as byte NN; WordPiece strips the continuation prefix and marks the piece
word-internal. Added and special tokens have no surface and stay out of every automaton.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import pickle
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from tokfst_cli.errors import InputError
from tokfst_cli.support import cache
from tokfst_cli.support.cache import cache_dir
from tokfst_cli.support.files import atomic_write
from tokfst_cli.support.meta import __version__

BUNDLED = ("gpt2",)
HUB_NAME = re.compile(r"[\w.-]+/[\w.-]+")  # a Hugging Face hub repository: org/name
_BYTE_TOKEN = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
SPACE_MARK = "\u2581"  # "▁", SentencePiece's space


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 bytes to printable code points."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table: dict[int, str] = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


@lru_cache(maxsize=1)
def unicode_to_bytes() -> dict[str, int]:
    return {c: b for b, c in bytes_to_unicode().items()}


@dataclass
class TokenizerModel:
    """What the automata need from a tokenizer: ids, surfaces, merges, options, fingerprint."""

    family: str  # "bpe" | "wordpiece"
    style: str  # "byte-level" | "sentencepiece" | "plain"
    tokens: list[str]  # token string by id ("" for a gap in the id space)
    surfaces: list[bytes | None]  # surface bytes by id; None = not in automata
    word_internal: list[bool]  # WordPiece "##" piece / BPE continuing_subword_prefix
    merges: list[tuple[int, int]] = field(default_factory=list)  # BPE, in rank order
    merge_new: list[int] = field(default_factory=list)  # BPE: the token each merge makes (empty: not known)
    options: dict[str, Any] = field(default_factory=dict)
    special_ids: frozenset[int] = frozenset()  # the special added tokens (control tokens, not text)
    outside_vocab: frozenset[int] = frozenset()  # added tokens outside the model's vocabulary (it never makes them)
    normalizer: Any = None
    pre_tokenizer: Any = None
    fingerprint: str = ""
    source: str = ""
    added_tokens: tuple[dict, ...] = ()  # tokenizer.json's added_tokens (content, normalized, special, ...)

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    @property
    def not_in_model(self) -> frozenset[int]:
        """The added tokens HF's BPE or WordPiece model never makes: special ones, and non-special
        ones outside its vocabulary."""
        got = self.__dict__.get("_not_in_model")
        if got is None:
            got = self.__dict__["_not_in_model"] = self.special_ids | self.outside_vocab
        return got

    def token_id(self, token: str) -> int | None:
        return self._ids().get(token)

    def _ids(self) -> dict[str, int]:
        ids = self.__dict__.get("_id_cache")
        if ids is None:
            ids = {t: i for i, t in enumerate(self.tokens) if t or i == 0}
            self.__dict__["_id_cache"] = ids
        return ids

    def lexicon_items(self) -> list[tuple[int, bytes]]:
        """(id, surface) of every token that takes part in automata."""
        return [(i, s) for i, s in enumerate(self.surfaces) if s]

    def model_vocab(self) -> dict[str, int]:
        """HF's *model* vocabulary: token string -> id, without the added tokens outside it."""
        got = self.__dict__.get("_model_vocab")
        if got is None:
            got = self.__dict__["_model_vocab"] = {t: i for i, t in enumerate(self.tokens)
                                                   if t and i not in self.outside_vocab}
        return got

    def model_items(self) -> list[tuple[int, bytes]]:
        """(id, model text) of every such token: the bytes HF's *model* reads for it after the
        normalizer and pre-tokenizer (stage P's output alphabet). Byte-level and plain tokenizers:
        the surface; SentencePiece-style: "▁" stays "▁" (the decoder, not the model, makes it a
        space); a byte-fallback token ``<0xNN>`` is byte NN."""
        if self.style != "sentencepiece":
            return [(i, s) for i, s in self.lexicon_items() if i not in self.outside_vocab]
        fb = bool(self.options.get("byte_fallback"))
        prefix = self.options.get("continuing_subword_prefix") or ""
        suffix = self.options.get("end_of_word_suffix") or ""
        out = []
        for i, s in self.lexicon_items():
            if i in self.outside_vocab:
                continue
            text = strip_markers(self.tokens[i], prefix, suffix)[0]
            out.append((i, _surface(text, "plain", fb)))
        return out


def strip_markers(token: str, prefix: str, suffix: str) -> tuple[str, bool, bool]:
    """(text, has continuing-subword prefix, has end-of-word suffix) of a token string."""
    pre = bool(prefix) and token.startswith(prefix) and len(token) > len(prefix)
    if pre:
        token = token[len(prefix):]
    suf = bool(suffix) and token.endswith(suffix) and len(token) > len(suffix)
    if suf:
        token = token[: -len(suffix)]
    return token, pre, suf


def merge_result(left: str, right: str, prefix: str) -> str:
    """The token a merge (left, right) makes: HF drops the right operand's prefix."""
    return left + (right[len(prefix):] if prefix and right.startswith(prefix) else right)


def resolve_path(name_or_path: str) -> Path:
    """The tokenizer.json of a path, a directory holding one, a bundled name (``gpt2``), or a
    Hugging Face hub name (``org/name``) already in the local Hugging Face cache (never downloaded)."""
    p = Path(name_or_path)
    if p.is_dir():
        if (p / "tokenizer.json").is_file():
            return p / "tokenizer.json"
        raise InputError(f"directory {name_or_path} holds no tokenizer.json",
                         "give the tokenizer.json itself, or a model directory that has one")
    if p.exists():
        return p
    if name_or_path in BUNDLED:
        return Path(str(resources.files("tokfst_cli") / "data" / f"{name_or_path}.json"))
    cached = hub_cached(name_or_path)
    if cached is not None:
        return cached
    if HUB_NAME.fullmatch(name_or_path):
        raise InputError(f"tokenizer {name_or_path} is neither a file nor in the local Hugging Face cache "
                         f"({hub_cache()}); tokfst never downloads",
                         f"fetch it with 'huggingface-cli download {name_or_path} tokenizer.json', or give a path")
    raise InputError(
        f"tokenizer file not found: {name_or_path}",
        f"give a path to a tokenizer.json, a model directory, a cached hub name or a bundled name "
        f"({', '.join(BUNDLED)})",
    )


def hub_cache() -> Path:
    """Hugging Face's hub cache: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
    return Path(home) / "hub"


def hub_cached(name: str) -> Path | None:
    """The tokenizer.json of hub repository ``name`` in the local cache (the snapshot ``refs/main``
    names, else the newest), or None."""
    if not HUB_NAME.fullmatch(name):
        return None
    repo = hub_cache() / ("models--" + name.replace("/", "--"))
    main = repo / "refs" / "main"
    with contextlib.suppress(OSError):
        found = repo / "snapshots" / main.read_text().strip() / "tokenizer.json"
        if found.is_file():
            return found
    snapshots = sorted(repo.glob("snapshots/*/tokenizer.json"), key=lambda f: f.stat().st_mtime)
    return snapshots[-1] if snapshots else None


def load(tokenizer: Any) -> TokenizerModel:
    """A tokenizer from anywhere: a :class:`TokenizerModel` (itself), a tokenizer.json path, a
    directory holding one, a bundled name, a hub name in the local Hugging Face cache
    (:func:`resolve_path`), a ``tokenizers.Tokenizer``, or a transformers fast tokenizer. An
    object's JSON is kept in tokfst's cache (by content) so that it has a file like the others."""
    if isinstance(tokenizer, TokenizerModel):
        return tokenizer
    if isinstance(tokenizer, (str, os.PathLike)):
        return _load_file(resolve_path(os.fspath(tokenizer)))
    backend = getattr(tokenizer, "backend_tokenizer", None)  # a transformers fast tokenizer
    obj = backend if backend is not None else tokenizer
    if type(obj).__module__.split(".")[0] == "tokenizers" and callable(getattr(obj, "to_str", None)):
        text = obj.to_str()
        return from_json(json.loads(text), source=str(_kept(text)))
    if getattr(tokenizer, "is_fast", None) is False:
        raise InputError(f"a slow transformers tokenizer ({type(tokenizer).__name__}) has no tokenizer.json",
                         "load it with use_fast=True, or give a tokenizer.json")
    raise InputError(f"cannot use a {type(tokenizer).__name__} as a tokenizer",
                     "give a tokenizer.json path, a model directory, a cached hub name, a bundled name, a "
                     "tokenizers.Tokenizer or a transformers fast tokenizer")


def _kept(text: str) -> Path:
    """``text`` (a tokenizer's JSON) as a file in tokfst's cache, named by its digest."""
    path = cache_dir() / "tokenizers" / f"{hashlib.sha256(text.encode('utf-8')).hexdigest()[:32]}.json"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return path


KEPT_FROM = 1 << 18  # tokenizer.json files from this size are kept read in the cache (by their bytes)
KEPT_FORMAT = 2


def _load_file(path: Path) -> TokenizerModel:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read tokenizer {path}: {e.strerror or e}", "give a readable tokenizer.json") from None
    entry = None
    if len(raw) >= KEPT_FROM:
        digest = hashlib.sha256(raw + f"/{__version__}/{KEPT_FORMAT}".encode()).hexdigest()[:32]
        entry = cache_dir() / f"v{KEPT_FORMAT}-tokenizer-{digest}.tokfst"
        kept = _read_kept(entry, str(path))
        if kept is not None:
            return kept
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        raise InputError(f"cannot read tokenizer {path}: not JSON ({why})", "give a valid tokenizer.json") from None
    model = from_json(data, source=str(path))
    if entry is not None:
        fields = {f.name: getattr(model, f.name) for f in dataclasses.fields(model) if f.name != "source"}
        cache.store(entry, pickle.dumps(fields, protocol=pickle.HIGHEST_PROTOCOL))
    return model


def _read_kept(entry: Path, source: str) -> TokenizerModel | None:
    """A large tokenizer.json as read before (tokens, surfaces, merges: a tenth of the JSON's time),
    from the cache entry named by its bytes; None when absent or unreadable."""
    data = cache.load(entry)
    if data is None:
        return None
    try:
        return TokenizerModel(**pickle.loads(data), source=source)
    except Exception:  # an entry of another layout: read the JSON again
        return None


def foreign(source: str, built: str | None, model: "TokenizerModel | str") -> InputError:
    """The error of an artifact built for another tokenizer: both named (fingerprints shortened)."""
    fp, name = (model.fingerprint, model.source) if isinstance(model, TokenizerModel) else (model, "this tokenizer")
    was = f"fingerprint {built[:12]}" if built else "an unknown fingerprint"
    return InputError(f"{source} was built for another tokenizer ({was}), not for {name} (fingerprint {fp[:12]})",
                      "load it with the tokenizer it was built for, or rebuild it for this one", hint="fingerprint")


def fingerprint_of(data: dict) -> str:
    """sha256 over what decides tokens and surfaces: model, normalizer, pre-tokenizer, decoder, added tokens."""
    keys = ("model", "normalizer", "pre_tokenizer", "decoder", "added_tokens")
    blob = json.dumps({k: data.get(k) for k in keys}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _types(spec: Any) -> set[str]:
    """All component types in a (possibly nested Sequence) normalizer/pre-tokenizer/decoder spec."""
    out: set[str] = set()
    if isinstance(spec, dict):
        if isinstance(spec.get("type"), str):
            out.add(spec["type"])
        for key in ("normalizers", "pretokenizers", "decoders"):
            subs = spec.get(key)
            for sub in subs if isinstance(subs, list) else ():
                out |= _types(sub)
    return out


def _replaces_space(spec: Any) -> bool:
    """Does a Replace component map " " to "▁" or back (SentencePiece-style BPE)?"""
    if isinstance(spec, dict):
        if spec.get("type") == "Replace":
            pat = (spec.get("pattern") or {}).get("String")
            if {pat, spec.get("content")} == {" ", SPACE_MARK}:
                return True
        for key in ("normalizers", "pretokenizers", "decoders"):
            if any(_replaces_space(s) for s in spec.get(key) or []):
                return True
    return False


def _style(data: dict) -> str:
    parts = (data.get("normalizer"), data.get("pre_tokenizer"), data.get("decoder"))
    types = set().union(*(_types(p) for p in parts))
    if "ByteLevel" in types:
        return "byte-level"
    if "Metaspace" in types or any(_replaces_space(p) for p in parts):
        return "sentencepiece"
    return "plain"


def _surface(token: str, style: str, byte_fallback: bool) -> bytes | None:
    if byte_fallback:
        m = _BYTE_TOKEN.match(token)
        if m:
            return bytes([int(m.group(1), 16)])
    if style == "byte-level":
        inv = unicode_to_bytes()
        try:
            return bytes(inv[c] for c in token)
        except KeyError:
            return None  # not spellable in byte-level alphabet
    if style == "sentencepiece":
        token = token.replace(SPACE_MARK, " ")
    return token.encode("utf-8")


_FIX = "give a valid tokenizer.json"
_OPTIONS = {  # model field -> (allowed types, what it must be)
    "unk_token": ((str,), "a string or null"),
    "continuing_subword_prefix": ((str,), "a string or null"),
    "end_of_word_suffix": ((str,), "a string or null"),
    "fuse_unk": ((bool,), "true, false or null"),
    "byte_fallback": ((bool,), "true, false or null"),
    "ignore_merges": ((bool,), "true, false or null"),
    "dropout": ((int, float), "a number or null"),
    "max_input_chars_per_word": ((int,), "an integer or null"),
}
COMPONENTS = ("normalizer", "pre_tokenizer", "post_processor", "decoder")
TOP_LEVEL = ("version", "truncation", "padding", "added_tokens", *COMPONENTS, "model")
REQUIRED = {"BPE": ("vocab", "merges"),  # HF's model fields without a default
            "WordPiece": ("vocab", "unk_token", "continuing_subword_prefix", "max_input_chars_per_word")}


def _check_fields(data: dict, m: dict, kind: str, source: str) -> None:
    """Refuse what Hugging Face refuses, and what tokfst cannot model, with a one-line reason.

    Types of the model's fields (HF reads ids as u32 and merges as "a b" or [a, b]); the
    vocabulary as a non-empty object with distinct ids; added tokens that contradict the
    vocabulary (another token's id, or a vocabulary token under another id); and the
    normalizer, pre-tokenizer, post-processor and decoder, which HF's own parser checks (with
    the version, truncation and padding when given). Top-level fields HF does not know are
    refused, as HF does; missing optional ones are not.
    """
    def bad(what: str, fix: str = _FIX) -> InputError:
        return InputError(f"{source}: {what}", fix)

    unknown = sorted(set(data) - set(TOP_LEVEL))
    if unknown:
        raise bad(f"unknown field {unknown[0][:40]!r} (Hugging Face refuses it)", "give a Hugging Face tokenizer.json")
    for key in REQUIRED[kind]:
        if m.get(key) is None:
            raise bad(f"model.{key} is missing (Hugging Face refuses a {kind} model without it)",
                      "give a complete tokenizer.json")
    vocab = m.get("vocab")
    if isinstance(vocab, list):
        raise bad(f"model.vocab of a {kind} model must be an object {{token: id}}, not a list",
                  "give a BPE or WordPiece tokenizer.json (a list is a Unigram vocabulary)")
    if not isinstance(vocab, dict) or not vocab:
        raise bad("model.vocab is missing or empty", "give a complete tokenizer.json")
    values = list(vocab.values())
    if set(map(type, values)) != {int} or min(values) < 0 or max(values) >= 2 ** 32 or len(set(values)) < len(values):
        owner: dict[int, str] = {}
        for tok, i in vocab.items():
            if type(i) is not int or not 0 <= i < 2 ** 32:
                raise bad(f"model.vocab id {str(i)[:20]!r} of {tok[:40]!r} is not a token id (0 <= integer < 2^32)")
            if i in owner:
                raise bad(f"tokens {owner[i][:40]!r} and {tok[:40]!r} share id {i}",
                          "give each vocabulary token its own id")
            owner[i] = tok
    for key, (types, what) in _OPTIONS.items():
        v = m.get(key)
        if v is not None and (type(v) not in types or (key == "dropout" and not 0 <= v <= 1)
                              or (key == "max_input_chars_per_word" and v < 0)):
            raise bad(f"model.{key} must be {what}, not {json.dumps(v)[:40]}")
    merges = m.get("merges")
    if merges is not None and not isinstance(merges, list):
        raise bad("model.merges must be a list", "write merges as a list of 'a b' or [a, b]")
    if merges and not all(type(mg) is str and mg.count(" ") == 1 for mg in merges) and not all(
            type(mg) is list and len(mg) == 2 and type(mg[0]) is str and type(mg[1]) is str for mg in merges):
        for rank, mg in enumerate(merges):
            if isinstance(mg, str):
                ok = mg.count(" ") == 1
            else:
                ok = isinstance(mg, list) and len(mg) == 2 and all(isinstance(x, str) for x in mg)
            if ok:
                continue
            raise bad(f"merge {rank} {json.dumps(mg, ensure_ascii=False)[:60]} is not a pair",
                      "write merges as 'a b' or [a, b]")
    added = data.get("added_tokens")
    if added is not None and not isinstance(added, list):
        raise bad("added_tokens must be a list")
    owner = {i: t for t, i in vocab.items()} if added else {}
    for a in added or []:
        if not isinstance(a, dict) or type(a.get("id")) is not int or not 0 <= a["id"] < 2 ** 32 \
                or not isinstance(a.get("content"), str):
            raise bad(f"added token {json.dumps(a, ensure_ascii=False)[:60]} needs an integer id and a string content")
        aid, content = a["id"], a["content"]
        if aid in owner and owner[aid] != content:
            raise bad(f"added token {content[:40]!r} takes id {aid} of vocabulary token {owner[aid][:40]!r}",
                      "give the added token a free id, or the content of the vocabulary token")
        if vocab.get(content, aid) != aid:
            raise bad(f"added token {content[:40]!r} has id {aid} but the vocabulary gives it id {vocab[content]}",
                      "give the added token the vocabulary's id")
    for part in COMPONENTS:
        spec = data.get(part)
        if spec is not None and not isinstance(spec, dict):
            raise bad(f"the {part.replace('_', '-')} must be an object or null")
    _check_components(data, source)


def _hf_refusal(spec: dict) -> str | None:
    """Why Hugging Face's parser refuses ``spec`` (its first line), None when it loads it. A Rust
    panic (a malformed Precompiled charsmap) is caught as the refusal it is: HF raises it as a
    BaseException, and its message, which Rust prints itself, is held off the user's stderr."""
    import tokenizers  # deferred: HF's tokenizers only where the oracle is asked (start-up)

    try:
        with _native_stderr_held():
            tokenizers.Tokenizer.from_str(json.dumps(spec))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - pyo3's PanicException is not an Exception
        text = str(e).splitlines()[0] if str(e) else type(e).__name__
        return re.sub(r" at line \d+ column \d+$", "", text)
    return None


@contextlib.contextmanager
def _native_stderr_held() -> Iterator[None]:
    """File descriptor 2 pointed at a discarded temporary file for the duration (what native code
    prints there, not Python's sys.stderr)."""
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2 at all: nothing to hold
        yield
        return
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def _check_components(data: dict, source: str) -> None:
    """Let Hugging Face's parser judge the pipeline components and added tokens (a stub tokenizer)."""
    import tokenizers  # deferred: HF's tokenizers only where the oracle is asked (start-up)

    spec = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": data.get("added_tokens", []),
            **{p: data.get(p) for p in COMPONENTS},
            "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}
    frame = {k: data[k] for k in ("version", "truncation", "padding") if k in data}
    whole = {**spec, **frame}
    if _hf_refusal(whole) is None:
        return
    for part in (*COMPONENTS, "added_tokens", *frame):
        msg = _hf_refusal({**spec, **{p: None for p in COMPONENTS}, "added_tokens": [], part: whole[part]})
        if msg is not None:
            types = ", ".join(sorted(_types(whole[part]))) if part in COMPONENTS else ""
            what = part.replace("_", "-").replace("added-tokens", "added tokens")
            raise InputError(f"{source}: Hugging Face's tokenizers {tokenizers.__version__} cannot read the {what}"
                             + (f" ({types})" if types else "") + f": {msg[:120]}",
                             "give a tokenizer.json that Hugging Face's tokenizers loads")
    raise InputError(f"{source}: Hugging Face's tokenizers cannot read its components",
                     "give a tokenizer.json that Hugging Face's tokenizers loads")


def from_json(data: dict, source: str = "<json>") -> TokenizerModel:
    """Build the neutral model from a parsed tokenizer.json."""
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise InputError(f"{source} has no 'model' section", "give a Hugging Face tokenizer.json")
    m = data["model"]
    kind = m.get("type")
    if "type" in m and not isinstance(kind, str):
        raise InputError(f"{source}: model.type must be a string, not {json.dumps(kind)[:40]}",
                         "give a BPE or WordPiece tokenizer.json")
    if kind is None:  # old files omit "type"; infer as HF does
        kind = "BPE" if "merges" in m else "WordPiece" if "max_input_chars_per_word" in m else None
    if kind in ("Unigram", "WordLevel"):
        raise InputError(
            f"{source}: {kind} models are not supported",
            "tokfst handles BPE and WordPiece tokenizers",
        )
    if kind not in ("BPE", "WordPiece"):
        raise InputError(f"{source}: unknown model type {kind!r}", "give a BPE or WordPiece tokenizer.json")
    _check_fields(data, m, kind, source)
    vocab = m["vocab"]
    size = max(vocab.values()) + 1
    if size > 10 * len(vocab) + 1000:
        raise InputError(f"{source}: vocabulary ids are too sparse (max id {size - 1})", "give a valid tokenizer.json")
    tokens = [""] * size
    for tok, i in vocab.items():
        tokens[i] = tok

    # Added tokens (HF's AddedVocabulary): a *special* one is a control token, left out of the
    # automata; a non-special one is text, spelled by its content as HF's decoder prints it, and
    # the BPE model makes it when it is in the vocabulary (Gemma-3's "▁▁", "\n"), never otherwise.
    added = data.get("added_tokens") or []
    special: set[int] = set()
    outside: set[int] = set()
    for a in added:
        aid = a["id"]
        if a.get("special"):
            special.add(aid)
        if aid >= len(tokens) or tokens[aid] != a["content"]:
            outside.add(aid)
        if aid >= len(tokens):
            tokens.extend([""] * (aid + 1 - len(tokens)))
            tokens[aid] = a["content"]

    style = _style(data)
    options: dict[str, Any] = {}
    merges: list[tuple[int, int]] = []
    merge_new: list[int] = []
    prefix = m.get("continuing_subword_prefix") or ""
    if kind == "BPE":
        dropout = m.get("dropout")
        if dropout not in (None, 0, 0.0):
            raise InputError(
                f"{source}: BPE dropout={dropout} makes tokenization random",
                "set model.dropout to null; canonical tokenization needs a deterministic model",
            )
        for key in ("unk_token", "fuse_unk", "byte_fallback", "continuing_subword_prefix",
                    "end_of_word_suffix", "ignore_merges"):
            options[key] = m.get(key)
        ids = {t: i for i, t in enumerate(tokens) if t}
        merges, merge_new = _merge_ids(m.get("merges") or [], ids, prefix, source)
    else:
        for key in ("unk_token", "continuing_subword_prefix", "max_input_chars_per_word"):
            options[key] = m.get(key)
        prefix = options["continuing_subword_prefix"] or "##"
        options["continuing_subword_prefix"] = prefix

    byte_fallback = bool(options.get("byte_fallback"))
    suffix = options.get("end_of_word_suffix") or ""
    surfaces: list[bytes | None] = []
    internal: list[bool] = []
    for i, tok in enumerate(tokens):
        text, inner, _ = strip_markers(tok, prefix, suffix)
        s = None if (i in special or not tok) else _surface(text, style, byte_fallback)
        if s is None and i in outside and style == "byte-level":
            s = tok.encode("utf-8")  # HF's ByteLevel decoder prints such a token as it is
        surfaces.append(s or None)
        internal.append(inner)

    return TokenizerModel(
        family="bpe" if kind == "BPE" else "wordpiece",
        style=style,
        tokens=tokens,
        surfaces=surfaces,
        word_internal=internal,
        merges=merges,
        merge_new=merge_new,
        options=options,
        special_ids=frozenset(special),
        outside_vocab=frozenset(outside),
        normalizer=data.get("normalizer"),
        pre_tokenizer=data.get("pre_tokenizer"),
        fingerprint=fingerprint_of(data),
        source=source,
        added_tokens=tuple(a for a in added if isinstance(a, dict)),
    )


def _merge_ids(raw: list, ids: dict[str, int], prefix: str, source: str) -> tuple[list[tuple[int, int]], list[int]]:
    """Merges as (left id, right id) in rank order, and the id each makes; an InputError names the
    first bad merge."""
    try:  # the common case in bulk (a 500k-merge list in a fraction of a second)
        pairs = [mg.split(" ") if type(mg) is str else mg for mg in raw]
        if all(type(p) in (list, tuple) and len(p) == 2 for p in pairs):
            out = [(ids[a], ids[b]) for a, b in pairs]
            made = [merge_result(a, b, prefix) for a, b in pairs] if prefix else [a + b for a, b in pairs]
            return out, [ids[x] for x in made]
    except (KeyError, TypeError):
        pass
    merges = []
    for rank, mg in enumerate(raw):
        pair = mg.split(" ") if isinstance(mg, str) else mg
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise InputError(f"{source}: merge {rank} {mg!r} is not a pair", "write merges as 'a b' or [a, b]")
        a, b = pair
        if a not in ids or b not in ids or merge_result(a, b, prefix) not in ids:
            raise InputError(
                f"{source}: merge {rank} ({a!r}, {b!r}) uses or makes a token not in the vocabulary",
                "give a consistent tokenizer.json",
            )
        merges.append((ids[a], ids[b]))
    return merges, [ids[merge_result(a, b, prefix)] for a, b in (
        (mg.split(" ") if isinstance(mg, str) else mg) for mg in raw)]


def from_vocab(pieces: list[str]) -> TokenizerModel:
    """A tiny plain vocabulary (for drawings such as Cognetta & Okazaki 2024 Fig. 3): surfaces are UTF-8."""
    if not pieces or any(not p for p in pieces) or len(set(pieces)) != len(pieces):
        raise InputError("the vocabulary must be non-empty and hold distinct, non-empty pieces", "e.g. a,b,ab",
                         hint="vocab")
    data = {"model": {"type": "BPE", "vocab": {p: i for i, p in enumerate(pieces)}, "merges": []}}
    return from_json(data, source="<vocab>")


def model_text(model: TokenizerModel, tid: int) -> tuple[str, bool, bool]:
    """The text HF's model sees for a token, and whether it carries the continuing-subword
    prefix (word-internal start) and the end-of-word suffix (word end)."""
    return strip_markers(model.tokens[tid], model.options.get("continuing_subword_prefix") or "",
                         model.options.get("end_of_word_suffix") or "")
