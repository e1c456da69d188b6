"""The long help of each command (``tokfst CMD --help``, the man page), kept apart from the code."""

PROMOTE = """\
Promote a regex to the automaton of all token sequences that spell it (Cognetta & Okazaki 2024 Eq. 3).

The result accepts exactly the sequences of TOKENIZER's tokens whose concatenated surface
bytes are a UTF-8 string matching REGEX in full: MIN(PROJ(A o T)) for the regex's byte
automaton A and the tokenizer's lexicon transducer T. It is tokenization-agnostic:
non-canonical segmentations are accepted too. Added and special tokens never appear.
Surfaces: byte-level BPE tokens spell their bytes (Ġ is a space), SentencePiece-style
tokens read ▁ as a space and <0xNN> as byte NN, WordPiece ## pieces are glued to the
piece before them (word boundaries come with canonical MaxMatch).

\b
--format fst    an OpenFst vector acceptor; labels are token id + 1 (0 = epsilon), with
                embedded symbol tables named tokfst-tokens-<fingerprint>, readable by
                fstinfo, fstprint and fstdraw. Binary: not written to a terminal.
                --symbols full (default): input and output tables of the whole
                vocabulary, ~20 bytes a token each (GPT-2: 1.96 MB for an 11-state
                date automaton of 36 KB of arcs); compact: only the tokens on the arcs,
                the terminal names and the last token id (65 KB for that date), which
                every tokfst command reads with its TOKENIZER as a full one; none:
                no tables (36 KB; fstprint shows numbers, the tokenizer cannot be
                checked; refused with terminal labels, named only in the table).
--format index  JSON: initial, finals, masks (sorted allowed token ids, shared by all
                states with the same set: coalescence), per state its mask and next
                states, and stats (masks, states in shared masks, single-token states).
--format lazy   agnostic, nothing promoted: the regex's (or schema's) byte DFA as a
                table over its classes of bytes, with the tokenizer's fingerprint
                (tokfst-lazy). constraint.load(OUT, TOKENIZER) makes each state's mask
                the first time a decoder visits it; no limit on A o T's size applies.
                Needs a tokenizer whose tokens spell every byte (not BERT); the text
                filters apply, --canonical, --prompt, --terminals and the token filters
                are refused. Binary: not written to a terminal.
--format auto   index, or where the promoted automaton passes --max-states (A o T's
                size is bounded before it is built) the lazy form, said in one line
                on stderr, instead of exit 3. With --canonical, --prompt, --method,
                --artifact, --terminals or a token filter (which the lazy form does
                not take) it is --format index, and exits 3 as before.

-v prints a summary on stderr; --json prints it as one JSON object on stdout: format
(written: fst, index, lazy, factorized, pushdown), requested_format, out, bytes, form,
pattern, fingerprint (the tokenizer's), canonical, seconds (building), total_seconds,
states, arcs, tokens (distinct tokens on the arcs), terminals, max_tokens, excluded
(special tokens whose texts were left out), cut (non-special added tokens cut out),
healing; the lazy form gives states and classes of its byte DFA and fallback (the limit
that --format auto met, or null). With the artifact on stdout (no OUT, or '-') --json
is refused (exit 2), as OpenFst's tools never mix a report with a binary on stdout:
give OUT a file.

Regexes: Python re syntax, matched in full, over all of Unicode (negated classes and .
included; . excludes newline unless (?s)); \\d, \\w and \\s are ASCII classes as in
interegular; \\uXXXX, \\UXXXXXXXX and \\N{NAME} escapes work; (?i) folds case per
character with str.lower/str.upper. Matching is whole: ^ and $ (\\A, \\Z) at the edges of the
match are accepted and mean nothing; other anchors, backreferences and lookaround are refused.
A regex file holds one pattern; one trailing newline is dropped.

--canonical keeps only what Hugging Face's tokenizer produces (without special tokens).
BPE (--level pipeline, the default): what encode(text, add_special_tokens=False) gives:
the regex's text goes through the tokenizer's normalizer and pre-tokenizer (stage P,
built from tokenizer.json; unmodelled components are refused by name), then the product
with the canonical BPE automaton (see compile-bpe) restarted at every pre-token boundary.
Added tokens are cut out of the text first, as encode does: a special one's text is left
out of the language (--special-text); a non-special one (Gemma-3's "\\n", "\\t", "▁▁") is a
pre-token of its own, and P restarts after it. --level model: the BPE model
alone on the text as one pre-token (the paper's setting). WordPiece: the
regex's text first goes through the tokenizer's normalizer and pre-tokenizer, as in HF
(BertNormalizer, Lowercase, BertPreTokenizer, WhitespaceSplit; other configurations are
refused): a regex over text the normalizer changes, e.g. upper case or accents for an
uncased model, yields the tokens of the normalized text (-e 'John' gives "john"), never
an empty result; whitespace between words leaves no trace in the tokens; punctuation
and CJK characters are words by themselves; a word of more than max_input_chars_per_word
characters, or one with no complete greedy parse, is [UNK] alone. Then each word is
tokenized greedily, longest piece first, "##" pieces after the first.

The canonical automaton is materialized and minimized while it stays under --max-arcs
(finite sets, dates, numbers); free text such as [a-z]+ has millions of canonical arcs
(BERT: 6,248 states and 25.3 M arcs for one word), so with --format index tokfst then
writes the factorized form: the text automaton plus the tokenizer fingerprint (BPE:
tokfst-factorized; WordPiece: tokfst-factorized-maxmatch), whose masks are computed per
step by the Python API (tokfst_cli.constraint.load).

JSON Schema (Koo et al. 2024 Sec. 5.1): --schema FILE replaces the regex by the JSON texts valid
under the schema, compiled to a byte automaton with pynini ($ref/$defs compiled once and
reused). A schema that nests without bound by itself (a recursive $ref: trees, linked lists; a
free value it writes: {}, true) compiles with a stack by default (--recursion auto): written as
a pushdown automaton .fst, as a grammar's below, nothing cut; where such a value meets allOf,
not, oneOf or if (a stack cannot be intersected), or with --canonical, filters, --prompt,
--terminals or --format index/lazy, recursion and free values nest at most --max-depth deep
instead (--recursion cut; --recursion stack refuses). Numbers in every JSON spelling of a
valid value (5.0, 2.50, -0; exponents only where no number is constrained beyond its sign),
or one per value with --number-spellings shortest; strings as json.dumps(ensure_ascii=False)
writes them; keys in a stable order (the properties of every applying schema in order of
appearance, then required names, then the rest; --any-order: any order); --whitespace
compact (none), pretty (one space after , and :) or flexible (any JSON whitespace).
Unsupported keywords (unevaluatedProperties, unevaluatedItems, $dynamicRef, ...) are refused
by name, or ignored with a warning under --lenient; formats outside date, time, date-time,
email, uuid, uri, ipv4, ipv6, hostname, ... are annotations, named in a warning.

Grammars (Koo et al. 2024 Sec. 3): --grammar FILE.gbnf (llama.cpp's GBNF: name ::= ...,
start rule root, literals, [classes] with \\x \\u \\U escapes, ( ) | * + ? {m,n}, # comments) or
FILE.lark (Lark: lowercase rules, UPPERCASE terminals as strings or regexes, %ignore,
%import common.X, start rule start). The text is the grammar's language with every terminal
spelled out (no lexer between them; %ignore'd terminals may stand between any two). A rule
whose recursion continues only at the end of its text (item ("," list)?) or only at its start
(Lark's item*) is a finite automaton, and the grammar then promotes like a regex, --canonical
and the filters included. A self-embedding rule (expr ::= "(" expr ")") needs a stack: the
grammar becomes a pushdown automaton over bytes (direct left recursion removed; indirect left
recursion refused by name), written as one .fst whose symbol table names the parentheses
("(_k" and ")_k"); tokfst.load(FILE, tokenizer) decodes it with a stack. It takes no --canonical,
filters, --prompt, --terminals or --format index/lazy (refused by name). --any-json is
every JSON document (RFC 8259) nested to any depth, the same way, spelled as --whitespace says
(a --schema of {} or true is the same with the schema's spellings; --recursion cut cuts it at
--max-depth, a finite automaton that takes every option).

Terminal labels (Koo et al. 2024 Sec. 2.5.1; agnostic only): --terminals replaces the token arcs of
a wildcard loop ([^"\\\\]*, [^\\n]{0,80}, a JSON string's contents) by one arc per length class
whose label names a precomputed token mask, e.g. <JSON_STRING:1+> (one token of one or more
JSON string characters) or <JSON_STRING:1+@U+0022> (a quote, then such characters). The
automaton accepts exactly the token sequences of the expanded form; tokens that cross the
wildcard's edge (\\", ."\\n) stay ordinary arcs. Labels are ids past the vocabulary, named in
the .fst's symbol table; the index (version 2) lists each terminal's mask. Default: on with
--schema or a token group below, off otherwise; --no-terminals expands them.

Regex groups (Koo et al. 2024 Table 1): (?P<TEXT_TOKEN>) one token of any text, (?P<PARAGRAPH_TOKEN>)
one token without a newline (token-level: one token of any tokenization, agnostic only; a
state's own token arcs take precedence over them); (?P<QUOTED_TEXT>) a JSON-style quoted
string with backslash escapes; (?P<UNQUOTED_TEXT>) a YAML-style plain scalar on one line;
and the syntactic sugar (?P<SUBSTRING_OF>text), (?P<DELIMITED_LIST>(item)(sep){m,n}),
(?P<DELIMITED_SUBSEQUENCE_OF>(a)(b)...(sep)), (?P<TEXT_UNTIL>stop), each compiled to its
small automaton directly (README: Regex groups).

Token healing (--canonical only; Pitfalls 2025 Sec. 4.4): --prompt TEXT or --prompt-file FILE
puts the prompt's text before the regex's, so the canonical automaton tokenizes the
boundary as encode(prompt + completion) does. stderr tells how many of encode(prompt)'s
first tokens to keep in the model's context (every accepted sequence starts with them);
the rest of encode(prompt) is re-tokenized by the constraint, whose automaton (.fst, index
or factorized) starts after the kept tokens. The index ("healing") and the factorized
header record the prompt, the kept ids and the re-tokenized count. A prompt holding an
added token's text (e.g. <|endoftext|>) is refused, and so is --max-tokens with --prompt.

Filters (Pitfalls 2025 Sec. 4) restrict the constraint without rewriting the regex, agnostic or
canonical. Text filters intersect the regex's byte automaton before preprocessing:
--scripts S,... (Unicode Script values, matched loosely, e.g. Latin, Greek, grek, Han;
Common and Inherited characters are always allowed), --ascii (U+0000-U+007F), --nfc (text
HF's NFC normalizer leaves unchanged). Token filters intersect the token automaton before
canonical filtering (C(S n F) = C(S) n F); at the pipeline level a pre-token boundary passes
through them: --no-byte-tokens (a character that has its own single-character token is
never spelled with byte tokens: no <0xNN> and no token boundary inside it), --literal-ascii
(ASCII never as <0xNN> where a character token exists; the identity on byte-level BPE),
--fuse-spaces (no one-space token [ ] followed by [t] when the fused token [ t] exists; a
pre-token boundary resets it), --max-tokens N (at most N tokens; applied after canonical
filtering; --format index keeps the automaton and N (index version 3, or for a factorized
canonical form tokfst-factorized version 5; no product: the decoder counts tokens), --format
fst writes the product, whose size is counted before it is built and refused past
--max-states). WordPiece canonical automata
are filtered after C, which needs the materialized form. A filter that leaves no string
exits 1.

The lexicon transducer is built once per tokenizer and cached under
$XDG_CACHE_HOME/tokfst (or $TOKFST_CACHE), keyed by the tokenizer's fingerprint.

\b
Examples:
  tokfst promote gpt2 -e '[0-9]{4}-[0-9]{2}-[0-9]{2}' date.fst
  tokfst promote gpt2 -e '(Paris|Lyon)\\.' --canonical --prompt 'The capital of France is ' \\
      --format index capital.json
  tokfst promote tests/data/llama2.json -f examples/email.re --format index > email.json
  tokfst promote tests/data/llama2.json -e '(中|켤)' --no-byte-tokens | tokfst draw - bytes.svg
  tokfst promote gpt2 --schema examples/person.json --format lazy person.lazy
  tokfst promote gpt2 --schema examples/person.json --format auto person.idx --json
  tokfst promote gpt2 --schema examples/person.json --format index > person-terminals.json
  tokfst promote gpt2 -e 'Summary:(\\n\\* (?P<PARAGRAPH_TOKEN>)+){3,5}' --format index > summary.json
  tokfst promote gpt2 -e '[A-Za-zα-ω ]{1,12}' --scripts Greek --fuse-spaces --max-tokens 4 > greek.fst
  tokfst promote gpt2 -e '(Cologne|Berlin)' | fstprint | head
  tokfst promote gpt2 --grammar examples/csv.gbnf --canonical --format index > csv.json
  tokfst promote gpt2 --grammar examples/chat.lark chat.fst
  tokfst promote gpt2 --grammar examples/arith.lark arith.fst
  tokfst promote gpt2 --any-json --whitespace flexible json.fst
  tokfst promote tests/data/bert-base-uncased.json -e '[0-9]{4}-[0-9]{2}-[0-9]{2}' --canonical date.fst
  tokfst promote tests/data/bert-base-uncased.json -e '[a-z]+( [a-z]+){0,3}' --canonical --format index > words.tfz
"""

