"""The `borrowguard` console script: a thin layer over the library.

Each subcommand lives in its own module under `borrowguard.cli` and is imported only when it runs,
so `borrowguard --help` and `borrowguard doctor` stay fast and import nothing heavy.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, NoReturn

import click

from borrowguard._version import __version__
from borrowguard.cli._common import silence_stdout
from borrowguard.errors import ConfigError, UserInputError
from borrowguard.exit_codes import ExitCode

# name -> (module, attribute, one-line help). The help is here so `--help` needs no imports.
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "doctor": ("borrowguard.cli.doctor", "doctor", "Check this environment against known-bad versions."),
    "scan": ("borrowguard.cli.scan", "scan", "Diagnose server logs: known failure signatures and remedies."),
    "repro": (
        "borrowguard.cli.repro",
        "repro",
        "Run the tokenizer race on this stack: crash, corruption or safe.",
    ),
    "serve": (
        "borrowguard.cli.serve",
        "serve",
        "Start the bundled reference server (real front end, stub engine).",
    ),
    "verify": (
        "borrowguard.cli.verify",
        "verify",
        "Load a server with image/tool/text chats and give a verdict.",
    ),
    "run": (
        "borrowguard.cli.run",
        "run",
        "Run any command with the guard in every Python process it starts.",
    ),
    "explain": ("borrowguard.cli.explain", "explain", "Explain a finding id: what, versions, remedies, references."),
    "rules": (
        "borrowguard.cli.rules",
        "rules",
        "Export log signatures as Loki/Prometheus, Elasticsearch, Vector rules; the troubleshooting page.",
    ),
}


# Distributions imported under another name than theirs (the rest: lower case, '-' -> '_').
_MODULE_OF = {"pillow": "PIL"}
_NOT_FOR_USERS = frozenset({"all", "dev"})  # extras that only gather others, or the developers' own


def _extra_of(module: str) -> str | None:
    """The extra of our distribution (pyproject's optional-dependencies, read from its metadata) that
    installs `module`: the first that lists it, as `pip install 'borrowguard[EXTRA]'` should name."""
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    try:
        requires = metadata.requires("borrowguard") or []
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return None
    for spec in requires:
        try:
            req = Requirement(spec)
        except InvalidRequirement:
            continue
        name = req.name.lower()
        if req.marker is None or _MODULE_OF.get(name, name.replace("-", "_")) != module:
            continue
        for extra in _extras(str(req.marker)):
            if extra not in _NOT_FOR_USERS:
                return extra
    return None


def _extras(marker: str) -> list[str]:
    return [part.split("==", 1)[1].strip().strip("'\"") for part in marker.split(" or ") if "extra ==" in part]


class LazyGroup(click.Group):
    """A group whose subcommands are imported on use, so that `--help` imports nothing heavy."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = _COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module, attr, _ = entry
        return getattr(importlib.import_module(module), attr)

    def invoke(self, ctx: click.Context) -> Any:
        # Caught here, before click's own handler turns a closed pipe into exit 1 ("warnings").
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            silence_stdout()
            sys.exit(ExitCode.BROKEN_PIPE)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, _COMMANDS[name][2]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="borrowguard")
def cli() -> None:
    """borrowguard — ends "Already borrowed" and silent settings leaks in HF fast tokenizers.

    \b
    Fix:       import borrowguard; borrowguard.install()   (vLLM: automatic via plugin)
               borrowguard run -- COMMAND...               (any other Python server)
    Diagnose:  borrowguard doctor | scan LOG... | repro
    Verify:    borrowguard verify [--url URL --log FILE]   (no --url: the bundled server)
    """


def main(argv: list[str] | None = None) -> Any:
    try:
        return cli.main(args=argv, prog_name="borrowguard", standalone_mode=True)
    except ConfigError as exc:  # the library names its setting; here it is the flag that set it
        _fail(exc.said_as("--" + exc.setting.replace("_", "-")))
    except UserInputError as exc:  # a user mistake is a message, never a traceback
        _fail(str(exc))
    except ModuleNotFoundError as exc:
        top = (exc.name or "").partition(".")[0]
        extra = _extra_of(top)
        if extra is None:
            raise
        _fail(f"this command needs {top}, which is not installed: pip install 'borrowguard[{extra}]'")


def _fail(message: str) -> NoReturn:
    click.echo(f"borrowguard: error: {message}", err=True)
    sys.exit(ExitCode.ERROR)
