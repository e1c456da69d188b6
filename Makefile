# tokfst: `make demo` and `make test` set everything up on a fresh Debian machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
REGEX  ?= [0-9]{4}-[0-9]{2}-[0-9]{2}

.PHONY: setup system-deps demo test test-thorough lint bench results docs docs-check clean

setup: system-deps $(BIN)/.installed

# Debian's graphviz (dot) and libfst-tools (fstinfo, fstprint, fstdraw, ...), unless present.
system-deps:
	@command -v dot >/dev/null && command -v fstinfo >/dev/null || { \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz libfst-tools >/dev/null; }

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# The tests' environment in one pip run: the test extra, tokfst[hf] (torch's CPU wheel and
# transformers, for the logits processor's tests) and tokfst[ray,dask] (compile-batch's cluster
# executors, tested on a local Ray and a Dask LocalCluster); one resolution and one editable build.
$(BIN)/.installed-hf: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,hf,ray,dask]'
	touch $(BIN)/.installed $@

# The main job on the bundled GPT-2 tokenizer: promote a regex, write the .fst, its index
# and drawings into artifacts/, and show that OpenFst's own tools read the result.
demo: setup
	$(BIN)/tokfst promote gpt2 -e '$(REGEX)' artifacts/date.fst -v
	$(BIN)/tokfst promote gpt2 -e '$(REGEX)' --format index artifacts/date.index.json
	$(BIN)/tokfst draw artifacts/date.fst artifacts/date.svg --max-arcs 6 --title 'GPT-2: $(REGEX)'
	$(BIN)/tokfst draw -e abaabcc --vocab a,b,c,ab,abc,bc --stages artifacts/fig3.svg
	$(BIN)/tokfst draw -e 'a(a|b)*b' --vocab a,b,aa,ab --maxmatch --stages artifacts/fig4.svg
	fstinfo artifacts/date.fst | head -8
	@ls -l artifacts/

# ruff first (seconds), then two workers (pytest-xdist; the machine has 2 cores), then the tests
# that assert how long a limit takes to act (marker `wallclock`) on their own, two at a time: no
# heavy test of the first part runs beside them to eat their margins. Property tests run at the
# "quick" Hypothesis budget (tests/conftest.py); `make test-thorough` runs their full budgets.
# compileall: tokfst's own bytecode, written once. pip compiles the dependencies at install, but
# not an editable project, and where PYTHONDONTWRITEBYTECODE is set (as on these machines) every
# `tokfst` process the tests start would compile tokfst_cli again (about 0.15 s each).
test: system-deps $(BIN)/.installed-hf lint
	$(BIN)/python -m compileall -q tokfst_cli >/dev/null
	$(BIN)/python -m pytest -q -n 2 --dist worksteal -m 'not wallclock' --durations=25
	$(BIN)/python -m pytest -q -n 2 --dist load -m wallclock

test-thorough: system-deps $(BIN)/.installed-hf lint
	TOKFST_TEST_PROFILE=thorough TOKFST_BATTERY=full $(BIN)/python -m pytest -q -n 2 --dist loadfile

lint: $(BIN)/.installed
	$(BIN)/ruff check tokfst_cli tokfst tests scripts

# Every `tokfst bench` mode (about an hour), each writing its JSON under docs/results/data/AREA/,
# then `make results` renders the pages docs/results/AREA.md from them. The paper's tables and the
# peer comparison (`all`) train on Debian's python3.11-doc.
RESULTS := docs/results/data
bench: setup
	@test -d /usr/share/doc/python3.11/html/_sources || \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3.11-doc >/dev/null
	$(BIN)/pip install -q -e '.[bench,hf]'
	mkdir -p $(RESULTS)/promote $(RESULTS)/canonical $(RESULTS)/maxmatch $(RESULTS)/decoding $(RESULTS)/paper
	$(BIN)/tokfst bench promote --tokenizer tests/data/llama2.json --tokenizer gpt2 --repeat 7 \
	  --json $(RESULTS)/promote/promote.json -v
	$(BIN)/tokfst bench canonical --tokenizer tests/data/llama2.json --tokenizer gpt2 --repeat 5 \
	  --json $(RESULTS)/canonical/canonical.json -v
	$(BIN)/tokfst bench maxmatch --tokenizer tests/data/bert-base-uncased.json --json $(RESULTS)/maxmatch/maxmatch.json -v
	$(BIN)/tokfst bench ready --tokenizer tests/data/llama2.json --tokenizer gpt2 --json $(RESULTS)/decoding/ready.json -v
	$(BIN)/tokfst bench logits --tokenizer tests/data/llama2.json --tokenizer gpt2 --json $(RESULTS)/decoding/logits.json -v
	mkdir -p $(RESULTS)/encode
	$(BIN)/tokfst bench encode --tokenizer gpt2 --tokenizer tests/data/llama2.json --json $(RESULTS)/encode/encode.json -v
	mkdir -p $(RESULTS)/batch
	$(BIN)/tokfst bench batch --tokenizer gpt2 --repeat 3 --json $(RESULTS)/batch/batch.json -v
	$(BIN)/tokfst bench all --tokenizer tests/data/llama2.json --tokenizer gpt2 \
	  --json $(RESULTS)/paper/all.json --csv artifacts/bench-all.csv --plot artifacts/bench-all.svg -v
	$(MAKE) results

# docs/results/AREA.md from the JSON in docs/results/data/AREA/ (tests/test_results.py checks they agree).
results: setup
	for d in $(RESULTS)/*/; do a=$$(basename $$d); \
	  $(BIN)/tokfst bench report $$d --markdown docs/results/$$a.md || exit 1; done

docs: setup
	$(BIN)/python scripts/gen_docs.py

docs-check: setup
	$(BIN)/python scripts/gen_docs.py --check

clean:
	rm -rf $(VENV) artifacts/*.fst artifacts/*.svg artifacts/*.json