DRAW = """\
Draw an automaton as dot, svg, pdf or png (Cognetta & Okazaki 2024 Figs. 3 and 4, Secs. 5 and 6.2).

Draws IN (an OpenFst file such as the output of 'tokfst promote'), the byte automaton A of
a regex (-e), the lexicon transducer T of a tiny vocabulary (--vocab), or with both the
promoted token automaton MIN(PROJ(A o T)). Another of tokfst's files as IN (an index, lazy
or factorized artifact, compile-bpe's A_BPE) is refused naming its kind and format version
(exit 2): draw the .fst of the same promotion instead. The format is --format, else OUT's suffix
(.dot, .svg, .pdf, .png), else dot; stdout gets dot text by default, and pdf/png are not
written to a terminal. Layout is left to right (rankdir=LR) by Graphviz's dot program
(Debian package graphviz), which svg, pdf and png need.

Labels come from the embedded symbol tables: token names as they are (▁, Ġ kept), bytes
as characters or escapes such as \\x20 for non-printables, ε for epsilon; in:out for
transducers, one label for acceptors. The start state has an incoming arrow, final states
are double circles. Arcs between the same two states share one edge; past --max-arcs arcs,
a state's remaining arcs fold into one '+K more' edge.

--stages writes each panel of Cognetta & Okazaki 2024 Fig. 3 to its own file: (a) the character
automaton A, (b) the character-to-subword transducer T, (c) A o T, (d) PROJ(A o T), the
output projection before epsilon removal, and (e) MIN(PROJ(A o T)). OUT fig3.svg gives
fig3-a.svg ... fig3-e.svg; files are written only after all five have rendered.

--maxmatch tokenizes greedily (MaxMatch, Cognetta & Okazaki 2024 Sec. 6.2) with every piece usable at
every position, as in Cognetta & Okazaki 2024 Fig. 4. With --stages it writes that figure's panels: (a)
A, (b) the MaxMatch transducer T_Aho (Cognetta & Okazaki 2024 Alg. 8) with failure arcs drawn as phi
arcs, (c) T, (d) MIN(PROJ(A o T_Aho)), the greedy tokenizations, and (e) MIN(PROJ(A o T)),
where the states and arcs on no greedy tokenization are dashed and red.

\b
Examples:
  tokfst draw -e abaabcc --vocab a,b,c,ab,abc,bc --stages fig3.svg
  tokfst draw -e 'a(a|b)*b' --vocab a,b,aa,ab --maxmatch --stages fig4.svg
  tokfst promote gpt2 -e '[0-9]{4}-[0-9]{2}' date.fst
  tokfst draw date.fst date.png --max-arcs 5 --title 'YYYY-MM'
  tokfst promote gpt2 -e '[0-9]+' | tokfst draw - | dot -Tsvg > digits.svg
"""

