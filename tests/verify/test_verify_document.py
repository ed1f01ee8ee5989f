"""`verify --json` keeps the `borrowguard.verify/1` document: every key where users' automation reads it.

tests/fixtures/verify/verify-1.shape.json is the document's shape (keys and nesting, no values; see
tests/support/shape.py), taken from `verify --json` on the bundled server, guarded and unguarded, before
the summaries became typed values. A key added, renamed or dropped fails here: change the schema's version
(and say so in the README) instead of the shape of version 1. Added since, as new keys a reader of
version 1 may ignore: target.nothing_served (the preflight found no endpoint it could load); per repeat key
`reference` (usage.prompt_tokens of the same request sent alone before the load, or null), `matches_reference`,
`vectors_compared`, `vectors_differing`, `vector_max_distance` (pooling answers' vectors against the reference,
relative L2); per level summary `empty_5xx` and `empty_5xx_bad_words` (5xx answers with an empty message, and
how many of them on requests with bad_words), `unfinished` (requests still in flight when the drain ran out, no
slower than the level's answers: not counted) and `slowest_answer_s`; a check named `vectors`, listed where
pooling vectors came back.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.shape import fits, merge, shape

SHAPE = json.loads((Path(__file__).parents[1] / "fixtures" / "verify" / "verify-1.shape.json").read_text())

pytestmark = pytest.mark.slow  # each test starts the bundled server


def verify_json(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "borrowguard", "verify", "--json", *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_guarded_sweep_and_unguarded_run_have_the_schemas_shape() -> None:
    guarded = verify_json("-d", "3s", "--sweep", "2,4")
    # the race is a chance per request: a short unguarded run can miss it (it did once in a clean-clone suite on the
    # new stack), and the shape of a FAIL's reasons is what this run is for, so it gets up to three tries
    for _ in range(3):
        unguarded = verify_json("--server-guard", "off", "-d", "4s", "-c", "16")
        if unguarded["verdict"] == "FAIL":
            break
    for doc in (guarded, unguarded):
        assert doc["schema"] == "borrowguard.verify/1"
        assert fits(shape(doc), SHAPE) == []
    assert guarded["verdict"] == "PASS" and len(guarded["levels"]) == 2
    assert unguarded["verdict"] == "FAIL"  # so its reasons, at least, were held to the shape
    assert merge(shape(guarded), shape(unguarded))["reasons"] != [None]
