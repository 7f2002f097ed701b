"""What a comparison says of each run: its status, one line of diagnosis when it is not ``ok``, and ranks that
only separate what the repetitions can tell apart.

Statuses (:data:`STATUSES`):

* ``ok``: ran the whole budget, finite, and ended below :data:`NO_PROGRESS` times its start;
* ``diverged``: a NaN or Inf (a :class:`~rowstoch_fast.DivergenceError`), or its gradient norm, loss or the
  compared metric grew a thousandfold (:data:`~rowstoch_fast.runner.GROWTH_WARNING`) without one (in the mean of
  the repetitions, or in one of them), or another recorded metric did (:data:`WATCHED`: a consensus error that
  runs off);
* ``no-progress``: ended above :data:`NO_PROGRESS` times its start;
* ``unstable``: the run climbs off at the end of its budget: its ranked metric ends above its lowest level by the
  tuner's stability factor (where the repetitions ran one trajectory; tenfold, and still rising, where they differ,
  or twice at an even pace to the end: :func:`_ramp`), or its consensus error runs off at the end of the budget
  (:func:`~rowstoch_fast.compare.tuning.climbs`), or some of its repetitions, not all, go back above their start
  (at the end, or after falling below half of it) while the others make progress (a rate one draw undoes), or run
  off far below it (:func:`_repetitions_run_off`), or its repetitions of one trajectory end far apart (rounding
  differences grown: :func:`_chaotic`). A
  tuned rate found ``diverged`` or ``unstable`` runs again at the best stable rate of the tuning at least a fifth
  of a decade below it (:func:`next_stable`; once more below that where it fails too: :data:`RETRIES`), and the
  table shows that run, its rate's source ``next stable``
  (where the tuned rate was ``unstable``, its diagnosis says where that rate ended, and whether the run shown climbs
  too: :func:`climbs_too`).
  Where the tuner found no stable rate (its source ``none stable``), the rate shown is its fallback
  (:func:`~rowstoch_fast.compare.tuning.tune`'s) and its evaluation's repetitions decide the status as above, the
  diagnosis saying what no rate of the grid did (:func:`none_did`, :func:`tuning_failures`); where the tuning
  rejected that very rate for a climb, a climb of the evaluation's typical curve by the tuner's own rule makes it
  ``unstable`` too (:func:`_climbs_again`);
* ``interrupted``: stopped by Ctrl-C or SIGTERM before the end of its budget (``--resume`` continues it).

Only ``ok`` runs are ranked and only they can be bold. Ranks (:func:`ranks`): a method's rank is one plus the
number of methods that are *distinguishably* better, where two methods are distinguishable when the means of the
logarithms of their final values differ by more than ln :data:`TIE_MARGIN` (a ratio of 1.1: within it, a tuned
rate's resolution) and by more than a two-sided test tells at a family-wise level of :data:`TIE_LEVEL` over
every pair of the section's methods (:func:`holm`: Holm's step-down, valid whatever the dependence between the
pairs; m counts the pairs tested: a pair within rounding, or with a method of one repetition, is not); methods
that cannot be told apart share a rank. The test is paired where the two methods ran the same repetitions (two or
more: repetition ``r`` of every method draws the same gradient streams and network draws, and a draw that is hard
for one is hard for the others), on the differences of their logarithms repetition by repetition (:func:`_paired`:
a method 10-25x worse than another in every one of four repetitions had been tied with it by the unpaired test,
whose spreads carry the shared draws' own, helper 195); Welch's otherwise (:func:`welch_p`: Student's t at the
Welch-Satterthwaite degrees of freedom; a method of an earlier comparison kept beside them, with other
repetitions). Each section of a table (graph, setting) is its own family, as it is ranked on its own. Tested pair
by pair at 5% each, 19 methods that were one and the same had been told apart 86-89% of the time (171 pairs:
about 8.5 false separations expected); with Holm's, 2-5% (4.95% over 4,000 simulated tables of ten identical
methods sharing each repetition's draw, paired). The price is power at few repetitions: at five, a method 2x worse
than ten others (their logarithms spread 0.3) is told worse than one of them about half the time; at ten, 99%.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np

from .._checks import as_float_array, check_bool, check_positive_float
from .. import report
from ..report import TIE_LEVEL, TIE_MARGIN, rate_text  # (the rule, below the harness: the tables' footnotes say
# it)
from ..runner import GROWTH_WARNING
from .tuning import (CLIMB, CONVERGED, NO_PROGRESS, SEARCH_DECADES, SPREAD, STABILITY_FACTOR, TAIL, UNTUNABLE, climbs,
                     final_estimate,
                     _short_climb, _tail, off_its_minimum, rising, runaway, smoothed, typical_curve)

__all__ = ["STATUSES", "NO_PROGRESS", "TIE_LEVEL", "TIE_MARGIN", "NEXT_STABLE", "RETRIES", "status_of", "ranks", "holm",
           "welch_p", "cause", "clauses", "climbs_too", "tuning_failures", "hint_outcomes", "next_stable"]

STATUSES = ("ok", "diverged", "no-progress", "unstable", "interrupted")
#: The statuses of an evaluation at a tuned rate that run it again at :func:`next_stable`'s rate.
RETRIED = ("diverged", "unstable")
#: ``lr_source`` of a method run at :func:`next_stable`'s rate, its tuned rate having failed in the evaluation.
NEXT_STABLE = "next stable"
#: The factor at least between a tuned rate that failed in the evaluation and the rate run in its place, where the
#: tuning judged one that far below stable: a fifth of a decade, more than the refinement's eighth step (a draw that
#: undoes the tuned rate is about as likely an eighth below it) and less than its quarter step, so that the grid's
#: points and the quarter points below it qualify. Helper 144's robust gradient-push (a lossy network) went back
#: above its start in 1 of 64 repetitions at its tuned 0.00316, and held in all at the grid's 0.001995 below it.
RETRY_STEP = 10.0 ** 0.2
#: The most runs at :func:`next_stable` rates after a tuned rate failed in the evaluation (each at least
#: :data:`RETRY_STEP` below the one before): two. Helper 242's Pull-Diag-GD on a sleepy two-cluster graph diverged
#: in 1 of 5 repetitions at its tuned 1e-4 and again at the next stable 5.62e-5 (1 in 20 repetitions there), and
#: was shown diverged and left unranked though 4.22e-5 held on all 20 and ended below a ranked method.
RETRIES = 2
# NO_PROGRESS (from .tuning, the tuner's rule too): a run whose final value (mean over repetitions) is above half
# its start made no progress. Its start is the same point for every repetition, its end a mean whose
# record-to-record noise on a plateau reaches the tuner's stability factor (2x), so less than a 2x reduction
# cannot be told from a run that never moved.


def _fmt(v):
    return f"{v:.3g}"


def _range(rates):
    rates = sorted(rates)
    return _fmt(rates[0]) if len(rates) == 1 else f"{_fmt(rates[0])}..{_fmt(rates[-1])}"


def clauses(diagnosis):
    """A diagnosis cut at each ``"; "`` outside parentheses: what the run did first, then the rates' details, the
    rate shown and the hints (:func:`cause`)."""
    parts, depth, begin = [], 0, 0
    for i, char in enumerate(diagnosis):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth <= 0 and diagnosis.startswith("; ", i):
            parts.append(diagnosis[begin:i])
            begin = i + 2
    return parts + [diagnosis[begin:]]


def cause(diagnosis):
    """A diagnosis up to its first ``"; "`` outside parentheses: what the run did, without the rates' details that
    follow it or its hints (a comparison's live line, a retried rate's note; the whole diagnosis is the table's).

    >>> cause("no rate in 0.1..1 made progress (0.1 made no progress (ending at 0.9x); 1 diverged); try R >= 4")
    'no rate in 0.1..1 made progress (0.1 made no progress (ending at 0.9x); 1 diverged)'
    """
    return clauses(diagnosis)[0]


def tuning_failures(record):
    """One phrase of why the rates of a tuning ``record`` were rejected, consecutive rates with the same reason
    grouped (``"1e-4..0.001 made no progress (ending at 0.98-1x their start); 0.00316 ended above their start
    (at 3.2x); 0.01 grew (ending at 4.2e+05x their start); 0.0316..10 diverged (NaN/Inf by
    iteration 40-300)"``): "grew" is the tuner's (past a thousandfold, what the evaluation calls diverged), and the
    rates that made no progress and ended above their start, short of it, are said apart from both."""
    why = _rejections(record)
    groups = []
    for lr in sorted(why):
        kind = _kind(why[lr])
        if groups and groups[-1][0] == kind:
            groups[-1][1].append(lr)
        else:
            groups.append((kind, [lr]))
    parts = []
    for kind, rates in groups:
        numbers = [float(t) for lr in rates for t in _numbers(why[lr])]
        detail = ""
        if numbers and kind == "diverged":
            detail = f" (NaN/Inf by iteration {_span(numbers, int)})"
        elif numbers and kind in ("no progress", "grew"):
            detail = f" (ending at {_span(numbers)}x their start)"
        elif numbers and kind == "rose":
            detail = f" (at {_span(numbers)}x)"
        elif numbers and kind == "unstable":
            detail = f" (ending {_span(numbers[::2])}x above their minimum)"
        elif numbers and kind == "ran off":
            detail = (f" (their nodes' consensus error past {GROWTH_WARNING:g}x its early peak, or climbing "
                      f"to the end, by iteration {_span(numbers, int)})")
        verb = {"diverged": "diverged", "grew": "grew", "rose": "ended above their start",
                "no progress": "made no progress",
                "unstable": "were unstable"}.get(kind, kind)
        parts.append(f"{_range(rates)} {verb}{detail}")
    return "; ".join(parts)


def _rejections(record):
    """``{lr: why}`` of the rates a tuning ``record`` rejected: a later stage's judgement of a rate replaces an
    earlier one's (a confirmation judges its contenders on more streams)."""
    why = {}
    for stage in record.get("stages", ()):
        for lr in stage["scores"]:
            if lr in stage["rejected"]:
                why[lr] = stage["rejected"][lr]
            else:
                why.pop(lr, None)
    return why


def _kind(why):
    """The kind of a rejection's reason: its first words, "rose" for "no progress" above its start (short of a
    thousandfold: "0.0001..1 made no progress (ending at 0.795-298x)" undersold it, and "grew" is the tuner's word
    for past a thousandfold)."""
    kind = why.split(" (")[0]
    return "rose" if kind == "no progress" and any(float(t) > 1.0 for t in _numbers(why)) else kind


#: The kinds of rejection of rates that stayed in range but did not get far enough (:func:`none_did`).
SHORT = ("no progress", "rose")


def none_did(record):
    """What no rate of a tuning ``record`` did, as "no rate in ... ___ over the budget" says it: "was stable" where
    each was rejected as unstable or diverging, "made progress" where each stayed in range without getting below
    half its start (helper 195: least squares of condition 1e5 ranked by ``distance``, every rate from 1e-4 to 1.33
    within 5% of its start, read "no rate in 0.0001..10 was stable"), both where some did one and some the other."""
    kinds = {_kind(why) for why in _rejections(record).values()}
    if kinds and kinds <= set(SHORT):
        return "made progress"
    return "made progress and stayed stable" if kinds & set(SHORT) else "was stable"


def next_stable(record, lr):
    """The rate that a tuned rate ``lr`` found ``diverged`` or ``unstable`` in the evaluation runs again at: of the
    rates at least :data:`RETRY_STEP` below it that the tuning (``record``,
    :func:`~rowstoch_fast.compare.tuning.tune`'s) judged stable (a finite score; a later stage's, on more streams,
    over an earlier's), the one that ended lowest; None where there is none (no retry: a rate closer to the one
    undone is about as likely to fail). The tuning chose ``lr`` on its own streams and draws; the evaluation's
    repetitions drew what undid it, and the method is then shown at the best rate that the tuning found stable with
    room to spare, not left unranked at a rate no run holds."""
    scores = _last_scores(record)
    climbed = _kept_rates(record)  # (kept for ending far below the steady rates, climbing all the same: a retry
    # goes to a steady one, helper 197)
    reach = lr * 1.000001 / RETRY_STEP  # (lr.json's rates are rounded to 6 digits: a resumed record's)
    with np.errstate(invalid="ignore"):
        pool = {float(r): float(v) for r, v in scores.items() if np.isfinite(v) and float(r) <= reach
                and not _among(r, climbed)}
    return min(pool, key=lambda r: (pool[r], -r)) if pool else None


def _last_scores(record):
    """``{lr: score}`` of a tuning ``record``'s stages, a later stage's (on more streams) over an earlier's."""
    scores = {}
    for stage in (record or {}).get("stages", ()):
        scores.update(stage.get("scores") or {})
    return scores


def _kept_rates(record):
    """The rates a tuning ``record`` kept although they climbed (``kept_climbing``; lr.json's keys are strings)."""
    return {float(r) for r in (record or {}).get("kept_climbing") or {}}


def _among(lr, rates):
    """Whether ``lr`` is one of ``rates`` (to lr.json's six digits)."""
    return any(abs(float(lr) / c - 1) < 1e-5 for c in rates)


def _numbers(text):
    import re

    return re.findall(r"[-+]?\d*\.?\d+(?:e[-+]?\d+)?", text.split("(", 1)[1]) if "(" in text else []


def _span(values, cast=float):
    f = (lambda v: str(int(v))) if cast is int else _fmt
    lo, hi = f(min(values)), f(max(values))
    return lo if lo == hi else f"{lo}-{hi}"  # (as printed: "1.49-1.49x" of two values a rounding apart)


def _tracker_hint(context, status=None, lr_source=None):
    """What a Pull-Diag tracker does on this graph, and what to try: ``context["tracker_peak"]`` its largest scale
    ``1/[A^k]_ii`` and the limit ``1/min(pi)`` (a pair, a number for both, or a function that gives them: asked
    for here, where a run is not ``ok``). The largest scale, not the limit: on a directed ring of 64 nodes
    ``1/min(pi)`` is 64 while the exact tracker's ``1/[A^63]_ii`` is 9.2e18, and a method that went to NaN at
    iteration 62 had been told nothing. On a schedule (``context["schedule"]``) instead, where the run's ``status``
    is ``no-progress`` or ``unstable``: that the tracker is exact on a static network only (a rate that blew up is
    not the schedule's doing; the push family suggested only where no messages are lost). Where messages are lost
    (``context["loses"]``, losses or sleep: each round's matrix differs) and the method tracks gradients
    (``context["tracks"]``): the offset the tracked gradients keep from the first rounds, which no later round
    removes, whatever the status but a given rate's divergence (``lr_source``: a rate too large there, helper 174's
    lr = 10 on a graph where the tuned rates end ok). Helper 172: Pull-Diag-GT under 10% losses on a directed ring
    of 16 grew at every rate below 1e-4, its models drifting by lr times an offset of 9.4e3 against gradients that
    sum to 46; the hint had named the static graph's scales and more gossip rounds, which MG-Pull-Diag-GT's 3
    iterations of 590 rounds did not help."""
    loses = context.get("loses")
    if context.get("tracker_peak") and loses and context.get("tracks") and not (
            status == "diverged" and lr_source not in ("tuned", UNTUNABLE)):
        why = f"this network {' and '.join(loses) if isinstance(loses, (list, tuple)) else 'loses messages'}"
        return ("; its tracker's D_t is the diagonal of the product of the rounds' matrices since iteration 0, and "
                f"gradient tracking is exact only where they do not change: {why}, so each round's matrix differs, "
                "and the tracked gradients keep an offset from the first rounds (where 1/[D_t]_ii is largest) that "
                "no later round removes: the models drift by about lr times it, whatever the rate; "
                + _robust_try(context, "the other push-sum methods lose mass with every lost message"))
    if context.get("tracker_peak") and context.get("schedule"):  # (one matrix's scales would mislead: helper 158's
        # "1/min(pi) = 423" was the first of three matrices', and the same graph held still ran ok)
        if status not in ("no-progress", "unstable"):  # (a rate that blew up: the schedule is not why)
            return ""
        return ("; its tracker's D_t is the diagonal of the product of the rounds' matrices since iteration 0, which "
                "tracking needs only where they do not change: exact on a static network only, short of the "
                "minimiser on a schedule" + ("" if context.get("loses") else  # (lost messages drain the push family:
                                             ": try an algorithm of the push family"))  # its own line says so)
    peak = context.get("tracker_peak")
    peak = peak() if callable(peak) else peak
    peak, limit = peak if isinstance(peak, tuple) else (peak, peak)
    if not peak or peak < 100:
        return ""
    lossy = context.get("lossy")
    why = f"this network {' and '.join(loses)}; " if isinstance(loses, (list, tuple)) else ""
    sleeps = isinstance(loses, (list, tuple)) and any("sleep" in phrase for phrase in loses)
    other = (_robust_try(context, f"{why}a push-sum method loses mass with every lost message"
                         f"{', and heavy sleep drains even theirs' if sleeps else ''}") if loses
             else "try more gossip rounds (mg-, --mg-rounds) or an algorithm of the push family")  # (where the
    # rounds' matrices differ, more rounds of them are no cure: helper 172)
    scale = (f"1/[A^k]_ii, up to {_fmt(peak)} on this graph before it settles at 1/min(pi) = {_fmt(limit)}"
             if peak > 1.5 * limit else
             f"1/[A^k]_ii, up to {_fmt(peak)} on this graph (1/min(pi) = {_fmt(limit)})" if peak > limit else
             f"1/[A^k]_ii -> 1/min(pi) = {_fmt(limit)} on this graph")
    return (f"; its tracker scales node gradients by {scale}: {other}" + ("" if lossy else
                                                                                 " (or --tracker perron)"))


def _robust_try(context, why=""):
    """The loss-robust methods a hint suggests (``why``: the reason, after a colon): those that run on this problem
    (``context["robust"]``: their names, or a function that gives them; all of the family where the context does
    not say), or, where none does, that none runs here (helper 212: SONATA on a lasso problem over a sleepy ring had
    been told to try robust-gradient-push and r-fast, which take no proximal step and were refused there)."""
    names = context.get("robust")
    names = names() if callable(names) else names
    family = family_members("loss-robust")
    if names is None:
        names = family
    if names:
        return f"try a loss-robust method ({', '.join(names)}{': ' + why if why else ''})"
    return (f"no loss-robust method ({', '.join(family)}) runs on this problem"
            + (f" ({why})" if why else ""))


def family_members(word):
    """The registry names of the methods whose family names ``word`` (``"loss-robust"``, ``"compressed"``)."""
    from ..algorithms import REGISTRY

    return [name for name, cls in REGISTRY.items() if word in cls.family]


def _suggested(diagnosis):
    """The registry names of the methods a diagnosis suggests trying (:func:`_tracker_hint`'s "an algorithm of the
    push family" and "a loss-robust method", :meth:`~rowstoch_fast.DivergenceError.starved`'s "one that pulls with
    a row-stochastic matrix", :func:`_effects_note`'s "a method made for compressed messages"), by what they gossip
    with (a column-stochastic matrix ``C``, the row-stochastic one alone ``A``) or their family."""
    from ..algorithms import REGISTRY

    names = set()
    if "push family" in diagnosis:
        names |= {name for name, cls in REGISTRY.items() if "C" in cls.matrices}
    if "loss-robust method" in diagnosis:
        names |= set(family_members("loss-robust"))
    if "one that pulls" in diagnosis:
        names |= {name for name, cls in REGISTRY.items() if tuple(cls.matrices) == ("A",)}
    if "made for compressed messages" in diagnosis:
        names |= set(family_members("compressed"))
    return names


def hint_outcomes(diagnosis, outcomes, own=None):
    """``diagnosis`` with what became, in the same comparison, of the methods it suggests trying (``"...; of the
    methods suggested, here: push-pull no-progress, sgp ok"``), so that a hint is not read as advice the comparison
    itself refutes (helper 144: "an algorithm of the push family" where Push-Pull had made no progress on that run;
    "one that pulls" where Pull-Diag-GT and FROST had made none). ``outcomes``: ``{label: status}`` of the
    comparison's methods (a label is a registry name or ``"mg-" + name``), ``own`` the diagnosed method's label
    (left out). Unchanged where it suggests none of them."""
    from ..algorithms import method_of

    suggested = _suggested(diagnosis)
    seen = [f"{label} {status}" for label, status in outcomes.items()
            if label != own and method_of(str(label)) in suggested]
    return diagnosis + (f"; of the methods suggested, here: {', '.join(seen)}" if seen else "")


def status_of(frame, metric, meta, *, lr, lr_source, iterations, tuning=None, context=None):
    """``(status, diagnosis)`` of one method's evaluation run: ``frame`` its records (every repetition), ``meta``
    its :class:`~rowstoch_fast.History`'s (``diverged``, ``grew``, ``completed_iterations``), ``lr`` and where it
    came from, its budget in ``iterations``, ``tuning`` the tuner's record and ``context`` what the harness knows
    of the problem (``tracker_peak``: the largest scale of a Pull-Diag tracker, :func:`_tracker_hint`; ``lossy``: not a
    static matrix; ``loses``: what its layers do that drops messages, :func:`~rowstoch_fast.network.losses_of`;
    ``converged``: the fraction of its start at rounding, :func:`~rowstoch_fast.compare.tuning.converged_for`;
    ``effects``: what its layers do to the messages, :func:`~rowstoch_fast.network.effects_of`; ``compresses``: the
    method is one made for compressed messages, ``for_compression`` those that run on this network (or a function
    that gives them), :func:`_effects_note`; ``pushes``: it pushes mass through a column-stochastic matrix,
    :func:`_push_hint`; ``schedule``: the matrices of a :class:`~rowstoch_fast.network.Schedule` the weights go
    through, where they change from round to round, :func:`_effects_note` and :func:`_tracker_hint`).
    The diagnosis is one line derived from what the run and the tuner recorded ("" for ``ok``, but for an ``ok`` run
    near the no-progress bar, :func:`_near_the_bar`, or at a rate the tuner found none stable or retried, and the
    notes of :func:`_settled_above`, :func:`_growing`, :func:`_at_the_reach` and :func:`_schedule_bias`)."""
    context = context or {}
    done = int(meta.get("completed_iterations", iterations))
    by = frame.groupby("iteration", sort=True)[metric]
    with np.errstate(invalid="ignore", over="ignore"):
        means = by.mean()
    start = float(means.iloc[0]) if len(means) else math.nan
    end = float(means.iloc[-1]) if len(means) else math.nan
    at = f"at lr {rate_text(lr)}"  # (the rate as the tables print it: helper 159)
    if meta.get("interrupted") or done < iterations and not meta.get("diverged"):
        rep, of = meta.get("interrupted_repetition") or (None, None)
        where = f"in repetition {rep} (of 0 .. {of - 1}) " if rep is not None else ""
        return "interrupted", (f"interrupted {where}before its first step; --resume runs it" if done == 0 and where
                               else f"interrupted {where}at iteration {done} of {iterations}; --resume continues it "
                               "from its checkpoint")
    status, diagnosis, too_small, kept_note = "ok", "", False, ""
    some, short = _diverged_repetitions(frame, metric, start, iterations)
    if short and not meta.get("diverged"):  # (a repetition that stopped before the budget: NaN or Inf, recorded
        # in an earlier part of a resumed evaluation)
        meta = {**meta, "diverged": {"message": "NaN/Inf", "iteration": short}}
    if meta.get("diverged"):
        d = meta["diverged"]
        status, diagnosis = "diverged", (f"{d.get('message', 'NaN/Inf')} (iteration {d.get('iteration')} of "
                                         f"{iterations} {at})")
    elif not meta.get("grew") and not math.isfinite(start) and not math.isfinite(end):  # (its iterates finite,
        # every record of the metric NaN: a user metric that returns NaN, an f* it cannot reach)
        status = "diverged"
        diagnosis = (f"{metric} was not finite from its start (iteration 0, before any step) to its end, at finite "
                     f"iterates: the metric, not the run; it ranks nothing {at}")
    elif meta.get("grew") or not math.isfinite(end):
        status = "diverged"
        diagnosis = (meta.get("grew") or f"{metric} ended at {end}").split(": the run diverges")[0] + f" {at}"
    elif math.isfinite(start) and start > 0 and end > GROWTH_WARNING * start:  # (the ranked metric itself)
        status = "diverged"
        diagnosis = f"{metric} grew {end / start:.3g}x ({_fmt(start)} -> {_fmt(end)}) {at}"
    elif exploded := _exploded(frame, metric, context.get("spread_floor", 0.0)):
        status, diagnosis = "diverged", f"{exploded} {at}"
    elif (climbed := _climbing(frame, metric, means, start, context.get("one_trajectory", False),
                               context.get("converged", CONVERGED), context.get("spread_floor", 0.0))) \
            and climbed.startswith(f"{metric} ") and (kept := _kept_climb(tuning, lr, lr_source, end)) \
            and _climbs_as_kept(frame, metric, context.get("converged", CONVERGED)):  # (the ranked metric's climb,
        # as the tuner read it; a consensus error that runs off is the run's)
        kept_note = f"{climbed} {at}, {kept}"
        if bad := (_repetitions_above_start(frame, metric, start)
                   or _repetitions_run_off(frame, metric, start, context.get("converged", CONVERGED))):
            status, diagnosis, kept_note = "unstable", f"{bad} {at}", ""  # (one draw that ran off, not the noise
            # every rate gathers: helper 258's fifth repetition at 1,162x the median, the mean 42x below the steady
            # rates, had read ok)
    elif climbed:
        status, diagnosis = "unstable", f"{climbed} {at}"
        if math.isfinite(start) and start > 0 and end > start:  # (helper 188: "climbed back 2.61x above its lowest
            # level" of a Pull-Diag-GT that went to 176,000x its start at iteration 24 and ended at 86x)
            diagnosis += f"; it ended at {end / start:.3g}x its start"
        diagnosis += _peak(means, start, end)  # (below its start too: helper 190's spike to 10,000x its start)
    else:
        floor = context.get("converged", CONVERGED) * abs(start) if math.isfinite(start) else 0.0
        if math.isfinite(start) and start > 0 and end > NO_PROGRESS * start and end > floor:
            status = "no-progress"
            diagnosis = f"{metric} ended at {end / start:.3g}x its start ({_fmt(start)} -> {_fmt(end)}) {at}"
            lowest = means.iloc[1:].idxmin() if len(means) > 1 else None
            low = means[lowest] if lowest is not None else math.inf
            if low < NO_PROGRESS * start:  # (it went down and came back: "no progress" read as "never moved")
                fell = f"{low / start:.3g}x its start" if low > 0 else _fmt(low)  # (a loss may go below 0)
                diagnosis += f"; it fell to {fell} by iteration {int(lowest)}, then climbed back"
            diagnosis += _peak(means, start, end)
            diagnosis += _mean_of_a_few(frame, metric, start)
            tried = sorted(lr for stage in (tuning or {}).get("stages", ()) for lr in stage["scores"])
            if lr_source == "tuned" and tried and lr <= tried[0] and _still_falling(means):  # (at a noise floor
                # a longer budget does not help: helper 145's FROST at 0.502x its start, said "too short")
                diagnosis += "; the smallest rate tried: the budget may be too short for this method"
            elif lr_source == "given" and low >= NO_PROGRESS * start and float(means.max()) <= start \
                    and _still_falling(means):  # (a given rate too small: Pull-Diag-GT at lr 1e-6, 0.969x its start
                # after 400 iterations, had been told of its tracker's scales and more gossip rounds; one that went
                # above its start first is not, helper 197)
                diagnosis += "; still falling at the end: a larger lr or a longer budget"
                too_small = True  # (the hints are of a method's failures, not of a rate too small)
        elif above := _repetitions_above_start(frame, metric, start):
            status, diagnosis = "unstable", f"{above} {at}"
        elif chaotic := _chaotic(frame, metric, start, context):
            status, diagnosis = "unstable", f"{chaotic} {at}"
        elif off := _repetitions_run_off(frame, metric, start, context.get("converged", CONVERGED)):
            status, diagnosis = "unstable", f"{off} {at}"
    unread = _nan_repetitions(frame, metric)
    if some and status != "diverged":  # (a repetition past a thousandfold its start, the mean not: one draw that
        # undid the rate; frost's 1,161x in 1 of 4 repetitions read "no-progress, ended at 443x its start")
        status, diagnosis = "diverged", (f"{metric} ended NaN in some repetitions {at}" if unread else
                                         f"{metric} grew past {GROWTH_WARNING:g}x its start {at}")
    if lr_source == UNTUNABLE:  # the tuner's finding first, then what the run shown did
        grid = [lr for stage in (tuning or {}).get("stages", ()) for lr in stage["scores"]]
        tried = f"{_fmt(min(grid))}..{_fmt(max(grid))}" if grid else "the grid"
        if (tuning or {}).get("alike"):  # (rates a decade apart did alike: the engine's "lr = ... too large?" of
            # a non-finite iterate blamed a rate that did not matter; helper 153: "(lr = 1e-12 too large?)")
            diagnosis = re.sub(r"\(lr = [^;)]* too large\?; or ", "(", re.sub(r" \(lr = [^;)]* too large\?\)", "",
                                                                           diagnosis))
        diagnosis = (f"no rate in {tried} {none_did(tuning or {})} over the budget ({tuning_failures(tuning or {})}); "
                     f"shown {at}, {(tuning or {}).get('fallback', 'the one that ended lowest in the tuning runs')}"
                     + (f": {diagnosis}" if diagnosis else ""))
        if status == "ok":  # (the evaluation's repetitions decide, read as the tuner reads a rate: the level their
            # records end at, not the last one, which a spiky curve can draw low; helper 152: FROST's last record at
            # 0.38x its start, level with the leaders, its last 12 records' mean at 0.70x, 1.7x the leader's)
            level = _level(means, context.get("converged", CONVERGED))
            again = _climbs_again(frame, metric, tuning, lr, start, context.get("converged", CONVERGED))
            if again is not None:
                status = "unstable"
                diagnosis += (f"; the evaluation's repetitions climbed off their minimum too: {metric} ended "
                              f"{again[0]:.3g}x above its lowest level (iteration {again[1]}), as the tuning runs "
                              "did at this rate")
            elif level < NO_PROGRESS * start:
                return "ok", diagnosis + "; the evaluation's repetitions ended ok at it, and it is ranked"
            else:
                status = "no-progress"
                diagnosis += (f"; its records' level at the end is {level / start:.3g}x its start (the last "
                              f"record {end / start:.3g}x), not below {NO_PROGRESS:g}x of it")
    if status != "ok" and (some or unread):
        diagnosis += f" ({'; '.join(part for part in (some, unread) if part)})"
    if status == "no-progress" and too_small:
        return status, diagnosis + _effects_note(context, said=diagnosis)
    if status != "ok":
        grew = not meta.get("diverged") and math.isfinite(start) and (status != "no-progress" or end > start)  # (a
        # run that failed without a NaN: not a metric NaN from its start, helper 178, the metric and not the run, nor
        # a rate too small, helper 177's 0.982x its start at lr 1e-5, as without losses)
        hints = (_push_hint(context, diagnosis) + _tracker_hint(context, status, lr_source)
                 + (_stranded_hint(context, diagnosis, frame, metric) if grew else ""))
        return status, diagnosis + _effects_note(context, said=diagnosis + hints) + hints
    notes = [note for note in (_near_the_bar(frame, metric, start, end),
                               "" if kept_note else  # (the kept climb says it: "settled 5.56x above" beside
                               # "climbed back 5.56x" had said it twice, helper 257)
                               _settled_above(frame, metric, start, context.get("converged", CONVERGED), lr_source),
                               _growing(frame, context.get("spread_floor", 0.0)),
                               _at_the_reach(lr, lr_source, tuning),
                               _schedule_bias(means, start, context, metric, lr_source), kept_note) if note]
    return "ok", "; ".join(notes)


def _climbs_as_kept(frame, metric, converged=CONVERGED):
    """Whether the evaluation's typical curve of ``metric`` climbs as a climb the tuner keeps does
    (:func:`~rowstoch_fast.compare.tuning._short_climb`: short of the tenfold, or bending): helper 258's
    repetitions climbing 1,000x on a line in their logarithm had read ``ok`` "as the tuning runs at this rate did"."""
    curves = _curves(frame, metric)
    if curves.empty:
        return False
    return bool(_short_climb(curves.index.to_numpy(np.float64), typical_curve(curves.to_numpy(np.float64)),
                             converged))


def _kept_climb(tuning, lr, lr_source, end):
    """Where a tuned rate ``lr`` is one the tuner kept although it climbed (``tuning["kept_climbing"]``:
    :func:`~rowstoch_fast.compare.tuning._keep_far_below`, every rate climbing under the noise it gathers) and the
    evaluation's mean ``end`` is still :data:`~rowstoch_fast.compare.tuning.CLIMB` times or more below every rate of
    the tuning that does not climb, the phrase that says so; else "". Its climb is then the problem's, as the
    tuning found it, not a sign of the rate: ``unstable`` had retried it at a steady rate that ends far above (helper
    251: EXTRA on a 4x4 torus under noise 1e-3 on the messages, tuned to 0.422, ``ok`` over 2 and 3 repetitions,
    ``unstable`` over 4 and 5 and shown at 0.01, 4.2e-2 against 2.7e-5; over 9 noisy networks, 11 of 18 EXTRA and
    NIDS tunings 287-1,989x worse)."""
    kept = _kept_rates(tuning)
    if lr_source != "tuned" or not _among(lr, kept) or not (math.isfinite(end) and end > 0):
        return ""
    steady = [float(v) for r, v in _last_scores(tuning).items() if np.isfinite(v) and not _among(r, kept)]
    if not steady or end * CLIMB > min(steady):
        return ""
    return (f"as the tuning runs at this rate did; kept, as the tuner kept it: it ends {min(steady) / end:.3g}x below "
            "every rate of the tuning that does not climb (under noise that builds up, every rate climbs, the "
            "larger ones from lower)")


def _at_the_reach(lr, lr_source, tuning):
    """Where a tuned rate ``lr`` is the smallest or the largest the tuner ever tries (:data:`SEARCH_DECADES`
    beyond its grid's ends: ``tuning``, its record), one phrase saying that a rate past it may do better; else "".
    Helper 245's MG-Pull-Diag-GT (R = 16) on a directed ring of 48 with six one-way chords, its tracker's scale
    2.6e14: tuned to 1e-12, the search's floor, where 7.5e-13 ended 2.23x lower over 20 repetitions, with nothing
    said."""
    grid = [float(lr) for stage in (tuning or {}).get("stages", ()) if stage.get("name") == "grid"
            for lr in stage.get("scores", {})]
    if lr_source != "tuned" or not grid:
        return ""
    reach = 10.0 ** SEARCH_DECADES
    low, high = min(grid) / reach, max(grid) * reach
    side = "smallest" if lr <= low * (1 + 1e-5) else "largest" if lr >= high * (1 - 1e-5) else None
    if side is None:
        return ""
    return (f"lr {rate_text(lr)} is the {side} rate the tuner tries ({SEARCH_DECADES} decades "
            f"{'below' if side == 'smallest' else 'above'} its grid): a {side[:-3]}er one may do better (give it "
            "with --lr)")


def _curves(frame, metric):
    """A run's ``metric`` as records x repetitions (indexed by iteration), the iterations every repetition recorded
    alone (an earlier comparison's kept repetitions may lack one)."""
    curves = frame.pivot_table(index="iteration", columns="rep", values=metric, aggfunc="first") \
        if "rep" in frame.columns else frame.set_index("iteration")[[metric]]
    return curves[curves.notna().all(axis=1)]


def _ends(frame, metric):
    """Each repetition's last record of ``metric`` (by repetition number)."""
    return frame.sort_values("iteration", kind="stable").groupby("rep")[metric].last().to_numpy(np.float64)


def _spread_climbs(frame, spread_floor=0.0, steady=None):
    """``(rep, found)`` of each repetition (``rep`` None where the frame has one run): where its nodes' consensus
    error runs off at the end, :func:`~rowstoch_fast.compare.tuning.climbs`' finding (``steady``: its steady
    climb's factor), else None. Nothing where the consensus error is not recorded."""
    if SPREAD not in frame.columns or frame[SPREAD].isna().all():
        return
    ordered = frame.sort_values("iteration", kind="stable")
    for rep, runs in ordered.groupby("rep", sort=True) if "rep" in frame.columns else [(None, ordered)]:
        yield rep, climbs(runs["iteration"].to_numpy(np.float64), runs[SPREAD].to_numpy(np.float64), spread_floor,
                          steady=steady)


#: An ``ok`` run whose mean ends within this factor below the no-progress bar (above NO_PROGRESS / NEAR_BAR of its
#: start) says so (:func:`_near_the_bar`).
NEAR_BAR = 1.25


def _near_the_bar(frame, metric, start, end):
    """The note of an ``ok`` run whose mean ended just below :data:`NO_PROGRESS` of its start (within
    :data:`NEAR_BAR`): the bar is a line, and a run that ends near it reads ``ok`` or ``no-progress`` by the draws;
    else "". Helper 205: Push-Pull and ABM at a given 0.178 on a lossy ring ended at 0.47-0.66x their start over
    five seeds, ``ok`` at two and ``no-progress`` at three (0.56-0.59x over 20 repetitions); helper 198's Push-Pull
    on a sleepy lossy ring, ``ok`` at 0.49x over repetitions ending 0.20x, 0.81x and 0.44x."""
    if not (math.isfinite(start) and start > 0 and math.isfinite(end)) or not NO_PROGRESS / NEAR_BAR < end / start:
        return ""
    said = f"{metric} ended at {end / start:.3g}x its start"
    if "rep" in frame.columns and frame["rep"].nunique() > 1:
        ends = _ends(frame, metric)
        ends = ends[np.isfinite(ends)] / start
        if ends.size > 1 and ends.min() != ends.max():  # (repetitions that ended equal drew nothing: no other
            # draw to read it otherwise, helper 208)
            return (f"{said}, its repetitions ending at {_span(list(ends))}x, near the bar of {NO_PROGRESS:g}x "
                    f"below which a run made progress: over other draws it may read no-progress (more "
                    f"repetitions, --repeats, tell)")
    return f"{said}, near the bar of {NO_PROGRESS:g}x below which a run made progress"


#: The least climb back off its lowest level that the note of an ``ok`` run says (:func:`_settled_above`).
SETTLED_SAID = 5.0


def _settled_above(frame, metric, start, converged=CONVERGED, lr_source=None):
    """The note of an ``ok`` run whose typical curve (:func:`~rowstoch_fast.compare.tuning.typical_curve`) ended
    :data:`SETTLED_SAID` times or more above its lowest level (:func:`~rowstoch_fast.compare.tuning.off_its_minimum`:
    levels over stretches of records, from its rounding up), past the climb its repetitions' spread allows
    (:func:`climb_factor`), and settled there (a climb still rising is ``unstable``: :func:`_climbing`); else "".
    Helper 232: Push-Pull and ABm at a given 0.0316 on two directed 16-cycles fell from 0.38 to 0.0047 and settled
    at 0.13 (9.5x their lowest stretch), ``ok`` with nothing said, where the tuner had rejected the rate. The level
    it ends at is the ranked one; the note says that it went lower on the way (an overshoot, or a noise floor that
    builds up after an early dip)."""
    if not (math.isfinite(start) and start > 0):
        return ""
    curves = _curves(frame, metric)
    if len(curves) < 4:
        return ""
    x = curves.index.to_numpy(np.float64)
    floor = max(converged * start, 1e-300)
    with np.errstate(invalid="ignore"):
        runs = np.maximum(curves.to_numpy(np.float64), floor)
    if not np.isfinite(runs).all():
        return ""
    off = off_its_minimum(x[1:], typical_curve(runs)[1:], SETTLED_SAID)
    if off is None:
        return ""
    first = max(1, int(np.searchsorted(x, off[1])) - int(_tail(x).sum()) + 1)  # (climbed_back's lowest stretch)
    same = runs.shape[1] > 1 and np.allclose(runs, runs[:, :1], rtol=1e-9, atol=0.0)
    if not same and off[0] <= climb_factor(runs[first:], floor):  # (one repetition: the tenfold, its noise unknown;
        # helper 236 found the note on 3 of 40 noisy plateaus of one repetition at the fivefold)
        return ""
    return (f"{metric} settled {off[0]:.3g}x above the lowest level it reached (by iteration {off[1]}): it ends "
            "above where it went on the way (an overshoot, or a noise floor that builds up after an early dip)"
            + ("; a smaller lr may end lower" if lr_source == "given" else ""))


#: The least growth of an ``ok`` run's consensus error on a straight line in its logarithm that its note says
#: (:func:`_growing`): below :data:`~rowstoch_fast.compare.tuning.STEADY_CLIMB`, where it runs off.
GROWTH_SAID = 1.25


def _growing(frame, spread_floor=0.0):
    """The note of an ``ok`` run whose nodes' consensus error grows on a straight line in its logarithm, by
    :data:`GROWTH_SAID` or more but short of a run-off (:func:`~rowstoch_fast.compare.tuning.climbs`' steady climb,
    its fit and pace), in every repetition; else "". Helper 211: on directed rings the tuner's rates grew 1.90-1.96x
    that way, just under the twofold, and 14 of 15 ran off over four times the budget; the status is the budget's,
    and the table says what it will do past it. (Re-read at factors down to 1.05, its `ok` runs of 21 problems flagged
    only rates shown to run off: the line's fit and pace, not the factor, set noise apart.)"""
    found = [climb for _, climb in _spread_climbs(frame, spread_floor, GROWTH_SAID)]
    if not found or any(climb is None for climb in found):
        return ""
    found = [end / low for low, end in found]
    return (f"its {SPREAD} grew {_span(found)}x on a straight line in its logarithm past the first quarter"
            + (" in every repetition" if len(found) > 1 else "") + ": a geometric growth that runs off past the "
            "budget (a longer budget at this rate tells)")


#: An ``ok`` run of a gradient-tracking method with a Pull-Diag tracker on a schedule whose mean's level over the
#: last quarter of its records is within this factor of the quarter's before it has flattened out
#: (:func:`_schedule_bias`).
SCHEDULE_FLAT = 1.05
#: ... where that level is this many times its rounding (the problem's ``converged`` fraction of its start) or more.
ABOVE_ROUNDING = 100.0


def _schedule_bias(means, start, context, metric, lr_source=None):
    """The note of an ``ok`` run of a gradient-tracking method with a Pull-Diag tracker (``context["tracks"]`` and
    ``context["tracker_peak"]``: Pull-Diag-GT, FROST, MG-Pull-Diag-GT) on a schedule (``context["schedule"]``: the
    rounds' matrices change) whose mean (``means``, by iteration) flattened out far above its rounding: the level of
    its last quarter of records (four at least; the mean of their logarithms) within :data:`SCHEDULE_FLAT` of the
    quarter's before it, and :data:`ABOVE_ROUNDING` times the problem's rounding (``context["converged"]`` of its
    start) or more, its gradients exact (``context["one_trajectory"]``: a flat level of sampled ones may be
    their noise's floor); else "" (a run still falling, one at rounding, a static network). Its tracker's ``D_t`` is the
    diagonal of the product of the rounds' matrices since iteration 0, exact on a static network only: on a
    schedule the run stops short of the minimiser, at a level no longer budget lowers. Helper 245: Pull-Diag-GT and
    FROST on a schedule of 3 directed Erdos-Renyi matrices of 12 nodes (least squares, full batch, 800 rounds)
    flattened out at 2.3% and 4.9% of their start, ``ok`` with nothing said, where Push-Pull and Push-DIGing reached
    rounding (4e-16)."""
    if not (context.get("schedule") and context.get("tracks") and context.get("tracker_peak")) \
            or not context.get("one_trajectory") or not (math.isfinite(start) and start > 0):  # (exact gradients:
        # with sampled ones a flat level can be the noise's floor, which the push family shares, helper 256)
        return ""
    v = means.to_numpy(dtype=np.float64)
    k = max(4, int(math.ceil(TAIL * (len(v) - 1))))
    if len(v) < 2 * k + 1 or not (np.isfinite(v).all() and (v[1:] > 0).all()):
        return ""
    logs = np.log(v[-2 * k:])
    level = float(np.exp(logs[k:].mean()))
    if abs(float(logs[k:].mean() - logs[:k].mean())) >= math.log(SCHEDULE_FLAT) \
            or level < ABOVE_ROUNDING * context.get("converged", CONVERGED) * start:
        return ""
    return (f"{metric} flattened out at {level / start:.3g}x its start (its last quarter's level within "
            f"{SCHEDULE_FLAT:g}x of the quarter's before), far above rounding: its tracker's D_t is the diagonal of "
            f"the product of the rounds' matrices since iteration 0, exact on a static network only, and on this "
            f"schedule of {context['schedule']} matrices it stops short of the minimiser (a bias a longer budget "
            "does not remove)" + ("" if context.get("loses") else  # (lost messages drain the push family)
                                  ": try a method exact on a schedule, an algorithm of the push family")
            + ("; or the rate is too large for it: a smaller one tells which" if lr_source == "given" else ""))
    # (helper 257: Pull-Diag-GT at a given 0.649 stalled as badly on each matrix of the schedule alone)


def _peak(means, start, end):
    """"; it went to ...x its start by iteration ..." where a run's mean (by iteration) went :data:`PEAK_SAID` times
    above where it ended (and its start) on the way; else ""."""
    if len(means) < 2 or not (math.isfinite(start) and start > 0):
        return ""
    with np.errstate(invalid="ignore"):
        highest = means.iloc[1:].idxmax()
    if not means[highest] > PEAK_SAID * max(end, start):
        return ""
    return f"; it went to {float(means[highest]) / start:.3g}x its start by iteration {int(highest)}"


def _climbs_again(frame, metric, tuning, lr, start, converged=CONVERGED):
    """``(ratio, iteration)`` where a rate shown with no stable rate on the grid (``lr``, the tuner's fallback) was
    rejected by the tuning for a climb off its minimum ("unstable") and the evaluation's typical curve over its
    repetitions climbs too by the tuner's own rule (:func:`~rowstoch_fast.compare.tuning.off_its_minimum`, the
    stability factor on the levels of stretches: read as the tuner reads a rate); else None. Helper 205: NIDS and
    Exact Diffusion under 4-bit QSGD at 0.316, each rejected by the tuner at 5.7-8.1x, climbed back 3.6-8.6x in
    the evaluations of five seeds: ``ok`` and ranked at some (under the evaluation's wider factor of repetitions
    that differ, or settled at the end), ``unstable`` at others and over 20 repetitions; over 3,200 rounds NIDS
    climbed 10.3x and ended 2.9x its start. Two independent sets of draws that both climb are not a noise floor's
    chance climb."""
    why = next((w for rate, w in _rejections(tuning or {}).items() if math.isclose(float(rate), lr, rel_tol=1e-6)),
               None)
    if why is None or _kind(why) != "unstable" or not (math.isfinite(start) and start > 0):
        return None
    curves = _curves(frame, metric)
    if len(curves) < 4:
        return None
    typical = np.maximum(typical_curve(curves.to_numpy(np.float64)), max(converged * start, 1e-300))
    if not np.isfinite(typical).all():
        return None
    return off_its_minimum(curves.index.to_numpy(np.float64), typical, STABILITY_FACTOR)


def _level(means, converged=CONVERGED):
    """The level the mean records ``means`` (by iteration) end at, read as the tuner reads a rate (its ``_judged``):
    :func:`~rowstoch_fast.compare.tuning.final_estimate` of the records held at the rounding level ``converged``
    (a fraction of the start) from below; the last record where a record is not finite."""
    v = means.to_numpy(dtype=np.float64)
    if not len(v) or not np.isfinite(v).all():
        return float(v[-1]) if len(v) else math.nan
    return final_estimate(means.index.to_numpy(dtype=np.float64), np.maximum(v, max(converged * abs(v[0]), 1e-300)))


def _push_hint(context, diagnosis):
    """Where a method that pushes mass through a column-stochastic matrix (``context["pushes"]``: Push-Pull, SGP,
    ...; not a loss-robust one) failed on a network that loses messages (``context["loses"]``), what they take and
    what to try; "" where the diagnosis says so already (:meth:`~rowstoch_fast.DivergenceError.starved`). On a 20%
    lossy graph Push-Pull, ABM and Compressed Push-Pull made no progress at every rate, and the line said nothing
    of the losses."""
    loses = context.get("loses")
    if not context.get("pushes") or not loses or "loss-robust" in diagnosis:
        return ""
    return (f"; this network {' and '.join(loses)}, and each lost message takes the mass it pushes (a column-"
            f"stochastic matrix): {_robust_try(context)}")


def _stranded_hint(context, diagnosis, frame, metric):
    """Where a loss-robust push-sum method (robust gradient-push) failed without a non-finite iterate (the engine's
    error judges the weights where one is: :meth:`~rowstoch_fast.DivergenceError.stranded`; its caller asks only
    then), and a node's push-sum weight fell below
    :data:`~rowstoch_fast.algorithms._deferred.STRANDED_WEIGHT` times the weight it settles at where no message is
    lost in the run's own draws of the network (``context["weakest_weight"]``: a function of ``{repetition: the
    last iteration it held}``, from ``frame``, that replays them:
    :func:`~rowstoch_fast.compare.method._weakest_weight`; the repetitions whose ``metric`` ended above its start,
    where some did: helper 177's line quoted a repetition that had converged) before that repetition's ``metric``
    first went above its start (a rate too large grows first: helper 178's lr 2, 1.55e16 at iteration 24, the
    first dip at 31), that weight and what it does; "" else. Helper 174: its runs that grew without a NaN under
    bursty losses had been told only "this network loses messages"."""
    replay = context.get("weakest_weight")
    if replay is None or "push-sum weight" in diagnosis or "rep" not in frame or not len(frame):
        return ""
    from ..algorithms._deferred import STRANDED_WEIGHT
    from ..errors import STRANDED_WHY

    by = frame.sort_values("iteration", kind="stable").groupby("rep")
    stops = {int(r): int(i) for r, i in by["iteration"].max().items()}
    above, failed = {}, []  # (each repetition's first record above its start, where it has one; those that ended
    for r, part in by:  # above it)
        values = part[metric].to_numpy(dtype=np.float64)
        with np.errstate(invalid="ignore"):
            up = ~(values <= values[0])  # (NaN: above)
        if up.any():
            above[int(r)] = int(part["iteration"].iloc[int(np.argmax(up))])
        if up[-1]:
            failed.append(int(r))
    stops = {r: i for r, i in stops.items() if r in failed} or stops
    found = replay(stops) if callable(replay) else replay
    if not found:
        return ""
    smallest, node, iteration, rep, level, began = found
    if not smallest < STRANDED_WEIGHT * level or began > above.get(rep, began):
        return ""
    where = f" of repetition {rep}" if len(by) > 1 else ""
    return (f"; node {node}'s push-sum weight fell to {smallest:.3g} by iteration {iteration}{where} ({level:.3g} "
            f"where no message is lost; the run's draws of the network replayed): {STRANDED_WHY}")


def _effects_note(context, said=""):
    """What the network does that loses messages (``context["loses"]``, unless ``said`` says it already) and what it
    does to the messages (``context["effects"]``, :func:`~rowstoch_fast.network.effects_of`), beside a failed run's
    diagnosis ("Exact Diffusion under rand-3 diverged at lr 1e-12" had said nothing of the compression, Push-Pull's
    "no progress" on a Gilbert-Elliott network nothing of its losses), and where it compresses them and the method
    is not one made for that (``context["compresses"]``), the ones that are and run on this network
    (``context["for_compression"]``)."""
    loses = context.get("loses")
    loses = [phrase for phrase in loses if phrase not in said] if isinstance(loses, (list, tuple)) else []
    varies = [f"changes its weights from round to round (a schedule of {context['schedule']} matrices)"] \
        if context.get("schedule") else []
    effects = varies + loses + list(context.get("effects") or ())
    if not effects:
        return ""
    note = f"; this network {' and '.join(effects)}"
    if any(e.startswith("compresses") for e in effects) and not context.get("compresses"):
        made = context.get("for_compression") or ()
        made = made() if callable(made) else made  # (asked for here, where a run failed under compression)
        if made:
            note += f": try a method made for compressed messages ({', '.join(made)})"
    return note


#: The recorded metrics besides the ranked one whose growth in any repetition marks a run diverged
#: (:func:`_exploded`): the non-negative ones a run's iterates set (not the loss, which may fall below 0, nor the
#: test metrics).
WATCHED = ("grad_norm", "grad_norm_centroid", "consensus_error", "descent_deviation", "distance", "grad_norm_mean",
           "suboptimality")


def _exploded(frame, metric, spread_floor=0.0):
    """What ran off, where another recorded metric of :data:`WATCHED` did so in a repetition
    (:func:`~rowstoch_fast.compare.tuning.runaway`: ended non-finite, or a thousandfold above its largest value
    early in the run); "" where none did. A push-sum method that loses its mass on a lossy network keeps the
    gradient at the average iterate in range while its nodes' own iterates run off (a consensus error of 1.2e107
    was judged ``no-progress`` on its ranked metric alone). Read from the records, each repetition's own, so that
    repetitions kept from an earlier comparison and resumed ones are judged alike. ``spread_floor``: the consensus
    error's rounding (:func:`~rowstoch_fast.compare.tuning.spread_floor`)."""
    ordered = frame.sort_values("iteration", kind="stable")
    for name in WATCHED:
        if name == metric or name not in frame.columns or frame[name].isna().all():  # (not recorded)
            continue
        for rep, runs in ordered.groupby("rep", sort=True) if "rep" in frame.columns else [(None, ordered)]:
            found = runaway(runs[name].to_numpy(np.float64), spread_floor if name == SPREAD else 0.0)
            if found is None:
                continue
            (first, end), where = found, (f" in repetition {rep}" if rep is not None and frame["rep"].nunique() > 1
                                          else "")
            if not math.isfinite(end):
                return f"{name} ended at {end}{where}"
            return f"{name} grew {end / first:.3g}x ({_fmt(first)} -> {_fmt(end)}){where}"
    return ""


def _climbing(frame, metric, means, start, one_trajectory=False, converged=CONVERGED, spread_floor=0.0):
    """Where a run that stayed finite and did not grow a thousandfold climbs off at the end of its budget, one phrase;
    else "". Its ranked metric's typical curve over the repetitions (their mean over two at most, their median over
    more: :func:`~rowstoch_fast.compare.tuning.typical_curve`) ends above its lowest level
    (:func:`~rowstoch_fast.compare.tuning.off_its_minimum`) by the tuner's stability factor where the repetitions
    ran the same trajectory (``one_trajectory``: exact gradients, nothing drawn, whatever the number of
    repetitions; or repetitions found equal: DIGing at a given rate fell to 3.6e-3 and climbed back to 1.18, ranked
    first, the rule having been the tuner's alone), by :func:`climb_factor`, still rising, where they differ
    (:data:`~rowstoch_fast.compare.tuning.CLIMB` where their spread is a noise floor's, less where they agree:
    :func:`climbed_back`); or the consensus error runs off at the end in a repetition (:func:`~rowstoch_fast.compare.tuning.climbs`: a lossy
    push-sum method's, growing 1.08x an iteration to the end of the budget, its ranked metric not yet touched,
    ranked ``ok``), read from its rounding ``spread_floor`` up (:func:`~rowstoch_fast.compare.tuning.spread_floor`)."""
    if len(means) >= 4 and math.isfinite(start) and start > 0:
        curves = _curves(frame, metric)
        runs = curves.to_numpy(np.float64)
        floor = max(converged * start, 1e-300)
        typical = np.maximum(typical_curve(runs), floor) if len(runs) >= 4 else None
        if typical is not None and np.isfinite(typical).all() and typical[1:].min() < NO_PROGRESS * start:  # (one
            # that never went below half its start made no progress, whatever it did after: helper 188's DSGD rising
            # from its start to its bias level, 3.1x it, read "climbed back 2.08x above its lowest level")
            same = one_trajectory or runs.shape[1] > 1 and np.allclose(runs, runs[:, :1], rtol=1e-9, atol=0.0)
            x = curves.index.to_numpy(np.float64)
            off = climbed_back(x, runs, typical, floor, same)
            if off is not None:
                return (f"{metric} climbed back {off[0]:.3g}x above its lowest level (reached by iteration {off[1]}) "
                        f"by the end")
            if not same and (ramp := _ramp(x, typical)) is not None:
                return (f"{metric} rose from its lowest level (iteration {ramp[1]}) to the end, {ramp[0]:.3g}x, in "
                        f"{ramp[2]:.0%} of its records and at an even pace: it climbs on past the budget")
            if not same and (late := _late_climb(x, runs, typical)) is not None:
                return (f"{metric} climbed {late[0]:.3g}x from its lowest level (iteration {late[1]}) to the end, at "
                        f"each of its last {late[2]} records and in every repetition, no slower at the end: still "
                        f"climbing at the end of the budget")
            if not same and (each := _each_climbs(x, runs, typical, floor)) is not None:
                return (f"{metric} climbed {_span(each[:2])}x from its lowest level to the end in each of its "
                        f"{runs.shape[1]} repetitions (lowest by iteration {each[2]}), rising in most records on a "
                        "line in its logarithm: it climbs on past the budget")
    for rep, found in _spread_climbs(frame, spread_floor):
        if found is not None:
            where = f" in repetition {rep}" if rep is not None and frame["rep"].nunique() > 1 else ""
            return (f"{SPREAD} climbs to the end of the budget, {found[1] / found[0]:.3g}x above its lowest level past "
                    f"the first quarter ({_fmt(found[0])} -> {_fmt(found[1])}){where}")
    return ""


#: Where three repetitions or more differ, the climb back from the lowest level that marks a run ``unstable`` is
#: ``exp(CLIMB_NOISE * s)`` times that level, ``s`` their spread (:func:`climb_factor`), within
#: :data:`~rowstoch_fast.compare.tuning.STABILITY_FACTOR` .. :data:`~rowstoch_fast.compare.tuning.CLIMB`.
CLIMB_NOISE = 3.0
#: The fewest repetitions whose spread :func:`climb_factor` reads (two say little of it).
CLIMB_SPREAD_REPEATS = 3


def climbed_back(x, runs, typical, floor, same=False):
    """``(ratio, iteration)`` where the typical curve ``typical`` of the repetitions ``runs`` (records at ``x`` x
    repetitions, the first record the start; values below ``floor`` read as it) ends above its lowest stretch
    (:func:`~rowstoch_fast.compare.tuning.off_its_minimum`, ``iteration`` where that stretch ends) by the tuner's
    :data:`~rowstoch_fast.compare.tuning.STABILITY_FACTOR` where they ran one trajectory (``same``), else by
    :func:`climb_factor` of the records from that stretch on, and still rising from there (a noise floor jumps,
    it does not climb); else None. The lowest stretch is one the run reached: none holding its start (helper 184:
    a run that jumped from 0.505 to 154 at its first record and fell at every record after, to 132, read
    "climbed back 2x above its lowest level", a stretch that held the start; it ended 261x its start, which
    ``no-progress`` says)."""
    off = off_its_minimum(x[1:], typical[1:], STABILITY_FACTOR)
    if off is None or off[0] < CLIMB and _settled(typical, off[0]):
        return None
    if same:
        return off
    k = int(_tail(x).sum())  # (the stretches' length: off_its_minimum's)
    first = max(1, int(np.searchsorted(x, off[1])) - k + 1)  # (the lowest stretch's first record)
    if off[0] <= climb_factor(runs[first:], floor):
        return None
    after = x >= off[1]
    return off if rising(x[after], np.log(typical[after])) else None


#: A climb back short of the tenfold has settled (:func:`_settled`) where the level of the last quarter of the
#: records (four at least) is above the quarter's before it by less than this share of the climb (in the logarithm).
SETTLED = 0.2


def _settled(typical, ratio):
    """Whether a typical curve that climbed back ``ratio`` times above its lowest level has settled at a level by the
    end: the level of its last quarter of records (four at least; the mean of their logarithms) is above the
    quarter's before it by less than :data:`SETTLED` of that climb. A biased method's fixed point reached from below
    (the mean passing near the optimum on its way: DSGD on a noisy quadratic, 7.0e-5, then flat at 2.49e-3 over its
    last 12 records) and a stochastic method's noise floor under a transient dip (Push-Pull's gradient at the mean,
    9.0e-3 then 0.048, the level it holds over twice and four times the budget) end at their level, which ranks them
    (helper 188: both read "climbed back 2.9x" and 2.8x, ``unstable``); a climb that goes on through noise at the end
    (MG-Pull-Diag-GT under 4-bit QSGD, 1.6e-3 to 1.8e-2, its last quarter 0.49 above the one before in the
    logarithm) has not, and a climb of tenfold or more is a departure whatever it does at the end."""
    k = max(4, int(math.ceil(TAIL * (len(typical) - 1))))
    if len(typical) < 2 * k + 2 or not ratio > 1.0:
        return False
    with np.errstate(all="ignore"):
        logs = np.log(typical)
        rise = float(logs[-k:].mean() - logs[-2 * k:-k].mean())
    return math.isfinite(rise) and rise < SETTLED * math.log(ratio)


def climb_factor(runs, floor):
    """How many times its lowest level the typical curve of repetitions that differ (``runs``: the records from
    its lowest stretch to the end x repetitions) must end at for :func:`climbed_back` to call it a climb: the tenfold
    (:data:`~rowstoch_fast.compare.tuning.CLIMB`) that a noise floor's median needs (in one or two dimensions it
    touches 0, and over five repetitions climbed 2x above its lowest stretch in 9-35% of a helper's stationary
    runs), narrowed where the repetitions agree to ``exp(CLIMB_NOISE * s)``, no less than the tuner's
    :data:`~rowstoch_fast.compare.tuning.STABILITY_FACTOR`: ``s`` the median, over those records (the ones the
    climb is read on: repetitions that agree on their way down to a noise floor had narrowed the factor of a floor
    in two dimensions from 10 to 4.4-7.4, helper 157), of the standard deviation (the sample's) of the logarithms
    of the repetitions' values (at least ``floor``), with :data:`CLIMB_SPREAD_REPEATS` repetitions at least: the
    twofold up to ``s`` = ln 2 / 3 = 0.23 (the spread of a noise floor in 32 dimensions or more, whose median's
    levels do not wander twofold), the tenfold from 0.77 (a floor in four dimensions or fewer). Push-Pull over uniform delays, its repetitions' logarithms 0.09 apart,
    fell from 5.43 to 0.048 by iteration 48 and climbed back to 2.55 by the end: helper 153's finding F1b, ``ok``
    under the tenfold. Over 21,600 simulated stationary noise floors (1 to 128 dimensions, 3 to 12 repetitions,
    16 to 51 records, AR(1) drift 0 to 0.97) it flags 3 more than the tenfold alone (36 against 33); over the 569
    ``ok`` runs of helper 153's rate grids 17, each a dip and a climb back to the end 2.0-7.1x above it; over 148
    ``ok`` runs of eight tuned comparisons, 5, each a fallback rate whose tuning runs had climbed 10.8-12.9x; over
    helper 155's 107 runs, 3, each still rising (bench/RESULTS.md section 69a)."""
    runs = np.asarray(runs, dtype=np.float64)
    if runs.ndim != 2 or runs.shape[1] < CLIMB_SPREAD_REPEATS or len(runs) < 1:
        return CLIMB
    with np.errstate(all="ignore"):
        spread = float(np.median(np.std(np.log(np.maximum(runs, floor)), axis=1, ddof=1)))
    return float(np.clip(math.exp(CLIMB_NOISE * spread), STABILITY_FACTOR, CLIMB)) if math.isfinite(spread) \
        else CLIMB


#: Where the repetitions differ, the least share of the records from the lowest level on that rise, and the least
#: ratio of the rise's pace (in value) over their later half to the earlier half, for a climb short of
#: :data:`~rowstoch_fast.compare.tuning.CLIMB` to count (:func:`_ramp`).
RAMP_RISES = 0.8
RAMP_PACE = 0.8
#: The fewest records from the lowest level on that :func:`_ramp` reads.
RAMP_RECORDS = 8


def _ramp(x, typical):
    """``(ratio, iteration, share)`` where a typical curve (over repetitions that differ) rises from its lowest level
    to the end of the budget by the tuner's stability factor and climbs on: past its start, the levels of every
    three records (their geometric mean); from the lowest one's first record on (:data:`RAMP_RECORDS` at least, and
    half the records: a noise floor's dip late in the run, then back to its level, is no ramp),
    :data:`RAMP_RISES` of the records rise, their logarithm's slope is more than twice its standard error, the
    last level is :data:`~rowstoch_fast.compare.tuning.STABILITY_FACTOR` times the lowest, and their later half
    rises no slower, in value, than :data:`RAMP_PACE` of the earlier (a level being approached slows: DGD's
    suboptimality climbing to its bias floor from below, at 0.01-0.7 of its earlier pace; a run that climbs on does
    not); else None. Helper 145: Push-Pull over Gilbert-Elliott losses, its median over 32 repetitions rising at
    an even pace (0.98) in 22 of its last 25 records from 0.10x to 0.31x its start by the end of the budget (0.93x
    by four times it), had been ``ok`` and ranked: short of the tenfold, and on a line in value, not in its
    logarithm (:func:`~rowstoch_fast.compare.tuning.climbs`' steady climb). Over the 14,428 runs of 3,015 earlier
    comparisons (helpers 136-146) it turns 8 ``ok`` runs ``unstable``: that one, at its tuned rate, and seven at
    rates given above the tuned ones (DGD, CHOCO-SGD, EXTRA, ABM, Push-Pull); and 15 ``no-progress``; over 5,400
    simulated stationary noise floors (1, 2 or 4 dimensions, 2-12 repetitions, 16-51 records, drifting or not), 1."""
    if len(typical) < RAMP_RECORDS + 3 or not (typical > 0).all():
        return None
    levels, j = _lowest_level(typical)
    xs, ys = x[j:], typical[j:]
    if len(ys) < max(RAMP_RECORDS, len(typical) // 2) or levels[-1] < STABILITY_FACTOR * levels[j - 1]:
        return None
    share = float(np.mean(np.diff(ys) > 0))
    if share < RAMP_RISES or not rising(xs, np.log(ys)) or not _no_slower(xs, ys):
        return None
    return float(levels[-1] / levels[j - 1]), int(x[j]), share


def _lowest_level(typical):
    """``(levels, j)`` of a typical curve: the geometric means of every three records past the start (level ``k``:
    records ``k + 1 .. k + 3``) and the first record of the lowest of them (``levels[j - 1]``)."""
    levels = smoothed(typical[1:], 3)[2:]
    return levels, int(np.argmin(levels)) + 1


def _no_slower(xs, ys):
    """Whether a rise (``ys`` at ``xs``) goes on no slower in value over its later half than :data:`RAMP_PACE` of
    the earlier (a level being approached slows: :func:`_ramp`, :func:`_late_climb`)."""
    half = len(xs) // 2
    early, late = np.polyfit(xs[:half + 1], ys[:half + 1], 1)[0], np.polyfit(xs[half:], ys[half:], 1)[0]
    return bool(early > 0 and late >= RAMP_PACE * early)


#: A run without progress whose mean went this many times above its end (and its start) on the way says so.
PEAK_SAID = 10.0
#: The fewest records from the lowest level's last one to the end that :func:`_late_climb` reads: each a rise.
LATE_RISES = 4


def _late_climb(x, runs, typical):
    """``(ratio, iteration, records)`` where a typical curve over repetitions that differ (``runs``: records x
    repetitions) climbs late in the budget, too late for :func:`_ramp` (half the records) and too steeply for
    :func:`climbed_back`'s stretches of a quarter of them: past its lowest level (the geometric mean of three
    records, past the start), it rises at every record to the end, :data:`LATE_RISES` at least; its last level is
    :data:`~rowstoch_fast.compare.tuning.CLIMB` times the lowest; every repetition's own last level is
    :data:`~rowstoch_fast.compare.tuning.STABILITY_FACTOR` times its level at those three records; and the rise in
    value over its later half is no slower than :data:`RAMP_PACE` of the earlier (a level approached from below
    slows). Else None. Helper 184: Push-Pull on a directed ring of 32 at 0.00316, 8,000 rounds, fell to 1.5e-5 by
    iteration 6080 and climbed 83x over its last 6 records, in each of 4 repetitions (it saturates at 4.6e-3 by
    16,000): ``ok``, its stretches' levels 2.84x apart against a climb factor of 3.06 (the repetitions' spread at
    its lowest point, near 0)."""
    if len(typical) < LATE_RISES + 4 or not (typical > 0).all():
        return None
    levels, j = _lowest_level(typical)
    rises = np.diff(typical[j + 2:])
    if len(rises) < LATE_RISES or not (rises > 0).all() or levels[-1] < CLIMB * levels[j - 1]:
        return None
    with np.errstate(all="ignore"):
        logs = np.log(np.maximum(np.asarray(runs, dtype=np.float64), 1e-300))  # (each repetition's own levels)
    if not (logs[-3:].mean(axis=0) - logs[j:j + 3].mean(axis=0) >= math.log(STABILITY_FACTOR)).all():
        return None
    if not _no_slower(x[j:], typical[j:]):
        return None
    return float(levels[-1] / levels[j - 1]), int(x[j]), len(rises)


#: The least share of a repetition's three-record levels from its lowest on that rise, for :func:`_each_climbs`.
EACH_RISES = 0.6


def _each_climbs(x, runs, typical, floor, factor=STABILITY_FACTOR):
    """``(least, most, iteration)`` where every one of three repetitions or more (``runs``: records at ``x`` x
    repetitions, the first the start; values below ``floor`` read as it) climbs on from its own lowest level to the
    end of the budget, and their typical curve ``typical`` has not settled there (:func:`_settled`): in each, past
    the start, the lowest of its levels (the geometric means of three records) comes in the first half of the
    records (:data:`RAMP_RECORDS` at least after it), its last level is ``factor`` (the tuner's
    :data:`~rowstoch_fast.compare.tuning.STABILITY_FACTOR`) times that lowest one or more, :data:`EACH_RISES` of its
    levels from there rise, and the line through the logarithm of its records from there rises by more than twice
    its standard error; ``least`` and ``most`` the repetitions' ratios of last to lowest level, ``iteration`` the
    last of their lowest levels' first records. Else None. Helper 212: Pull-Diag-GT at 0.0562 on an exponential
    graph of 16 whose nodes sleep with probability 0.3 climbed 2.6x, 7x and 18x from its repetitions' lowest levels
    over 300 rounds (to 4.2x its start over 1,200), ``ok``: their levels are far apart (the climb factor's tenfold),
    their median's rises too few for :func:`_ramp` (the same run at 0.0316 read ``unstable``). Not where the climbs,
    pooled, slow toward a level (:func:`_slowing`). Over 3,600 simulated stationary noise floors
    (``bench/climb_check.py``'s, AR 0-0.97) it flags 1; over 400 of helper 217's curves nearing a level from below,
    5; over the ``ok`` runs of 1,089 comparisons kept from helpers' checks (3,519 with three repetitions or more that
    differ), 16, climbs that go on (bench/RESULTS.md section 83)."""
    runs = np.asarray(runs, dtype=np.float64)
    if runs.ndim != 2 or runs.shape[1] < CLIMB_SPREAD_REPEATS or len(runs) < RAMP_RECORDS + 4:
        return None
    ratios, firsts, climbs_ = [], [], []
    for values in np.maximum(runs[1:], floor).T:
        levels = smoothed(values, 3)[2:]
        j = int(np.argmin(levels))  # (level j: records j .. j + 2 past the start)
        if len(values) - j < max(RAMP_RECORDS, len(values) // 2) or levels[-1] < factor * levels[j]:
            return None
        if np.mean(np.diff(levels[j:]) > 0) < EACH_RISES or not rising(x[1 + j:], np.log(values[j:])):
            return None
        ratios.append(float(levels[-1] / levels[j]))
        firsts.append(int(x[1 + j]))
        climbs_.append((x[1 + j:], np.log(values[j:])))
    levels, j = _lowest_level(typical)
    if _settled(typical, float(levels[-1] / levels[j - 1])) or _slowing(climbs_):
        return None
    return min(ratios), max(ratios), max(firsts)


#: The least ratio of the later half's slope to the earlier half's, in the logarithm, of the repetitions' climbs
#: pooled, for :func:`_each_climbs` (a level approached from below slows: ``1 - 0.7 exp(-t / 12)`` over 30 records,
#: 0.2-0.3).
EACH_PACE = 0.3


def _slowing(climbs_):
    """Whether climbs (``(x, log values)`` per repetition, each from its lowest level on) slow in the logarithm:
    the pooled slope of their later half (each centred on its own mean there) is below :data:`EACH_PACE` of their
    earlier half's. Pooled, the repetitions' noise averages out, which each one's own pace does not (helper 217:
    curves nearing a level read ``unstable`` in 15 of 400 seeds; 5 with this)."""
    middle = (max(xs[0] for xs, _ in climbs_) + max(xs[-1] for xs, _ in climbs_)) / 2

    def slope(late):
        dx, dy = [], []
        for xs, ys in climbs_:
            half = xs >= middle if late else xs <= middle
            if half.sum() >= 2:
                dx.append(xs[half] - xs[half].mean())
                dy.append(ys[half] - ys[half].mean())
        dx, dy = np.concatenate(dx), np.concatenate(dy)
        return float(dx @ dy / (dx @ dx)) if dx @ dx > 0 else 0.0

    early = slope(False)
    return early > 0 and slope(True) < EACH_PACE * early


#: The least ratio of every repetition's last level to its lowest for :func:`climbs_too`.
ALIKE = 1.5


def climbs_too(frame, metric):
    """Where every repetition of a run (``frame``'s records of ``metric``: a method shown at :func:`next_stable`'s
    rate, its tuned rate ``unstable``) climbs from its own lowest level to the end as :func:`_each_climbs` reads a
    climb, by :data:`ALIKE` times that level or more (short of the twofold that makes a run ``unstable``), one
    phrase; else "". Helper 216: where a tuned rate climbed in every repetition, the next stable rate shown instead
    ended the same or worse at the budget and climbed on over four times it in all four cases checked (Push-Pull at
    0.562 over losses: 1.57-1.71x from its repetitions' lowest levels within the budget, ``ok``), the climb the
    setting's (2-bit compression, losses), not the rate's; the table says so beside the rate it shows. Of the other
    six such runs of helper 216's problems, whose repetitions ended 1.1-4.3x above their lowest levels, none."""
    curves = _curves(frame, metric) if metric in frame.columns else None
    runs = curves.to_numpy(np.float64) if curves is not None else np.empty((0, 0))
    if runs.ndim != 2 or runs.shape[1] < CLIMB_SPREAD_REPEATS or len(runs) < 4 or not np.isfinite(runs).all() \
            or not runs[0].mean() > 0:
        return ""
    floor = max(CONVERGED * float(runs[0].mean()), 1e-300)
    typical = np.maximum(typical_curve(runs), floor)
    found = _each_climbs(curves.index.to_numpy(np.float64), runs, typical, floor, ALIKE)
    if found is None:
        return ""
    short = " (short of the twofold)" if found[1] < STABILITY_FACTOR else " (not every one twofold)"  # (one of
    # them past it: "1.57-2.44x ... (short of the twofold)" had contradicted itself, helper 222)
    return (f"its repetitions climb here too, {_span(found[:2])}x from their lowest levels to the end{short}: the "
            "climb is the setting's as much as the rate's")


def _still_falling(means):
    """Whether a run's mean over its repetitions (by iteration) still falls over the last :data:`TAIL` of its
    records (three at least): the slope of its logarithm below zero by more than twice its standard error."""
    tail = means.iloc[-max(3, int(math.ceil(TAIL * len(means)))):]
    values = tail.to_numpy(np.float64)
    if len(values) < 3 or not (np.isfinite(values).all() and (values > 0).all()):
        return False
    return rising(tail.index.to_numpy(np.float64), -np.log(values))


def _mean_of_a_few(frame, metric, start):
    """Where a run's mean ended above :data:`NO_PROGRESS` of its start but the median of its repetitions below it,
    the repetitions that ended above their start, one phrase; else "". Helper 145: "no-progress: suboptimality ended
    at 4.78x its start", where 27 of 32 repetitions had ended at 0.43-0.46x and 5 had jumped to 5.9-94x."""
    if "rep" not in frame.columns or not (math.isfinite(start) and start > 0):
        return ""
    ends = _ends(frame, metric)
    with np.errstate(invalid="ignore"):
        above = ends[ends > start]
    if len(ends) < 2 or not above.size or not np.median(ends) < NO_PROGRESS * start:
        return ""
    return (f"; the median of its {len(ends)} repetitions ends at {float(np.median(ends)) / start:.3g}x its start, "
            f"the mean raised by {above.size} that ended above it ({_span(above / start)}x)")


def _repetitions_above_start(frame, metric, start):
    """Where some repetitions, not all, went back above their start (the same point for every one), and a
    thousandfold (:data:`~rowstoch_fast.runner.GROWTH_WARNING`) above the median of the repetitions at that record,
    while the run as a whole made progress, one phrase; else "": at its end, or after it had fallen below
    :data:`NO_PROGRESS` of its start. A rate that one draw undoes short of a thousandfold its start (helper 144's
    robust gradient-push over Gilbert-Elliott losses: 63 of 64 repetitions converged to about 1e-3; one fell to
    3.4e-3, jumped to 29.1, 4x its start and 11,000x the median there, at iteration 1,520 and ended at 2.47) had
    been ``ok`` and ranked on the mean of the others. The median's thousandfold, not the start alone: where the
    start lies within tenfold of a noise floor in one dimension (a chi-square of one degree of freedom, max / median
    15-20 over 32 repetitions, 80 at a record), some repetition of a healthy method ends above its start by chance
    (helper 145: 17 of 17 such flags undeserved)."""
    if "rep" not in frame.columns or not (math.isfinite(start) and start > 0):
        return ""
    curves = frame.pivot_table(index="iteration", columns="rep", values=metric, aggfunc="first").sort_index()
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (a record no repetition has: an all-NaN row)
        medians = np.nanmedian(curves.to_numpy(np.float64), axis=1)
    found, ends = {}, []
    for rep in curves.columns:
        values = curves[rep].to_numpy(np.float64)
        kept = np.flatnonzero(np.isfinite(values))
        if not kept.size:
            continue
        ends.append(values[kept[-1]])
        with np.errstate(invalid="ignore"):
            fell = np.flatnonzero(values < NO_PROGRESS * start)
            first = fell[0] if fell.size else kept[-1]  # (from where it fell below half its start, else its end)
            off = (np.arange(len(values)) >= first) & (values > start) & (values > GROWTH_WARNING * medians)
        if off.any():
            k = int(np.flatnonzero(off)[np.argmax(values[off])])
            found[rep] = (float(values[k]), int(curves.index[k]), float(values[k] / medians[k]))
    if len(ends) < 2 or not found or len(found) == len(ends):
        return ""
    worst = max(found, key=lambda rep: found[rep][0])
    return (f"{metric} went back above its start, and {GROWTH_WARNING:g}x above the median of the repetitions, in "
            f"{len(found)} of {len(ends)} repetitions ({', '.join(str(r) for r in found)}: up to "
            f"{found[worst][0] / start:.3g}x its start and {found[worst][2]:.3g}x the median, in repetition {worst} at "
            f"iteration {found[worst][1]}; the median of all ends at {float(np.median(ends)) / start:.3g}x): the "
            f"rate does not hold on every draw")


#: Repetitions of one trajectory (``context["one_trajectory"]``) whose last records differ by this factor or more
#: (read from their rounding up, the largest :data:`ABOVE_ROUNDING` times it or more) did not settle
#: (:func:`_chaotic`).
CHAOS = STABILITY_FACTOR


def _chaotic(frame, metric, start, context):
    """Where the repetitions of a run ran one trajectory up to rounding (``context["one_trajectory"]``: gradients of
    the whole data over a network that draws nothing; only the order of sums differs) and their last records of
    ``metric`` (at least the problem's rounding, ``context["converged"]`` of the start) are :data:`CHAOS` times apart
    or more, the largest :data:`ABOVE_ROUNDING` times its rounding or more, one phrase; else "". The same iterates
    up to rounding ending that far apart are rounding differences grown: the iterates wander at this rate, and the
    mean of where they stopped is no level to rank. Helper 245: FROST at a given 1334 on a directed graph of 4 nodes
    (separable logistic, full batch, 5,000 rounds), its 5 repetitions ending at 4.7e-5 to 0.54x their start, each
    oscillating in its last records, read ``ok`` (its neighbours 1000 and 1778 read ``unstable``)."""
    if not context.get("one_trajectory") or "rep" not in frame.columns or frame["rep"].nunique() < 2 \
            or not (math.isfinite(start) and start > 0):
        return ""
    floor = max(context.get("converged", CONVERGED) * start, 1e-300)
    ends = _ends(frame, metric)
    if not np.isfinite(ends).all():
        return ""
    ends = np.maximum(ends, floor)
    if ends.max() < CHAOS * ends.min() or ends.max() < ABOVE_ROUNDING * floor:
        return ""
    apart = float(ends.max() / ends.min())
    return (f"{metric} ended {_span(list(ends / start))}x its start in its {len(ends)} repetitions, {apart:.3g}x "
            f"apart, where they run one trajectory up to rounding (gradients of the whole data, a "
            f"network that draws nothing): rounding differences grown, the iterates do not settle at this rate")


#: The least climb of a repetition's level at the end (the mean of its last three records) off its own lowest
#: such level, and above the median of the repetitions' levels at the end, that :func:`_repetitions_run_off` reads
#: as a run-off ...
RUN_OFF = 30.0
#: ... where one repetition at least is this many times the median at the end (a noise floor in one dimension whose
#: records drift slowly, AR(1) 0.9-0.97, is :data:`RUN_OFF` times its median by chance now and then).
RUN_OFF_MEDIAN = 100.0


def _repetitions_run_off(frame, metric, start, converged=CONVERGED):
    """Where some of three repetitions or more, not all, ran off below their start (:func:`_repetitions_above_start`
    reads those above it), one phrase; else "". A repetition ran off where the level of its last three records (their
    mean, from its rounding ``converged`` of the start up) is :data:`RUN_OFF` times its own lowest such level past the
    start or more, and :data:`RUN_OFF` times the median of the repetitions' last levels or more; the run, where one
    of them is :data:`RUN_OFF_MEDIAN` times that median or more. Levels of three records, not records, and their
    mean, not their logarithms': a noise floor's records jump, and in one dimension one of three near 0 draws a
    geometric level far down. Over 28,800 simulated noisy-but-converged runs (``bench/run_off_check.py``: floors in
    1-32 dimensions, AR(1) 0-0.97, 3-32 repetitions each at its own level within 1-10x, 16-51 records) it flags 4,
    floors in one dimension drifting at AR(1) 0.9-0.97 (61 at the thirtyfold alone, 216 on geometric levels).
    Helper 242: Pull-Diag-GT at a given 0.0422 over Gilbert-Elliott losses, ``ok`` and ranked 2= while 2 of its 5
    repetitions climbed 70x off their own lowest level, to 30-200x the median, short of their start."""
    if "rep" not in frame.columns or not (math.isfinite(start) and start > 0):
        return ""
    curves = _curves(frame, metric)
    runs = curves.to_numpy(np.float64)
    if runs.ndim != 2 or runs.shape[1] < CLIMB_SPREAD_REPEATS or len(runs) < 5 or not np.isfinite(runs).all():
        return ""
    values = np.maximum(runs[1:], max(converged * start, 1e-300))
    levels = (values[:-2] + values[1:-1] + values[2:]) / 3.0  # (level j: records j + 1 .. j + 3)
    last, median = levels[-1], float(np.median(levels[-1]))
    off = (last >= RUN_OFF * levels.min(axis=0)) & (last >= RUN_OFF * median)
    if not (off & (last >= RUN_OFF_MEDIAN * median)).any() or off.all():
        return ""
    worst = int(np.argmax(np.where(off, last, -np.inf)))
    return (f"{metric} ran off in {int(off.sum())} of {runs.shape[1]} repetitions ({_some(curves.columns[off])}), "
            f"below its start: their last levels {_span(list((last / levels.min(axis=0))[off]))}x above their own "
            f"lowest and {_span(list(last[off] / median))}x above the median of the repetitions' (up to "
            f"{last[worst] / start:.3g}x its start, in repetition {curves.columns[worst]}): the rate does not hold on "
            f"every draw")


def _nan_repetitions(frame, metric):
    """``"<metric> NaN at the end in k of m repetitions (r, ...), from iteration i: the figures are the others'"``
    where some repetitions, not all, end with ``metric`` NaN (the table's mean and the lines' figures skip them), else
    "". Helper 180: FROST's table showed 6.05e204 "(1 run)" of three, two NaN from iteration 96, and its line
    "grew 2.65e206x" said nothing of them."""
    if "rep" not in frame.columns or not len(frame):
        return ""
    ordered, last = _by_repetition(frame)
    ends = last[metric]
    gone = np.isnan(ends.to_numpy(dtype=np.float64))
    if not gone.any() or gone.all():
        return ""
    since = []  # (the first record of each one's NaN end)
    for rep in ends.index[gone]:
        values = ordered.loc[ordered["rep"] == rep, [metric, "iteration"]]
        held = np.flatnonzero(~np.isnan(values[metric].to_numpy(dtype=np.float64)))
        since.append(int(values["iteration"].iloc[held[-1] + 1 if held.size else 0]))
    return (f"{metric} NaN at the end in {int(gone.sum())} of {len(ends)} repetitions ({_some(ends.index[gone])}), "
            f"from iteration {min(since)}: the figures are the others'")


def _by_repetition(frame):
    """``(ordered, last)``: ``frame``'s records by repetition then iteration, and each repetition's last record,
    indexed by ``rep``, NaN or not (groupby's ``last()`` skips NaN: a repetition that ended NaN had counted as one
    that did not diverge, helper 183)."""
    ordered = frame.sort_values(["rep", "iteration"], kind="stable")
    return ordered, ordered.groupby("rep").tail(1).set_index("rep")


def _some(reps, most=10):
    """The repetitions ``reps`` as a line names them: the first ``most`` and how many more."""
    reps = [str(r) for r in reps]
    return ", ".join(reps[:most]) + (f" and {len(reps) - most} more" if len(reps) > most else "")


def _diverged_repetitions(frame, metric, start, iterations):
    """``(words, short)``: ``"in k of m repetitions: r, ..."`` where some of the repetitions, not all, diverged
    (ended non-finite, above :data:`~rowstoch_fast.runner.GROWTH_WARNING` times the start, or before the budget
    of ``iterations``: on a network drawn anew for each, one draw can undo a rate that is stable on the others),
    else ""; and the first iteration a repetition stopped at before the budget (None where none did)."""
    if "rep" not in frame.columns or not len(frame):
        return "", None
    ends = _by_repetition(frame)[1]
    stopped = ends["iteration"].to_numpy() < iterations
    with np.errstate(invalid="ignore", over="ignore"):
        values = ends[metric].to_numpy(float)
        bad = stopped | ~np.isfinite(values)
        if math.isfinite(start) and start > 0:
            bad |= values > GROWTH_WARNING * start
    short = int(ends["iteration"][stopped].min()) if stopped.any() else None
    if not bad.any() or bad.all():
        return "", short
    return f"in {int(bad.sum())} of {len(ends)} repetitions: {_some(ends.index[bad])}", short


def _paired(p, labels, finals, reps, floor):
    """Overwrite ``p[a, b]`` (Welch's p-values of the methods ``labels``) with a paired t-test's two-sided p-value
    where methods ``a`` and ``b`` ran the same repetitions (``reps``: ``{label: their numbers}``, two or more),
    on the differences of the logarithms of their final values (at least ``floor``) repetition by repetition: 0
    where the differences are one non-zero value (deterministic runs), 1 where they are all 0."""
    from scipy.special import stdtr

    order = {}
    for k, label in enumerate(labels):
        ids = reps.get(label)
        if ids is None or len(ids) != np.size(finals[label]) or len(ids) < 2 or len(set(map(str, ids))) != len(ids):
            continue
        ids = [str(r) for r in ids]
        logs = np.log(np.maximum(np.asarray(finals[label], dtype=np.float64), floor))
        order[k] = (tuple(sorted(ids)), dict(zip(ids, logs)))
    for a in order:
        for b in order:
            if a >= b or order[a][0] != order[b][0]:
                continue
            keys = order[a][0]
            d = np.array([order[a][1][r] - order[b][1][r] for r in keys])
            mean, sd = float(d.mean()), float(d.std(ddof=1))
            if mean == 0:
                value = 1.0
            elif sd == 0 or not math.isfinite(sd):
                value = 0.0
            else:
                value = float(2.0 * stdtr(len(d) - 1, -abs(mean) / (sd / math.sqrt(len(d)))))
            p[a, b] = p[b, a] = value


def holm(p, level=None):
    """Holm's step-down over the finite entries of ``p`` (each pair's p-value, NaN where not tested): a boolean
    array of the same shape, True where that test's hypothesis is rejected at family-wise ``level`` (default
    :data:`~rowstoch_fast.report.TIE_LEVEL`, read at the call). The smallest p-value is compared with level / m,
    the next with level / (m - 1), ..., until one is not below its bound (m: the number of tests; one test is
    rejected below ``level`` as a lone test is). Valid under any dependence between the tests (each method's
    repetitions enter every pair it is in)."""
    if level is None:
        level = report.TIE_LEVEL
    level = check_positive_float(level, "level")
    if not level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    p = np.asarray(p, dtype=np.float64)
    flat = p.ravel()
    where = np.flatnonzero(np.isfinite(flat))
    order = where[np.argsort(flat[where], kind="stable")]
    bounds = level / (len(order) - np.arange(len(order)))
    passed = flat[order] < bounds
    stop = int(np.argmin(passed)) if not passed.all() else len(order)
    out = np.zeros(flat.shape, dtype=bool)
    out[order[:stop]] = True
    return out.reshape(p.shape)


def welch_p(gap, se_a, se_b, n_a, n_b):
    """Welch's two-sided p-value of a ``gap`` between two means of standard errors ``se_a``, ``se_b`` over ``n_a``,
    ``n_b`` values (arrays broadcast): Student's t at the Welch-Satterthwaite degrees of freedom; 0 where both
    errors are 0 and the gap is not (deterministic runs: any gap tells), 1 where the gap is 0."""
    from scipy.special import stdtr

    va, vb = np.square(se_a, dtype=np.float64), np.square(se_b, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        den = (np.where(np.asarray(n_a) > 1, va * va / (np.asarray(n_a, dtype=np.float64) - 1), 0.0)
               + np.where(np.asarray(n_b) > 1, vb * vb / (np.asarray(n_b, dtype=np.float64) - 1), 0.0))
        df = np.where(den > 0, (va + vb) ** 2 / np.where(den > 0, den, 1.0), np.inf)
        t = np.abs(np.asarray(gap, dtype=np.float64)) / np.sqrt(va + vb)
        p = 2.0 * stdtr(df, -np.where(np.isnan(t), 0.0, t))
    return np.where(np.asarray(gap) == 0, 1.0, p)


def ranks(finals, scale=None, higher_is_better=False, converged=CONVERGED, reps=None, margin=None):
    """Ranks of methods from their final values, ties where the repetitions cannot tell them apart.

    Parameters
    ----------
    finals : dict
        ``{label: array of final values, one per repetition}`` of the runs to rank (``ok`` ones).
    scale : float, optional
        The size of the metric (default: the largest final value): values below ``converged`` times it
        have converged to rounding and are equal (the tuner's rule, with the runs' start as the scale), and so
        are two methods whose mean final values (as they are, not raised to that level) differ by less than that.
    higher_is_better : bool, default False
        Rank the largest values first (an accuracy), by the same test on the logarithms.
    converged : float, default :data:`CONVERGED`
        The problem's fraction at rounding (:func:`~rowstoch_fast.compare.tuning.converged_for`: 1.2e-5 in
        float32; the suboptimality's four times its loss's rounding near f*).
    reps : dict, optional
        ``{label: the repetitions' numbers, in the order of its final values}``. Two methods that ran the same
        repetitions (two or more) ran them on the same seeds (gradient streams, network draws): they are compared
        by a paired t-test on the differences of their logarithms, repetition by repetition, which the draws they
        share do not blur (a method 10-25x worse than another in every one of four repetitions had been tied with
        it by Welch's test, whose spreads include the draws' own, helper 195); others by Welch's test.
    margin : float, optional
        The least ratio of two methods' geometric means told apart, whatever the test says (default
        :data:`~rowstoch_fast.report.TIE_MARGIN`, 1.1, read at the call: a tuned rate's resolution on the metric
        it was tuned on). 1 for none: a table's other metrics (an accuracy of 0.95 against 0.87, a loss of 0.301
        against 0.325 near f* = 0.3, are no tuner's noise; helper 208).

    Returns
    -------
    dict
        ``{label: (rank, shared)}``: rank 1 is the best (1 + the methods distinguishably better); ``shared`` is
        True where another method cannot be told apart from it (so with A = B, B = C and A better than C, C's
        rank 2 is shared: B, ranked 1, is not distinguishably better than C). With one repetition each, no two
        methods can be told apart: every one is ``(1, True)``.

    Examples
    --------
    >>> import numpy as np
    >>> r = {k: np.array(v) for k, v in {"A": [1.0, 1.1, 0.9], "B": [1.6, 1.0, 2.2], "C": [2.0, 2.1, 1.9]}.items()}
    >>> ranks(r)
    {'A': (1, True), 'B': (1, True), 'C': (2, True)}
    """
    return ranks_told(finals, scale, higher_is_better, converged, reps, margin)[0]


def ranks_told(finals, scale=None, higher_is_better=False, converged=CONVERGED, reps=None, margin=None):
    """:func:`ranks` (its arguments), and ``{label: the labels told better than it}``: what the ranks count (a
    method not told worse than another with a far lower mean is said, :func:`~rowstoch_fast.report.wide_ties`)."""
    if not isinstance(finals, dict):
        raise TypeError(f"finals must be a dict of label -> final values, got {type(finals).__name__}")
    finals = {label: np.atleast_1d(as_float_array(v, f"finals[{label!r}]", np.float64, ndim=(0, 1), finite=False))
              for label, v in finals.items()}
    if any(v.size == 0 for v in finals.values()):
        raise ValueError("finals: every label needs one final value at least")
    for label, v in finals.items():  # (an inf had tied every method, after NumPy's warnings: helper 185)
        if not np.isfinite(v).all():
            raise ValueError(f"finals[{label!r}] holds {v[~np.isfinite(v)][0]}: only finite final values rank (a run "
                             "that diverged is not ranked)")
    if scale is not None:
        scale = check_positive_float(scale, "scale", allow_zero=True)
    if reps is not None and not isinstance(reps, dict):
        raise TypeError(f"reps must be a dict of label -> the repetitions' numbers, got {type(reps).__name__}")
    converged = check_positive_float(converged, "converged", allow_zero=True)
    higher_is_better = check_bool(higher_is_better, "higher_is_better")
    labels = list(finals)
    if not labels:
        return {}, {}
    if scale is None:
        scale = max((float(np.max(np.abs(v[np.isfinite(v)]), initial=0.0)) for v in finals.values()), default=0.0)
    floor = max(converged * scale, 1e-300)
    sign = -1.0 if higher_is_better else 1.0
    mean, se, level, count = (np.zeros(len(labels)) for _ in range(4))
    for k, label in enumerate(labels):
        raw = np.asarray(finals[label], dtype=np.float64)
        v = np.log(np.maximum(raw, floor))
        se[k] = float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0
        mean[k], level[k], count[k] = sign * float(np.mean(v)), sign * float(np.mean(np.maximum(raw, 0.0))), len(v)
        # (level: the mean as it is, but below 0; raised to the floor first, a method 1.4x above it in every
        # repetition had tied one at 0, helper 260; one repetition far below f* pulled a mean back into rounding,
        # helper 262)
    if all(np.size(finals[label]) < 2 for label in labels):  # one run each: no spread to tell any two apart
        # (a 1.6% gap from one seed ranked a method 1st, and 3rd on the next seed)
        return {b: (1, len(labels) > 1) for b in labels}, {b: set() for b in labels}
    # better[a, b]: a is distinguishably better than b (and by more than rounding: deterministic runs, whose
    # repetitions do not spread, had ranked float32 methods apart on one rounding step of f(x_bar), 30 above f*)
    gap = mean[None, :] - mean[:, None]
    spread = count >= 2  # (one repetition tells nothing of its spread: it ties with every method, as where all are
    # single runs; helper 179: two single runs were told apart by any gap beside a method of three)
    tested = ((gap > 1e-9 * np.maximum(1.0, abs(mean))) & (abs(level[None, :] - level[:, None]) > floor)
              & spread[:, None] & spread[None, :])  # (a, b) with a's mean lower, by more than rounding
    np.fill_diagonal(tested, False)
    p = welch_p(gap, se[:, None], se[None, :], count[:, None], count[None, :])
    if reps is not None:
        _paired(p, labels, finals, reps, floor)
    # told apart where the test rejects (Holm's m: every pair tested) and the gap is beyond the margin: a ratio
    # within 1.1 ties (a test of the gap beyond the margin instead had tied 61 pairs 1.1-6.8x apart at every seed,
    # whose p-values sat by Holm's bars, helper 207)
    if margin is None:  # (read at the call, as holm reads TIE_LEVEL: the footnote says report's value)
        margin = report.TIE_MARGIN
    margin = check_positive_float(margin, "margin")
    if not margin >= 1:
        raise ValueError(f"margin must be a ratio >= 1 (1: none), got {margin}")
    better = tested & holm(np.where(tested, p, np.nan)) & (gap > math.log(margin))
    apart = better | better.T
    np.fill_diagonal(apart, True)
    return ({b: (1 + int(better[:, k].sum()), bool((~apart[:, k]).any())) for k, b in enumerate(labels)},
            {b: {labels[a] for a in np.flatnonzero(better[:, k])} for k, b in enumerate(labels)})
