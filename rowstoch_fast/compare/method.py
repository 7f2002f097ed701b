"""One method of a comparison: tuned (where its rate is not given), evaluated and judged (:func:`run_method`)."""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass

import numpy as np

from ..errors import DivergenceError
from ..runner import run
from .tuning import UNTUNABLE, NoStableRate, tune
from .verdict import status_of

__all__ = ["Outcome", "run_method"]


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


def _context(plan, method):
    """What the diagnosis may use of the problem: the Pull-Diag tracker's largest scale on this graph
    (``1 / min(pi)``, the limit of ``1 / [A^k]_ii``) for the methods with one, and whether the network varies."""
    from ..algorithms import REGISTRY
    from ..mixing import MixingMatrix
    from ..network import base_matrix

    out = {"lossy": not isinstance(plan.network, MixingMatrix), "loses": _loses_messages(plan.network)}
    if "tracker" in REGISTRY[method.method].hyper:
        try:
            pi = np.asarray(base_matrix(plan.network).metrics().pi)
            out["tracker_peak"] = float(1.0 / pi.min()) if pi.min() > 0 else float("inf")
        except Exception:  # noqa: BLE001 - a diagnosis never fails a comparison
            pass
    return out


def _loses_messages(network):
    """Whether a layer of ``network`` drops messages (a :class:`~rowstoch_fast.network.Lossy` that is not
    lossless): push-sum methods then lose mass with every lost message."""
    from ..network.lossy import Lossy  # (the class itself, wherever the package's name for it points)

    while network is not None:
        if isinstance(network, Lossy) and not network.lossless:
            return True
        network = getattr(network, "base", None)
    return False


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
    meta = dict(h.meta)
    wall = time.perf_counter() - start + meta.get("resumed_wall_seconds", 0.0)  # (a resumed run: the time before
    # its checkpoint too; the summary showed 0.9 s for a run of 5.7)
    meta["interrupted"] = h.interrupted
    frame = h.frame.copy()
    done = max(1, meta.get("completed_iterations", iterations))
    traffic = meta.get("traffic_per_repetition", meta.get("traffic", {"messages": 0, "bytes": 0}))  # (one run's:
    # the repetitions run as replicas of one stepper, each of whose messages carries every replica's values)
    frame.insert(0, "algorithm", method.label)
    frame["lr"] = lr
    frame["rounds_per_iteration"] = method.rounds
    frame["messages"] = frame["iteration"] * traffic["messages"] / done
    frame["bytes"] = frame["iteration"] * traffic["bytes"] / done
    frame["gradient_evaluations"] = frame["samples"] * plan.network.n  # mini-batch samples over all nodes
    frame["total_wall_seconds"] = wall
    return frame, meta


def _added_path(plan, method, first):
    """The checkpoint of the repetitions ``first, ...`` added to ``method``'s finished run."""
    return os.path.join(plan.checkpoint_dir, f"{method.label}.from-rep{first}.npz")


def _finished(checkpoint, meta):
    """An added run's checkpoint removed once it finished (one left behind is an interrupted run's)."""
    if checkpoint is not None and not meta.get("interrupted"):
        try:
            os.remove(checkpoint)
        except FileNotFoundError:
            pass


def _added_repetitions(plan, method, done):
    """``(first, checkpoint)`` of the repetitions ``first .. done - 1`` added to a finished run and interrupted
    (the latest such checkpoint below ``done``), or None."""
    if plan.checkpoint_dir is None:
        return None
    firsts = [first for first in range(1, done) if os.path.exists(_added_path(plan, method, first))]
    return (max(firsts), _added_path(plan, method, max(firsts))) if firsts else None


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
    added = _added_repetitions(plan, method, done) if status == "interrupted" else None
    if added is not None:  # the repetitions added to a finished run stopped part-way: they go on from their
        # checkpoint, the finished ones kept
        first, checkpoint = added
        log(f"{method.label}: repetitions {first} .. {done - 1} resumed from their checkpoint")
        frame, meta = _one_run(plan, method, lr, repeats=done - first, progress=progress, first_repeat=first,
                               checkpoint=checkpoint, resume=checkpoint)
        parts = [earlier[earlier["rep"] < first], frame]
        _finished(checkpoint, meta)
    elif status == "interrupted":  # goes on from its checkpoint (with the repetitions it had), or again from 0
        resume = path if path is not None and os.path.exists(path) else None
        log(f"{method.label}: " + ("resumed from its checkpoint" if resume else "no checkpoint: run again"))
        frame, meta = _one_run(plan, method, lr, repeats=done, progress=progress, checkpoint=path, resume=resume)
        parts = [frame]
    else:
        log(f"{method.label}: kept from the earlier comparison ({status}, {done} repetitions)")
        meta["kept"] = earlier
    if not meta.get("interrupted") and done < plan.repeats:  # the repetitions it lacks, on their own streams
        more = None if plan.checkpoint_dir is None else _added_path(plan, method, done)
        frame, meta = _one_run(plan, method, lr, repeats=plan.repeats - done, progress=progress, first_repeat=done,
                               checkpoint=more)
        parts.append(frame)
        _finished(more, meta)
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
            lr, record = tune(plan.network, plan.objective, method, plan.budget, plan.ranked, seed=plan.seed,
                              backend=plan.backend, grid=plan.grid, log=log, checkpoint_dir=plan.checkpoint_dir)
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
        diagnosis = str(kept["diagnosis"].astype(object).fillna("").iloc[0]) if "diagnosis" in kept.columns else ""
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
