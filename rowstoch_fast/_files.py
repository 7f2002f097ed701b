"""Files written atomically: what a reader (or a resumed run) sees is the old file or the new one, never half; and
a set of files written whole (:func:`signals_held`): a signal does not leave some new and some old."""

from __future__ import annotations

import contextlib
import os

__all__ = ["atomic_write", "signals_held"]


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


@contextlib.contextmanager
def signals_held():
    """Ctrl-C (SIGINT) and SIGTERM held while the block runs (a set of files it writes together), then handed to
    the handlers they would have met: the first held one, SIGTERM first. A comparison's outputs cut by a
    scheduler's SIGTERM were new tables beside the earlier figure and settings. Where the block raises, its error
    goes on and the held signal is dropped (the error ends the command). The main thread only; a signal ignored
    stays ignored."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held, previous = [], {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, lambda signum, frame: held.append(signum))
    try:
        yield
    except BaseException:  # (the block's own error is what is said: a held signal raised here would replace it,
        # "interrupted" in place of a full disk)
        held.clear()
        raise
    finally:
        for signum, handler in previous.items():  # (None: a handler not set from Python; Python's own then)
            signal.signal(signum, signal.default_int_handler if handler is None and signum == signal.SIGINT
                          else signal.SIG_DFL if handler is None else handler)
        if held:
            signal.raise_signal(signal.SIGTERM if signal.SIGTERM in held else held[0])
