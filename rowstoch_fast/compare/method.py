"""One method of a comparison: tuned (where its rate is not given), evaluated and judged (:func:`run_method`)."""

from __future__ import annotations

import math
import os
import re
import time
import warnings
from dataclasses import dataclass

import numpy as np

from ..errors import DivergenceError, NetworkIgnoredWarning
from ..network import Network, draws, effects_of, losses_of, redrawn, source_of
from ..runner import BELOW_OPTIMUM_WORDS, check_takes, run
from .tuning import (DAMAGED, UNTUNABLE, NoStableRate, converged_for, exact_tuning, forget_stages, spread_floor,
                     tune)
from .verdict import (NEXT_STABLE, RETRIED, RETRIES, _ends as ends, cause, clauses, climbs_too, family_members,
                      next_stable, status_of)

__all__ = ["Outcome", "judge_run", "run_method"]


#: What a kept diverged method's diagnosis adds where the comparison grew (``--resume DIR --repeats N``): its values
#: are over the earlier comparison's repetitions, which the table's caption does not say.
KEPT_DIVERGED = "diverged in the earlier comparison's"


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


def _runs_on(plan, name):
    """Whether the registry's ``name`` runs on ``plan``'s network and objective (a proximal problem needs a
    proximal method; a per-sample method, a finite sum)."""
    from ..algorithms import REGISTRY

    cls = REGISTRY[name]
    try:
        check_takes(cls, plan.objective)
    except ValueError:
        return False
    return bool(cls.applies_to(plan.network))


def _context(plan, method):
    """What the diagnosis may use of the problem: for the methods with a Pull-Diag tracker, its largest scale on
    this graph (``tracker_peak``, asked for only where a run is not ``ok``: :func:`_tracker_peak`), and whether
    the network varies and whether it loses messages (losses, sleep: :func:`~rowstoch_fast.network.losses_of`), what
    it does to the messages (compression, delays, noise: :func:`~rowstoch_fast.network.effects_of`), whether the
    method is one made for compressed messages and which of those run on this network, and whether it pushes mass
    through a column-stochastic matrix (and is not loss-robust)."""
    from ..algorithms import REGISTRY
    from ..mixing import MixingMatrix

    out = {"lossy": not isinstance(plan.network, MixingMatrix), "loses": losses_of(plan.network),  # (its phrases)
           # (its repetitions run one trajectory: gradients of the whole data, up to the order of their sums, over a
           # network that draws nothing; helper 153: a float32 logistic objective with a batch of every sample, its
           # repetitions 9e-8 apart, was judged as noisy runs, and a fall to 2e-4 then a climb to 3.4e-2 was `ok`)
           "one_trajectory": exact_tuning(plan.network, plan.objective, method),
           "converged": converged_for(plan.objective, getattr(plan.metric, "name", plan.metric)),
           "spread_floor": spread_floor(plan.objective),  # (the consensus error's rounding)
           "effects": effects_of(plan.network), "compresses": "compressed" in REGISTRY[method.method].family,
           # (it pushes mass through a column-stochastic matrix, which lost messages take, and is not loss-robust)
           "pushes": "C" in REGISTRY[method.method].matrices and "loss-robust" not in REGISTRY[method.method].family,
           # (those that run on this network, asked for only where a run failed under compression)
           "for_compression": lambda: [name for name in family_members("compressed")
                                       if REGISTRY[name].applies_to(plan.network)],
           # (the loss-robust methods a hint may suggest: those that run on this network and objective)
           "robust": lambda: [name for name in family_members("loss-robust") if _runs_on(plan, name)]}
    cls = REGISTRY[method.method]
    if not cls.matrices:  # (a server's or an all-reduce's exact average: the network's losses, compression, delays
        # and schedule touch none of its runs; a centralized run's "no progress" had been told "this network loses
        # messages" under the plan's warning that the losses do not affect it, helper 261)
        out.update(lossy=False, loses=[], effects=[])
        return out
    if cls.push_sum_weights and cls.per_link_state and out["loses"] and not _noisy(plan.network):  # (noise on
        # the running sums reaches the weights, which may go below 0 for that: not what the replay's line explains)
        out["weakest_weight"] = lambda stops: _weakest_weight(plan, method, stops)
    if "tracker" in cls.hyper:
        out["tracker_peak"] = lambda: _tracker_peak(plan.network, method)
        out["tracks"] = "gradient tracking" in cls.family  # (its tracked gradients, not a DGD)
    try:
        source, _ = source_of(plan.network)
    except Exception:  # noqa: BLE001 - a diagnosis never fails a comparison
        source = None
    if isinstance(source, Network) and len(getattr(source, "matrices", ())) > 1:  # (a schedule: the weights change
        out["schedule"] = len(source.matrices)  # from round to round; one of one matrix does not)
    return out


