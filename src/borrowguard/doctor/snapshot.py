"""The environment snapshot: what doctor knows about an environment, and its JSON form.

A snapshot comes from this process (`collect`), from `doctor --capture` JSON, or from the text of
`vllm collect-env` / `python -m torch.utils.collect_env`. The last two can be hostile or huge, so
everything read back is type-checked, length-capped, stripped of control characters and redacted again.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from packaging.utils import canonicalize_name

from borrowguard.errors import UserInputError

SCHEMA = "borrowguard.snapshot/1"
REDACTED = "<redacted>"
MAX_STRING = 400
# Caps on what a snapshot may hold; a real environment is far below each.
MAX_PACKAGES = 5000
MAX_REQUIRES = 1000
MAX_ENV = 500
MAX_GPUS = 256
MAX_NOTES = 50

_ENV_PREFIXES = ("VLLM_", "NCCL_", "BORROWGUARD_")
_ENV_NAMES = frozenset({"TOKENIZERS_PARALLELISM"})
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_MACHINES = {
    "aarch64": "aarch64",
    "arm64": "aarch64",
    "armv8": "aarch64",
    "x86_64": "x86_64",
    "amd64": "x86_64",
    "x64": "x86_64",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
}


def normalize_machine(machine: str | None) -> str | None:
    """One name per architecture: arm64 and aarch64 are the same CPU for every rule."""
    if not machine:
        return None
    return _MACHINES.get(machine.strip().lower(), machine.strip().lower())


def is_relevant_env(name: str) -> bool:
    return name.startswith(_ENV_PREFIXES) or name in _ENV_NAMES


def is_secret_name(name: str) -> bool:
    """True for names whose values must never be shown. TOKENIZER(S) is a word of its own, not a token."""
    upper = name.upper().replace("TOKENIZER", "")
    return any(word in upper for word in _SECRET_WORDS)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {name: (REDACTED if is_secret_name(name) else value) for name, value in env.items()}


def clean(value: str, limit: int = MAX_STRING) -> str:
    """A string safe to print: no control or escape characters, at most `limit` characters."""
    text = "".join(
        "?" if unicodedata.category(ch) in ("Cc", "Cf") and ch != "\t" else ch for ch in value[: limit + 1]
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Snapshot:
    """Facts about one environment. None means "not known", which never fires a rule.

    `packages` maps canonical names to versions; a name mapped to None is known to be absent, a name
    not in the mapping is unknown (collect-env texts list only some packages).
    """

    source: str = "live"
    python_version: str | None = None
    python_implementation: str | None = None
    system: str | None = None
    os: str | None = None
    machine: str | None = None
    packages: Mapping[str, str | None] = field(default_factory=dict)
    requires: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    nccl_version: str | None = None
    nccl_source: str | None = None
    cuda: Mapping[str, str] = field(default_factory=dict)
    gpus: tuple[str, ...] = ()
    plugin_registered: bool | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    borrowguard_version: str | None = None
    server: Mapping[str, Any] = field(default_factory=dict)
    """How the server runs (vLLM's start-up facts such as renderer_num_workers, from `doctor --log`);
    empty when not known."""

    def version(self, package: str) -> str | None:
        return self.packages.get(canonicalize_name(package))

    def knows(self, package: str) -> bool:
        return canonicalize_name(package) in self.packages

    @property
    def lacks(self) -> tuple[str, ...]:
        """What a verdict needs and this snapshot does not say; empty when it says enough. With neither
        the transformers nor the tokenizers version (a collect-env paste cut short, a hand-made snapshot)
        whether the tokenizer race applies cannot be told, so "no known problem" would be a guess.
        (`collect` always knows both, installed or not; a vLLM report lists transformers.)"""
        needed = ("transformers", "tokenizers")
        return () if any(self.knows(name) for name in needed) else needed

    def lacks_note(self) -> str | None:
        """The note that says what is missing, or None."""
        if not self.lacks:
            return None
        # collect-env's package list ("Versions of relevant libraries") comes after the system, GPU and
        # CPU sections: a paste without any package but those named in its header lines was cut before it.
        listed = set(self.packages) - {"torch", "vllm"}
        where = "no package list at all" if not listed else "no '[pip3] transformers==...' line"
        return (
            f"incomplete: no {' or '.join(self.lacks)} version ({where}: a collect-env paste cut short?), "
            "so whether the tokenizer race applies cannot be told; give the whole report, or run "
            "`borrowguard doctor --capture > env.json` on that machine"
        )

    def with_notes(self, *notes: str) -> Snapshot:
        return replace(self, notes=(*self.notes, *notes)[:MAX_NOTES])

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "source": self.source,
            "borrowguard_version": self.borrowguard_version,
            "python": {"version": self.python_version, "implementation": self.python_implementation},
            "platform": {"system": self.system, "os": self.os, "machine": self.machine},
            "packages": dict(sorted(self.packages.items())),
            "requires": {name: list(reqs) for name, reqs in sorted(self.requires.items())},
            "nccl": {"version": self.nccl_version, "source": self.nccl_source},
            "cuda": dict(self.cuda),
            "gpus": list(self.gpus),
            "guard": {"plugin_registered": self.plugin_registered},
            "env": dict(sorted(self.env.items())),
            "notes": list(self.notes),
            "server": dict(self.server),
        }

    @classmethod
    def from_dict(cls, data: Any) -> Snapshot:
        """Validate a snapshot read from an untrusted file; raise UserInputError naming the bad field."""
        if not isinstance(data, Mapping):
            raise UserInputError("not a borrowguard snapshot: the JSON document is not an object")
        if "environment" in data and "findings" in data:  # the output of `doctor --json` works too
            data = data["environment"]
            if not isinstance(data, Mapping):
                raise UserInputError("snapshot field 'environment' must be an object")
        if data.get("schema") != SCHEMA:
            raise UserInputError(
                f"not a borrowguard snapshot (field 'schema' is not {SCHEMA!r}); "
                "create one with `borrowguard doctor --capture > env.json`"
            )
        r = _Reader(data)
        env = r.str_map("env", MAX_ENV)
        return cls(
            source="snapshot",
            borrowguard_version=r.opt_str("borrowguard_version"),
            python_version=r.opt_str("python", "version"),
            python_implementation=r.opt_str("python", "implementation"),
            system=r.opt_str("platform", "system"),
            os=r.opt_str("platform", "os"),
            machine=normalize_machine(r.opt_str("platform", "machine")),
            packages=MappingProxyType(
                {
                    canonicalize_name(k): v
                    for k, v in r.str_map("packages", MAX_PACKAGES, nullable=True).items()
                }
            ),
            requires=MappingProxyType(r.requires()),
            nccl_version=r.opt_str("nccl", "version"),
            nccl_source=r.opt_str("nccl", "source"),
            cuda=MappingProxyType(r.str_map("cuda", 20)),
            gpus=tuple(r.str_list("gpus", MAX_GPUS)),
            plugin_registered=r.opt_bool("guard", "plugin_registered"),
            env=MappingProxyType(redact_env({k: v for k, v in env.items() if _ENV_NAME.fullmatch(k)})),
            notes=tuple(r.str_list("notes", MAX_NOTES)),
            server=MappingProxyType(r.server()),
        )


class _Reader:
    """Typed access to an untrusted JSON object; every error names the field."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data

    def _get(self, *path: str) -> Any:
        value: Any = self.data
        for i, key in enumerate(path):
            if value is None:
                return None
            if not isinstance(value, Mapping):
                raise self._error(path[:i], "must be an object")
            value = value.get(key)
        return value

    @staticmethod
    def _error(path: tuple[str, ...], message: str) -> UserInputError:
        return UserInputError(f"snapshot field {'.'.join(path)!r} {message}")

    def opt_str(self, *path: str) -> str | None:
        value = self._get(*path)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._error(path, "must be a string or null")
        return clean(value)

    def opt_bool(self, *path: str) -> bool | None:
        value = self._get(*path)
        if value is not None and not isinstance(value, bool):
            raise self._error(path, "must be true, false or null")
        return value

    def str_map(self, key: str, limit: int, nullable: bool = False) -> dict[str, Any]:
        value = self._get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self._error((key,), "must be an object")
        if len(value) > limit:
            raise self._error((key,), f"has {len(value)} entries; at most {limit} are accepted")
        out: dict[str, Any] = {}
        for name, item in value.items():
            if item is None and nullable:
                out[clean(name)] = None
            elif isinstance(item, str):
                out[clean(name)] = clean(item)
            else:
                raise self._error((key, name), "must be a string" + (" or null" if nullable else ""))
        return out

    def str_list(self, key: str, limit: int) -> list[str]:
        value = self._get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._error((key,), "must be a list of strings")
        if len(value) > limit:
            raise self._error((key,), f"has {len(value)} entries; at most {limit} are accepted")
        return [clean(v) for v in value]

    def server(self) -> dict[str, Any]:
        value = self._get("server")
        if value is None:
            return {}
        if not isinstance(value, Mapping) or len(value) > 20:
            raise self._error(("server",), "must be an object of server facts")
        out: dict[str, Any] = {}
        for name, item in value.items():
            if isinstance(item, bool) or not isinstance(item, (int, str)):
                raise self._error(("server", name), "must be a number or a string")
            out[clean(str(name), 60)] = clean(item) if isinstance(item, str) else item
        return out

    def requires(self) -> dict[str, tuple[str, ...]]:
        value = self._get("requires")
        if value is None:
            return {}
        if not isinstance(value, Mapping) or len(value) > 50:
            raise self._error(("requires",), "must be an object of package -> list of requirements")
        out: dict[str, tuple[str, ...]] = {}
        for name, reqs in value.items():
            if (
                not isinstance(reqs, list)
                or not all(isinstance(r, str) for r in reqs)
                or len(reqs) > MAX_REQUIRES
            ):
                raise self._error(("requires", name), f"must be a list of at most {MAX_REQUIRES} strings")
            out[canonicalize_name(name)] = tuple(clean(r) for r in reqs)
        return out
