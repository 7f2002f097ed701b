"""Files written atomically: what a reader (or a resumed run) sees is the old file or the new one, never half."""

from __future__ import annotations

import os

__all__ = ["atomic_write"]


def atomic_write(path, write, mode="w"):
    """``write(fh)`` into ``path`` through a temporary file in its folder, flushed to disk, then renamed over it."""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, mode) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def process_alive(pid):
    """Whether process ``pid`` runs on this machine (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