def judge_run(history, network, objective, method, rounds=1, tracker="exact", metric="grad_norm"):
    """``(status, diagnosis)`` of a run made outside a comparison (``rowstoch run``'s
    :class:`~rowstoch_fast.History`, of registered ``method`` at its given rate, ``rounds`` gossip rounds per
    iteration) by a comparison's rules (:func:`~rowstoch_fast.compare.verdict.status_of` on ``metric``, with what
    the diagnosis may use of ``network`` and ``objective``; no replay of push-sum weights, whose draws are a
    comparison's). Pull-Diag-GT over 10% losses fell to 0.128x its start by iteration 420 and climbed back to 0.503x
    by 2,000: ``rowstoch run`` said "done" and nothing else, where a comparison says ``no-progress``."""
    from types import SimpleNamespace

    from .plan import Method

    lr = history.meta.get("lr")
    spec = Method(method, method, rounds, {"tracker": tracker}, lr, "given")
    context = _context(SimpleNamespace(network=network, objective=objective, metric=metric), spec)
    context.pop("weakest_weight", None)
    return status_of(history.frame, metric, history.meta, lr=lr, lr_source="given",
                     iterations=int(history.meta.get("iterations", history.frame["iteration"].max())),
                     context=context)


def _noisy(net):
    """Whether a layer of ``net`` adds noise to the messages (:class:`~rowstoch_fast.network.Noisy`)."""
    from ..network import Noisy

    while isinstance(net, Network):
        if isinstance(net, Noisy):
            return True
        net = getattr(net, "base", None)
    return False


