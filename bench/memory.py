"""Resident memory of the bench's own process, the same for every bench script.

    from memory import rss_mb, settled_rss_mb
"""

from __future__ import annotations

import os


def rss_mb() -> float:
    """Resident set size now, in MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def settled_rss_mb() -> float:
    """RSS once the calls in flight are gone and freed memory went back to the system: what a design keeps
    (copies, caches), not its working set."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # give freed arenas back, or they count as "kept"
    except OSError:
        pass
    return rss_mb()
