"""The methods of a plan in parallel processes (``jobs``): :func:`execute_in_processes`.

Each worker is a fresh interpreter (``spawn``: no OpenMP runtime is forked mid-flight) that reads the plan once
(from a file: :func:`_plan_file`), runs its share of the cores' threads, and takes methods from a queue until there
are none left or the comparison is stopped. Every method's run is seeded as in a serial run and no kernel's result
depends on the thread count, so the outcomes are a serial run's. A Ctrl-C or SIGTERM reaches the workers (the terminal's signal goes to the
whole process group; a signal to this process alone is passed on): each stops its run as the serial one would
(the evaluation saves its checkpoint) and reports what it has.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import signal
import time

from .._files import process_alive
from .._progress import bar as progress_bar
from .._signals import signals_held, sigterm_as_interrupt

__all__ = ["execute_in_processes", "default_jobs", "cores"]

#: Seconds the workers get to report after an interruption before they are terminated.
GRACE = 60.0


def cores():
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def default_jobs():
    """The default of ``jobs`` (``rowstoch compare --jobs``): the environment variable ``ROWSTOCH_JOBS`` where it is
    set (a positive integer: e.g. 1 where something else runs a process per core already, a test runner's workers
    or a job array), else the cores this process may use.

    Raises
    ------
    UsageError
        When ``ROWSTOCH_JOBS`` is set to anything but a positive integer.
    """
    value = os.environ.get("ROWSTOCH_JOBS", "").strip()
    if not value:
        return cores()
    try:
        jobs = int(value)
    except ValueError:
        jobs = 0
    if jobs < 1:
        from ..errors import UsageError

        raise UsageError(f"the environment variable ROWSTOCH_JOBS must be a positive integer (the default of --jobs), "
                         f"got {value!r}")
    return jobs


def _interrupt_once(term=True):
    """A worker's SIGINT and SIGTERM: the first raises KeyboardInterrupt (the run saves what it has), the later
    ones are ignored, so that the worker can save and report. A terminal's Ctrl-C reaches the whole process group
    and the parent then signals each worker again: a second KeyboardInterrupt escaped the run while it saved and
    lost its results. Set explicitly: a worker of a comparison started with SIGINT ignored (``cmd &`` in a
    script) still stops when the parent asks. Not ``term``: SIGTERM ignored, as the parent ignores it."""
    fired = []

    def handler(signum, frame):
        if not fired:
            fired.append(signum)
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler if term else signal.SIG_IGN)
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # (a closed terminal's
        signal.signal(signal.SIGHUP, handler)  # reaches the workers too; under nohup, ignored as by the parent)


def _die_with_parent():
    """On Linux, this process is killed when its parent dies: a SIGKILL of ``rowstoch compare --jobs 2`` left its
    workers running, writing checkpoints into a folder that a new ``--resume`` had taken, and one of them then
    blocked for ever on its queue to the dead parent. (SIGKILL, as the parent had: what a worker checkpointed
    before is kept, written atomically.)"""
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0) != 0:  # PR_SET_PDEATHSIG
            return  # (refused: the worker lives as before)
    except (OSError, AttributeError):
        return
    import multiprocessing

    parent = multiprocessing.parent_process()
    if parent is not None and os.getppid() != parent.pid:  # (the parent died before the call)
        os._exit(1)


#: The signals a worker holds from its start until its handlers are set (:func:`_started_holding_signals`).
HELD_AT_START = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ())


@contextlib.contextmanager
def _started_holding_signals():
    """Processes started in the block begin with Ctrl-C and SIGTERM blocked (a process's signal mask passes to
    the processes it starts), until :func:`_unblock_signals`: a Ctrl-C in a worker's first second, as the new
    interpreter imported its modules, printed a traceback per worker (and "lost sys.stderr"). This process holds
    them for the block's span too, then takes any that came (multiprocessing's resource tracker starts so)."""
    if not hasattr(signal, "pthread_sigmask"):  # (not POSIX: as before)
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_AT_START)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _unblock_signals():
    """A worker's end of :func:`_started_holding_signals`, its handlers set: a signal that came meanwhile is
    raised now."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD_AT_START)


