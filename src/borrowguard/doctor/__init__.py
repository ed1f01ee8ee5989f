"""`borrowguard doctor` as a library: is this environment affected, and what exactly to change.

    from borrowguard.doctor import collect, diagnose, read_snapshot
    from borrowguard.knowledge import load

    kb = load()
    diagnosis = diagnose(collect(kb), kb)            # this environment, in well under a second
    diagnosis = diagnose(read_snapshot("env.json"), kb)  # or a captured one / collect-env text
    for finding in diagnosis.findings: ...
    diagnosis.exit_code(strict=False)                # 0 nothing/info, 1 warnings, 2 errors

Nothing here imports torch, vllm, transformers or tokenizers (`collect(deep=True)` runs torch in a child).
"""

from borrowguard.doctor.collect import collect, decode_nccl_version
from borrowguard.doctor.collect_env import parse_collect_env
from borrowguard.doctor.rules import Diagnosis, EnvFinding, GuardStatus, diagnose, guard_status
from borrowguard.doctor.snapshot import SCHEMA, Snapshot, is_secret_name, redact_env
from borrowguard.doctor.source import MAX_INPUT_BYTES, parse_snapshot, read_snapshot

__all__ = [
    "MAX_INPUT_BYTES",
    "SCHEMA",
    "Diagnosis",
    "EnvFinding",
    "GuardStatus",
    "Snapshot",
    "collect",
    "decode_nccl_version",
    "diagnose",
    "guard_status",
    "is_secret_name",
    "parse_collect_env",
    "parse_snapshot",
    "read_snapshot",
    "redact_env",
]
