"""Test scaffolding that never ships in the wheel: a hostile fake HTTP server, the synthetic corpus the
bundled tokenizers are built from, and a plain HTTP helper for poking real server subprocesses.

Imported as `support` (pytest puts tests/ on sys.path); bench/ and scripts/ add tests/ themselves.
"""
