"""Running a :class:`~rowstoch_fast.compare.plan.Plan`: each method tuned (where its rate is not given), evaluated
and judged (:func:`run_method`), one after the other or in parallel processes (:func:`execute`, ``jobs``), with
the same results either way.

A Ctrl-C or a SIGTERM stops the comparison cleanly: the method running keeps what it recorded (its evaluation run
writes a checkpoint, and its status is ``interrupted``), the finished ones are returned, and the caller writes
what there is. An error in one method's run goes out with the methods that finished before it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import warnings
from dataclasses import dataclass

import numpy as np

from ..errors import DivergenceError
from ..runner import run
from .tuning import NoStableRate, UNTUNABLE, tune
from .verdict import status_of

__all__ = ["Outcome", "run_method", "execute", "default_jobs", "sigterm_as_interrupt"]


@dataclass
class Outcome:
    """One method's result: its records (every repetition), its status and diagnosis, the rate it ran at and
    where that came from, and the tuner's record (None for a given rate)."""

    label: str
    frame: object
    status: str
    diagnosis: str
    lr: float
    lr_source: str
    tuning: dict = None


def default_jobs():
    """The cores this process may use: the default of ``jobs``."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def sigterm_as_interrupt():
    """SIGTERM (what a job scheduler sends) raised as KeyboardInterrupt while the block runs, as Ctrl-C is: the
    run in progress saves its checkpoint and what finished is written (the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    previous = signal.getsignal(signal.SIGTERM)

    def interrupt(signum, frame):
        if callable(previous):  # (a caller's handler first: the command line counts SIGTERM apart from Ctrl-C)
            previous(signum, frame)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _context(plan, method):
    """What the diagnosis may use of the problem: the Pull-Diag tracker's largest scale on this graph
    (``1 / min(pi)``, the limit of ``1 / [A^k]_ii``) for the methods with one, and whether the network varies."""
    from ..algorithms import REGISTRY
    from ..mixing import MixingMatrix
    from ..network import base_matrix

    out = {"lossy": not isinstance(plan.network, MixingMatrix)}
    if "tracker" in REGISTRY[method.method].hyper:
        try:
            pi = np.asarray(base_matrix(plan.network).metrics().pi)
            out["tracker_peak"] = float(1.0 / pi.min()) if pi.min() > 0 else float("inf")
        except Exception:  # noqa: BLE001 - a diagnosis never fails a comparison
            pass
    return out


def _one_run(plan, method, lr, *, repeats, progress, checkpoint=None, resume=None, first_repeat=0):
    """(records, meta) of one evaluation run of ``method`` at ``lr`` (the frame's columns of a comparison)."""
    iterations = method.iterations(plan.budget)
    algo = method.algorithm(plan.network, lr, plan.backend)
    start = time.perf_counter()
    try:
        h = run(algo, plan.objective, iterations, record_at=plan.schedule(method), repeats=repeats, seed=plan.seed,
                progress=progress, metrics=plan.metrics, checkpoint=checkpoint, resume=resume,
                first_repeat=first_repeat)
    except DivergenceError as exc:
        h = exc.history
    wall = time.perf_counter() - start
    meta = dict(h.meta)
    meta["interrupted"] = h.interrupted
    frame = h.frame.copy()
    done = max(1, meta.get("completed_iterations", iterations))
    traffic = meta.get("traffic", {"messages": 0, "bytes": 0})
    frame.insert(0, "algorithm", method.label)
    frame["lr"] = lr
    frame["rounds_per_iteration"] = method.rounds
    frame["messages"] = frame["iteration"] * traffic["messages"] / done
    frame["bytes"] = frame["iteration"] * traffic["bytes"] / done
    frame["gradient_evaluations"] = frame["samples"] * plan.network.n  # mini-batch samples over all nodes
    frame["total_wall_seconds"] = wall
    return frame, meta


def _evaluate(plan, method, lr, log, progress):
    """(records, meta) of ``method``'s evaluation: a new run, or an earlier comparison's kept, resumed from its
    checkpoint, or given the repetitions it lacks."""
    import pandas as pd

    path = None if plan.checkpoint_dir is None else os.path.join(plan.checkpoint_dir, f"{method.label}.npz")
    earlier = plan.previous.get(method.label)
    if earlier is None:
        return _one_run(plan, method, lr, repeats=plan.repeats, progress=progress, checkpoint=path)
    status = str(earlier["status"].iloc[0]) if "status" in earlier.columns else "ok"
    done = int(earlier["rep"].nunique())
    parts, meta = [earlier], {"completed_iterations": method.iterations(plan.budget)}
    if status == "interrupted":  # goes on from its checkpoint (with the repetitions it had), or again from 0
        resume = path if path is not None and os.path.exists(path) else None
        log(f"{method.label}: " + ("resumed from its checkpoint" if resume else "no checkpoint: run again"))
        frame, meta = _one_run(plan, method, lr, repeats=done, progress=progress, checkpoint=path, resume=resume)
        parts = [frame]
    else:
        log(f"{method.label}: kept from the earlier comparison ({status}, {done} repetitions)")
        meta["kept"] = earlier
    if not meta.get("interrupted") and done < plan.repeats:  # the repetitions it lacks, on their own streams
        frame, meta = _one_run(plan, method, lr, repeats=plan.repeats - done, progress=progress, first_repeat=done)
        parts.append(frame)
        log(f"{method.label}: {plan.repeats - done} more repetitions")
    frame = pd.concat(parts, ignore_index=True)
    frame = frame[frame["rep"] < plan.repeats] if not meta.get("interrupted") else frame
    frame = frame.assign(total_wall_seconds=sum(float(p["total_wall_seconds"].iloc[0]) for p in parts))
    return frame.sort_values(["iteration", "rep"], kind="stable").reset_index(drop=True), meta


def run_method(plan, method, *, progress=False, log=None):
    """Tune (unless its rate is given), evaluate and judge one method of ``plan``: its :class:`Outcome`.

    KeyboardInterrupt during the tuning propagates (nothing of this method is kept); during the evaluation the
    runner stops cleanly and the outcome is ``interrupted``.
    """
    log = log or (lambda line: None)
    lr, source, record = method.lr, method.lr_source, None
    if lr is None:
        try:
            lr, record = tune(plan.network, plan.objective, method, plan.budget, plan.metric, seed=plan.seed,
                              backend=plan.backend, grid=plan.grid, log=log)
        except NoStableRate as exc:  # (on a harsh network: the comparison goes on, the table says why)
            record, lr, source = exc.record, exc.fallback, UNTUNABLE
            log(f"{method.label}: no rate tried stays stable: shown at {lr:g}, the one that ended lowest")
        else:
            source = "tuned"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a growing run is reported in the table, not warned about
        frame, meta = _evaluate(plan, method, lr, log, progress)
    kept = meta.pop("kept", None)
    if kept is not None:  # an earlier comparison's finished run, as it was: its own verdict
        status = str(kept["status"].iloc[0]) if "status" in kept.columns else "ok"
        status = "ok" if status == "done" else status  # (a comparison of an older version)
        diagnosis = str(kept["diagnosis"].fillna("").iloc[0]) if "diagnosis" in kept.columns else ""
    else:
        status, diagnosis = status_of(frame, plan.metric, meta, lr=lr, lr_source=source,
                                      iterations=method.iterations(plan.budget), tuning=record,
                                      context=_context(plan, method))
    frame["lr_source"] = source
    frame["diverged"] = status == "diverged"
    frame["status"] = status
    frame["diagnosis"] = diagnosis
    log(f"{method.label}: {status} ({frame['total_wall_seconds'].iloc[0]:.1f} s)" + (f": {diagnosis}" if diagnosis
                                                                                     else ""))
    return Outcome(method.label, frame, status, diagnosis, lr, source, record)


def execute(plan, *, jobs=1, progress=False, log=None, on_outcome=None):
    """Run every method of ``plan``: ``(outcomes, interrupted, error)``.

    ``outcomes`` are in the plan's order (the methods that finished, and the one interrupted), ``interrupted``
    says whether a Ctrl-C or SIGTERM stopped the comparison, ``error`` is the exception one method's run raised
    (the others' outcomes kept), or None. ``on_outcome(outcome)`` is called as each method finishes (to write
    the results as they come). ``jobs > 1`` runs the methods in that many processes (each with its share of the
    cores' threads); the outcomes are those of a serial run.
    """
    log = log or (lambda line: None)
    if jobs > 1 and len(plan.methods) > 1:
        from ._parallel import execute_in_processes

        return execute_in_processes(plan, jobs, progress=progress, log=log, on_outcome=on_outcome)
    outcomes, interrupted, error = [], False, None
    bar = _bar(progress, len(plan.methods))
    try:
        with sigterm_as_interrupt():
            for method in plan.methods:
                if bar is not None:
                    bar.set_description(method.label + ("" if method.lr is not None else " (tuning)"))
                outcome = run_method(plan, method, progress=progress, log=log)
                outcomes.append(outcome)
                if on_outcome is not None:
                    on_outcome(outcome)
                if outcome.status == "interrupted":  # the runner caught the interruption: stop here
                    interrupted = True
                    break
                if bar is not None:
                    bar.update(1)
    except KeyboardInterrupt:
        interrupted = True
    except Exception as exc:  # noqa: BLE001 - one method's run failed: the finished ones go with the error
        error = exc
    finally:
        if bar is not None:
            bar.close()
    return outcomes, interrupted, error


def _bar(enabled, total):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=total, unit="algorithm", leave=False)