CANONICAL_CHECK = """\
Check token sequences for canonicity (BPE: Cognetta & Okazaki 2024 Sec. 6.5; WordPiece: Sec. 6.2).

BPE (--level pipeline, the default): a sequence is canonical when encode(text,
add_special_tokens=False) gives exactly it for some text: it splits into pre-tokens that
the normalizer and pre-tokenizer can produce, each one the BPE model's tokenization of
its text; an added token is a text segment of its own. --level model: when HF's BPE model
produces exactly it for its own text as one pre-token (no normalizer): every token
reachable, no banned adjacent pair, byte-fallback runs spelling whole characters absent
from the vocabulary.

WordPiece: canonical when HF's tokenizer (normalizer, pre-tokenizer, WordPiece, without
special tokens) produces it for some text: every piece the longest match of its kind,
no ## piece at a word start, words that the normalizer and pre-tokenizer can produce
(e.g. no upper case for an uncased model, no punctuation inside a word), at most
max_input_chars_per_word characters per word, [UNK] alone as a word; an added token
([CLS], [MASK], ...: HF splits them out of the text) stands between complete text
segments, each checked on its own. Added tokens that strip spaces, match single words
or match normalized text are not modelled: a sequence holding one is refused (exit 2).

Each input line (UTF-8; a line ends at a line feed, a CR LF counts as one, and \\v,
\\f or U+2028 are text of the line) is one
sequence: space-separated token ids (--input ids), token names with the escapes of
fstprint/symbol files (--input tokens), or raw text (--input text: reports its canonical
tokenization, HF's encode, and checks it). Input is read and checked in chunks of 4,096 lines (memory stays flat); a
bad line stops the run with exit 2 before any line of its chunk is written.

Output, one line per input line: "canonical" and the tokens, or "non-canonical", the
index of the first offending token, the reason, the offending pair, and the canonical
tokenization of the same text (tab-separated; --json gives objects with the same fields).

Exit status as grep: 0 every line canonical, 1 some line not, 2 error (bad input, an
unsupported tokenizer, an artifact for another tokenizer); 3 a limit, as for every command.

\b
Examples:
  echo '464 3290' | tokfst canonical-check gpt2
  tokfst compile-bpe tests/data/llama2.json llama2.bpe
  tokfst canonical-check tests/data/llama2.json examples/seqs.txt --json --artifact llama2.bpe
  tokfst canonical-check tests/data/bert-base-uncased.json --input tokens <<< 'un ##af ##fa ##ble'
"""

