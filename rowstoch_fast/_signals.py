"""Ctrl-C (SIGINT), SIGTERM and SIGHUP held for a while: the handlers put in and put back, which held signal goes first,
and a set of files written whole (:func:`signals_held`). The runner's agreements under MPI hold them the same way
(:mod:`rowstoch_fast.runner`)."""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["hold", "put_back", "first", "signals_held", "sigterm_as_interrupt"]

#: The signals held: a terminal's Ctrl-C, a job scheduler's SIGTERM and a closed terminal's SIGHUP (an ssh
#: session that dropped had ended ``rowstoch run`` with nothing written, helper 185; POSIX only).
HELD = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ())


def hold(handler):
    """``handler`` for each of :data:`HELD` that is not ignored (an ignored one stays ignored): ``{signum: the
    handler it replaced}``, for :func:`put_back`."""
    return {signum: signal.signal(signum, handler) for signum in HELD if signal.getsignal(signum) is not signal.SIG_IGN}


def put_back(previous):
    """The handlers ``previous`` (``{signum: handler}``) put back; None (a handler not set from Python) is Python's
    own: KeyboardInterrupt for SIGINT, the default for the others."""
    for signum, handler in previous.items():
        signal.signal(signum, signal.default_int_handler if handler is None and signum == signal.SIGINT
                      else signal.SIG_DFL if handler is None else handler)


def first(held):
    """The held signal to hand on: the largest number, SIGTERM (15), then Ctrl-C's SIGINT (2), then SIGHUP (1) (a
    scheduler's stop is the one that ends the process; the order the processes of an MPI run agree on, by the
    largest), None where none is held."""
    return max(held) if held else None


@contextlib.contextmanager
def signals_held():
    """Ctrl-C (SIGINT), SIGTERM and SIGHUP held while the block runs (a set of files it writes together), then handed to
    the handlers they would have met: the first held one (:func:`first`). A comparison's outputs cut by a
    scheduler's SIGTERM were new tables beside the earlier figure and settings. Where the block raises, its error
    goes on and the held signal is dropped (the error ends the command). The main thread only; a signal ignored
    stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = []
    previous = hold(lambda signum, frame: held.append(signum))
    try:
        yield
    except BaseException:  # (the block's own error is what is said: a held signal raised here would replace it,
        # "interrupted" in place of a full disk)
        held.clear()
        raise
    finally:
        put_back(previous)
        if held:
            signal.raise_signal(first(held))


@contextlib.contextmanager
def sigterm_as_interrupt(before_ending=None):
    """A SIGTERM (what a job scheduler or ``timeout`` sends) that the program left to its default raised as
    KeyboardInterrupt while the block runs, as Ctrl-C is, so that the run in progress saves its checkpoint; once the
    block is over the process ends by it, as the default would have (``before_ending()`` called first: under MPI,
    the ranks wait for each other, as mpiexec ends them all once one ends by a signal). A script's loop of
    comparisons had gone on to the next one; a run had ended at once, saving nothing. A handler of the program's
    own (the command line's, which raises KeyboardInterrupt and counts SIGTERM apart from Ctrl-C) is left to
    decide, and an ignored SIGTERM stays ignored. The main thread only; nested, the outermost ends the process."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        yield
        return
    got = []

    def interrupt(signum, frame):
        got.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if got:  # (the default's: the process ends, as the signal asked)
            try:
                if before_ending is not None:
                    before_ending()
            finally:
                signal.raise_signal(signal.SIGTERM)
