"""`borrowguard run -- COMMAND…`: the guard in every Python process a command starts.

`launch` (parent side) prepares the child's environment and execs the command; `bootstrap/` holds the
`sitecustomize.py` put on the child's PYTHONPATH; `hook` (child side) installs the guard when the child
imports transformers. This package's `__init__` imports nothing: the bootstrap runs in every child process.
"""
