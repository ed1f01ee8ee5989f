"""How verify's report names the operator's settings, and the advice it gives: the one module outside
`cli/` that writes a CLI flag.

The library raises and returns facts (`ConfigError.setting`, `MismatchKind`); the
CLI words its errors itself, with `flag()`. The report is different: its reasons, notes, check details and
skipped scenarios are text in the `borrowguard.verify/1` document (the JSON, the HTML, the terminal), read
by whoever ran `borrowguard verify`, so they name a setting as the flag that sets it, and a fix as the flag
to pass. They take those words from here, and so does `cli/verify.py`, so the two cannot drift.
"""

from __future__ import annotations

from borrowguard.load.faults import MismatchKind

FLAGS = {"logs": "--log", "log_commands": "--log-cmd", "targets": "--target", "targets_file": "--targets"}
"""VerifyConfig settings (and the fleet's inputs, `targets` and `targets_file`) whose flag is not `--` and the
setting with dashes."""


def flag(setting: str) -> str:
    """The CLI flag of a VerifyConfig setting: `max_model_len` -> `--max-model-len`."""
    return FLAGS.get(setting, "--" + setting.replace("_", "-"))


LOG_FLAGS = f"{flag('logs')} / {flag('log_commands')}"
"""What gives verify a server log to watch."""

FIXES = {
    MismatchKind.TOO_LONG: "verify fits prompts to the context it learns; if the server hides it, pass "
    f"{flag('max_model_len')} N",
    MismatchKind.NO_VISION: f"the model takes no images: {flag('mix')} text=1,tools=1",
    MismatchKind.TOO_MANY_IMAGES: f"{flag('images_per_request')} 1 (or start vLLM with --limit-mm-per-prompt)",
    MismatchKind.NO_TOOLS: "start vLLM with --enable-auto-tool-choice --tool-call-parser NAME, or "
    f"{flag('mix')} text=1,image=1",
    MismatchKind.TOOL_CALL_CUT: "the forced tool call did not fit max_tokens; nothing to fix on the server",
    MismatchKind.UNKNOWN_FIELD: f"the server rejects vLLM's extra fields: {flag('no_vllm_extensions')}",
    MismatchKind.NO_ENDPOINT: "the server lacks this endpoint; the scenario is skipped",
}
"""What the operator changes when a request was refused for what we sent (never the server's fault)."""