COMPILE_BPE = """\
Compile the canonical BPE automaton A_BPE (Cognetta & Okazaki 2024 Sec. 6.4-6.5).

A_BPE accepts exactly the token sequences Hugging Face's BPE model produces for some
text (one pre-token): merges by (rank, leftmost position), a repeated pair keeping its
last rank, unreachable tokens never, byte-fallback runs only as the UTF-8 of characters
absent from the vocabulary, continuing-subword prefixes and end-of-word suffixes in place.

--form implicit (default) writes a versioned, zlib-compressed artifact: per merge one
rectangle of banned pairs over the two spine orders, one-row and one-column rectangles for
tokens whose merge traces pop out of rank order (merge lists converted from rank tables),
and the side automata; it carries the tokenizer fingerprint, counts and a sha256 checksum
(format in tokfst_cli/bpe/implicit.py). Llama-2: about 0.5 MB; 262k tokens: about 4 MB.

--form fst writes A_BPE explicitly (one state per class of tokens with the same banned
set, plus the start) for vocabularies where it fits under --max-arcs. --form gadgets
builds the same automaton the slow, reference way: the cascade of merge gadgets (Eq. 4,
made exact for merge lists out of rank order) applied to Sigma*.

\b
Examples:
  tokfst compile-bpe tests/data/llama2.json llama2.bpe
  tokfst compile-bpe --info llama2.bpe --json
  tokfst compile-bpe examples/small.json small-abpe.fst --form fst
"""

COMPILE_MAXMATCH = """\
Compile the MaxMatch transducer T_Aho (Cognetta & Okazaki 2024 Sec. 6.2, App. C Alg. 7-8).

T_Aho maps a pre-tokenized text to exactly the token ids Hugging Face's WordPiece model
produces: per word, greedy longest match from the left (word-initial pieces first, "##"
pieces after), [UNK] for a word with an unmatched position. It is the Aho-Corasick-style
failure trie of LinMaxMatch (Song et al. 2021) with the failure arcs expanded over the
byte labels (pynini has no phi matcher).

\b
Labels, as in promote: input byte b is label b+1, with two more input symbols:
  <w>         (label 257) the boundary between two words; maps to nothing
  <unk-word>  (label 258) a word longer than max_input_chars_per_word; maps to [UNK]
output token id t is label t+1 (0 = epsilon); symbol tables are embedded (the token table
is named tokfst-tokens-<fingerprint>, which promote --artifact checks).

The length rule and the normalizer/pre-tokenizer are not inside T_Aho: `promote
--canonical --method aho --artifact FILE` applies them to the regex first (X) and
computes MIN(PROJ(X o T_Aho)). The transducer is cached by tokenizer fingerprint.

\b
Examples:
  tokfst compile-maxmatch tests/data/bert-base-uncased.json bert-taho.fst
  tokfst compile-maxmatch tests/data/bert-base-uncased.json --info --json
  tokfst promote tests/data/bert-base-uncased.json -e '[0-9]{4}' --canonical --method aho --artifact bert-taho.fst
"""