def _worker(path, threads, tasks, results, stop, term=True):
    """A worker: :func:`_work`, a Ctrl-C or SIGTERM outside a method's run (as it imports, loads the plan or
    leaves) reported as one within, and the signals ignored once it is done. (A signal in its exit, where
    multiprocessing flushes the queue, ended it mid-message: the parent then waited for ever for the rest of it:
    1 of 49 SIGTERMs to the process group.)"""
    _die_with_parent()
    _interrupt_once(term)
    try:
        _unblock_signals()  # (held since the start: a signal while this process started is raised here, handled)
        _work(path, threads, tasks, results, stop)
    except KeyboardInterrupt:
        results.put(("interrupted", -1, None))
    finally:
        for signum in HELD_AT_START:
            signal.signal(signum, signal.SIG_IGN)


def _work(path, threads, tasks, results, stop):
    """A worker's loop: methods by index until the queue is empty or ``stop`` is set (``path``: the file of the
    pickled plan)."""
    results.put(("started", -1, os.getpid()))
    from .. import _core
    from .method import run_method

    _core.set_num_threads(threads)
    try:
        with open(path, "rb") as fh:
            plan, _ = pickle.load(fh)  # (the methods' classes of the user's own: their modules imported, registered)
        results.put(("loaded", -1, os.getpid()))
    except Exception as exc:  # noqa: BLE001 - a metric function this process cannot import: said by the parent
        results.put(("error", -1, RuntimeError(f"a worker process could not load the comparison: its objective, "
                                               f"network or metric functions ({type(exc).__name__}: {exc}); "
                                               "define them at the top level of a module (or of a file loaded by "
                                               "load_metrics_module, --metrics-module), or run with jobs=1 "
                                               "(--jobs 1)")))
        return
    while not stop.is_set():
        try:
            index = tasks.get_nowait()
        except queue.Empty:
            break
        method = plan.methods[index]

        def log(line, index=index):
            results.put(("log", index, line))

        try:
            outcome = run_method(plan, method, log=log)
        except KeyboardInterrupt:
            results.put(("interrupted", index, None))
            break
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
            try:
                pickle.dumps(exc)
            except Exception:  # noqa: BLE001 - an exception that cannot travel: its text does
                exc = RuntimeError(f"{type(exc).__name__}: {exc}")
            results.put(("error", index, exc))
            break
        results.put(("outcome", index, outcome))
        if outcome.status == "interrupted":
            break


def _own_classes(plan):
    """The classes of ``plan``'s methods defined outside this package: sent with the plan, so that a worker (a fresh
    interpreter) imports their modules, which registers them (only the methods' names travel in the plan: a method
    of the user's imported in a function, or under ``python -c``, ended the comparison with a bare
    ``KeyError: 'NAME'``, helper 238)."""
    from .._checks import outside_package
    from ..algorithms import REGISTRY

    return sorted({cls for cls in (REGISTRY[m.method] for m in plan.methods) if outside_package(cls)},
                  key=lambda cls: cls.name)


