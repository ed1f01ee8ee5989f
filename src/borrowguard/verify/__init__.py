"""`borrowguard verify`: load a server, watch its log and health, and give the operator's verdict.

    result = run_verify(VerifyConfig(duration=30, concurrency=16))   # no url: the bundled server
    result.verdict, result.exit_code, result.reasons                  # Verdict.PASS, 0, []

The parts: `config` (what to do, every default and rule), `preflight` (learn the target: a frozen
`Target`), `session` (run it), `watch` (the log, health and /metrics beside the load), `verdict` (a pure
function of the collected, typed facts), `result` (the typed result, made once), `document` (its JSON,
written once), `wording` (how the report names settings and fixes: the flags). The load itself is
`borrowguard.load`.
"""

from borrowguard.verify.config import VerifyConfig
from borrowguard.verify.result import (
    Check,
    CheckName,
    CheckState,
    LevelResult,
    Reason,
    ReasonCode,
    Verdict,
    VerifyResult,
)
from borrowguard.verify.session import Progress, run_verify

PASS, FAIL, ERROR, INCOMPLETE = Verdict

__all__ = [
    "ERROR",
    "FAIL",
    "INCOMPLETE",
    "PASS",
    "Check",
    "CheckName",
    "CheckState",
    "LevelResult",
    "Progress",
    "Reason",
    "ReasonCode",
    "Verdict",
    "VerifyConfig",
    "VerifyResult",
    "run_verify",
]