BENCH = """\
Reproduce the paper's tables and time tokfst against its peers (Cognetta & Okazaki 2024 Sec. 6.4-6.5, \
the structured-generation practical).

\b
table1     Table 1: canonical promotion time of the automaton of all strings within edit
           distance one of --words corpus words, per trained vocabulary: Eq. 4 (merge
           gadgets, timed whole), Eq. 5 (precomputed explicit A_BPE) and the implicit
           form; each cell in its own process, a cell over --timeout shows >T; the
           three results are checked to be equivalent.
table2     Table 2: A_BPE size (states, stored arcs, bytes) as an explicit .fst, in the
           seed's implicit encoding and as tokfst's artifact, per trained vocabulary and
           --tokenizer.
paragraph  Sec. 6.4.1: a corpus paragraph (~--paragraph-chars) tokenized via the automaton
           vs HF's encode: time per trial, and equality of the token ids.
peers      per regex: tokfst's agnostic and canonical promotion vs outlines-core's Index
           (optional: pip install 'tokfst[bench]'), ratios, start masks, non-canonical first
           tokens; default regexes: the six of the foundation issue and Pitfalls 2025's Pokedex.
masks      per-step masks along HF's tokenization of a sample per regex, each at a fresh
           state, as a packed bitmask: tokfst's index, lazy decoder, canonical
           materialized and factorized vs outlines-core, llguidance and xgrammar
           (optional: pip install tokfst[bench]), and whether the masks agree; default
           regexes: the bench set and [a-z]+( [a-z]+){0,3}.
all        the five above, one report (the paper's tables; the modes below run alone).
promote    per --tokenizer and regex (default: the six): promote warm (in-process) and
           cold (a whole tokfst promote process, --cold-repeat runs, warm and empty
           cache) against the targets 0.1 s and 2 s; sizes, coalescence, a plain pynini
           peer (checked equivalent), the lexicon T's build and cache read, time by step
           and a cold-start breakdown by phase.
logits     the transformers logits processor (pip install 'tokfst[hf]'): a tiny random
           GPT-2-architecture model per --tokenizer samples 32 tokens unconstrained, agnostic
           and canonical (default regexes: the six); ms per token and the processor's own
           time per call.
ready      regex -> ready constraint per --tokenizer and regex (default: the six): tokfst's
           agnostic promotion + index export + load + first mask, and the lazy decoder
           + first mask, vs xgrammar's compile_regex, llguidance and outlines-core (pip
           install 'tokfst[bench]').
canonical  canonical BPE per --tokenizer: compile-bpe time and artifact size, canonical-check
           per pair vs HF (checked to agree); per regex (default: the six) the agnostic,
           materialized and factorized promotion and a mask lookup.
maxmatch   canonical MaxMatch per WordPiece --tokenizer: compile-maxmatch in a cold process;
           per regex (default: the six and three free-text ones) the product machine,
           its initial mask, the materialized automaton and MIN(PROJ(X o T_Aho)) (checked
           equivalent).
check      per --tokenizer (any family): canonical-check --input text on --lines generated
           lines as a whole process vs HF's encode (in-process and as a process), its
           start-up, and its peak RSS on --rss-mb inputs; per WordPiece --tokenizer and regex
           (default: [a-z]+( [a-z]+){0,3} and [a-z]+ [a-z]+) the materialized/factorized
           switch of promote --canonical --format index, cold and in-process, vs the BFS
           up to the limit that decided it before.
compile    per BPE --tokenizer: compile-bpe as a whole process with an empty cache
           (--repeat runs): time, peak RSS and artifact bytes against the targets 10 s,
           1 GB, 8 MB; merges, traces out of rank order, and the time by stage.
schemas    DIR: per JSON Schema file of DIR (sorted; --limit N: the first
           N), tokfst's compile_schema, the lazy decoder (ready, masks), agnostic
           promotion on each --tokenizer (terminal labels unless --no-terminals) and the
           mask time along a random walk, vs
           outlines-core, llguidance and xgrammar compiling the same schema (--no-peers:
           tokfst only). Each engine runs in worker processes: --timeout per peer call
           [20 s], --tokfst-timeout per tokfst stage [120 s]; --repeat [1]. Status per
           file (compiled, refused, limit, memory, error, timeout), coverage, median and
           p95 per engine, peer/tokfst ratios.
terminals  per --tokenizer and pattern (default: five wildcard patterns; or -e,
           -f): agnostic promotion expanded and with terminal labels: time, states, arcs,
           the largest state, states of 10^4+ arcs, the most arcs of a terminals state
           whose expanded twin has 10^4+, index export, decoder load, mask at fresh states.
grammars   per --tokenizer and self-embedding grammar (arithmetic, S-expressions, JSON; Lark
           text for tokfst and llguidance, the same language in GBNF for xgrammar): a
           --steps token walk [1000] led by tokfst's masks, then tokfst's pushdown decoder,
           llguidance (no_forcing) and xgrammar along it from fresh matchers, a row each:
           first mask (grammar text to mask), mask median and p99, last/first 100 steps
           (growth with the output), ratios to tokfst, masks compared at every step.
batch      compile-batch on --batch-inputs small regexes [1000], the first --tokenizer:
           in-process compiles, the local pool with one worker and with two (overhead per
           input, speed-up), a rerun with every result kept, a promote process per input
           (30 inputs); the artifacts compared.

BPE tokenizers (byte-level, GPT-2-like) are trained on the corpus with HF's BpeTrainer and
cached under $XDG_CACHE_HOME/tokfst/bench (or $TOKFST_CACHE/bench). Regexes: -e, -f, or
catalogue names with --named (tokfst_cli/catalogue.py). Output: tables on stdout (rich on
a terminal, Markdown otherwise), each with machine, versions, repetition count and the
command; --json (schema in tokfst_cli/bench/common.py), --csv, --plot. Exit 1 if an
internal equivalence check fails.

\b
Examples:
  tokfst bench table1 --vocab-sizes 4000,8000 --timeout 300 --json t1.json
  tokfst bench table2 --tokenizer tests/data/llama2.json --tokenizer gpt2 --plot t2.svg
  tokfst bench peers --tokenizer gpt2 -e '[0-9]{4}-[0-9]{2}-[0-9]{2}'
  tokfst bench all --corpus examples/notes.txt --vocab-sizes 300,400 --words 5 --trials 3
  tokfst bench promote --tokenizer tests/data/llama2.json --tokenizer gpt2 --repeat 7
  tokfst bench canonical --tokenizer gpt2 --named date,email
  tokfst bench maxmatch --tokenizer tests/data/bert-base-uncased.json --json mm.json
  tokfst bench check --tokenizer gpt2 --tokenizer tests/data/bert-base-uncased.json --rss-mb 10,100
  tokfst bench compile --tokenizer gpt2 --tokenizer tests/data/llama2.json --repeat 3
  tokfst bench schemas tests/data/schemas --tokenizer gpt2 --json schemas.json
  tokfst bench grammars --tokenizer gpt2 --tokenizer tests/data/llama2.json --steps 1000
"""

