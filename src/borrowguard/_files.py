"""Writing what the user asked for, where they asked, without ever clobbering something else.

An output path is checked before any work starts (a run of minutes must not end in "no such directory"),
written atomically (an interrupted run leaves no half file), and written *through* a symlink to the regular
file it names; a device, FIFO, directory or socket is refused, never replaced.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from borrowguard.errors import UserInputError


def resolve_output(path: str | os.PathLike[str], option: str) -> Path:
    """The regular file `path` names (through symlinks), checked writable; UserInputError otherwise."""
    target = Path(os.path.realpath(path))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UserInputError(f"{option} {path}: {exc.strerror or exc}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, FIFO or socket)"
        raise UserInputError(f"{option} {path}: {kind}; give the path of a regular file")
    parent = target.parent
    if not parent.is_dir():
        raise UserInputError(f"{option} {path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (st is not None and not os.access(target, os.W_OK)):
        raise UserInputError(f"{option} {path}: not writable")
    return target


def write_atomic(path: str | os.PathLike[str], text: str, option: str = "output") -> Path:
    """Write `text` to the regular file `path` names: a temporary file beside it, then a rename."""
    target = resolve_output(path, option)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if target.exists():
            os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
