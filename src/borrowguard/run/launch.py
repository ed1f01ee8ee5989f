"""Parent side of `borrowguard run`: work out what the command is, prepare its environment, exec it.

The command replaces this process (exec), like `opentelemetry-instrument` and `ddtrace-run`: signals sent
to it (SIGINT, SIGTERM, any other), its exit code and its stdin/stdout/stderr are the command's own, and no
borrowguard process stays in between. Only the child's environment changes — PYTHONPATH gains the
bootstrap directory — so nothing is installed or edited anywhere.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from borrowguard.errors import UserInputError
from borrowguard.run.hook import BOOTSTRAP_ENV, DISABLE_ENV, PACKAGE_ENV, QUIET_ENV, flag

__all__ = [
    "BOOTSTRAP_DIR",
    "CommandNotFoundError",
    "CommandNotRunnableError",
    "Plan",
    "execute",
    "find_python",
    "plan",
]

BOOTSTRAP_DIR = Path(__file__).resolve().parent / "bootstrap"
PACKAGE_DIR = Path(__file__).resolve().parent.parent
_PYTHON_NAME = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?[a-z]?(\.exe)?$")
# pip writes `#!/bin/sh` + `'''exec' /long/path/python "$0" "$@"` when the interpreter path is too long.
_SH_EXEC = re.compile(rb"^'''exec' +\"?([^\"\s]+)")
_SHEBANG_BYTES = 1024
_CHECK_TIMEOUT_S = 20.0


class CommandNotFoundError(UserInputError):
    """The executable does not exist on PATH (exit 127, as a shell would)."""


class CommandNotRunnableError(UserInputError):
    """The executable exists but cannot be run (exit 126, as a shell would)."""


@dataclass(frozen=True)
class Plan:
    """What `execute` will run, and what the user should be told first."""

    argv: tuple[str, ...]
    executable: str
    env: Mapping[str, str]
    python: str | None
    """The interpreter that will run the command, when it is a Python program."""
    guarded: bool
    """False when BORROWGUARD_DISABLE is set: the command runs with its environment untouched."""
    messages: tuple[str, ...] = field(default=())
    """Warnings and notes for stderr (never fatal)."""


def plan(
    command: Sequence[str],
    *,
    quiet: bool = False,
    environ: Mapping[str, str] | None = None,
    check_transformers: bool = True,
) -> Plan:
    """Resolve `command` and build the child's environment. Raises CommandNotFoundError (127) and
    CommandNotRunnableError (126); a non-Python command or a Python without transformers only warns."""
    if not command:
        example = "borrowguard run -- python app.py"
        raise UserInputError(f"nothing to run: give a command after `--`, e.g. {example}")
    env = dict(os.environ if environ is None else environ)
    executable = _resolve(command[0], env)
    messages: list[str] = []
    python = find_python(executable, env)
    disabled = flag(DISABLE_ENV, env)
    quiet = quiet or flag(QUIET_ENV, env)

    if disabled:
        if not quiet:
            messages.append(f"borrowguard: {DISABLE_ENV} is set; running the command without the guard")
        return Plan(tuple(command), executable, env, python, False, tuple(messages))

    if python is None:
        messages.append(
            f"borrowguard: warning: {command[0]} does not look like a Python program; the guard will reach "
            "only the Python processes it starts"
        )
    elif check_transformers and _lacks_transformers(python, env):
        messages.append(
            f"borrowguard: warning: transformers is not importable by {python}; there is nothing to guard "
            "in that environment (the command runs unchanged)"
        )

    env[PACKAGE_ENV] = str(PACKAGE_DIR)
    env[BOOTSTRAP_ENV] = str(BOOTSTRAP_DIR)
    entries = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(BOOTSTRAP_DIR) not in entries:  # nested `borrowguard run`: once is enough
        entries.insert(0, str(BOOTSTRAP_DIR))
    env["PYTHONPATH"] = os.pathsep.join(entries)
    if quiet:
        env[QUIET_ENV] = "1"
    return Plan(tuple(command), executable, env, python, True, tuple(messages))


def execute(p: Plan) -> NoReturn:
    """Replace this process with the command. Raises CommandNotRunnableError if the exec fails."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    try:
        os.execve(p.executable, list(p.argv), dict(p.env))
    except OSError as exc:
        raise CommandNotRunnableError(f"cannot run {p.argv[0]}: {exc.strerror or exc}") from None
    raise AssertionError("unreachable")  # pragma: no cover


def find_python(executable: str, env: Mapping[str, str]) -> str | None:
    """The Python interpreter `executable` runs under: itself, or its shebang's; None if not Python."""
    if _PYTHON_NAME.match(os.path.basename(executable)):
        return executable
    try:
        with open(executable, "rb") as fh:
            head = fh.read(_SHEBANG_BYTES)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    lines = head.splitlines()
    words = lines[0][2:].decode("utf-8", "replace").split()
    if not words:
        return None
    interpreter = words[0]
    if os.path.basename(interpreter) == "env" and len(words) > 1:
        args = [w for w in words[1:] if not w.startswith("-")]
        interpreter = (shutil.which(args[0], path=env.get("PATH")) or args[0]) if args else interpreter
    if _PYTHON_NAME.match(os.path.basename(interpreter)):
        return interpreter
    if os.path.basename(interpreter) == "sh":  # pip's long-path form
        for line in lines[1:3]:
            match = _SH_EXEC.match(line)
            if match and _PYTHON_NAME.match(os.path.basename(match.group(1).decode("utf-8", "replace"))):
                return match.group(1).decode("utf-8", "replace")
    return None


def _resolve(name: str, env: Mapping[str, str]) -> str:
    if os.sep in name or (os.altsep and os.altsep in name):
        path = name
        if not os.path.exists(path):
            raise CommandNotFoundError(f"command not found: {name}")
    else:
        found = shutil.which(name, path=env.get("PATH", os.defpath))
        if found is None:
            raise CommandNotFoundError(f"command not found: {name} (not on PATH)")
        path = found
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise CommandNotRunnableError(f"cannot run {name}: not an executable file")
    return path


def _lacks_transformers(python: str, env: Mapping[str, str]) -> bool:
    """Ask the child's interpreter, in the child's environment (without our bootstrap), about transformers."""
    probe = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('transformers') else 3)"
    try:
        done = subprocess.run(
            [python, "-c", probe],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=_CHECK_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False  # cannot tell: say nothing rather than something wrong
    return done.returncode == 3
