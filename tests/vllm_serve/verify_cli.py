"""`borrowguard verify` run as a user would against a real server of these tests, its JSON read back."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def verify(server: Any, requests: str, *extra: str, concurrency: int = 16) -> tuple[int, dict]:
    """Default options but --url, --log, a request count and a concurrency; (exit code, the --json document).

    A count, not a duration: on a busy machine the server is slower, and a fixed duration then sends too
    few requests to prove anything; `-n` alone has no time limit (the subprocess timeout bounds a hang)."""
    proc = subprocess.run(
        [sys.executable, "-m", "borrowguard", "verify", "--url", server.base_url, "--log", str(server.log_path),
         "-n", requests, "-c", str(concurrency), "--json", *extra],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.stdout, proc.stderr[-3000:]
    return proc.returncode, json.loads(proc.stdout)


def counts_line(label: str, doc: dict) -> str:
    """One line with every count the run produced: what the report of a real-server run quotes."""
    summary = doc["levels"][0]["summary"]
    scenarios = {k: v["statuses"] for k, v in summary["scenarios"].items()}
    repeats = summary["repeats"].values()
    vectors = (sum(r.get("vectors_differing", 0) for r in repeats), sum(r.get("vectors_compared", 0) for r in repeats))
    return (f"{label}: {doc['verdict']}, {summary['requests']} requests, {summary['ok']} ok, {scenarios}, "
            f"faults {summary['errors_by_fault']}, log findings {doc['log']['finding_counts']}, "
            f"vectors differing {vectors[0]} of {vectors[1]}, unfinished {summary.get('unfinished', 0)}, "
            f"checks {[(c['name'], c['state']) for c in doc['checks']]}")