DOCTOR = """\
Print what a bug report needs: the versions of tokfst, Python, pynini (and the OpenFst
library it bundles), tokenizers, numpy, interegular, typer, rich and the graphviz package;
OpenFst's command line tools (fstinfo: Debian's libfst-tools) and Graphviz's dot; the cache:
its location, entries and size, how many do not verify, and whether it is writable.

Something missing is reported with the fix ("missing: ..." lines), never an error: the
exit status is 0.

\b
Examples:
  tokfst doctor
  tokfst doctor --json | python3 -m json.tool
"""

SAMPLE = """\
Draw random token sequences of an artifact, for inspection and tests.

ARTIFACT is any artifact of tokfst promote for TOKENIZER: an OpenFst .fst, a JSON index
(--format index), a factorized form (tokfst-factorized, tokfst-factorized-maxmatch) or a
lazy one (--format lazy, tokfst-lazy).

\b
(default)          materialized artifacts (.fst, index): as --uniform paths. Factorized
                   and lazy artifacts have no arc table: a random walk chooses uniformly
                   among the allowed tokens and, at a final state, ending, for the first
                   half of --max-tokens; then it is steered to the nearest final state and
                   ends there (a walk not final after --max-tokens tokens is drawn again).
                   Walks are not uniform over sequences.
--uniform paths    uniform among the token sequences of at most --max-tokens tokens the
                   artifact accepts: exact (big-integer) counts of the paths per state and
                   length weigh every choice, so each sequence is equally likely.
--uniform strings  uniform among the distinct strings the sequences spell (token surfaces
                   as promote reads them: Ġ and ▁ are spaces, <0xNN> is byte NN, WordPiece
                   pieces are glued), of at most --max-len bytes (default: every string of
                   a finite language, else 64). Each is written as a token sequence that
                   spells it: for a canonical artifact the only one, for an agnostic one
                   drawn uniformly among the artifact's sequences for that string.

With --uniform paths, a factorized or lazy artifact is first expanded through its decoder,
state by state from the start, into an acceptor of at most --max-arcs arcs (exit 3 past it).
--uniform strings needs no expansion where every token is also a path of single-byte tokens
(agnostic artifacts, terminal labels and lazy ones included, over a tokenizer whose tokens
spell every byte: GPT-2, Llama): the strings are then the single-byte-token part's (a
person schema of 843 states with terminal labels: 1.3 s, 150 MB); otherwise (canonical
or token-filtered artifacts) the artifact composed with the lexicon, expanded up to
--max-arcs, whose string automaton is refused past 1,000,000 states before it is
determinized (exit 3). On a terminal a progress line names the step after a second. An
artifact with no sequence within the bound is refused (exit 2).

\b
--output ids     token ids separated by spaces (one sequence per line; default)
--output tokens  token names as fstprint shows them (canonical-check --input tokens reads
                 them back)
--output text    Hugging Face's decode of the ids (a text with a newline spans two lines:
                 use --json)
--json           one object per line: {"ids": [...], "tokens": [...], "text": "..."}

\b
Examples:
  tokfst promote gpt2 -e '(Cologne|Berlin|Bonn|Munich)' --format index > cities.json
  tokfst sample gpt2 cities.json -n 5 --output tokens
  tokfst sample gpt2 cities.json -n 1000 --seed 1 --json samples.jsonl
  tokfst promote gpt2 -e '[0-9]{1,3}' digits.fst
  tokfst sample gpt2 digits.fst -n 5 --uniform strings --output tokens
  tokfst promote tests/data/bert-base-uncased.json -e '[a-z]+( [a-z]+){0,3}' --canonical --format index \\
      > words.tfz
  tokfst sample tests/data/bert-base-uncased.json words.tfz --max-tokens 16 --output text
"""