def _check_sendable(plan):
    """A ValueError naming the objective or network layer of ``plan`` whose class an interactive session's
    ``__main__`` defines, or the first extra metric that the worker processes could not receive: a
    function that cannot be pickled (a lambda, a closure), or one of an interactive session's ``__main__``
    (which a worker, a fresh interpreter, does not have)."""
    import sys

    interactive = not getattr(sys.modules["__main__"], "__file__", None)
    net = plan.network
    layers = [net]
    while hasattr(net, "base") and net.base is not net and len(layers) < 32:  # (a network's layers, outermost first)
        net = net.base
        layers.append(net)
    for what, obj in (("objective", plan.objective), *(("network", layer) for layer in layers)):
        if interactive and type(obj).__module__ == "__main__":  # (a worker could not import it: "could not import
            # the comparison's metric functions" had named the metrics, helper 196)
            raise ValueError(f"jobs > 1 runs the methods in worker processes, which cannot receive the {what} (its "
                             f"class {type(obj).__name__!r} is defined in an interactive session); define the class "
                             "at the top level of a module, or run with jobs=1")
    for cls in _own_classes(plan):
        try:
            if interactive and cls.__module__ == "__main__":
                raise pickle.PicklingError("it is defined in an interactive session")
            pickle.dumps(cls, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - a class defined in a function: named
            raise ValueError(f"jobs > 1 runs the methods in worker processes, which cannot import method "
                             f"{cls.name!r} (class {cls.__qualname__}: {exc}); define it at the top level of a module, "
                             "or run with jobs=1") from None
    for m in plan.metrics:
        if isinstance(m, str):
            continue
        main = getattr(m.fn, "__module__", None) == "__main__" and interactive
        try:
            if main:
                raise pickle.PicklingError("it is defined in an interactive session")
            pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - what pickle refuses: named
            raise ValueError(f"jobs > 1 runs the methods in worker processes, which cannot receive metric "
                             f"{m.name!r} ({exc}); define it at the top level of a module (or of a file loaded by "
                             f"load_metrics_module, --metrics-module), or run with jobs=1") from None


def _longest_first(plan):
    """The methods' indices, those with the most iterations first (K local steps a round: K times a round's
    gradients), the plan's order among equals: no long method left to run alone at the end while the other
    workers idle. The tables keep the plan's order."""
    cost = [m.iterations(plan.budget) for m in plan.methods]
    return sorted(range(len(plan.methods)), key=lambda i: -cost[i])


def _remove(path):
    if path is not None:
        try:
            os.remove(path)
        except OSError:
            pass


def remove_stale_plan_files():
    """Remove the workers' plan files (:func:`_plan_file`) of a parent killed by SIGKILL before its workers had
    read them (200 KB each in the temporary folder): those whose process no longer runs. Any comparison's start
    does it, whatever its ``jobs``."""
    import glob
    import tempfile

    host = _host_slug()
    for stale in glob.glob(os.path.join(glob.escape(tempfile.gettempdir()), "rowstoch-plan-*.pickle")):
        parts = os.path.basename(stale).split("-")  # rowstoch, plan, HOST, PID, RANDOM.pickle; an earlier version's
        # had no HOST. Only this machine's (a TMPDIR shared with other machines holds theirs, of processes this one
        # cannot see: they were removed under a live comparison there)
        pid = parts[3] if len(parts) == 5 and parts[2] == host else parts[2] if len(parts) == 4 else ""
        if pid.isdigit() and not process_alive(int(pid)):
            _remove(stale)


def _host_slug():
    """This machine's name in a plan file's name, ``rowstoch-plan-HOST-PID-RANDOM.pickle`` (letters, digits, ``.``
    and ``_``: a ``-`` would end it)."""
    import re
    import socket

    return re.sub(r"[^A-Za-z0-9._]", "_", socket.gethostname()) or "host"


def _plan_file(plan):
    """The pickled ``plan`` in a file the workers read (its path): a worker that dies as it starts (a script
    without ``if __name__ == "__main__":``, which every worker runs again) left the parent blocked for ever in the
    process's start, writing a plan larger than the pipe's buffer to a child that would never read it."""
    import tempfile

    path = None
    try:
        fd, path = tempfile.mkstemp(prefix=f"rowstoch-plan-{_host_slug()}-{os.getpid()}-", suffix=".pickle")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump((plan, _own_classes(plan)), fh, protocol=pickle.HIGHEST_PROTOCOL)
    except OSError as exc:
        _remove(path)
        raise type(exc)(f"jobs > 1: the worker processes' plan cannot be written to "
                        f"{path or tempfile.gettempdir()!r} ({exc.strerror or exc}); set TMPDIR to a writable "
                        "folder with room, or run with jobs=1") from None
    except (pickle.PicklingError, AttributeError, TypeError) as exc:  # (a lambda or a closure in the problem)
        _remove(path)
        raise ValueError(f"jobs > 1 runs the methods in worker processes, which cannot receive this comparison's "
                         f"problem ({type(exc).__name__}: {exc}): a function in it (a Prox's, an objective's, a "
                         "network's) must be defined at the top level of a module, not a lambda or a closure; or "
                         "run with jobs=1 (--jobs 1)") from None
    except BaseException:
        _remove(path)
        raise
    return path


def execute_in_processes(plan, jobs, *, progress=False, log=None, on_outcome=None):
    """:func:`~rowstoch_fast.compare.execute.execute` with ``jobs`` worker processes."""
    with sigterm_as_interrupt():  # (around the whole: a script's SIGTERM ends the process once the workers, the
        # plan's file and the queues are gone)
        return _in_processes(plan, jobs, progress, log, on_outcome)


def _in_processes(plan, jobs, progress, log, on_outcome):
    import multiprocessing

    log = log or (lambda line: None)
    ctx = multiprocessing.get_context("spawn")
    jobs = min(jobs, len(plan.methods))
    threads = max(1, cores() // jobs)
    with _started_holding_signals():  # (their semaphores start multiprocessing's resource tracker, which ignores
        tasks, results, stop = ctx.Queue(), ctx.Queue(), ctx.Event()  # Ctrl-C and SIGTERM but not SIGHUP: it
    # starts with the signals blocked, SIGHUP kept so; a terminal's SIGHUP to the group had killed it, and its
    # successor printed a KeyError for each semaphore unregistered)
    for index in _longest_first(plan):
        tasks.put(index)
    _check_sendable(plan)
    term = signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN  # (an ignored SIGTERM: ignored by the workers too)
    done, interrupted, error, started, loaded = {}, False, None, set(), set()
    workers, path, bar = [], None, None

    def handle(kind, index, value):
        nonlocal interrupted, error
        if kind == "started":
            started.add(value)
        elif kind == "loaded":
            loaded.add(value)
            if len(loaded) == len(workers):  # (every worker has the plan: its file, perhaps large, goes at once)
                _remove(path)
        elif kind == "log":
            log(value)
        elif kind == "outcome":
            done[index] = value
            if on_outcome is not None:
                with signals_held():  # (the caller writes what finished: a signal waits until it is written)
                    on_outcome(value)
            if bar is not None:
                bar.update(1)
            if value.status == "interrupted":
                interrupted = True
                stop.set()
        elif kind == "interrupted":
            interrupted = True
            stop.set()
        elif kind == "error":
            if error is None:
                error = value
            stop.set()

    try:
        path = _plan_file(plan)
        workers = [ctx.Process(target=_worker, args=(path, threads, tasks, results, stop, term), daemon=True)
                   for _ in range(jobs)]
        bar = progress_bar(progress, len(plan.methods), unit="algorithm")
        try:
            with _started_holding_signals():
                for w in workers:
                    w.start()
            while any(w.is_alive() for w in workers) or not results.empty():
                try:
                    handle(*results.get(timeout=0.1))
                except queue.Empty:
                    continue
        except KeyboardInterrupt:
            interrupted = True
            stop.set()
            for w in workers:  # (a signal to this process alone: the workers stop their runs as well)
                if w.is_alive() and w.pid is not None:
                    try:
                        os.kill(w.pid, signal.SIGINT)
                    except OSError:
                        pass
            deadline = time.monotonic() + GRACE
            while any(w.is_alive() for w in workers) and time.monotonic() < deadline:
                try:
                    handle(*results.get(timeout=0.1))
                except (queue.Empty, KeyboardInterrupt):
                    continue
        while True:  # what the workers reported as they stopped
            try:
                handle(*results.get_nowait())
            except queue.Empty:
                break
    finally:
        with signals_held():  # (a signal now waits until the workers are gone and the plan's file with them)
            for w in workers:
                if w.pid is None:  # (never started: a start that failed raises its own error, not join's)
                    continue
                w.join(timeout=5)
                if w.is_alive():
                    w.terminate()
            if bar is not None:
                bar.close()
            _remove(path)
            for q in (tasks, results):  # (their threads and semaphores released now, not at the process's end)
                q.close()
                q.cancel_join_thread()
    unstarted = [w.exitcode for w in workers if w.pid not in started and w.exitcode not in (0, None)]
    lost = [w.exitcode for w in workers if w.exitcode not in (0, None)]
    if error is None and not interrupted and 1 in unstarted:
        error = RuntimeError("a worker process ended with exit code 1 as it started, before it took a method (its "
                             "error is above, on stderr): with jobs > 1 the methods run in new Python processes, "
                             "which import the main script again; a script that calls compare() outside "
                             "`if __name__ == \"__main__\":` starts them again from there (Python's multiprocessing "
                             "guide). Put the script's code under that line, or run with jobs=1 (--jobs 1)")
    elif error is None and not interrupted and lost and len(done) < len(plan.methods):
        error = RuntimeError(f"a worker process ended with exit code {lost[0]} before its method finished (out of "
                             f"memory?); run with jobs=1 (--jobs 1) to see its error")
    outcomes = [done[i] for i in sorted(done)]
    return outcomes, interrupted, error
