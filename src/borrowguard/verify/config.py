"""What a verify run is asked to do: the target, its logs, the load, and the verdict's tolerance.

`VerifyConfig` owns every default (the CLI takes its defaults from here) and every rule about how the
settings go together; `validate()` raises ConfigError naming the setting, never a CLI flag (the CLI says
it with its own flag).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from borrowguard._text import display_url, without_password
from borrowguard.errors import ConfigError
from borrowguard.load.scenarios import CHAT_MIX, POOLING_MIX, ScenarioSettings

DEFAULT_HEALTH_PATH = "/health"
DEFAULT_DURATION = 30.0  # seconds per level, unless a request count bounds the run
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")  # visible ASCII: what a bearer token can be


@dataclass(frozen=True)
class VerifyConfig:
    url: str | None = None  # None: start the bundled reference server
    model: str | None = None
    api_key_env: str | None = None
    logs: list[Path] = field(default_factory=list)
    log_commands: list[str] = field(default_factory=list)
    health_path: str = DEFAULT_HEALTH_PATH
    # chat and pooling scenarios: the preflight keeps those the server serves
    scenario: ScenarioSettings = field(default_factory=lambda: ScenarioSettings(mix={**CHAT_MIX, **POOLING_MIX}))
    concurrency: int = 16
    # None: DEFAULT_DURATION, unless `requests` is given: then the run has no time limit
    duration: float | None = None
    requests: int | None = None
    ramp_up: float = 0.0
    timeout: float = 60.0
    sweep: list[int] | None = None
    max_error_rate: float = 0.0
    max_model_len: int | None = None  # overrides what the server reports (or does not)
    records: Path | None = None
    server_guard: bool | None = None  # the bundled server's guard; None: on. Given with `url`: refused
    server_workers: int = 4
    server_log: Path | None = None  # keep the bundled server's log here (default: a temporary file)
    server_start_timeout: float = 180.0

    def __post_init__(self) -> None:
        if self.duration is None and self.requests is None:
            object.__setattr__(self, "duration", DEFAULT_DURATION)  # frozen: set once, while it is made

    def validate(self) -> None:
        if self.concurrency < 1:
            raise ConfigError("concurrency", "{} must be at least 1")
        if self.requests is not None and self.requests < 1:
            raise ConfigError("requests", "{} must be at least 1")
        if self.duration is not None and not (math.isfinite(self.duration) and self.duration > 0):
            raise ConfigError("duration", "{} must be a finite time above zero")
        if not 0.0 <= self.max_error_rate <= 1.0:
            raise ConfigError("max_error_rate", "{} must be between 0 and 1 (0.01 = 1%)")
        if not (math.isfinite(self.timeout) and self.timeout > 0):
            raise ConfigError("timeout", "{} must be more than zero")
        if self.max_model_len is not None and self.max_model_len < 64:
            raise ConfigError("max_model_len", "{} must be at least 64 tokens")
        if not self.health_path.startswith("/"):
            raise ConfigError("health_path", f"{{}} must start with '/', got {self.health_path!r}")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ConfigError("url", f"{{}} must start with http:// or https://, got {display_url(self.url)!r}")
        if self.url is not None and self.server_guard is not None:
            raise ConfigError(
                "server_guard", "{} applies to the bundled server only; it cannot change a server at a URL"
            )
        if self.api_key_env is not None and not self.api_key:
            raise ConfigError(
                "api_key_env", f"{{}}: the environment variable {self.api_key_env} is not set or empty"
            )
        if self.api_key is not None and not _HEADER_SAFE.fullmatch(self.api_key):
            raise ConfigError(
                "api_key_env", f"{{}}: {self.api_key_env} holds characters an HTTP header cannot carry "
                "(a newline, a space, a control character)"
            )
        if self.url is not None and without_password(self.url)[1] is not None and self.api_key_env:
            raise ConfigError(
                "api_key_env", "{} and a user:password in the URL both set the Authorization header: give one"
            )
        for command in self.log_commands:
            if not command.strip():
                raise ConfigError("log_commands", "{}: an empty command")
        for path in self.logs:
            if not path.is_file():
                raise ConfigError("logs", f"{{}}: no such file: {path}")

    @property
    def guarded(self) -> bool:
        """Whether the bundled server runs with the guard (the default) or without (to watch it fail)."""
        return self.server_guard is not False

    @property
    def levels(self) -> list[int]:
        return list(self.sweep) if self.sweep else [self.concurrency]

    @property
    def api_key(self) -> str | None:
        """The key from the environment, without the newline a key file or `echo` leaves around it."""
        key = os.environ.get(self.api_key_env, "").strip() if self.api_key_env else ""
        return key or None
