"""The exception hierarchy. The CLI turns a UserInputError into a message and exit 2, never a traceback."""


class BorrowguardError(Exception):
    """Base class of every error borrowguard raises on its own account."""


class UserInputError(BorrowguardError):
    """Bad input from the user: a missing file, an unparsable snapshot, a wrong option value."""


class GuardError(BorrowguardError):
    """The guard cannot take hold of an object (not a fast tokenizer, unsupported version...)."""