CACHE = """\
List or clear tokfst's cache of built automata and tables.

The cache is $TOKFST_CACHE, else $XDG_CACHE_HOME/tokfst, else ~/.cache/tokfst. Entries are
named by format version, kind and key (a tokenizer fingerprint or a configuration hash):
lexicon (the lexicon transducer T), bpe (the implicit A_BPE), taho (T_Aho), pre, preout,
pretables, alltext, unkwords and maxmatch-dom (WordPiece stages); bench/ holds the
tokenizers tokfst bench trains. Each entry is written atomically and sealed with its
sha256; it is verified whenever it is read, and one that does not verify (truncated by a
crash, damaged, written by an older tokfst) is rebuilt and replaced.

\b
list   one line per entry: name, kind, size in bytes, verified (yes/no); --json gives
       one object {location, entries: [{name, kind, bytes, verified, path}], bytes,
       temporary_files}
clear  remove the entries and any temporary files left by killed runs; nothing else
       in the directory is touched

\b
Examples:
  tokfst cache list
  tokfst cache list --json
  tokfst cache clear
"""

COUNT = """\
Count an artifact's token sequences and the strings they spell, exactly, by length.

ARTIFACT is any artifact of tokfst promote for TOKENIZER (.fst, index JSON, factorized, lazy).
Two tables, by length: token sequences the artifact accepts, by their number of tokens;
strings, by their number of bytes: the distinct byte strings the sequences spell, token
surfaces read as promote reads them (Ġ and ▁ are spaces, <0xNN> is byte NN, WordPiece
pieces glued; a canonical Llama-2 artifact's strings start with the space of the ▁ that
the normalizer prepends). The strings are the composition of the artifact with the
tokenizer's lexicon transducer T, projected on its bytes, determinized and minimized.

Counts are exact integers of any size (a deterministic automaton has one path per
sequence: a dynamic program over its states sums them). A canonical artifact has as many
sequences as strings (one tokenization per string); an agnostic one has more. Lengths run
from 0 to --max-len (tokens for sequences, bytes for strings), or, without --max-len, to
the longest of a finite language; an infinite language (a cycle) needs --max-len (exit 2
without it). Rows where both counts are zero are left out of the table; the JSON lists
every length.

Factorized artifacts have no arc table: they are expanded through their decoder, state by
state from the start, into an acceptor of at most --max-arcs arcs (exit 3 past it). A
grammar's pushdown artifact (promote --grammar) needs --max-len: its decoder is expanded
breadth first to N tokens from the start, which holds every sequence of at most N tokens
(and every string of at most N bytes), so the counts are exact; whether the language is
finite and its longest member are then unknown ("> N?"; JSON "finite": null) unless a
cycle shows it infinite; JSON "cut_at_max_len" is true whenever the expansion stopped at N
tokens. The
work is estimated before counting: (states + pairs of states joined by an arc) x (--max-len
+ 1) past 20,000,000 cells is refused (exit 3).

\b
Output: columns length, sequences, strings; then "total" and "longest" ("infinite" for a
language with no longest). --json: {"max_len": N or null, "sequences": {"by_length": [...],
"total": N, "finite": bool, "longest": N or null}, "strings": {... the same},
"cut_at_max_len": bool} with integers written in full.

\b
Examples:
  tokfst promote gpt2 -e '(Cologne|Berlin|Bonn|Munich)' cities.fst
  tokfst count gpt2 cities.fst
  tokfst promote gpt2 -e '[0-9]+' digits.fst
  tokfst count gpt2 digits.fst --max-len 12 --json
  tokfst promote gpt2 --grammar examples/arith.lark arith.fst
  tokfst count gpt2 arith.fst --max-len 2
"""

ENCODE = """\
Encode text to token ids, exactly as Hugging Face's encode(text, add_special_tokens=False).

IN is one UTF-8 text (absent or '-': stdin; invalid UTF-8: exit 2). The pipeline is HF's:
added tokens (special and not) cut out of the raw text first, leftmost-longest; each text
segment between them normalized and pre-tokenized by stage P's transducer (the automaton the
canonical constructions use; a component tokfst does not model is refused by name, exit 2);
each pre-token through HF's BPE (merges by rank and position, ignore_merges, byte fallback,
unknown tokens), compiled with numba. --level model: the BPE model on the text as one
pre-token. BPE tokenizers only (WordPiece and Unigram refused by name).

--stream reads stdin as the bytes arrive and prints, after each read, the tokens no later
text can change (eager output), then the rest at the end; the lines joined are the ids of
the whole text. Final: an added token once the text past its start is as long as the
longest added token; the pre-tokens of the open segment but the last two, where the text
splits there consistently. A model without a pre-tokenizer (Llama-2) has one pre-token per
segment: its tokens are final only at an added token or the end (the incremental BPE
algorithm that would emit them earlier is not implemented yet).

\b
Output: ids separated by spaces and a newline; --tokens: the token strings instead (escaped
as fstprint shows them); --count: the number of tokens; --json: {"count": N, "ids": [...],
"tokens": [...] with --tokens}.

\b
Examples:
  echo 'Hello world' | tokfst encode gpt2
  tokfst encode gpt2 examples/notes.txt --count
  tokfst encode tests/data/llama2.json examples/notes.txt --tokens
  printf 'a b c' | tokfst encode gpt2 --stream
"""

