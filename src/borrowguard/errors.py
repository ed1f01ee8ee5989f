"""The exception hierarchy. The CLI turns a UserInputError into a message and exit 2, never a traceback."""

from __future__ import annotations


class BorrowguardError(Exception):
    """Base class of every error borrowguard raises on its own account."""


class UserInputError(BorrowguardError):
    """Bad input from the user: a missing file, an unparsable snapshot, a wrong option value."""


class ConfigError(UserInputError):
    """A setting out of range, or settings that do not go together.

    `setting` is the library's name for it (a VerifyConfig field, a run_repro keyword...); `template` says
    the problem with `{}` where the setting's name goes, so that a front end can name it its own way
    (`said_as("--concurrency")`; the CLI says `--` and the setting with dashes unless it words it otherwise).
    """

    def __init__(self, setting: str, template: str, target: str | None = None, detail: str = "") -> None:
        self.setting = setting
        self.template = template
        self.detail = detail  # said after the template as it is (it may quote the user's text, braces too)
        self.target = target  # the fleet target whose settings these are
        super().__init__(self.said_as(setting))

    def said_as(self, name: str) -> str:
        text = self.template.format(name) + self.detail
        return f"target {self.target}: {text}" if self.target else text

    def for_target(self, target: str) -> ConfigError:
        return ConfigError(self.setting, self.template, target, self.detail)


class GuardError(BorrowguardError):
    """The guard cannot take hold of an object (not a fast tokenizer, unsupported version...)."""
