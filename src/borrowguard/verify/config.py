"""What a verify run is asked to do: the target, its logs, the load, and the verdict's tolerance."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from borrowguard.errors import UserInputError
from borrowguard.load.scenarios import ScenarioSettings

DEFAULT_HEALTH_PATH = "/health"


@dataclass
class VerifyConfig:
    url: str | None = None  # None: start the bundled reference server
    model: str | None = None
    api_key_env: str | None = None
    logs: list[Path] = field(default_factory=list)
    log_commands: list[str] = field(default_factory=list)
    health_path: str = DEFAULT_HEALTH_PATH
    scenario: ScenarioSettings = field(default_factory=ScenarioSettings)
    concurrency: int = 16
    duration: float | None = 30.0
    requests: int | None = None
    ramp_up: float = 0.0
    timeout: float = 60.0
    sweep: list[int] | None = None
    max_error_rate: float = 0.0
    max_model_len: int | None = None  # overrides what the server reports (or does not)
    records: Path | None = None
    server_guard: bool = True
    server_workers: int = 4
    server_log: Path | None = None  # keep the bundled server's log here (default: a temporary file)
    server_start_timeout: float = 180.0

    def validate(self) -> None:
        if self.concurrency < 1:
            raise UserInputError("--concurrency must be at least 1")
        if self.requests is not None and self.requests < 1:
            raise UserInputError("--requests must be at least 1")
        if self.duration is None and self.requests is None:
            raise UserInputError("give --duration or --requests")
        if self.duration is not None and not (math.isfinite(self.duration) and self.duration > 0):
            raise UserInputError("--duration must be a finite time above zero")
        if not 0.0 <= self.max_error_rate <= 1.0:
            raise UserInputError("--max-error-rate must be between 0 and 1 (0.01 = 1%)")
        if not (math.isfinite(self.timeout) and self.timeout > 0):
            raise UserInputError("--timeout must be more than zero")
        if self.max_model_len is not None and self.max_model_len < 64:
            raise UserInputError("--max-model-len must be at least 64 tokens")
        if not self.health_path.startswith("/"):
            raise UserInputError(f"--health-path must start with '/', got {self.health_path!r}")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise UserInputError(f"--url must start with http:// or https://, got {self.url!r}")
        if self.api_key_env is not None and not os.environ.get(self.api_key_env):
            raise UserInputError(
                f"--api-key-env: the environment variable {self.api_key_env} is not set or empty"
            )
        for command in self.log_commands:
            if not command.strip():
                raise UserInputError("--log-cmd: an empty command")
        for path in self.logs:
            if not path.is_file():
                raise UserInputError(f"--log: no such file: {path}")

    @property
    def levels(self) -> list[int]:
        return list(self.sweep) if self.sweep else [self.concurrency]

    @property
    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def to_dict(self) -> dict[str, Any]:
        s = self.scenario
        return {
            "url": self.url,
            "model": self.model,
            "api_key_env": self.api_key_env,  # the name only; the key is never written anywhere
            "logs": [str(p) for p in self.logs],
            "log_commands": self.log_commands,
            "health_path": self.health_path,
            "mix": s.mix,
            "image_sizes": [f"{w}x{h}" for w, h in s.image_sizes],
            "images_per_request": s.images_per_request,
            "tool_result_bytes": s.tool_result_bytes,
            "vllm_extensions": s.vllm_extensions,
            "stream": s.stream,
            "concurrency": self.concurrency,
            "duration_s": self.duration,
            "requests": self.requests,
            "ramp_up_s": self.ramp_up,
            "timeout_s": self.timeout,
            "sweep": self.sweep,
            "max_error_rate": self.max_error_rate,
            "max_model_len": self.max_model_len,
            "records": str(self.records) if self.records else None,
            "server_guard": self.server_guard if self.url is None else None,
        }
