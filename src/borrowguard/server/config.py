"""The server's settings, shared by the CLI, the launcher and the app."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from borrowguard.data import CHATML, tokenizer_path
from borrowguard.errors import ConfigError

DEFAULT_MODEL = "borrowguard-stub"
DEFAULT_PORT = 8000
# Set by the process that starts the server with a pipe on its stdin (verify): that end of the pipe closes
# when the starter dies, however it dies (SIGKILL included), and the server then stops instead of
# listening on as an orphan.
WATCH_STDIN_ENV = "BORROWGUARD_SERVE_WATCH_STDIN"


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    tokenizer: Path | None = None  # None: the bundled ChatML tokenizer
    workers: int = 4
    guard: bool = True
    token_delay_ms: float = 0.0
    log_file: Path | None = None
    max_body_mb: float = 20.0
    allow_remote_images: bool = False
    model: str | None = None
    # How the server's answers name a setting ("start the server with allow_remote_images"): `borrowguard
    # serve` gives its flags, so that what a client reads says what its operator types; absent, the setting.
    setting_names: Mapping[str, str] = field(default_factory=dict, compare=False)

    def said(self, setting: str) -> str:
        """The name of `setting` in what the server answers."""
        return self.setting_names.get(setting, setting)

    def __post_init__(self) -> None:
        """ConfigError naming the setting (the CLI says the flag that set it)."""
        if not 0 <= self.port <= 65535:
            raise ConfigError("port", f"{{}} must be between 0 and 65535, got {self.port}")
        if self.workers < 1:
            raise ConfigError("workers", f"{{}} must be at least 1, got {self.workers}")
        if self.token_delay_ms < 0:
            raise ConfigError("token_delay_ms", f"{{}} must be >= 0, got {self.token_delay_ms:g}")
        if self.max_body_mb <= 0:
            raise ConfigError("max_body_mb", f"{{}} must be positive, got {self.max_body_mb:g}")
        if self.model is not None and not self.model.strip():
            raise ConfigError("model", "{} must not be empty")

    @property
    def tokenizer_dir(self) -> Path:
        return self.tokenizer if self.tokenizer is not None else tokenizer_path(CHATML)

    @property
    def model_name(self) -> str:
        if self.model:
            return self.model
        if self.tokenizer is None:
            return DEFAULT_MODEL
        return self.tokenizer.resolve().name or DEFAULT_MODEL

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * 1024 * 1024)
