"""tests/vllm runs only inside the lean vLLM environment, through `make test-vllm` (scripts/vllm_env.py).

The normal suite (testpaths = tests) must not collect it: it needs vLLM, which the .venv-old/.venv-new stacks
do not have. `make test-vllm` sets BORROWGUARD_VLLM_HARNESS=1.
"""

import os

if os.environ.get("BORROWGUARD_VLLM_HARNESS") != "1":
    collect_ignore_glob = ["*.py"]
