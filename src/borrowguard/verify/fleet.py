"""Fleet verification: every replica loaded and watched at the same time, each with its own log source and
its own verdict; the fleet's verdict is the worst of them.

    targets = [parse_target("a=http://10.0.0.1:8000,log-cmd=kubectl logs -f pod/vllm-0"), ...]
    result = run_fleet(targets, base_config)   # one event loop, one Session per target

Loading a Kubernetes Service instead would spread the load over replicas and hide which one fails: a fleet
run addresses each replica by its own URL. Memory stays bounded per target (metrics are histograms and
counters; findings are sampled), and all targets share one event loop and one thread for the load.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from borrowguard._files import resolve_output
from borrowguard.errors import UserInputError
from borrowguard.verify.config import ConfigError, VerifyConfig
from borrowguard.verify.descriptors import ensure_descriptors
from borrowguard.verify.result import Verdict, VerifyResult
from borrowguard.verify.session import Progress, Session
from borrowguard.verify.signals import install_interrupts, terminate_as_interrupt
from borrowguard.verify.wording import flag

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SCHEMA = "borrowguard.verify-fleet/1"
MAX_TARGETS = 256
MAX_TARGETS_FILE = 1 << 20  # bytes: a fleet file is a few lines per target, not a stream (/dev/zero)
# Matched whole (fullmatch): `$` would also match before a trailing newline, and "a\n" would name a file.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# The fleet's verdict is its worst target's: a proven failure first, then a run that could not happen.
_SEVERITY = {Verdict.PASS: 0, Verdict.INCOMPLETE: 1, Verdict.ERROR: 2, Verdict.FAIL: 3}


@dataclass(frozen=True)
class Replica:
    """One server of a fleet (a `--target`): loaded at once with the others, with its own log and verdict."""

    name: str
    url: str
    logs: list[Path] = field(default_factory=list)
    log_commands: list[str] = field(default_factory=list)
    model: str | None = None


def parse_target(spec: str) -> Replica:
    """`NAME=URL[,log-cmd=CMD][,log=FILE][,model=NAME]` (a command holding commas needs --targets FILE)."""
    name, sep, rest = spec.partition("=")
    if not sep or not _NAME.fullmatch(name.strip()):
        raise ConfigError("targets", "{}: expected NAME=URL[,log-cmd=CMD][,log=FILE], got ",
                          detail=f"{spec!r} (NAME: letters, digits, '.', '_', '-')")
    url, *options = rest.split(",")
    target = Replica(name.strip(), url.strip())
    for option in options:
        key, sep, value = option.partition("=")
        key = key.strip()
        if not sep or not value.strip():
            raise ConfigError("targets", "{} ", detail=f"{name}: expected KEY=VALUE after the URL, got {option!r}")
        target = _apply(target, key, value.strip(), ("targets", f" {name}"))
    return target


def load_targets(path: Path) -> list[Replica]:
    """A TOML file of `[[target]]` tables with `name`, `url`, and optionally `log`, `log_cmd`, `model`."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_TARGETS_FILE + 1)  # bounded: the path may name a device or a FIFO
    except OSError as exc:
        raise _file_error(path, f"{exc.strerror or exc}") from None
    if len(raw) > MAX_TARGETS_FILE:
        raise _file_error(path, f"larger than {MAX_TARGETS_FILE >> 20} MiB; not a fleet file")
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise _file_error(path, f"not valid TOML: {exc}") from None
    tables = doc.get("target")
    if not isinstance(tables, list) or not tables:
        raise _file_error(path, "expected [[target]] tables with name and url")
    targets = []
    for i, table in enumerate(tables):
        where = f" {path}: target #{i + 1}"
        if not isinstance(table, dict) or not isinstance(table.get("name"), str) or not isinstance(
            table.get("url"), str
        ):
            raise ConfigError("targets_file", "{}", detail=f"{where}: needs name and url (strings)")
        if not _NAME.fullmatch(table["name"]):
            raise ConfigError("targets_file", "{}", detail=f"{where}: name {table['name']!r}: letters, digits, "
                              "'.', '_', '-' only")
        target = Replica(table["name"], table["url"])
        for key, value in table.items():
            if key in ("name", "url"):
                continue
            for item in value if isinstance(value, list) else [value]:
                if not isinstance(item, str):
                    raise ConfigError("targets_file", "{}", detail=f"{where}: {key} must be a string (or a list of "
                                      "strings)")
                target = _apply(target, key.replace("_", "-"), item, ("targets_file", where))
        targets.append(target)
    return targets