INSPECT = """\
Inspect token automata: their structure and, on a regex, the skip rate of decoding
(Pitfalls 2025 Sec. 3.3.1, Table 2; App. C's Pokedex object is catalogue.POKEDEX).

With ARTIFACT (any artifact of tokfst promote; factorized ones are expanded up to
--max-arcs arcs; another of tokfst's files, such as compile-bpe's A_BPE or a bench report,
is refused naming its kind, exit 2): states, arcs, final states; coalescence: the distinct masks
(allowed-token sets), the states sharing their mask with another state, single-token
states (one allowed token: the model need not be called) and final states with no token.
A grammar's pushdown artifact (promote --grammar) has unbounded decoder states: with
--max-len N its states within N tokens of the start are inspected (said below the table).

With -e REGEX or -f FILE (BPE tokenizers; then the one argument after TOKENIZER is OUT):
two automata are built and reported side by side:

\b
canonical  promote --canonical (pipeline level): exactly what encode(text,
           add_special_tokens=False) produces for the regex's texts (A -> P -> S -> C).
agnostic   the agnostic automaton with the tokenizer's preprocessing (A -> P -> S): every
           tokenization of every pre-token of the text as the model sees it (Llama-2: with
           the ▁ its normalizer prepends); the pre-token boundaries erased.

Then --samples texts are drawn uniformly among the regex's strings (of at most --max-len
bytes; an infinite language needs --max-len), tokenized by Hugging Face's encode, and each
token sequence is walked through both automata (every one must be accepted: else an
internal error). A decoding step is choosing the next token or ending, so n tokens take
n + 1 steps; its options are the allowed tokens, plus one where the sequence may end. A
step with one option is skippable: the token (or the end) is forced and the model need not
run. The skip rate is skippable steps / steps over all samples. Non-canonical first tokens:
the tokens the agnostic automaton allows first that start no canonical tokenization, and
their share of its first tokens.

\b
Output: one row per measure, one column per automaton. --json: {"regex", "max_len",
"strings", "samples", "steps", "automata": {"agnostic": {...}, "canonical": {...}},
"first_tokens": {"agnostic", "noncanonical", "share"}}; each automaton: states, arcs,
finals, masks, states_in_shared_masks, single_token_states, final_only_states,
skippable_steps, skip_rate. ARTIFACT: {"artifact", "automata": {"artifact": {...}}}.

\b
Examples:
  tokfst inspect gpt2 -e '(Cologne|Berlin|Bonn|Munich)'
  tokfst inspect tests/data/llama2.json -f examples/pokedex.re --samples 1000 --seed 0 --json
  tokfst inspect gpt2 -e '[a-z]+( [a-z]+){0,3}' --max-len 24
  tokfst promote gpt2 -e '[0-9]{4}-[0-9]{2}-[0-9]{2}' date.fst
  tokfst inspect gpt2 date.fst
"""

COMPILE_BATCH = """\
Compile many regexes, JSON Schemas and grammars into one artifact each, resumably.

Each INPUT is a file, or a directory of them: .re (one regex, as promote -f), .json (a
JSON Schema, as promote --schema), .gbnf and .lark (grammars, as promote --grammar); --kind
gives the kind of every input instead. Each is compiled as promote would with the same
options (--canonical, --format, the filters, --max-states, --max-arcs) into
DIR/artifacts/KEY.SUFFIX, written atomically, and gets one JSON line in DIR/results.jsonl:
input, kind, key, status (compiled, refused, limit, timeout, crashed), exit_code (as
promote's: 0, 2 bad input, 1 empty result or crash, 3 a limit), message (promote's one
line), times (total and per stage, seconds), sizes (input, states, arcs, artifact bytes),
artifact (its path in DIR) and sha256. A summary follows: counts per status, the median and
p95 compile time, the slowest inputs (--json: one JSON object). Exit 0 when every input
compiled, else 1.

\b
Resumable, content-addressed: KEY is the sha256 of the tokenizer's fingerprint, the input's
bytes, the options and tokfst's version. A run keeps what DIR/results.jsonl already holds
under an input's key (compiled with its artifact present, refused, limit) and compiles the
rest: an interrupted run is continued by running it again. Inputs with the same bytes are
compiled once.

\b
--executor local  (default) --jobs worker processes forked from this one, which has loaded
                  the tokenizer and the lexicon once; a worker that dies (native code
                  aborts, SIGKILL) leaves its input crashed and is replaced, as is one past
                  --task-timeout (status timeout) and, after --recycle inputs, every one.
--executor ray    the same tasks on Ray (pip install 'tokfst[ray]'): --address a cluster,
                  else a local Ray with --jobs CPUs.
--executor dask   the same tasks on Dask (pip install 'tokfst[dask]'): --address a
                  scheduler (tcp://HOST:8786), else a LocalCluster of --jobs processes.
On Ray and Dask each input runs in a child forked from its worker, under --task-timeout and
--task-memory; the inputs' text travels with the tasks and the artifacts come back to this
machine, so workers need only tokfst and the tokenizer (see docs/batch.md). A progress bar
(counts, rate, ETA) shows on a terminal.

\b
Examples:
  tokfst compile-batch gpt2 examples/date.re examples/email.re examples/person.json --out batch
  tokfst compile-batch gpt2 examples/date.re examples/csv.gbnf --out batch --json
  tokfst compile-batch gpt2 examples/date.re --out batch-index --format index --jobs 1 --task-timeout 60
"""

# global options kept by the supervisor (tokfst_cli.support.guard)
TIMEOUT_OPTION = ("End the command with exit 3 when it runs longer than SECONDS, naming the stage it was in; "
                  "0 = no limit [default: no limit].")
MAX_MEMORY_OPTION = ("End the command with exit 3 when it needs more memory than SIZE: "
                     "4G, 500M, 75% (of physical memory), 0 = no limit [default: 75%].")