def _weakest_weight(plan, method, stops):
    """``(smallest, node, iteration, repetition, level, began)``: the push-sum weight of a loss-robust push-sum method
    (running sums per link: robust gradient-push) in the evaluation's repetitions, ``stops`` ``{repetition: the last
    iteration it held}`` (a repetition that diverged stopped early), at its first dip below
    :data:`~rowstoch_fast.algorithms._deferred.STRANDED_WEIGHT` times the weight its node settles at where no
    message is lost (the earliest over the repetitions: what a run's growth follows, helper 177, where the deepest
    dip came after it), the lowest of that dip, at which node, iteration and repetition, that node's level (``n
    pi`` of C) and the iteration the dip began; else the lowest against its level over the run (``began``: its
    iteration); None where it cannot be had. The weights evolve apart from the models and gradients (a weight is a
    message of its own, which compression leaves exact), so they are replayed on each repetition's own draws of the
    network (:func:`~rowstoch_fast.network.redrawn`, as :func:`_repetitions` runs them) with zero gradients, one
    replica, on the CPU: a step of the mixing alone per iteration, asked for only where a run failed, for the
    repetitions in order as far as :data:`_REPLAY_WORK` goes (what was replayed: a weight held by then); numerical
    warnings silenced (a warning made an error would have lost the line). Helper 174: robust gradient-push's runs
    that grew without a NaN under bursty losses had been told only "this network loses messages"."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # (weights near 0, models that stay 0: nothing to
            return _replayed(plan, method, stops)  # warn of, and a warning made an error is none either)
    except Exception:  # noqa: BLE001 - a diagnosis never fails a comparison
        return None


def _replayed(plan, method, stops):
    """:func:`_weakest_weight`'s replay itself."""
    from .._checks import precision_of
    from ..algorithms._deferred import STRANDED_WEIGHT

    lowest, first = None, None  # ((ratio, weight, node, iteration, repetition, level): the lowest; (began, that) of
    # the earliest dip)
    width = int(np.prod(np.shape(plan.objective.x0())[-1:]))
    left, cost = int(_REPLAY_WORK), _replay_cost(plan.network, width)
    for r, stop in sorted(stops.items()):
        stop = min(int(stop), left // cost)  # (the first iterations of a repetition past the bound)
        if stop <= 0:
            break
        left -= stop * cost
        algo = method.redrawn(r).algorithm(redrawn(plan.network, r), 1.0, "cpu")
        opt = algo.build(np.zeros(width, dtype=precision_of(algo.A)))  # (the run's width: a compression's k is
        # checked against it)
        zero = np.zeros_like  # (the models stay 0: their weights alone move)
        opt.initialize(zero)
        trace = []  # (each step's weight against its level, as in lowest)
        for _ in range(stop):
            try:
                opt.step(zero)
            except DivergenceError:  # (a weight that underflowed to 0: 0 / 0, at the node lowest before it)
                node, _, level = opt.stranded_push_sum_weight()
                trace.append((0.0, 0.0, node, opt.iteration + 1, r, level))
                break
            node, smallest, level = opt.stranded_push_sum_weight()  # (the lowest against its own level)
            trace.append((smallest / level, smallest, node, opt.iteration, r, level))
            if smallest == 0.0:
                break
        lowest = min([h for h in (lowest,) if h] + trace, key=lambda h: h[0], default=None)
        low = [k for k, h in enumerate(trace) if h[0] < STRANDED_WEIGHT]
        if low:  # (the first dip: from its first step below the threshold to the next that is not)
            end = next((k for k in range(low[0], len(trace)) if not trace[k][0] < STRANDED_WEIGHT), len(trace))
            began = trace[low[0]][3]
            if first is None or began < first[0]:
                first = (began, min(trace[low[0]:end], key=lambda h: h[0]))
    if first:
        return (*first[1][1:], first[0])
    return None if lowest is None else (*lowest[1:], lowest[3])


def _replay_cost(network, width):
    """What one iteration of :func:`_weakest_weight`'s replay costs, in value-steps: the stored weights of the
    network's matrix times the ``width + 1`` values a link carries (a model and its weight; at least
    :data:`_STEP_WORK`, the step's Python path), times ``1 + max_delay`` for each layer that delays messages (a
    history of that many rounds per link)."""
    from ..network import base_matrix

    cost = max(base_matrix(network).nnz * (width + 1), _STEP_WORK)
    while isinstance(network, Network):
        cost *= 1 + int(getattr(network, "max_delay", 0) or 0)
        network = getattr(network, "base", None)
    return cost


#: The most value-steps (:func:`_replay_cost` times iterations) a failed run's weights are replayed for
#: (:func:`_weakest_weight`), summed over its repetitions: what lies past it is not replayed. About 2 s here on a
#: ring of 50,000 nodes under losses, d = 10 (1,000 iterations), 6.5 s with delays of up to 8 rounds (111).
_REPLAY_WORK = 1e9
#: The fewest value-steps an iteration of the replay counts: its Python path (55 us a step on a ring of 16).
_STEP_WORK = 30_000


def _tracker_peak(network, method):
    """``(largest 1 / [D_t]_ii, 1 / min(pi))`` of ``method``'s tracker on ``network``'s matrix: the exact tracker's
    over its table (``D_t = Diag(A^(tR))`` until it settles at ``diag(pi)``: on a directed ring of 64 nodes
    ``[A^63]_ii = 2^-63``, a scale of 9.2e18 where ``1 / min(pi)`` is 64), the Perron tracker's ``1 / min(pi)``;
    the limit alone where the exact table is not at hand within :data:`_PEAK_WORK` and :data:`_PEAK_NODES` (the
    run's own is cached on the matrix: a method over a static matrix built it; over losses it follows the network
    instead); None where even that cannot be had (no Perron vector)."""
    from ..network import base_matrix
    from ..tracker import DiagTracker

    try:
        A = base_matrix(network)
        pi = np.asarray(A.pi)
        limit = float(1.0 / pi.min()) if pi.min() > 0 else float("inf")
    except Exception:  # noqa: BLE001 - a diagnosis never fails a comparison
        return None
    if method.options.get("tracker", "exact") == "perron" or (
            not DiagTracker.built(A, method.rounds) and A.n > _PEAK_NODES):  # (the build's spectral gap
        # comes before its bound on the work: ARPACK took minutes on slowly mixing graphs of 16,000 nodes)
        return limit, limit
    try:
        return max(DiagTracker(A, method.rounds, max_work=_PEAK_WORK, max_bytes=_PEAK_WORK).max_inverse_diagonal,
                   limit), limit
    except Exception:  # noqa: BLE001 - past the bound, or a diagonal that reaches 0
        return limit, limit


#: The most multiply-adds (and bytes) a diagnosis spends on an exact tracker's table that the run did not build
#: (about a second), on a graph of at most :data:`_PEAK_NODES` nodes: past them, the hint gives the table's limit,
#: ``1 / min(pi)``.
_PEAK_WORK = 1e9
_PEAK_NODES = 4096


def _one_run(plan, method, lr, *, repeats, progress, checkpoint=None, resume=None, first_repeat=0, counted=False):
    """(records, meta) of one evaluation run of ``method`` at ``lr``: the repetitions ``first_repeat ..
    first_repeat + repeats - 1`` on the network drawn for the first (:func:`~rowstoch_fast.network.redrawn` by
    ``first_repeat``: the plan's network itself where nothing is drawn, or for the first repetition) (the frame's
    columns of a comparison). Its wall time includes the time before the checkpoint it resumed, unless
    ``counted`` (the earlier records kept beside it count it already)."""
    method = method.redrawn(first_repeat)  # (its own draws, a federated method's clients: the repetition's)
    iterations = method.iterations(plan.budget)
    algo = method.algorithm(redrawn(plan.network, first_repeat), lr, plan.backend)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():  # (the comparison says it once, of all its records: assemble)
            warnings.filterwarnings("ignore", message=".*" + re.escape(BELOW_OPTIMUM_WORDS), category=RuntimeWarning)
            warnings.simplefilter("ignore", NetworkIgnoredWarning)  # (the plan warned of it, once)
            h = run(algo, plan.objective, iterations, record_at=plan.schedule(method), repeats=repeats,
                    seed=plan.seed, progress=progress, metrics=plan.metrics, checkpoint=checkpoint, resume=resume,
                    first_repeat=first_repeat, _metrics_checked=True, _record_stop=False)  # (a resume goes on
            # from the checkpoint: no metric pass more in a worker's grace after Ctrl-C, helper 239)
    except DivergenceError as exc:
        h = exc.history
    meta = dict(h.meta)
    wall = time.perf_counter() - start + (0.0 if counted else meta.get("resumed_wall_seconds", 0.0))  # (a resumed
    # run: the time before its checkpoint too; the summary showed 0.9 s for a run of 5.7)
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


def _checkpoint(plan, method, first):
    """The checkpoint of the run of the repetitions ``first, ...``: ``<label>.npz`` for the first run,
    ``<label>.from-rep<first>.npz`` for a run of repetitions added to it (None without a checkpoint folder)."""
    if plan.checkpoint_dir is None:
        return None
    return os.path.join(plan.checkpoint_dir, f"{method.label}.npz" if first == 0 else
                        f"{method.label}.from-rep{first}.npz")


def _finished(checkpoint, meta, iterations):
    """An added run's checkpoint removed once it finished (one left behind is an interrupted run's; one
    interrupted at its last iteration has finished)."""
    if checkpoint is not None and (not meta.get("interrupted") or
                                   meta.get("completed_iterations", 0) >= iterations):
        try:
            os.remove(checkpoint)
        except FileNotFoundError:
            pass


def _repetitions(plan, method, lr, first, stop, progress, resume=None, counted=False):
    """``(frames, meta)`` of the repetitions ``first .. stop - 1`` of ``method`` at ``lr``. Where the network draws
    nothing they are replicas of one batched run; where it draws (losses, sleep, random delays, compression,
    noise: :func:`~rowstoch_fast.network.draws`) they run one at a time, repetition ``r`` on the network
    :func:`~rowstoch_fast.network.redrawn` by ``r``, so that the repetitions' spread covers the network's draws
    too (replicas of one block share its per-link draws), and each is the same whether it ran with the others,
    was added by a later ``--repeats`` or resumed; one that diverges stops alone (the others run: one draw can
    undo a rate that is stable on the others). ``resume``: the first run goes on from this checkpoint
    (``counted``: the earlier records kept count the time before it). ``meta``: the last run's, with the first
    divergence and growth of any. The runs stop at one interrupted (a Ctrl-C between two of them: the finished
    ones, interrupted)."""
    iterations = method.iterations(plan.budget)
    if resume is not None:  # (read whole by the caller: a damaged one is not given)
        _check_rate(resume, method, lr)
    runs = [(r, 1) for r in range(first, stop)] if draws(plan.network) or method.draws else \
        [(first, stop - first)] * (stop > first)  # (a method's own draws too: a federated one's clients)
    frames, meta, seen = [], {"completed_iterations": iterations}, {}
    for r, count in runs:
        checkpoint = _checkpoint(plan, method, r)
        started = len(frames)
        try:
            frame, meta = _one_run(plan, method, lr, repeats=count, progress=progress, first_repeat=r,
                                   checkpoint=checkpoint, resume=resume if r == first else None,
                                   counted=counted and r == first)
            frames.append(frame)
            for key in ("diverged", "grew"):  # (a repetition that diverged or grew, whichever: the verdict's)
                seen.setdefault(key, meta.get(key))
                seen[key] = seen[key] or meta.get(key)
            if r > 0:
                _finished(checkpoint, meta, method.redrawn(r).iterations(plan.budget))
        except KeyboardInterrupt:  # (in a run's set-up, before its loop caught it, or in the lines after it
            # returned: the runs finished are kept; a Ctrl-C there had lost every repetition of the method)
            if not frames:
                raise
            following = r + (count if len(frames) > started else 0)  # (in the lines after it returned: it is kept)
            meta = {**meta, "interrupted": True}
            if following < stop:  # (the next had not begun: the last finished run's count had read "interrupted at
                # iteration 400 of 400", helper 233)
                meta.update(interrupted_repetition=[following, stop], completed_iterations=0)
            break
        if meta.get("interrupted"):
            if count == 1:  # (one at a time: which one, of how many; the iteration alone read as nearly done)
                meta = {**meta, "interrupted_repetition": [r, stop]}
            break
    return frames, {**meta, **{key: value for key, value in seen.items() if value}}


def _readable(path):
    """Whether the checkpoint ``path`` reads whole (every array of its archive): one cut short or overwritten by
    something else is set aside (helper 214: a checkpoint cut to half its size had made ``--resume`` exit 2)."""
    try:
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as archive:  # (our handle: np.load leaks its
            # own where the archive is damaged)
            for key in archive.files:
                archive[key]
    except DAMAGED:
        return False
    return True


def _check_rate(path, method, lr):
    """A ValueError where the checkpoint ``path`` holds a run of ``method`` at another rate than ``lr`` (another
    comparison wrote into the same folder: its run went on under this one's rate in its records; the runner lets
    a run resumed change its rate, a comparison's may not)."""
    try:
        with np.load(path, allow_pickle=False) as archive:  # (the rate alone: the runner reads the rest)
            saved = np.asarray(archive["opt/lr"], dtype=float)
    except DAMAGED:  # (a damaged file, none of the runner's, or one without a rate: the runner says so)
        return
    if saved.ndim == 0 and not np.array_equal(saved, np.asarray(lr, dtype=float)):
        raise ValueError(f"checkpoint_dir: {path!r} holds a run of {method.label} at lr = {float(saved):g}, but the "
                         f"comparison resumed ran it at {lr:g} (another comparison wrote into the same folder?); "
                         "give each comparison its own checkpoint_dir, or remove that file to run it again")


def _resumed(plan, method, earlier, done):
    """``(first, stop, checkpoint)``: the repetitions of an interrupted evaluation (``earlier``, its records, ``done``
    repetitions in them) that run again, from ``first`` (the earlier records below it kept) to ``stop``, the first
    going on from ``checkpoint`` (None: from the start)."""
    if draws(plan.network) or method.draws:  # one run per repetition: the last recorded goes on (or the next, where
        # it finished)
        last = int(earlier["rep"].max())
        whole = earlier.loc[earlier["rep"] == last, "iteration"].max() >= method.redrawn(last).iterations(plan.budget)
        first = last + 1 if whole else last
        checkpoint = _checkpoint(plan, method, first)
        return first, max(done, plan.repeats), checkpoint if checkpoint and os.path.exists(checkpoint) else None
    added = [first for first in range(1, done) if plan.checkpoint_dir is not None
             and os.path.exists(_checkpoint(plan, method, first))]
    if added:  # the repetitions added to a finished run stopped part-way: they go on from their checkpoint
        return max(added), done, _checkpoint(plan, method, max(added))
    checkpoint = _checkpoint(plan, method, 0)  # goes on from its checkpoint (with the repetitions it had), or again
    return 0, done, checkpoint if checkpoint is not None and os.path.exists(checkpoint) else None


def _evaluate(plan, method, lr, log, progress):
    """(records, meta) of ``method``'s evaluation: a new run, or an earlier comparison's kept, resumed from its
    checkpoint, or given the repetitions it lacks."""
    earlier = plan.previous.get(method.label)
    if earlier is None:
        parts, meta = _repetitions(plan, method, lr, 0, plan.repeats, progress)
        stop = plan.repeats
    else:
        status = str(earlier["status"].iloc[0]) if "status" in earlier.columns else "ok"
        stop = int(earlier["rep"].nunique())
        parts, meta = [earlier], {"completed_iterations": method.iterations(plan.budget)}
        if status == "interrupted":
            first, stop, checkpoint = _resumed(plan, method, earlier, stop)
            what = f"{method.label}: " + ("" if not first else f"repetition {first} " if stop == first + 1 else
                                          f"repetitions {first} .. {stop - 1} ")
            damaged = checkpoint is not None and not _readable(checkpoint)
            checkpoint = None if damaged else checkpoint
            log(what + ("resumed from its checkpoint" if checkpoint else
                        "its checkpoint is damaged: set aside, run again" if damaged else
                        "no checkpoint: run again" if first == int(earlier["rep"].max()) or first == 0 else "run"))
            kept = earlier[earlier["rep"] < first]
            more, meta = _repetitions(plan, method, lr, first, stop, progress, resume=checkpoint,
                                      counted=len(kept) > 0)  # (the earlier total counts the time before it)
            parts = [kept, *more]
            meta = {**meta, "earlier_total_kept": len(kept) > 0}
        else:
            log(f"{method.label}: kept from the earlier comparison ({status}, {stop} repetition{'s' * (stop != 1)})")
            meta["kept"] = earlier
            if status == "diverged" and stop < plan.repeats:  # (its records end finite: more repetitions would
                # have judged it afresh, and ok)
                log(f"{method.label}: diverged in the earlier comparison: no more repetitions")
                stop = plan.repeats
    if not meta.get("interrupted") and not meta.get("diverged") and stop < plan.repeats:  # the repetitions it
        # lacks, on their own streams (and network draws)
        more, meta = _repetitions(plan, method, lr, stop, plan.repeats, progress)
        parts += more
        log(f"{method.label}: {plan.repeats - stop} more repetition{'s' * (plan.repeats - stop != 1)}")
    return _assembled(parts, meta, plan.repeats), meta


def _assembled(parts, meta, repeats):
    """One frame of an evaluation's parts (runs of repetitions, earlier records), its wall time their sum."""
    import pandas as pd

    frame = pd.concat(parts, ignore_index=True)
    frame = frame[frame["rep"] < repeats] if not meta.get("interrupted") else frame
    frame = frame.assign(total_wall_seconds=sum(float(p["total_wall_seconds"].iloc[0]) for p in parts if len(p)))
    return frame.sort_values(["iteration", "rep"], kind="stable").reset_index(drop=True)


def _judged(plan, method, frame, meta, lr, source, record):
    """``(status, diagnosis)`` of an evaluation of ``method`` at ``lr`` (:func:`~.verdict.status_of`)."""
    return status_of(frame, plan.metric, meta, lr=lr, lr_source=source, iterations=method.iterations(plan.budget),
                     tuning=record, context=_context(plan, method))


def _retry_note(failed, also="", again=()):
    """What a diagnosis says of a method shown at :func:`~.verdict.next_stable`'s rate: what its tuned rate did in
    the evaluation (its diagnosis up to its hints) and where it ended (``failed["final"]``, the mean of its
    repetitions' last records, where finite and it was ``unstable``: the rate shown may end higher: helper
    216's Push-Pull, 0.0438 at its tuned rate and 0.0511 at the next); ``also``: what the run shown did too
    (:func:`~.verdict.climbs_too`); ``again``: the next stable rates that failed too (:data:`~.verdict.RETRIES`)."""
    if again:
        said = ", ".join(f"{g['lr']:.3g}, {g['status']}" for g in again)
        return (_retry_note(failed).replace("; shown at the next stable rate of its tuning", "")
                + f"; so {'were' if len(again) > 1 else 'was'} the next stable rate{'s' * (len(again) > 1)} of its "
                f"tuning ({said}); shown at the next stable rate below {'them' if len(again) > 1 else 'it'}"
                + (f", where {also}" if also else ""))
    why = cause(str(failed.get("diagnosis", "")))
    final, metric = failed.get("final"), failed.get("metric")
    ended = f", its {metric + ' ' if metric else ''}ending at {final:.3g}" \
        if isinstance(final, (int, float)) and math.isfinite(final) and failed.get("status") == "unstable" else ""
    # (a diverged run's end says nothing its growth does not; the metric named: "ending at 0.00576" had read as a
    # rate, helper 223)
    return (f"the tuned rate {failed['lr']:.3g} was {failed['status']}{ended}" + (f": {why}" if why else "")
            + "; shown at the next stable rate of its tuning" + (f", where {also}" if also else ""))


def _forget_runs(plan, method):
    """The checkpoints of ``method``'s evaluation runs removed (where the comparison keeps them)."""
    for first in range(plan.repeats):
        path = _checkpoint(plan, method, first)
        if path is not None:
            try:
                os.remove(path)
            except FileNotFoundError:  # (none kept, or another MPI rank removed it)
                pass


def run_method(plan, method, *, progress=False, log=None):
    """Tune (unless its rate is given), evaluate and judge one method of ``plan``: its :class:`Outcome`.

    KeyboardInterrupt during the tuning propagates (nothing of this method is kept but, with a checkpoint folder,
    its finished stages, which also stay until its evaluation ran: one interrupted before its first record tunes
    again in no time); during the evaluation the runner stops cleanly and the outcome is ``interrupted``.
    """
    log = log or (lambda line: None)
    lr, source, record = method.lr, method.lr_source, plan.tuned.get(method.label)  # (an earlier comparison's:
    # the tuning that chose the rate its runs go on with)
    if lr is None:
        try:
            lr, record = tune(plan.network, plan.objective, method, plan.budget, plan.ranked, seed=plan.seed,
                              backend=plan.backend, grid=plan.grid, log=log, checkpoint_dir=plan.checkpoint_dir,
                              keep_stages=True, progress=progress)
        except NoStableRate as exc:  # (on a harsh network: the comparison goes on, the table says why)
            record, lr, source = exc.record, exc.fallback, UNTUNABLE
            log(f"{method.label}: no rate tried stays stable: shown at {lr:g}, "
                + record.get("fallback", "the one that ended lowest in the tuning runs"))
        except KeyboardInterrupt:  # (a user's trial: nothing said which method stopped, or what was kept)
            log(f"{method.label}: interrupted while tuning" + ("; --resume goes on from its stages' checkpoints"
                                                             if plan.checkpoint_dir is not None else ""))
            raise
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
        reps = int(kept["rep"].nunique())
        if status == "diverged" and reps < plan.repeats and KEPT_DIVERGED not in diagnosis:  # (the table's caption
            # says the comparison's repetitions: its values are over fewer, and only the terminal had said so,
            # helper 266)
            diagnosis += f" ({KEPT_DIVERGED} {reps} repetition{'s' * (reps != 1)}: no more run)"
    else:
        status, diagnosis = _judged(plan, method, frame, meta, lr, source, record)
        tries = 0 if source == "tuned" else 1 + len(record.get("retried_also", ())) if source == NEXT_STABLE and (
            record or {}).get("retried") else RETRIES  # (a resumed retry counts those before it)
        while tries < RETRIES and status in RETRIED and (alt := next_stable(record, lr)) is not None:
            # the evaluation's draws undid the tuned rate: once more, at the next stable one (and below it)
            log(f"{method.label}: {status} at its {'tuned' if tries == 0 else 'next stable'} rate {lr:g}: run again "
                f"at the next stable rate of its tuning{' below it' if tries else ''}, {alt:g}")
            spent = float(frame["total_wall_seconds"].iloc[0])
            with np.errstate(invalid="ignore", over="ignore"):
                final = float(np.mean(ends(frame, plan.metric))) if plan.metric in frame.columns else math.nan
            final = final if math.isfinite(final) else None  # (lr.json's: strict JSON)
            failed = {"lr": lr, "status": status, "diagnosis": diagnosis, "wall_seconds": spent, "next_stable": alt,
                      "final": final, "metric": plan.metric}  # (next_stable: the rate run, which tuning.png marks)
            record = {**record, "retried": failed} if tries == 0 else {
                **record, "retried": {**record["retried"], "next_stable": alt},
                "retried_also": [*record.get("retried_also", ()), failed]}
            tries += 1
            lr, source = alt, NEXT_STABLE
            _forget_runs(plan, method)  # (the failed rate's checkpoints: a resume goes on at the new rate)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                parts, meta = _repetitions(plan, method, lr, 0, plan.repeats, progress)
            frame = _assembled(parts, meta, plan.repeats)
            frame["total_wall_seconds"] += spent  # (the method's time: both runs)
            status, diagnosis = _judged(plan, method, frame, meta, lr, source, record)
        if source == NEXT_STABLE and (record or {}).get("retried"):  # (run at it, or resumed there)
            also = climbs_too(frame, plan.metric) if status == "ok" and record["retried"].get("status") == "unstable" \
                else ""
            diagnosis = _retry_note(record["retried"], also, record.get("retried_also", ())) + (
                f"; here: {diagnosis}" if diagnosis else "")
            if meta.get("earlier_total_kept") is False:  # (resumed from its first repetition: no earlier record
                # carries the failed rate's run's time)
                failed = (record.get("retried_also") or [record["retried"]])[-1]  # (the last: its time counts
                # those before it, helper 243)
                frame["total_wall_seconds"] += float(failed.get("wall_seconds", 0.0))
    if record is not None and plan.checkpoint_dir is not None:  # (its records hold the rate now)
        forget_stages(plan.checkpoint_dir, method.label, record)
    frame["lr_source"] = source
    frame["diverged"] = status == "diverged"
    frame["status"] = status
    frame["diagnosis"] = diagnosis
    parts = clauses(diagnosis)  # (the whole diagnosis is the table's: helper 202 read 900 characters twice)
    said = parts[0] if status != "ok" or len(parts) < 2 else f"{parts[0]}; {parts[-1]}"  # (an ok run's last: "it is
    # ranked", "shown at the next stable rate"; its first alone had read as a failure, helper 208)
    log(f"{method.label}: {status} ({frame['total_wall_seconds'].iloc[0]:.1f} s)" + (f": {said}" if said else "")
        + (" (in full with the table)" if said != diagnosis else ""))
    return Outcome(method.label, frame, status, diagnosis, lr, source, record)