def _file_error(path: Path, problem: str) -> ConfigError:
    return ConfigError("targets_file", "{}", detail=f" {path}: {problem}")


def _apply(target: Replica, key: str, value: str, where: tuple[str, str]) -> Replica:
    """The target with one more KEY=VALUE; `where` is the setting it came in and which entry of it."""
    if key == "log":
        return dataclasses.replace(target, logs=[*target.logs, Path(value).expanduser()])
    if key == "log-cmd":
        return dataclasses.replace(target, log_commands=[*target.log_commands, value])
    if key == "model":
        return dataclasses.replace(target, model=value)
    setting, entry = where
    raise ConfigError(setting, "{}", detail=f"{entry}: unknown key {key!r} (known: log, log-cmd, model)")


# The base config's settings that each target brings its own of: given on the base too, one would be dropped.
_PER_TARGET = ("url", "logs", "log_commands", "server_guard", "server_log")


def check_base(base: VerifyConfig) -> None:
    """ConfigError naming a setting of `base` that a fleet run cannot take: each target has its own URL and
    logs, and a fleet loads servers at URLs, never the bundled one (before, run_fleet dropped them silently)."""
    for setting in _PER_TARGET:
        if getattr(base, setting) not in (None, []):
            raise ConfigError(setting, "{} cannot be combined with fleet targets (each target has its own)")


def check_targets(targets: list[Replica]) -> None:
    if not targets:
        raise ConfigError("targets", "give at least one {}")
    if len(targets) > MAX_TARGETS:
        raise UserInputError(f"at most {MAX_TARGETS} targets in one run")
    names = [t.name for t in targets]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise UserInputError(f"target names must be unique: {', '.join(duplicates)}")


@dataclass(frozen=True)
class FleetResult:
    verdict: Verdict
    targets: list[tuple[str, VerifyResult]]
    started_at: str = ""
    elapsed: float = 0.0
    interrupted: bool = False

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code

    def to_dict(self) -> dict[str, Any]:
        """The fleet's JSON document (borrowguard.verify.document)."""
        from borrowguard.verify.document import to_dict

        return to_dict(self)


def _per_target(path: Path | None, name: str) -> Path | None:
    """`records.jsonl` -> `records.NAME.jsonl`: one file per target, none clobbering another."""
    return None if path is None else path.with_name(f"{path.stem}.{name}{path.suffix}")


def worst(verdicts: list[Verdict]) -> Verdict:
    return max(verdicts, key=_SEVERITY.__getitem__) if verdicts else Verdict.ERROR


def run_fleet(
    targets: list[Replica], base: VerifyConfig, progress: Callable[[str, Progress], None] | None = None
) -> FleetResult:
    """Every target at once, in one event loop; blocks. SIGINT/SIGTERM end every target's load early.
    ConfigError for a base setting each target has its own of (check_base), or a target's bad setting."""
    check_base(base)
    check_targets(targets)
    configs = [
        dataclasses.replace(base, url=t.url, logs=list(t.logs), log_commands=list(t.log_commands),
                            model=t.model or base.model, records=_per_target(base.records, t.name))
        for t in targets
    ]
    for target, config in zip(targets, configs):
        try:
            config.validate()
        except ConfigError as exc:
            raise exc.for_target(target.name) from None
        if config.records is not None:  # r.NAME.jsonl: checked before the run, like --records itself
            try:
                resolve_output(config.records, flag("records"))
            except UserInputError as exc:
                raise UserInputError(f"target {target.name}: {exc}") from None
    ensure_descriptors(configs)
    with terminate_as_interrupt():
        return asyncio.run(_fleet(targets, configs, progress))


async def _fleet(
    targets: list[Replica], configs: list[VerifyConfig], progress: Callable[[str, Progress], None] | None
) -> FleetResult:
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    sessions = []
    for target, config in zip(targets, configs):
        report = (lambda p, name=target.name: progress(name, p)) if progress else None
        session = Session(config, report, own_signals=False)
        sessions.append(session)

    def interrupt() -> None:
        for session in sessions:
            session.interrupt()

    restore = install_interrupts(interrupt)
    try:
        results = await asyncio.gather(*(s.main() for s in sessions))
    finally:
        restore()
    named = [(t.name, r) for t, r in zip(targets, results)]
    return FleetResult(
        verdict=worst([r.verdict for r in results]),
        targets=named,
        started_at=started_at,
        elapsed=time.perf_counter() - t0,
        interrupted=any(s.interrupted for s in sessions),
    )

