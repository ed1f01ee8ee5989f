"""The preflight's own requests never count against the server: its discovery probes the endpoints a server
may not serve, and the server logs a 404 for each, which the log watch may read only after the first level
of load has started (a file is polled; a log command hands lines on late, the later the busier the machine).
Against the real bundled server, started by verify in a subprocess."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from borrowguard.verify import VerifyConfig, run_verify

pytestmark = pytest.mark.slow  # every test here starts the bundled server

_SHORT = {"duration": 2.0, "concurrency": 4}


def _not_served(result) -> list[str]:
    return sorted(path for path, ok in result.target.endpoints.items() if not ok)


def _logged_404s(log: Path, paths: list[str]) -> list[str]:
    return [line for line in log.read_text().splitlines() if '" 404' in line and any(f" {p} " in line for p in paths)]


def test_the_discoverys_404s_are_not_findings(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    result = run_verify(VerifyConfig(server_log=log, **_SHORT))
    assert result.verdict == "PASS", result.reasons
    not_served = _not_served(result)
    assert not_served and _logged_404s(log, not_served)  # the probes were answered 404 and logged
    assert "http-error-status" not in result.finding_counts, [f.text for f in result.findings]


def test_a_probes_line_that_arrives_during_the_load_is_still_the_preflights(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    # The same log, handed on by a command that starts late: every line of the preflight reaches the watch
    # after the first level has started.
    late = "sh -c " + shlex.quote(f"sleep 3; exec tail -n +1 -F {shlex.quote(str(log))}")
    result = run_verify(VerifyConfig(server_log=log, log_commands=[late], **_SHORT))
    assert result.verdict == "PASS", result.reasons
    assert _logged_404s(log, _not_served(result))
    assert result.log_lines > 2 * len(log.read_text().splitlines()) - 50  # the command's lines were read too
    assert "http-error-status" not in result.finding_counts, [f.text for f in result.findings]
